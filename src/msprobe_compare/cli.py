"""Command line: `msprobe -f {pytorch,mindspore} compare -i compare.json [-o OUT] ...`. Only wiring."""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
from dataclasses import replace
import os
import sys
from pathlib import Path
from typing import Any

# Our BLAS work always runs on one thread (measure/blas.py pins it); without this, OpenBLAS starts its own
# threads at import, which spin for a while on a machine whose cores the compare itself keeps busy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported below

# The imports below (numpy and the pipeline) make some 20,000 tracked objects (functions, classes, tables) that
# live as long as the process: a cyclic collection would find nothing among them, so none runs meanwhile, and after
# them they go to the oldest generation at once instead of being scanned as young objects first (start-up speed;
# about 3% of the instructions of a small compare).
_collecting = gc.isenabled()
gc.disable()
try:
    from msprobe_compare import __version__
    from msprobe_compare.api import compare_files
    from msprobe_compare.config import FRAMEWORKS, CompareConfig, Options, formats_option, load_config, make_config
    from msprobe_compare.errors import CompareError, InputError, OptionError, UsageError
    from msprobe_compare.load.framework import framework_of
    from msprobe_compare.judge.gate import GATE_LEVELS, LevelCounts, gate_hits
    from msprobe_compare.log import Console
    from msprobe_compare.render.files import prepare_output_dir
    from msprobe_compare.render import report
    from msprobe_compare.render.report import DEFAULT_FORMATS, FORMATS, Written
    from msprobe_compare.render.story import gate_line
    from msprobe_compare import runtime
    from msprobe_compare.runtime import tune_malloc
finally:
    if not gc.get_freeze_count():  # (a caller's own frozen objects stay frozen)
        gc.freeze()  # and unfreeze: every tracked object into the oldest generation, none scanned
        gc.unfreeze()
    if _collecting:
        gc.enable()

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_GATE = 0, 1, 2, 3
COMMANDS = ("compare", "merge_result")  # launch.OURS: `msprobe` hands every other subcommand to mindstudio-probe
OWN_COMMAND = "msprobe-compare"  # ours alone, never handed over (launch.msprobe_compare)
# the reference's own compare, for users who want it rather than ours (the CLI module of 8.3.x and 26.x runs with -m)
REFERENCE_COMPARE = "python -m msprobe.msprobe [-f FRAMEWORK] compare ..."
EXAMPLE = "msprobe -f pytorch compare -i ./compare.json -o ./compare_result/accuracy_compare -s"
SPELLING_26 = """\
msprobe 26.x spelling, also accepted (paths given directly, framework from the dumps):
  msprobe compare -tp TARGET -gp GOLDEN [-o OUT] [--xlsx] [-fm] [-cm [YAML]] [-am [YAML]] [-dm YAML]
                  [-lm [YAML]] [-da] [--step S] [--rank R]   (msprobe compare -tp x -gp y -h lists them)
  = msprobe compare -i compare.json with npu_path TARGET and bench_path GOLDEN; -fm is -f (fuzzy match),
  --step S / --rank R choose the step{S} / rank{R} folder of both paths. Kept from 8.3.3, not from 26.x: the
  xlsx table and the HTML report (26.x writes CSV only; --format csv adds it), colours, the advisor and our
  verdicts (26.x marks unmatched rows 'pass' and has neither colours nor advisor)."""


def _shell_join(words: list[str]) -> str:
    import shlex  # only for the messages of usage errors (start-up speed)

    return shlex.join(words)


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`, as argparse's help formatter asks it, without importing shutil (which
    probes bz2 and lzma at import: start-up speed)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _formatter(cls: type[argparse.HelpFormatter] = argparse.HelpFormatter) -> Any:
    """`cls` with the width argparse would give it (the terminal's columns - 2), measured once per parser instead
    of by every formatter argparse makes (one per argument)."""
    return functools.partial(cls, width=_terminal_columns() - 2)


def _epilog(prog: str) -> str:
    """The top-level help's last lines: an example, and (for `msprobe`) where the other subcommands go."""
    example = f"example: {EXAMPLE.replace('msprobe', prog, 1)}"
    if prog != "msprobe":
        return example
    return (
        f"{example}\n\nother subcommands (run_ut, parse, acc_check, ...) are handed to mindstudio-probe when it is "
        f"installed;\nits own compare: {REFERENCE_COMPARE}\nthis compare alone: {OWN_COMMAND} ..."
    )


def _parser(prog: str = "msprobe") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Accuracy comparison of msprobe dumps.",
                                     epilog=_epilog(prog),
                                     formatter_class=_formatter(argparse.RawDescriptionHelpFormatter))  # fmt: skip
    parser.add_argument("--version", action="version", version=f"msprobe-compare {__version__}")
    parser.add_argument("-f", "--framework", choices=FRAMEWORKS, default=None,
                        help="framework of the NPU dump (required; before the subcommand)")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    cmp = sub.add_parser("compare", help="compare two dumps",
                         epilog=f"example: {EXAMPLE.replace('msprobe', prog, 1)}\n\n{SPELLING_26}",
                         formatter_class=_formatter(argparse.RawDescriptionHelpFormatter))  # fmt: skip
    cmp.add_argument("-i", "--input_path", required=True, type=Path, help="compare.json")
    cmp.add_argument("-o", "--output_path", nargs="?", const="./output", default="./output",
                     help="output directory (default ./output; created if missing)")  # fmt: skip
    cmp.add_argument("-s", "--stack_mode", action="store_true", help="show NPU_Stack_Info (with stack_path)")
    cmp.add_argument("-c", "--compare_only", action="store_true", help="do not write the advisor file")
    cmp.add_argument("-f", "--fuzzy_match", action="store_true", help="match names that differ by call counter")
    colour = cmp.add_mutually_exclusive_group()
    colour.add_argument("-hl", "--highlight", action="store_true", default=None,
                        help="colour suspicious rows (the default)")  # fmt: skip
    colour.add_argument("--no-highlight", dest="highlight", action="store_false",
                        help="write the table without colour marks")  # fmt: skip
    cmp.add_argument("-dm", "--data_mapping", type=Path, help="YAML mapping NPU row names to bench row names")
    cmp.add_argument("-cm", "--cell_mapping", nargs="?", const=True, default=None,
                     help="MindSpore cell -> PyTorch module mapping (optional YAML)")  # fmt: skip
    cmp.add_argument("-am", "--api_mapping", nargs="?", const=True, default=None,
                     help="MindSpore API -> PyTorch API mapping (built-in table, optional YAML)")  # fmt: skip
    cmp.add_argument("-lm", "--layer_mapping", nargs="?", const=True, default=None,
                     help="MindSpore: derive a data mapping from the layer structure (optional YAML)")  # fmt: skip
    cmp.add_argument("--format", default=",".join(DEFAULT_FORMATS), type=_formats,
                     help=f"output formats, comma-separated: {', '.join(FORMATS)} (html: an interactive report); "
                          f"default {','.join(DEFAULT_FORMATS)}")  # fmt: skip
    cmp.add_argument("-da", "--diff_analyze", action="store_true",
                     help="write diff_analyze_{ts}.json with the origins of every rank")  # fmt: skip
    cmp.add_argument("--fail-on", type=_fail_levels, default=None, metavar="LEVELS",
                     help="for CI gates: exit with code 3 when such rows exist; LEVELS is one or more of "
                          "'error' (red rows, md5 Different, Accuracy No), 'warning' (errors plus yellow and "
                          "Warning rows) and 'unmatched' (NPU rows without a bench counterpart), comma-separated, "
                          "e.g. --fail-on error,unmatched; a compare in which nothing could be compared fails "
                          "every gate")  # fmt: skip
    cmp.add_argument("-j", "--jobs", type=_jobs, default=None, help="worker count, at least 1 (default: all cores)")
    cmp.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                     help="run ranks and tensor rows as Ray tasks: on the cluster at ADDRESS, else the one named by "
                          "RAY_ADDRESS, else a local instance; dumps and output must be on a shared filesystem "
                          "(needs Ray: pip install 'ray>=2.9')")  # fmt: skip
    _add_layout_args(cmp)
    merge = sub.add_parser("merge_result", help="merge several ranks' compare results", formatter_class=_formatter())
    merge.add_argument("-i", "--input_path", required=True, type=Path, help="folder of compare_result_rank*.xlsx")
    merge.add_argument("-o", "--output_path", nargs="?", const="./output", default="./output", help="output folder")
    merge.add_argument("-config", "--config-path", dest="config_path", required=True, type=Path,
                       help="YAML with 'api' (and optional 'compare_index') lists")  # fmt: skip
    return parser


TARGET_FLAGS = ("-tp", "--target_path", "-gp", "--golden_path")


def _spelling_26(argv: list[str]) -> int | None:
    """The index of `compare` when the 26.x spelling (-tp/-gp) follows it, else None."""
    if "compare" not in argv:
        return None
    at = argv.index("compare")
    rest = argv[at + 1 :]
    if any(a in TARGET_FLAGS or a.startswith(("--target_path=", "--golden_path=")) for a in rest):
        return at
    return None


def _add_layout_args(p: argparse.ArgumentParser) -> None:
    """Options of ours that both spellings take: the parallel layouts and the root cause's tolerances."""
    p.add_argument("--npu-layout", dest="npu_layout", default=None, metavar="LAYOUT",
                   help="parallel layout of the npu run when it differs from the bench run's, e.g. tp=2,pp=2,dp=2 "
                        "(optional order=tp-dp-pp, fastest first; Megatron's order by default); detected when "
                        "absent")  # fmt: skip
    p.add_argument(
        "--bench-layout",
        dest="bench_layout",
        default=None,
        metavar="LAYOUT",
        help="parallel layout of the bench run (as --npu-layout)",
    )
    p.add_argument("--align", choices=("auto", "on", "off"), default="auto",
                   help="runs of different code (a training engine against an inference engine, a port with fused "
                        "kernels): pair their module trees by the tensors they carry; auto: when the trees differ "
                        "(see docs/align.md)")  # fmt: skip
    p.add_argument("--alignment", type=Path, default=None, metavar="FILE",
                   help="a module alignment file (module_alignment_{timestamp}.yaml of an earlier compare, checked "
                        "or corrected): its pairs win over the ones found")  # fmt: skip
    p.add_argument(
        "--consistent_check",
        action="store_true",
        help="msprobe 26.x: a training engine (npu side, -tp) against the inference engine (bench side, "
        "vLLM names), paired by 26.x's name maps for --backend first, then aligned as --align does",
    )
    p.add_argument(
        "--backend",
        choices=("fsdp", "megatron"),
        default=None,
        help="--consistent_check: the training engine, fsdp or megatron",
    )
    # root cause: the constants of the noise model, see docs/rootcause.md
    p.add_argument("--tolerance", type=_tolerance, default=None, metavar="KEY=VALUE,...",
                   help="root cause: override the noise model's constants, e.g. origin=3,suspect=1.5 "
                        "(keys: origin, suspect, tensor_origin, tensor_suspect, floor_units, min_floor, "
                        "extremes, excess_units, tensor_confirm, reduced_matmul, backward_origin; see "
                        "docs/rootcause.md)")  # fmt: skip


def _parser_26(prog: str = "msprobe") -> argparse.ArgumentParser:
    """`msprobe compare -tp TARGET -gp GOLDEN ...` (msprobe 26.x), with our own options too; dests as in _parser."""
    p = argparse.ArgumentParser(prog=f"{prog} compare", description="Compare two dumps (msprobe 26.x spelling).",
                                epilog=SPELLING_26,
                                formatter_class=_formatter(argparse.RawDescriptionHelpFormatter))  # fmt: skip
    p.add_argument("-tp", "--target_path", required=True, type=Path, help="NPU dump: dump.json, rank or step folder")
    p.add_argument("-gp", "--golden_path", required=True, type=Path, help="bench dump, of the same kind")
    p.add_argument("-o", "--output_path", nargs="?", const="./output", default="./output",
                   help="output directory (default ./output)")  # fmt: skip
    p.add_argument("--xlsx", action="store_true", help="accepted: the xlsx table is always written")
    p.add_argument("-fm", "--fuzzy_match", action="store_true", help="match names that differ by call counter")
    p.add_argument("-cm", "--cell_mapping", nargs="?", const=True, default=None, help="as -cm of -i compares")
    p.add_argument("-am", "--api_mapping", nargs="?", const=True, default=None, help="as -am of -i compares")
    p.add_argument("-dm", "--data_mapping", type=Path, help="as -dm of -i compares")
    p.add_argument("-lm", "--layer_mapping", nargs="?", const=True, default=None, help="as -lm of -i compares")
    p.add_argument("-da", "--diff_analyze", action="store_true", help="write diff_analyze_{ts}.json")
    p.add_argument("-m", "--mode", default="auto", help="only 'auto' (dump compare) is supported")
    p.add_argument("-tensor_log", "--is_print_compare_log", action="store_true",
                   help="accepted: per-row log lines of tensor compares are always printed")  # fmt: skip
    p.add_argument("--step", type=int, help="compare the step{S} folder of both paths")
    p.add_argument("--rank", type=int, help="compare the rank{R} folder of both (step) folders")
    p.add_argument("-s", "--stack_mode", action="store_true", help="accepted: the stack column is automatic")
    p.add_argument("-c", "--compare_only", action="store_true", help="do not write the advisor file")
    colour = p.add_mutually_exclusive_group()
    colour.add_argument("-hl", "--highlight", action="store_true", default=None, help="colour marks (default)")
    colour.add_argument("--no-highlight", dest="highlight", action="store_false", help="no colour marks")
    p.add_argument("--format", default=",".join(DEFAULT_FORMATS), type=_formats, help="as --format of -i compares")
    p.add_argument("--fail-on", type=_fail_levels, default=None, metavar="LEVELS", help="as --fail-on")
    p.add_argument("-j", "--jobs", type=_jobs, default=None, help="worker count, at least 1")
    p.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS", help="as --ray")
    _add_layout_args(p)
    return p


def _parse_26(parser: argparse.ArgumentParser, argv: list[str], at: int) -> argparse.Namespace:
    """The 26.x spelling -> the namespace of ours (framework from before `compare`, or None: from the dumps)."""
    head = argv[:at]
    framework = None
    if head:
        top = argparse.ArgumentParser(prog=parser.prog, add_help=False, formatter_class=_formatter())
        top.add_argument("-f", "--framework", choices=FRAMEWORKS)
        known, extra = top.parse_known_args(head)
        if extra:
            parser.error(f"unrecognized arguments before compare: {_shell_join(extra)}")
        framework = known.framework
    args = _parser_26(parser.prog).parse_args(argv[at + 1 :])
    if args.mode != "auto":
        _parser_26(parser.prog).error(f"--mode {args.mode} is not supported; only dump compares (--mode auto)")
    if args.xlsx and "xlsx" not in args.format:
        args.format = (*args.format, "xlsx")
    args.framework, args.command, args.input_path = framework, "compare", None
    return args


def _chosen(path: Path, step: int | None, rank: int | None, flag: str) -> Path:
    """--step/--rank of the 26.x spelling: the step{S} / rank{R} folder of a dump root / step folder."""
    for name, value in (("step", step), ("rank", rank)):
        if value is None or path.name == f"{name}{value}":
            continue
        child = path / f"{name}{value}"
        if not child.is_dir():
            raise InputError(f"--{name} {value}: {flag} holds no {name}{value} folder", path)
        path = child
    return path


def _merge(args: argparse.Namespace, console: Console) -> int:
    from msprobe_compare.merge import merge_results  # merge_result only: openpyxl's side (start-up speed)

    try:
        out_dir = prepare_output_dir(Path(args.output_path))
        merge_results(args.input_path, out_dir, args.config_path, console)
    except CompareError as exc:
        console.error(exc.message)
        return EXIT_ERROR
    finally:
        console.end_stages()
    return EXIT_OK


def main(argv: list[str] | None = None, prog: str = "msprobe") -> int:
    """Run the command line; returns the exit code (usage errors, -h and --version exit through SystemExit).
    Called as the command itself (no `argv`: console script, python -m), the process ends here once the run is
    done (runtime.exit_now): a large compare's tables are not taken apart object by object first. `prog`: the
    command's name in usage and hints (launch.py's commands)."""
    if argv is not None:
        return _run(argv, prog)
    gc.freeze()  # what is loaded now lives until exit: no collection scans it again (start-up speed: ~5%)
    with runtime.exiting_now():
        code = _run(sys.argv[1:], prog)
    runtime.exit_now(code)
    return code  # not reached


def _run(argv: list[str], prog: str = "msprobe") -> int:
    """main's work: the exit code."""
    parser = _parser(prog)
    if not argv:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    at26 = _spelling_26(argv)
    misplaced = _misplaced_framework(argv, prog) if at26 is None else None
    if misplaced:
        parser.error(misplaced)
    args = parser.parse_args(argv) if at26 is None else _parse_26(parser, argv, at26)
    if at26 is not None:
        try:
            for flag, path in (("-tp", args.target_path), ("-gp", args.golden_path)):
                if not path.exists():
                    raise InputError(f"{flag} does not exist", path)
            args.target_path = _chosen(args.target_path, args.step, args.rank, "-tp")
            args.golden_path = _chosen(args.golden_path, args.step, args.rank, "-gp")
            args.framework = args.framework or framework_of(args.target_path)
        except CompareError as exc:
            Console().error(exc.message)
            return EXIT_ERROR
        if args.framework is None:
            parser.error(f"the framework of {args.target_path} cannot be told from the dump; give it: {prog} -f "
                         f"{{{','.join(FRAMEWORKS)}}} {_shell_join(argv[at26:])}")  # fmt: skip
    if args.framework is None:
        parser.error(f"-f/--framework is required before the subcommand: {prog} -f {{{','.join(FRAMEWORKS)}}} "
                     f"{_shell_join(argv)}")  # fmt: skip
    if getattr(args, "consistent_check", False) and args.backend is None:
        parser.error("--consistent_check needs --backend fsdp or --backend megatron (the training engine)")
    if getattr(args, "consistent_check", False) and args.align == "off":
        parser.error("--consistent_check aligns the module trees: it cannot go with --align off")
    tune_malloc()
    console = Console(stages=True)  # the stages of a long compare, on a terminal's stderr only
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        console.warning(
            "msprobe is being run as root. To avoid security risks, "
            "it is recommended to switch to a regular user to run it."
        )
    if args.command == "merge_result":
        return _merge(args, console)
    if args.framework == "pytorch" and (args.cell_mapping is not None or args.api_mapping is not None):
        console.error("Argument -cm or -am is not supported in PyTorch framework")
        return EXIT_ERROR
    ray_session = contextlib.ExitStack()
    try:
        options = _options(args)
        if options.ray:
            from msprobe_compare import distribute  # --ray only (start-up speed)

            ray_session.enter_context(distribute.session())
        cfg = (load_config(args.input_path, options) if at26 is None
               else make_config(args.target_path, args.golden_path, options))  # fmt: skip
        for note in cfg.notes:  # compare.json's unknown keys, paths read from its folder
            console.warning(note)
        out_dir = prepare_output_dir(options.output_dir)
        cfg = _with_output(cfg, out_dir)
        if cfg.graph is not None:  # MindSpore graph mode (spec §7.5, §7.6): kernel_compare.py
            return _graph_compare(cfg, console)
        if cfg.is_directory_compare:
            # folders (and the parallel layouts with their tensor reader) only for folder inputs (start-up speed)
            from msprobe_compare.folders import compare_directories

            summary = compare_directories(cfg, console)
            report.log_directory_summary(console, summary)
            if not summary.ok:
                return EXIT_ERROR
            results = [r.written for r in summary.ranks if r.written]
            if args.diff_analyze:
                report.write_origins_json(console, cfg.options.output_dir,
                                          {r.label: r.written.origins for r in summary.ranks if r.written})  # fmt: skip
            return _gate(console, args.fail_on, results)
        console.info("Please check whether the input data belongs to you. If not, there may be security risks.")
        written = compare_files(cfg, console)
        if args.diff_analyze and written.xlsx is not None:
            _origins_json_or_withdraw(console, cfg, written)
    except UsageError as exc:
        console.error(exc.message)
        return EXIT_USAGE
    except CompareError as exc:
        console.error(exc.message)
        return EXIT_ERROR
    except KeyboardInterrupt:
        console.error("interrupted")
        return 130
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as exc:  # a defect of ours: one line, the traceback only on request
        if os.environ.get("MSPROBE_DEBUG"):
            raise
        console.error(f"internal error: {type(exc).__name__}: {exc} (set MSPROBE_DEBUG=1 for the traceback)")
        return EXIT_ERROR
    finally:
        ray_session.close()
        console.end_stages()
    if written.xlsx is not None:
        console.banner()
    return _gate(console, args.fail_on, [written])


def _origins_json_or_withdraw(console: Console, cfg: CompareConfig, written: Written) -> None:
    """-da of one pair: diff_analyze_{ts}.json; when it cannot be written, the result set just published is
    removed again before the error, so a failed run leaves no partial set."""
    try:
        report.write_origins_json(console, cfg.options.output_dir, {cfg.npu_path.parent.name: written.origins})
    except CompareError:
        for path in written.files:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        raise


def _options(args: argparse.Namespace) -> Options:
    return Options(
        framework=args.framework,
        output_dir=Path(args.output_path),
        stack_mode=args.stack_mode,
        auto_analyze=not args.compare_only,
        fuzzy_match=args.fuzzy_match,
        highlight=args.highlight is not False,
        data_mapping=args.data_mapping,
        cell_mapping=_mapping_arg(args.cell_mapping),
        api_mapping=_mapping_arg(args.api_mapping),
        layer_mapping=_mapping_arg(args.layer_mapping) if args.framework == "mindspore" else None,
        jobs=args.jobs,
        formats=args.format,
        ray=(args.ray.strip() or True) if isinstance(args.ray, str) else args.ray,
        npu_layout=args.npu_layout,
        bench_layout=args.bench_layout,
        tolerance=args.tolerance,  # root cause: the noise model's constants
        align=args.align,
        alignment=args.alignment,
        consistent_check=args.backend if args.consistent_check else None,
    )


def _gate(console: Console, fail_on: frozenset[str] | None, results: list[Written]) -> int:
    """--fail-on: exit code 3 when rows at those levels exist (the counts of judge.gate, as the console shows)."""
    if not fail_on:
        return EXIT_OK
    hits = sum(gate_hits(fail_on, w.counts) for w in results)
    total = sum((w.counts for w in results), LevelCounts())
    line = gate_line(fail_on, total, hits)
    if hits:
        console.error(line)
        return EXIT_GATE
    console.info(line)
    return EXIT_OK


def _fail_levels(text: str) -> frozenset[str]:
    chosen = frozenset(part.strip() for part in text.split(",") if part.strip())
    bad = sorted(chosen - set(GATE_LEVELS))
    if not chosen or bad:
        raise argparse.ArgumentTypeError(f"unknown level {bad or text!r}; choose from {', '.join(GATE_LEVELS)}")
    return chosen


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of workers, got {text!r}") from None
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {jobs}")
    return jobs


def _misplaced_framework(argv: list[str], prog: str = "msprobe") -> str | None:
    """The hint for `-f FRAMEWORK` typed after the subcommand (where -f means --fuzzy_match), else None."""
    after_flag = ("-f", "--framework")  # `-f compare` would be a (bad) framework value, not the subcommand
    command = next((k for k, arg in enumerate(argv) if arg in COMMANDS and (k == 0 or argv[k - 1] not in after_flag)),
                   None)  # fmt: skip
    if command is None:
        return None
    rest = argv[command + 1 :]
    for k, arg in enumerate(rest):
        if arg in ("-f", "--framework") and k + 1 < len(rest) and not rest[k + 1].startswith("-"):
            value, end = rest[k + 1], k + 2
        elif arg.startswith("--framework="):
            value, end = arg.partition("=")[2], k + 1
        else:
            continue
        framework = value if value in FRAMEWORKS else "{" + ",".join(FRAMEWORKS) + "}"
        fixed = " ".join([prog, "-f", framework, _shell_join([argv[command], *rest[:k], *rest[end:]])])
        return f"-f/--framework goes before the subcommand (after it, -f is --fuzzy_match): {fixed}"
    return None


def _formats(text: str) -> tuple[str, ...]:
    """--format: the check of Options.formats, as a usage error."""
    try:
        return formats_option(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(exc.problem.replace(" in option 'formats'", "")) from None


def _tolerance(text: str) -> str:
    """--tolerance: checked here (a usage error), kept as text in Options."""
    from msprobe_compare.judge.noise import Tolerance
    from msprobe_compare.errors import UsageError

    try:
        Tolerance.parse(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _mapping_arg(value: object) -> Path | bool | None:
    """-cm/-am/-lm: absent -> None, bare flag -> True, with a value -> the YAML path."""
    if value is None or value is True:
        return value
    return Path(str(value))


def _graph_compare(cfg: CompareConfig, console: Console) -> int:
    """The kernel-dump or single-point compare; only -i, -o and -j apply (as the reference: no highlight,
    advisor or gate)."""
    from msprobe_compare import kernel_compare

    assert cfg.graph is not None
    console.info("Please check whether the input data belongs to you. If not, there may be security risks.")
    run = kernel_compare.compare_kernel_dumps if cfg.graph.kind == "kernel" else kernel_compare.compare_common
    written = run(cfg.npu_path, cfg.bench_path, cfg.graph, cfg.options.output_dir, console, cfg.options.jobs)
    console.info(f"Written: {len(written)} result file{'s' if len(written) != 1 else ''}.")
    return EXIT_OK if written else EXIT_ERROR


def _with_output(cfg: CompareConfig, out_dir: Path) -> CompareConfig:
    return replace(cfg, options=replace(cfg.options, output_dir=out_dir))


if __name__ == "__main__":
    raise SystemExit(main())
