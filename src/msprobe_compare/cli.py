"""Command line: `msprobe -f {pytorch,mindspore} compare -i compare.json [-o OUT] ...`. Only wiring."""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import replace
import os
import sys
from pathlib import Path

# Our BLAS work always runs on one thread (measure/blas.py pins it); without this, OpenBLAS starts its own
# threads at import, which spin for a while on a machine whose cores the compare itself keeps busy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from msprobe_compare import distribute  # noqa: E402 (after the BLAS setting)
from msprobe_compare.api import compare_directories, compare_files  # noqa: E402
from msprobe_compare.config import CompareConfig, Options, load_config  # noqa: E402
from msprobe_compare.errors import CompareError, UsageError  # noqa: E402
from msprobe_compare.judge.gate import GATE_LEVELS, LevelCounts, gate_hits  # noqa: E402
from msprobe_compare.log import Console  # noqa: E402
from msprobe_compare.merge import merge_results  # noqa: E402
from msprobe_compare.render.files import prepare_output_dir  # noqa: E402
from msprobe_compare.render import report  # noqa: E402
from msprobe_compare.render.report import DEFAULT_FORMATS, FORMATS, Written  # noqa: E402
from msprobe_compare.render.story import gate_line  # noqa: E402
from msprobe_compare.runtime import tune_malloc  # noqa: E402

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_GATE = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msprobe", description="Accuracy comparison of msprobe dumps.")
    parser.add_argument("-f", "--framework", required=True, choices=["pytorch", "mindspore"],
                        help="framework of the dumps")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="compare two dumps")
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
                     help="output formats, comma-separated: xlsx, csv, jsonl, html (an interactive report); "
                          "default xlsx,html")  # fmt: skip
    cmp.add_argument("-da", "--diff_analyze", action="store_true",
                     help="write diff_analyze_{ts}.json with the origins of every rank")  # fmt: skip
    cmp.add_argument("--fail-on", type=_fail_levels, default=None, metavar="LEVELS",
                     help="for CI gates: exit with code 3 when such rows exist; LEVELS is one or more of "
                          "'error' (red rows, md5 Different, Accuracy No), 'warning' (errors plus yellow and "
                          "Warning rows) and 'unmatched' (NPU rows without a bench counterpart), comma-separated, "
                          "e.g. --fail-on error,unmatched; a compare in which nothing could be compared fails "
                          "every gate")  # fmt: skip
    cmp.add_argument("-j", "--jobs", type=int, default=None, help="worker count (default: all cores)")
    cmp.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                     help="run ranks and tensor rows as Ray tasks: on the cluster at ADDRESS, else the one named by "
                          "RAY_ADDRESS, else a local instance; dumps and output must be on a shared filesystem "
                          "(needs msprobe-compare[ray])")  # fmt: skip
    # root cause (issue #13): the constants of the noise model, see docs/rootcause.md
    cmp.add_argument("--tolerance", type=_tolerance, default=None, metavar="KEY=VALUE,...",
                     help="root cause: override the noise model's constants, e.g. origin=3,suspect=1.5 "
                          "(keys: origin, suspect, tensor_origin, tensor_suspect, floor_units, min_floor, "
                          "extremes; see docs/rootcause.md)")  # fmt: skip
    merge = sub.add_parser("merge_result", help="merge several ranks' compare results")
    merge.add_argument("-i", "--input_path", required=True, type=Path, help="folder of compare_result_rank*.xlsx")
    merge.add_argument("-o", "--output_path", nargs="?", const="./output", default="./output", help="output folder")
    merge.add_argument("-config", "--config-path", dest="config_path", required=True, type=Path,
                       help="YAML with 'api' (and optional 'compare_index') lists")  # fmt: skip
    return parser


def _merge(args: argparse.Namespace, console: Console) -> int:
    try:
        out_dir = prepare_output_dir(Path(args.output_path))
        merge_results(args.input_path, out_dir, args.config_path, console)
    except CompareError as exc:
        console.error(exc.message)
        return EXIT_ERROR
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser()
    if len(argv) < 3:
        parser.print_help()
        return EXIT_OK
    args = parser.parse_args(argv)
    tune_malloc()
    console = Console()
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
    options = Options(
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
        tolerance=args.tolerance,  # root cause (issue #13)
    )
    ray_session = contextlib.ExitStack()
    try:
        if options.ray:
            ray_session.enter_context(distribute.session())
        cfg = load_config(args.input_path, options)
        out_dir = prepare_output_dir(options.output_dir)
        cfg = _with_output(cfg, out_dir)
        if cfg.is_directory_compare:
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
    if args.diff_analyze and written.xlsx is not None:
        report.write_origins_json(console, cfg.options.output_dir, {cfg.npu_path.parent.name: written.origins})
    if written.xlsx is not None:
        console.banner()
    return _gate(console, args.fail_on, [written])


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


def _formats(text: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    bad = [f for f in chosen if f not in FORMATS]
    if not chosen or bad:
        raise argparse.ArgumentTypeError(f"unknown format {bad or text!r}; choose from {', '.join(FORMATS)}")
    return chosen


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
        return value  # type: ignore[return-value]
    return Path(str(value))


def _with_output(cfg: CompareConfig, out_dir: Path) -> CompareConfig:
    return replace(cfg, options=replace(cfg.options, output_dir=out_dir))


if __name__ == "__main__":
    raise SystemExit(main())
