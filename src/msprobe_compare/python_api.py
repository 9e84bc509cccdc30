"""The Python API: `compare(npu_path, bench_path, ...)` and `compare_json(path, ...)` return a `CompareResult`.

They run the CLI's pipeline (`api.py`) with the same options, write the same files (none with `write=False`: the
result holds the table, the counts and the root cause all the same), print nothing unless `verbose=True`, and raise
instead of printing `[ERROR]` lines: `OptionError` (also a ValueError) for an option,
`InputError` for bad input, `OutputError` when the output folder cannot be written (all `CompareError`s).
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_compare import distribute
from msprobe_compare.api import PairResult, compare_pair
from msprobe_compare.folders import RunSummary, compare_directories
from msprobe_compare.config import (
    FRAMEWORKS,
    OPTION_NAMES,
    CompareConfig,
    Options,
    load_config,
    make_config,
    path_option,
)
from msprobe_compare.errors import InputError, OptionError
from msprobe_compare.load.dumpjson import check_input_file
from msprobe_compare.load.framework import dump_framework
from msprobe_compare.load.layout import first_dump
from msprobe_compare.load.stream import open_dump
from msprobe_compare.log import Console
from msprobe_compare.judge.rootcause import CallState
from msprobe_compare.render import report, table
from msprobe_compare.render.diff_analyze import write_diff_analyze
from msprobe_compare.render.files import prepare_output_dir
from msprobe_compare.render.findings import Finding
from msprobe_compare.records import dataclass

PathLike = str | os.PathLike[str]
# keyword options: those of Options but the ones given as parameters (framework, output_dir) or internal
COMPARE_OPTIONS = tuple(n for n in OPTION_NAMES if n not in ("framework", "output_dir", "parallel_read", "quiet"))
_CLI_SPELLINGS = {  # CLI names that are spelled differently here
    "compare_only": "auto_analyze=False",
    "format": "formats=...",
    "output_path": "output_dir=...",
    "input_path": "compare_json(path)",
    "fail_on": "the counts of the result (errors, warnings)",
    "stack_path": "compare(..., stack_path=...), or stack_path in the compare.json",  # compare_json has none
}


@dataclass(frozen=True)
class CompareResult:
    """What a compare wrote and found.

    For step folders the counts are the sums over ranks, `first_origin` is the earliest across ranks (prefixed with
    the rank), `origins`/`suspects` every rank's (`rank` set), the file paths and `columns` are per rank in `ranks`,
    and `failed`/`unpaired` name ranks not compared. `to_pandas()` makes the table a DataFrame for analysis.
    """

    output_dir: Path | None  # None with write=False
    xlsx: Path | None = None
    csv: Path | None = None
    jsonl: Path | None = None
    html: Path | None = None  # the HTML report
    advisor: Path | None = None
    diff_analyze: Path | None = None  # with diff_analyze=True, when some rank has an origin
    rows: int = 0
    matched: int = 0  # rows with a bench row
    red: int = 0  # rows coloured red (0 with highlight=False)
    yellow: int = 0
    errors: int = 0  # rows at error level: red rows, md5 `Different`, real-data `Accuracy No` (as --fail-on error)
    warnings: int = 0  # matched yellow rows and summary `Warning` rows that are not errors
    excluded: int = 0  # error/warning rows not counted: in-place inputs the dumper recorded after the write
    layout_only: int = 0  # rows of calls a parallel layout adds (all-reduce, ...): no counterpart expected
    nothing_compared: bool = False  # no row had a bench counterpart: no verdict is possible (not agreement)
    first_origin: str | None = None  # where accuracy first breaks (`Root cause: ...`), None when nowhere
    columns: Mapping[str, list[Any]] = field(default_factory=dict, repr=False)  # column name -> cells (numbers numeric)
    ranks: Mapping[str, CompareResult] = field(default_factory=dict, repr=False)  # step folders: rank label -> result
    failed: Mapping[str, str] = field(default_factory=dict)  # rank label -> error
    unpaired: tuple[str, ...] = ()  # ranks found on one side only, e.g. "npu rank2"
    # runs of different code (the module trees were aligned): {"pairs": [{"npu", "bench", "how", "slots"}, ...],
    # "unpaired": {side: [...]}, "same_as": {side: {...}}} (merged parts joined by ';'), as
    # module_alignment_{ts}.yaml has them; None when the trees were not aligned
    alignment: dict[str, Any] | None = field(default=None, repr=False)
    # the root cause as records (render.findings.Finding: call, kind, evidence numbers, threshold, ...): origins in
    # execution order, then suspects; for step folders every rank's, each with its rank label in `rank`
    origins: tuple[Finding, ...] = field(default=(), repr=False)
    suspects: tuple[Finding, ...] = field(default=(), repr=False)
    levels: list[str] = field(default_factory=list, repr=False)  # per row: "red", "yellow" or "none"
    states: list[str] = field(default_factory=list, repr=False)  # per row: its call's root-cause state

    @property
    def unmatched(self) -> int:
        """Rows without a bench counterpart (rows of calls a parallel layout adds not counted)."""
        return self.rows - self.matched - self.layout_only

    @property
    def ok(self) -> bool:
        """Every rank was compared (always True for one pair of dumps)."""
        return not self.failed and not self.unpaired

    @property
    def files(self) -> dict[str, Path]:
        """The files written, by kind (xlsx, csv, jsonl, html, advisor, diff_analyze)."""
        kinds = ("xlsx", "csv", "jsonl", "html", "advisor", "diff_analyze")
        return {k: getattr(self, k) for k in kinds if getattr(self, k) is not None}

    def to_pandas(self) -> Any:
        """The table as a pandas DataFrame made for analysis: the metric, difference and statistic columns as floats
        (NaN where the table has no number: N/A, unsupported, ...; a column's other texts, such as `unsupported`
        or an argument's value, in a column of their own named "<column> text" beside it), the other columns as the
        table has them, then `level` ("none" < "yellow" < "red": the row's colour, or its error/warning level where
        the table has no colours) and `state` (the root-cause state of the row's call: origin, suspect, propagated,
        noise, ok, unknown, one-sided), both categorical. For step folders all ranks, with the rank label as first
        index level."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("CompareResult.to_pandas() needs pandas, which is not installed (pip install pandas); "
                              "result.columns holds the same table as a dict of lists") from exc  # fmt: skip
        if self.ranks:
            return pd.concat({label: r.to_pandas() for label, r in self.ranks.items()}, names=["rank", None])
        return _frame(pd, self.columns, self.levels, self.states)


LEVELS = ("none", "yellow", "red")  # the `level` column's categories, in order
STATES = tuple(state.value for state in CallState)  # the `state` column's categories
NO_VALUE = ("N/A", "None")  # texts of a numeric column that say it has no value (no text column for them)


def _numbers(cells: list[Any]) -> tuple[np.ndarray, list[str | None] | None]:
    """A numeric column's cells as float64 (booleans as 0 and 1, NaN for anything else) and its texts other than
    N/A and None (None when it has none)."""
    values = np.full(len(cells), np.nan)
    texts: list[str | None] | None = None
    for i, v in enumerate(cells):
        if isinstance(v, (int, float)):
            values[i] = v
        elif isinstance(v, str) and v and v not in NO_VALUE:
            if texts is None:
                texts = [None] * len(cells)
            texts[i] = v
    return values, texts


def _frame(pd: Any, columns: Mapping[str, list[Any]], levels: list[str], states: list[str]) -> Any:
    """The DataFrame of one table (CompareResult.to_pandas)."""
    data: dict[str, Any] = {}
    for name, cells in columns.items():
        if name in table.NUMERIC:
            data[name], texts = _numbers(cells)
            if texts is not None:
                data[f"{name} text"] = texts
        else:
            data[name] = cells
    n = len(next(iter(columns.values()), []))
    data["level"] = pd.Categorical(levels if len(levels) == n else [LEVELS[0]] * n, categories=LEVELS, ordered=True)
    data["state"] = pd.Categorical(states if len(states) == n else [CallState.UNKNOWN.value] * n, categories=STATES)
    return pd.DataFrame(data)


def compare(
    npu_path: PathLike,
    bench_path: PathLike,
    output_dir: PathLike = "./output",
    *,
    framework: str | None = None,
    stack_path: PathLike | None = None,
    verbose: bool = False,
    diff_analyze: bool = False,
    **options: Any,
) -> CompareResult:
    """Compare two dumps and write the result files into `output_dir` (created if missing).

    `npu_path`/`bench_path`: dump.json files, rank folders holding one, or step folders of rank folders. `framework`:
    that of the NPU dump, by default its dump.json's `framework` field. `options`: those of `COMPARE_OPTIONS`
    (`stack_mode`, `fuzzy_match`, `formats`, `jobs`, `write`, ...; see README "Python API"). `verbose`: print the
    CLI's log.
    """
    npu = path_option("npu_path", npu_path)
    bench = path_option("bench_path", bench_path)
    stack = None if stack_path is None else path_option("stack_path", stack_path)
    return _run(lambda opts: make_config(npu, bench, opts, stack_path=stack), framework, output_dir, verbose,
                diff_analyze, options)  # fmt: skip


def compare_json(
    path: PathLike,
    output_dir: PathLike = "./output",
    *,
    framework: str | None = None,
    verbose: bool = False,
    diff_analyze: bool = False,
    **options: Any,
) -> CompareResult:
    """`compare` of the dumps a compare.json names (`npu_path`, `bench_path`, optional `stack_path`), as
    `msprobe -f FRAMEWORK compare -i path` does; relative paths in it are read against the working directory, or
    against compare.json's folder where they exist only there."""
    source = path_option("path", path)
    return _run(lambda opts: load_config(source, opts), framework, output_dir, verbose, diff_analyze, options)


def _check_names(options: Mapping[str, Any]) -> None:
    for name in options:
        if name in COMPARE_OPTIONS:
            continue
        if name in _CLI_SPELLINGS:
            hint = f"; use {_CLI_SPELLINGS[name]}"
        else:
            close = difflib.get_close_matches(name, COMPARE_OPTIONS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
        raise OptionError(f"unknown option '{name}'{hint} (options: {', '.join(COMPARE_OPTIONS)})")


def _run(
    build: Callable[[Options], CompareConfig],
    framework: str | None,
    output_dir: PathLike,
    verbose: bool,
    diff_analyze: bool,
    options: dict[str, Any],
) -> CompareResult:
    _check_names(options)
    for name, value in (("verbose", verbose), ("diff_analyze", diff_analyze)):
        if not isinstance(value, bool):
            raise OptionError(f"option '{name}' must be True or False, got {type(value).__name__} {value!r}")
    if diff_analyze and options.get("write") is False:
        raise OptionError("option 'diff_analyze' writes a file; it cannot go with write=False")
    settings = {"output_dir": output_dir, "quiet": not verbose, **options}
    if framework is None:
        probe = build(Options(framework=FRAMEWORKS[0]))  # the paths only; the options are checked below
        cfg = replace(probe, options=Options(framework=_dump_framework(probe.npu_path), **settings))
    else:
        cfg = build(Options(framework=framework, **settings))  # options checked before any file is read
    console = Console(quiet=cfg.options.quiet)
    for note in cfg.notes:  # compare.json's unknown keys, paths read from its folder (verbose only, as every line)
        console.warning(note)
    with contextlib.ExitStack() as session:
        if cfg.options.ray:
            session.enter_context(distribute.session())
        out_dir = prepare_output_dir(cfg.options.output_dir) if cfg.options.write else None
        if out_dir is not None:
            cfg = replace(cfg, options=replace(cfg.options, output_dir=out_dir))
        if cfg.is_directory_compare:
            return _directory_result(cfg, compare_directories(cfg, console, with_table=True), console, diff_analyze)
        pair = compare_pair(cfg, console, with_table=True)
    if pair.written.xlsx is not None:
        console.banner()
    result = _pair_result(out_dir, pair, cfg.options.formats)
    if not diff_analyze or out_dir is None:
        return result
    origins = {cfg.npu_path.parent.name: pair.written.origins}
    return replace(result, diff_analyze=_diff_analyze(out_dir, origins, console))


def _dump_framework(npu_path: Path) -> str:
    """The framework of the NPU dump.json (of the first rank, for step folders): its `framework` field, else its
    tensor types (MSAdapter's 'mindtorch' counts as MindSpore)."""
    dump = npu_path if not npu_path.is_dir() else first_dump(npu_path)
    if dump is None:
        raise InputError("holds no rank folder with a dump.json", npu_path)
    check_input_file(dump, "npu_path")
    header = open_dump(dump)[0]
    found = dump_framework(header)
    if found not in FRAMEWORKS:
        named = header.framework
        raise OptionError(f"{dump}: framework not given and the dump names {repr(named) if named else 'none'}; pass "
                          f"framework='pytorch' or framework='mindspore'")  # fmt: skip
    return found


def _pair_result(out_dir: Path | None, pair: PairResult, formats: tuple[str, ...]) -> CompareResult:
    written, summary = pair.written, pair.summary
    tables: dict[str, Path] = {}
    first = written.xlsx
    if first is not None and first != written.html:  # table files share one name but their suffix (report.write_all)
        tables = {fmt: first.with_suffix(f".{fmt}") for fmt in formats if fmt != "html"}
    return CompareResult(
        output_dir=out_dir,
        xlsx=tables.get("xlsx"),
        csv=tables.get("csv"),
        jsonl=tables.get("jsonl"),
        html=written.html,
        advisor=written.advisor,
        rows=summary.rows,
        matched=summary.matched,
        red=summary.red,
        yellow=summary.yellow,
        errors=written.errors,
        warnings=written.warnings,
        excluded=written.counts.excluded,
        layout_only=written.counts.layout_only,
        nothing_compared=written.nothing_compared,
        first_origin=written.first_origin[1] if written.first_origin else None,
        columns=summary.columns or {},
        alignment=written.alignment,
        origins=tuple(f for f in written.findings if f.state == CallState.ORIGIN.value),
        suspects=tuple(f for f in written.findings if f.state == CallState.SUSPECT.value),
        levels=summary.levels or [],
        states=summary.states or [],
    )


def _directory_result(cfg: CompareConfig, run: RunSummary, console: Console, diff_analyze: bool) -> CompareResult:
    report.log_directory_summary(console, run)
    out_dir = cfg.options.output_dir if cfg.options.write else None
    ranks: dict[str, CompareResult] = {}
    for rank in run.ranks:
        if rank.written is not None and rank.summary is not None:
            folder = out_dir / Path(rank.label).parent if out_dir is not None else None
            ranks[rank.label] = _pair_result(folder, PairResult(rank.written, rank.summary), cfg.options.formats)
    found = [(r.written.first_origin, r.label) for r in run.ranks if r.written and r.written.first_origin]
    earliest = min(found, key=lambda item: item[0][0]) if found else None
    source = report.collective_source([r for r in run.ranks if r.written])
    if source is not None:  # a collective brings another rank's origin: that rank's origin is the answer
        earliest = (source[1].written.first_origin, source[1].label)
    origins = {r.label: r.written.origins for r in run.ranks if r.written}
    return CompareResult(
        output_dir=out_dir,
        diff_analyze=_diff_analyze(out_dir, origins, console) if diff_analyze and out_dir is not None else None,
        **{
            k: sum(getattr(r, k) for r in ranks.values())
            for k in ("rows", "matched", "red", "yellow", "errors", "warnings", "excluded", "layout_only")
        },  # fmt: skip
        nothing_compared=bool(ranks) and all(r.nothing_compared for r in ranks.values()),
        first_origin=f"{earliest[1]}: {earliest[0][1]}" if earliest else None,
        ranks=ranks,
        failed={r.label: r.error for r in run.ranks if r.error is not None},
        unpaired=tuple(run.unpaired),
        origins=tuple(_ranked(label, f) for label, r in ranks.items() for f in r.origins),
        suspects=tuple(_ranked(label, f) for label, r in ranks.items() for f in r.suspects),
    )


def _ranked(label: str, found: Finding) -> Finding:
    """A rank's finding with the rank's label (before a parallel layout's rank: "dp0:rank1")."""
    return replace(found, rank=label if found.rank is None else f"{label}:{found.rank}")


def _diff_analyze(out_dir: Path, per_rank: dict[str, list[dict[str, Any]]], console: Console) -> Path | None:
    """diff_analyze_{ts}.json as -da writes it; None (and the CLI's note) when no rank has an origin."""
    if not any(per_rank.values()):
        console.info("Cannot find any diff node, no need to generate analyze file.")
        return None
    path = write_diff_analyze(out_dir, per_rank)
    console.info(f"The analyze result is saved in: {path}")
    return path
