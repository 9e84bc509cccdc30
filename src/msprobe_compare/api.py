"""The compare pipeline for one pair of dump.json files: load -> pair -> measure -> judge -> render. Step folders
(ranks) are folders.py's."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from msprobe_compare.config import CompareConfig, Options
from msprobe_compare.errors import CompareError, InputError
from msprobe_compare.judge.highlight import Colour
from msprobe_compare.judge.judgement import judge
from msprobe_compare.judge.rootcause import analyse_later
from msprobe_compare.judge.noise import Tolerance
from msprobe_compare.pair.calls import TreeDiff, named_rows_bound, tree_beside, tree_diff
from msprobe_compare.load.framework import dump_framework
from msprobe_compare.load.dumpjson import (
    LayerFiles,
    check_input_file,
    read_bytes,
    read_construct_json,
    read_layer_files,
    read_stack_json,
    stacks_of,
)
from msprobe_compare.load.mode import Mode, check_tasks, detect_mode
from msprobe_compare.load.rows import NO_DATA_FILE, RowTable, empty_entries, names_a_file
from msprobe_compare.load.sides import flatten_sides
from msprobe_compare.load.stream import DumpHeader, open_dump
from msprobe_compare.log import Console
from msprobe_compare.measure.measured import Measured, measure
from msprobe_compare.measure.tensor_metrics import MetricState, TensorMetrics, TensorMsg
from msprobe_compare.model import CompareOutcome
from msprobe_compare.pair.exact import apply_dtype_gate, match_data_mapping, match_exact
from msprobe_compare.pair.param_grad import param_grad_keys
from msprobe_compare.pair.risk_level import risk_level_note
from msprobe_compare.render import findings, report, table
from msprobe_compare.render.files import prepare_output_dir
from msprobe_compare.render.report import Written
from msprobe_compare.render.texts import STATE_TEXT, messages_text
from msprobe_compare.runtime import gc_paused, keep_until_exit
from msprobe_compare.records import dataclass

if TYPE_CHECKING:  # annotations only: the tensor rows are imported with tensor mode (start-up speed)
    from msprobe_compare.measure.tensor_rows import Failure, RowTask, TensorColumns


def check_frameworks(
    framework: str, npu: DumpHeader, bench: DumpHeader, console: Console
) -> tuple[str | None, str | None]:
    """Warn when a dump's framework (its `framework` key, else its tensor types) contradicts -f, which names the NPU
    side's framework (a MindSpore NPU dump may be compared with a PyTorch bench dump). -> the two frameworks."""
    npu_fw, bench_fw = dump_framework(npu), dump_framework(bench)
    if npu_fw is not None and npu_fw != framework:
        console.warning(f"{npu.path}: the dump's framework is '{npu.framework or npu_fw}' but -f is '{framework}'; "
                        f"-f names the framework of npu_path (here: -f {npu_fw})")  # fmt: skip
    allowed = {framework, "pytorch"} if framework == "mindspore" else {framework}
    if bench_fw is not None and bench_fw not in allowed:
        console.warning(f"{bench.path}: the bench dump's framework is '{bench.framework or bench_fw}' but -f is "
                        f"'{framework}', whose bench dump should be {' or '.join(sorted(allowed))}")  # fmt: skip
    return npu_fw, bench_fw


PRECHECK_MSGS = (TensorMsg.NPU_NO_DATA_FILE, TensorMsg.BENCH_NO_DATA_FILE, TensorMsg.BENCH_UNMATCHED)


def _stack_decision(cfg: CompareConfig, console: Console) -> Path | None:
    """Which stack.json to show, if any (spec §1.4)."""
    if cfg.stack_path is not None:
        return cfg.stack_path if cfg.options.stack_mode else None
    console.warning(
        "Missing stack_path in the configuration file. "
        "Automatically detecting stack.json to determine whether to display NPU_Stack_Info."
    )
    candidate = cfg.npu_path.parent / "stack.json"
    if candidate.is_file():
        return candidate
    console.warning(f"stack.json is not found in dump dir {cfg.npu_path.parent}.")
    return None


def read_data_mapping(path: Path) -> dict[str, str]:
    from msprobe_compare.pair.mapping_file import load_yaml, text_mapping  # only with -dm (start-up speed)

    return text_mapping(load_yaml(path, "data mapping"), path, "data mapping", "NPU row names to bench row names")


def _mapped_keys(opts: Options, npu: RowTable, bench: RowTable, console: Console) -> list[str | None] | None:
    """NPU compare keys under -am or -cm (-am wins when both are given, as in the reference), else None."""
    if opts.api_mapping is not None:
        from msprobe_compare.pair.api_mapping import api_mapping_keys, read_api_mapping  # -am only (start-up speed)

        if opts.cell_mapping is not None:
            console.warning("-cm is ignored when -am is given")
        user = read_api_mapping(opts.api_mapping) if isinstance(opts.api_mapping, Path) else None
        return api_mapping_keys(npu, bench, user, warn=console.warning)
    if opts.cell_mapping is not None:
        from msprobe_compare.pair.cell_mapping import cell_mapping_keys, read_cell_mapping  # -cm (start-up speed)

        cells = read_cell_mapping(opts.cell_mapping) if isinstance(opts.cell_mapping, Path) else None
        return cell_mapping_keys(npu, cells)
    return None


def build_outcome(cfg: CompareConfig, console: Console, *, root_cause: bool = True) -> CompareOutcome:
    """Everything up to, not including, writing the result files (-lm saves its data mapping here). `root_cause`
    False: no root-cause analysis, nor the bench construct.json it alone reads (bench/rootcause_ab.py measures what
    the analysis costs so)."""
    check_input_file(cfg.npu_path, "npu_path")
    check_input_file(cfg.bench_path, "bench_path")
    npu_dump, npu_entries = open_dump(cfg.npu_path)  # headers now; entries streamed by flatten
    bench_dump, bench_entries = open_dump(cfg.bench_path)
    check_tasks(npu_dump, bench_dump)
    npu_fw, bench_fw = check_frameworks(cfg.options.framework, npu_dump, bench_dump, console)
    stack_path = _stack_decision(cfg, console)
    layer_files: list[LayerFiles] = []  # -lm: stack.json and construct.json of each side, each read once
    layer_error: list[InputError] = []  # raised where -lm is applied, after the rows are read, as always
    if cfg.options.layer_mapping is not None:
        try:
            layer_files.append(read_layer_files(cfg.npu_path.parent))
            wanted = layer_files[0].stack and layer_files[0].construct  # else -lm derives nothing
            layer_files.append(read_layer_files(cfg.bench_path.parent) if wanted else
                               LayerFiles(cfg.bench_path.parent, None, None))  # fmt: skip
        except InputError as exc:
            layer_error.append(exc)
    stacks = {}
    if stack_path is not None:
        check_input_file(stack_path, "stack_path")
        same = len(layer_files) == 2 and layer_files[0].stack is not None and _same_file(
            stack_path, cfg.npu_path.parent / "stack.json")  # fmt: skip
        stacks = stacks_of(layer_files[0].stack, stack_path) if same else read_stack_json(stack_path)
    tree: list[Any] = []  # construct.json of each side (and their tree_diff), read while the bench side is still read

    def read_trees() -> None:
        npu_tree, bench_tree = cfg.npu_path.parent / "construct.json", cfg.bench_path.parent / "construct.json"
        if len(layer_files) == 2 and layer_files[0].construct:  # the tree -lm read serves the root cause too
            tree.append(layer_files[0].construct)
            bench = layer_files[1].construct
            tree.append(bench if bench is not None else module_tree(bench_tree, console))
            return
        tree.append(module_tree(npu_tree, console))
        if not tree[0] or not (root_cause or cfg.options.align != "off"):  # the root cause's pairing, the aligner
            tree.append(None)
        elif _same_bytes(npu_tree, bench_tree):  # the same module tree: no second parse
            tree.extend((tree[0], tree_diff(tree[0], tree[0])))
        else:  # the root cause's module-local pairing (pair.calls.analysis_pairing), and the trees' diff, made
            tree.extend(_bench_tree(bench_tree, tree[0], console))  # while the bench side may still be read

    console.stage("reading")
    npu, bench = flatten_sides(cfg.npu_path, npu_entries, stacks, cfg.bench_path, bench_entries,
                               parallel=cfg.options.parallel_read and cfg.options.jobs != 1,
                               meanwhile=read_trees)  # fmt: skip
    if not npu.entries:
        console.warning("No APIs found in dump.json.")
    _warn_empty_entries(npu, bench, console)
    note = risk_level_note(npu, bench)
    if note:
        console.warning(note)
    mode = detect_mode(npu_dump, bench_dump, npu.has_md5, bench.has_md5)
    console.stage("pairing")
    opts = cfg.options
    cross = npu_fw == "mindspore" and bench_fw == "pytorch"
    fuzzy = None
    keys = _mapped_keys(opts, npu, bench, console)
    data_map: dict[str, str | None] | None = None
    derived: dict[str, str] | None = None
    if opts.layer_mapping is not None:  # overrides -dm; an empty result means ordinary matching
        from msprobe_compare.pair.layer_mapping import layer_mapping, read_layer_mapping  # -lm (start-up speed)

        lm_yaml = read_layer_mapping(opts.layer_mapping) if isinstance(opts.layer_mapping, Path) else None
        if layer_error:
            raise layer_error[0]
        derived = layer_mapping(layer_files[0], layer_files[1], lm_yaml, npu, bench, bench_framework=bench_fw)
        data_map = dict(derived) or None  # derived is published with the result files (render.report.write_all)
    elif opts.data_mapping is not None:
        data_map = dict(read_data_mapping(opts.data_mapping))
    if data_map is not None:
        if keys is not None:  # as the reference: -cm/-am give the names, -dm/-lm only the name-only join
            console.warning("-cm/-am decide the compare names; the -dm/-lm mapping only makes the match ignore "
                            "shape and dtype")  # fmt: skip
            data_map = dict(zip(npu.names, keys))
        match = match_data_mapping(npu, bench, data_map)
    elif opts.fuzzy_match:
        from msprobe_compare.pair.fuzzy import match_fuzzy  # only with -f (start-up speed)

        found = match_fuzzy(npu, bench, keys=keys)
        for npu_name, bench_name in found.failed_tests:
            console.warning(f"{npu_name} and {bench_name} can not fuzzy match")
        if found.failed_count > len(found.failed_tests):
            console.warning(f"... and {found.failed_count - len(found.failed_tests)} more pairs can not fuzzy match")
        match = apply_dtype_gate(npu, bench, found.match, cross)
        fuzzy = (match >= 0) & (np.asarray(npu.names, dtype=object) != np.asarray(
            [bench.names[j] if j >= 0 else "" for j in match.tolist()], dtype=object))  # fmt: skip
    else:
        by_names = functools.cache(functools.partial(match_exact, npu, bench, keys=param_grad_keys(npu, bench, keys),
                                                     cross_framework=cross))  # fmt: skip
        match = None  # made below, unless the alignment's pairing is taken without it
    plain = keys is None and data_map is None and not opts.fuzzy_match and not cross  # names pair as they are
    alignment = None
    if plain and opts.align != "off":
        aligned = _aligned(opts, npu, bench, tree[0], tree[1] if len(tree) > 1 else None, console,
                           by_name=lambda: int(np.count_nonzero(by_names() >= 0)))  # fmt: skip
        if aligned is not None:
            alignment, npu, bench, match = aligned
            plain = False  # the analysis reads the alignment's pairing, not the trees'
    if match is None:  # (made once: by_names keeps what _aligned made)
        match = by_names()
    tensors = None
    if mode is Mode.ALL:
        console.stage("comparing tensors")
        tensors = measure_tensors(cfg, npu, bench, match, console)
    console.stage("judging" if mode is Mode.ALL else "measuring and judging")
    tolerance = Tolerance.parse(opts.tolerance)
    analysis = None
    if root_cause:  # started before the rows are measured (analyse_later: in-process unless asked to fork)
        analysis = analyse_later(
            Measured(mode, npu, bench, match, tensors=tensors),
            tree[0],
            tree[1] if plain else None,
            tolerance,
            tree[2] if plain and len(tree) > 2 else None,
        )
    measured = measure(mode, npu, bench, match, tensors=tensors, fuzzy=fuzzy)
    verdicts = judge(measured, highlight_on=opts.highlight, auto_analyze=opts.auto_analyze,
                     tolerance=tolerance, rootcause_on=root_cause, analysis=analysis)  # fmt: skip
    return CompareOutcome.of(
        measured, verdicts, show_stack=stack_path is not None, derived_mapping=derived, alignment=alignment
    )


def _aligned(opts: Options, npu: RowTable, bench: RowTable, npu_tree: dict[str, str | None] | None,
             bench_tree: dict[str, str | None] | None, console: Console, by_name: Callable[[], int] = lambda: 0
             ) -> tuple[dict[str, Any], RowTable, RowTable, np.ndarray] | None:  # fmt: skip
    """Runs of different code (pair/align.py): their aligned tables and match, and the alignment; None when the
    module trees are the same code (auto) and no alignment file is given, or when (auto) the alignment pairs no
    more rows than the names do (`by_name()`: two dumps of different models): the tables stay as they are. The
    names' pairing is made only when the alignment pairs no more rows than the names could (`named_rows_bound`)."""
    from msprobe_compare.pair.align import decide

    decision = decide(npu, bench)
    if opts.alignment is None and opts.consistent_check is None and not (opts.align == "on" or decision.differ):
        return None
    from msprobe_compare.pair.aligned import plan  # only for runs of different code (start-up speed)
    from msprobe_compare.render.alignment import align_lines, not_aligned_line

    user = user_alignment(opts)
    why = "as asked (--align on)" if opts.align == "on" and not decision.differ else (
        f"the module trees differ: {decision.same_names} of {decision.npu_modules} npu module calls have a "
        f"namesake among the bench's {decision.bench_modules}")  # fmt: skip
    if opts.alignment is not None:
        why += f"; the pairs of {opts.alignment} first"
    if opts.consistent_check is not None:
        why += f"; msprobe 26.x's consistent check: its {opts.consistent_check} name maps first"
    al, tables = plan(npu, bench, npu_tree, bench_tree, user=user, user_path=opts.alignment,
                      backend=opts.consistent_check)  # fmt: skip
    asked = opts.align == "on" or opts.alignment is not None or opts.consistent_check is not None
    if not asked and tables.rows_paired <= named_rows_bound(npu, bench):
        named = by_name()
        if tables.rows_paired <= named:
            console.info(not_aligned_line(decision, tables.rows_paired, named))
            return None
    for line in align_lines(al, tables, why):
        console.info(line)
    from msprobe_compare.pair.align import describe

    return describe(al), tables.npu.table, tables.bench.table, tables.match


def user_alignment(opts: Options) -> Any:
    """The document of the user's module alignment file (--alignment), None without one."""
    if opts.alignment is None:
        return None
    from msprobe_compare.pair.mapping_file import load_yaml  # only with --alignment (start-up speed)

    return load_yaml(opts.alignment, "module alignment")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


EMPTY_SHOWN = 20


def _warn_empty_entries(npu: RowTable, bench: RowTable, console: Console) -> None:
    """No entry is dropped silently: each one that yields no row is named (the first 20 per side), with a count."""
    for side, rows in (("npu", npu), ("bench", bench)):
        empty = empty_entries(rows)
        for name in empty[:EMPTY_SHOWN]:
            console.warning(f"{side} entry '{name}' yields no row (no tensor or argument description in it)")
        if empty:
            more = f" ({len(empty) - EMPTY_SHOWN} not named above)" if len(empty) > EMPTY_SHOWN else ""
            console.warning(f"{len(empty)} {side} entr{'y' if len(empty) == 1 else 'ies'} of "
                            f"{len(rows.entries)} yield no row{more}")  # fmt: skip


def _bench_tree(path: Path, npu_tree: dict[str, str | None],
                console: Console) -> tuple[dict[str, str | None] | None, TreeDiff | None]:  # fmt: skip
    """The bench side's construct.json and its diff from the NPU tree (None, None without one): read beside the NPU
    tree in C where it can be (pair.calls.tree_beside: one pass, the parents shared), else as module_tree reads it."""
    if os.path.lexists(path):
        try:
            got = tree_beside(read_bytes(path), npu_tree)
        except InputError:
            got = None  # module_tree below says what is wrong with it
        if got is not None:
            return got
    tree = module_tree(path, console)
    return tree, tree_diff(npu_tree, tree) if tree is not None else None


def module_tree(path: Path, console: Console) -> dict[str, str | None] | None:
    """construct.json of the NPU dump, for naming the innermost origin; optional."""
    if not os.path.lexists(path):
        return None
    try:
        return read_construct_json(path)
    except InputError as exc:
        console.warning(f"construct.json ignored: {exc.message}")
        return None


def measure_tensors(
    cfg: CompareConfig, npu: RowTable, bench: RowTable, match: np.ndarray, console: Console
) -> TensorColumns:
    """Real-data metrics of every row, with the per-row log lines when `is_print_compare_log` is on."""
    from msprobe_compare import distribute  # tensor mode only, as its reader and workers (start-up speed)
    from msprobe_compare.measure.tensor_rows import measure_rows
    from msprobe_compare.render.progress import Progress

    npu_dir = cfg.npu_path.parent / "dump_tensor_data"
    bench_dir = cfg.bench_path.parent / "dump_tensor_data"
    for side, directory in (("npu", npu_dir), ("bench", bench_dir)):
        if not directory.is_dir():
            raise InputError(f"the {side} dump has task 'tensor' but no dump_tensor_data folder", directory)

    def log_row(task: RowTask, metrics: TensorMetrics, failure: Failure) -> None:
        console.info(f"start compare: {task.npu_name}")
        if metrics.messages and metrics.messages[0] in PRECHECK_MSGS:
            console.info(f"[{task.npu_name}] Compare result: {messages_text(metrics.messages[:1], failure[0])}")
            return
        shown = []
        for metric, (_, log_name) in table.METRIC_COLUMNS.items():
            m = getattr(metrics, metric.field)
            shown.append(f"{log_name} {m.value if m.state == MetricState.VALUE else STATE_TEXT[MetricState(m.state)]}")
        console.info(f"[{task.npu_name}] Compare result: {', '.join(shown)}, {messages_text(metrics.messages)}")

    sizes = [_pair_bytes(npu_dir, npu.data_name[i], bench_dir, bench.data_name[j] if j >= 0 else NO_DATA_FILE)
             for i, j in enumerate(match.tolist())]  # fmt: skip
    progress = Progress("API/Module Item Compare Process", sum(sizes), unit="B", enabled=not cfg.options.quiet)

    def on_row(task: RowTask, metrics: TensorMetrics, failure: Failure) -> None:
        if cfg.print_compare_log:
            log_row(task, metrics, failure)
        progress.advance(sizes[task.row])

    backend = distribute.row_backend(cfg.options.ray, console, cfg.options.jobs) if cfg.options.ray else None
    try:
        return measure_rows(npu, bench, match, npu_dir, bench_dir, jobs=cfg.options.jobs, on_row=on_row,
                            pool=cfg.options.pool or "auto", backend=backend,
                            excess_units=Tolerance.parse(cfg.options.tolerance).excess_units)  # fmt: skip
    finally:
        progress.close()


def _pair_bytes(npu_dir: Path, npu_name: str, bench_dir: Path, bench_name: str) -> int:
    """Size of a row's two tensor files (0 for missing ones), for the progress bar."""
    total = 0
    for directory, name in ((npu_dir, npu_name), (bench_dir, bench_name)):
        if names_a_file(name):
            try:
                total += (directory / name).stat().st_size
            except (OSError, ValueError):
                pass
    return total


@dataclass(frozen=True)
class PairSummary:
    """What one compare's table holds: row counts and, when asked for, the cells (`table.value_columns`)."""

    rows: int
    matched: int  # rows with a bench row
    red: int  # rows coloured red (0 without highlighting)
    yellow: int
    columns: dict[str, list[Any]] | None = None
    levels: list[str] | None = None  # with the cells: per row "red", "yellow" or "none" (render.findings.row_levels)
    states: list[str] | None = None  # per row, the root-cause state of its call (render.findings.row_states)


def summarize(outcome: CompareOutcome, with_table: bool = False) -> PairSummary:
    colour = outcome.marks.colour if outcome.marks is not None else np.zeros(len(outcome), dtype=np.int8)
    return PairSummary(
        rows=len(outcome),
        matched=int(np.count_nonzero(outcome.match >= 0)),
        red=int(np.count_nonzero(colour == Colour.RED)),
        yellow=int(np.count_nonzero(colour == Colour.YELLOW)),
        columns=table.value_columns(outcome) if with_table else None,
        levels=findings.row_levels(outcome) if with_table else None,
        states=findings.row_states(outcome) if with_table else None,
    )


@dataclass(frozen=True)
class PairResult:
    written: Written
    summary: PairSummary


def compare_pair(cfg: CompareConfig, console: Console, suffix: str = "", *, with_table: bool = False,
                 keep: bool = False) -> PairResult:  # fmt: skip
    """Compare one pair of dump.json files, write the result files, and summarise the table. `keep`: the command
    compares only this pair, so its tables are kept until the process ends (runtime.keep_until_exit)."""
    debug = cfg.npu_path.name == "debug.json"  # single-point data (spec §7.7): never coloured, its own file name
    if debug and cfg.options.highlight:
        cfg = replace(cfg, options=replace(cfg.options, highlight=False))
    with gc_paused():
        outcome = build_outcome(cfg, console)
        if keep:
            keep_until_exit(outcome)
        if len(outcome) == 0:
            console.warning("Can`t match any op. No compare result file generated.")
            return PairResult(Written(None, None), summarize(outcome, with_table))
        if not cfg.options.write:  # the Python API's write=False: the story without files
            return PairResult(report.tell(outcome, console, bench_path=cfg.bench_path), summarize(outcome, with_table))
        console.stage("writing")
        written = report.write_all(outcome, cfg.options.output_dir, console, suffix=suffix,
                                   coloured=cfg.options.highlight, formats=cfg.options.formats,
                                   bench_path=cfg.bench_path, prefix="debug_" if debug else "",
                                   compared=report.compared_facts(cfg.npu_path, cfg.bench_path,
                                                                  cfg.options.framework)
                                   if "html" in cfg.options.formats else None)  # fmt: skip
        return PairResult(written, summarize(outcome, with_table))


def compare_files(cfg: CompareConfig, console: Console, suffix: str = "") -> Written:
    """Compare one pair of dump.json files and write the result files."""
    return compare_pair(cfg, console, suffix, keep=True).written


@dataclass(frozen=True)
class RankOutcome:
    label: str  # "rank0", "rank", or "graph/step0/rank1" in mix dumps
    written: Written | None
    error: str | None
    summary: PairSummary | None = None


def compare_rank(cfg: CompareConfig, label: str, suffix: str, with_table: bool = False) -> RankOutcome:
    """One rank, in a worker process: its own log prefix; errors become a result, not an exception."""
    console = Console(prefix=f"[{label}] ", quiet=cfg.options.quiet)
    try:
        for side, path in (("npu", cfg.npu_path), ("bench", cfg.bench_path)):
            if not path.is_file():
                raise InputError(f"the {side} rank folder has no dump.json", path.parent)
        out_dir = prepare_output_dir(cfg.options.output_dir) if cfg.options.write else cfg.options.output_dir
        done = compare_pair(replace(cfg, options=replace(cfg.options, output_dir=out_dir)), console, suffix,
                            with_table=with_table)  # fmt: skip
        written = done.written
    except CompareError as exc:
        console.error(exc.message)
        return RankOutcome(label, None, exc.message)
    except Exception as exc:  # a defect of ours must not stop the other ranks
        message = f"internal error: {type(exc).__name__}: {exc}"
        console.error(message)
        return RankOutcome(label, None, message)
    if written.xlsx is not None:
        console.banner()
    return RankOutcome(label, written, None, done.summary)
