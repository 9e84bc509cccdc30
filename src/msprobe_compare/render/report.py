"""Write one compare's files (xlsx, advisor) and its console lines."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from msprobe_compare.judge.advisor import AdvisorResult
from msprobe_compare.judge.gate import LevelCounts
from msprobe_compare.render.diff_analyze import origin_items, write_diff_analyze
from msprobe_compare.judge.floors import collective_calls
from msprobe_compare.judge.rootcause import RootCause
from msprobe_compare.log import Console
from msprobe_compare.model import CompareOutcome, Mode
from msprobe_compare.render import story, table
from msprobe_compare.render.findings import Finding, finding_records, row_marks
from msprobe_compare.render.files import atomic_output, claim_names
from msprobe_compare.render.flat import write_csv, write_jsonl
from msprobe_compare.records import dataclass


@dataclass(frozen=True)
class Written:
    """Files one compare produced."""

    xlsx: Path | None  # the result table (xlsx, else the first of csv/jsonl, else the HTML report)
    advisor: Path | None
    first_origin: tuple[int, str] | None = None  # (position in execution order, description)
    counts: LevelCounts = LevelCounts()  # rows, matched, error/warning/excluded rows (see judge.gate)
    origins: list = field(default_factory=list)  # diff-analyze items of the origins (render.diff_analyze)
    html: Path | None = None  # the HTML report
    nothing_compared: bool = False  # no call could be compared (the root cause could not decide)
    first_suspect: tuple[int, str] | None = None  # (position, headline text) when a call is suspect (judge.rootcause)
    noise: bool = False  # some call differs within the noise floor
    # the first origin: the collective call that brings it from another rank (None: its own), and how many collective
    # calls come before it in execution order (its own place among them, for a collective): ranks line up by these
    first_collective: str | None = None
    collectives_before: int = 0
    files: tuple[Path, ...] = ()  # every file of the result set, as published
    alignment: dict | None = None  # runs of different code: the module pairs found (pair.align.describe)
    findings: tuple[Finding, ...] = ()  # the origins, then the suspects, as records

    @property
    def errors(self) -> int:
        return self.counts.errors

    @property
    def warnings(self) -> int:
        return self.counts.warnings


def rootcause_lines(rc: RootCause | None, counts: LevelCounts | None = None, limit: int = 10) -> list[str]:
    """The advisor's `Root cause` section: ranked origins and suspects, their evidence and advice, the noise model."""
    if rc is None:
        return []
    lines = ["", "Root cause (where the two runs first part, in execution order):"]
    if not rc.origins:
        head = story.headline(rc, counts if counts is not None else LevelCounts(len(rc.entries), len(rc.entries)))
        assert head is not None
        if head.state != "suspect":  # the suspect is listed below with its evidence
            lines.append(head.text[0].upper() + head.text[1:].rstrip(".") + ".")
        else:
            lines.append("No origin the precision of the dump can support.")
    lines += _ranked([(f"{o.kind.value}, {o.phase}", story.origin_description(o), story.evidence_text(o.evidence),
                       "Advice", story.origin_advice(o)) for o in rc.origins], limit, "origins")  # fmt: skip
    if rc.suspects:
        lines.append("Suspects (above the noise floor by less than the precision can support; not origins):")
        lines += _ranked([(f"suspect, {x.phase}", story.suspect_description(x), story.evidence_text(x.evidence),
                           "To decide", story.suspect_advice(x)) for x in rc.suspects], limit, "suspects")  # fmt: skip
    model = story.noise_model_line(rc)
    if model:
        lines.append(model)
    return lines


def _ranked(items: list[tuple[str, str, str, str, str]], limit: int, what: str) -> list[str]:
    """Numbered `[tags] description` entries with their evidence and a labelled advice line; `limit` shown."""
    lines = []
    for k, (tags, description, evidence, label, advice) in enumerate(items[:limit], start=1):
        lines += [f"{k}. [{tags}] {description}", f"   Evidence: {evidence}", f"   {label}: {advice}"]
    if len(items) > limit:
        lines.append(f"... and {len(items) - limit} more {what}")
    return lines


def write_advisor(path: Path, result: AdvisorResult, rc: RootCause | None = None, *,
                  mode: Mode = Mode.SUMMARY, counts: LevelCounts | None = None) -> None:  # fmt: skip
    """The reference's three lines first (parity), labelled by a note with the row counts, then our root cause."""
    lines = story.advisor_lines(result)
    if counts is not None:
        lines += ["", *story.advisor_note(mode, result, counts, rc)]
    lines += rootcause_lines(rc, counts)
    with atomic_output(path) as tmp:
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def log_rootcause(console: Console, head: story.Headline | None) -> None:
    """The headline: where the two runs first part (or why that cannot be told)."""
    if head is not None:
        (console.warning if head.is_warning else console.info)(f"Root cause: {head.text}")


def log_counts(console: Console, counts: LevelCounts, bench_path: Path | None, aligned: bool = False) -> None:
    console.info(story.count_line(counts))
    warning = story.unmatched_warning(counts, bench_path, aligned)
    if warning:
        console.warning(warning)


def log_advisor(console: Console, mode: Mode, result: AdvisorResult, counts: LevelCounts | None = None,
                rc: RootCause | None = None) -> None:  # fmt: skip
    """The reference's advisor on the console, labelled as its rule; its "all data meets the accuracy requirements"
    only where nothing in the run contradicts it (story.advisor_shown_lines: the file keeps the reference's words)."""
    console.info(f"Start analyzing the comparison result: {mode.value}")
    console.info(story.advisor_rule(mode))
    for name in result.unmatched:
        console.warning(f"The tensor name matches but the shape or dtype does not match: {name}")
    contradicted = counts is not None and bool(story.advisor_objections(result, counts, rc))
    if result.line is None:
        console.info(f"No row fails the reference rule ({story.ADVISOR_COLUMN[mode]} column)" if contradicted
                     else "All data from api input/output accuracy reached")  # fmt: skip
    else:
        console.warning(f"Find {result.node} accuracy not reached, the line is {result.line}")
    console.info("The summary of the expert advice is as follows: ")
    shown = story.advisor_shown_lines(result, counts, mode, rc) if counts is not None else story.advisor_lines(result)
    for line in shown:
        console.info(line)
    extra = story.advisor_contradiction(result, counts, mode, rc) if counts is not None else None
    if extra:
        console.warning(extra)


def write_html(path: Path, outcome: CompareOutcome, title: str, *, columns: list[Any] | None,
               compared: dict[str, Any] | None = None, tables: tuple[str, ...] = ()) -> None:  # fmt: skip
    """render/html.py's write_html, imported only when a report is written (start-up speed); `tables`: the result
    table's files, named on a page that holds part of a large table."""
    from msprobe_compare.render import html

    html.write_html(path, outcome, title, columns=columns, compared=compared, tables=tables)


def _xlsx(path: Path, header: list[str], columns: list[Any] | table.ColumnBlocks, colours: Any,
          coloured: bool) -> None:  # fmt: skip
    assert not isinstance(columns, table.ColumnBlocks), "the xlsx writer takes whole columns"
    from msprobe_compare.render.xlsx import write_xlsx_columns  # only with an xlsx (start-up speed)

    write_xlsx_columns(path, header, columns, colours, sheet_name=_sheet_name(coloured))


def _sheet_name(coloured: bool) -> str:
    return "Sheet" if coloured else "Sheet1"  # as the reference names it in each style


def _result_xlsx(path: Path, outcome: CompareOutcome, header: list[str], columns: list[Any] | table.ColumnBlocks,
                 colours: Any, coloured: bool, files: list[tuple[str, str]]) -> None:  # fmt: skip
    """The result workbook: the table (names frozen with the header; origin and suspect rows marked when coloured),
    then the Summary sheet (render/summary_sheet.py) naming the run's other `files`."""
    assert not isinstance(columns, table.ColumnBlocks), "the xlsx writer takes whole columns"
    from msprobe_compare.render.summary_sheet import summary_sheet  # only with an xlsx (start-up speed)
    from msprobe_compare.render.xlsx import write_xlsx_columns

    name = _sheet_name(coloured)
    first_metric = next((k for k, h in enumerate(header) if h not in table.COMMON), len(header))
    write_xlsx_columns(path, header, columns, colours, sheet_name=name, freeze=first_metric,
                       marks=row_marks(outcome) if coloured else None,
                       extra=summary_sheet(outcome, name, files))  # fmt: skip


def _csv(path: Path, header: list[str], columns: list[Any] | table.ColumnBlocks, colours: Any, coloured: bool) -> None:
    write_csv(path, header, columns, colours)


def _jsonl(
    path: Path, header: list[str], columns: list[Any] | table.ColumnBlocks, colours: Any, coloured: bool
) -> None:
    write_jsonl(path, header, columns, colours)


DUMP_HEAD_CHARS = 65536  # what is read of a dump.json for its level and framework (they precede "data")
_HEAD_KEY = re.compile(r'"(task|level|framework)"\s*:\s*"([^"\\]{0,64})"')


def compared_facts(npu_path: Path, bench_path: Path, framework: str) -> dict[str, Any]:
    """What a compare compared, for the HTML report's head: the dump.json paths, the framework, each dump's task,
    level and framework as its head says, this tool's version and the command line."""
    import shlex
    import sys

    from msprobe_compare import __version__

    def head(path: Path) -> dict[str, str]:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(DUMP_HEAD_CHARS)
        except OSError:
            return {}
        text = text.split('"data"', 1)[0]
        return {k: v for k, v in _HEAD_KEY.findall(text)}

    return {"npu": str(npu_path), "bench": str(bench_path), "framework": framework,
            "npu_dump": head(npu_path), "bench_dump": head(bench_path), "version": __version__,
            "command": shlex.join(sys.argv)}  # fmt: skip


def report_title(compared: dict[str, Any] | None, suffix: str) -> str:
    """The report's title: what it compares (the two dump folders) and the rank suffix."""
    rank = suffix.replace("_", " ")
    if not compared:
        return f"msprobe compare report{rank}"
    return f"msprobe-compare: {Path(compared['npu']).parent} vs {Path(compared['bench']).parent}{rank}"


# the writer of each table format: (path, header, columns, colour codes, coloured) -> the file at path
TABLE_WRITERS: dict[str, Callable[[Path, list[str], list[Any] | table.ColumnBlocks, Any, bool], None]] = {
    "xlsx": _xlsx, "csv": _csv, "jsonl": _jsonl,
}  # fmt: skip
FORMATS = (*TABLE_WRITERS, "html")  # "html": the report, written after the tables
DEFAULT_FORMATS = ("xlsx", "html")


def write_all(
    outcome: CompareOutcome,
    out_dir: Path,
    console: Console,
    *,
    suffix: str,
    coloured: bool,
    formats: tuple[str, ...] = DEFAULT_FORMATS,
    bench_path: Path | None = None,
    prefix: str = "",
    compared: dict[str, Any] | None = None,
) -> Written:
    """Write the table in each requested format (and the HTML report), then the advisor file; one time stamp.
    `prefix`: `debug_` for debug.json compares (`debug_compare_result_{ts}.xlsx`, spec §7.7); `compared`: what was
    compared (compared_facts), for the HTML report's head and title."""
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:  # Options refuses them; a caller that made its own tuple gets no file of a guessed format
        raise ValueError(f"unknown format {', '.join(map(repr, unknown))}; choose from {', '.join(FORMATS)}")
    names = {fmt: f"{prefix}compare_result{suffix}_{{ts}}.{fmt}" for fmt in formats if fmt in TABLE_WRITERS}
    html_name = f"compare_report{suffix}_{{ts}}.html"
    advisor_name = f"advisor{suffix}_{{ts}}.txt"
    mapping_name = ["data_mapping_{ts}.yaml"] if outcome.derived_mapping is not None else []  # -lm
    if outcome.alignment is not None:
        mapping_name.append(f"module_alignment{suffix}_{{ts}}.yaml")
    patterns = [*names.values(), html_name, advisor_name, *mapping_name]
    with claim_names(out_dir, patterns) as claim:  # one stamp for the set, reserved
        written = _write_set(
            outcome,
            out_dir,
            console,
            claim.ts,
            names,
            html_name,
            advisor_name,
            suffix=suffix,
            coloured=coloured,
            formats=formats,
            bench_path=bench_path,
            compared=compared,
        )
    published = (claim.path(p) for p in patterns)  # those written (an advisor under -c is not)
    return replace(written, files=tuple(p for p in published if p.is_file() and not p.is_symlink()))


def _write_set(
    outcome: CompareOutcome,
    out_dir: Path,
    console: Console,
    ts: str,
    names: dict[str, str],
    html_name: str,
    advisor_name: str,
    *,
    suffix: str,
    coloured: bool,
    formats: tuple[str, ...],
    bench_path: Path | None,
    compared: dict[str, Any] | None = None,
) -> Written:
    """write_all's files under the claimed stamp `ts`."""
    header = table.header(outcome)
    first: Path | None = None
    colours = table.colour_codes(outcome)
    counts = outcome.counts
    log_counts(console, counts, bench_path, aligned=outcome.alignment is not None)  # first: most rows unmatched
    others = _other_files(outcome, ts, names, html_name if "html" in formats else None,
                          advisor_name if outcome.advisor is not None else None, suffix)  # fmt: skip
    plain: list[table.Column] | None = None  # the plain-style columns, shared by csv, jsonl and the HTML report
    for fmt, name in names.items():
        path = out_dir / name.format(ts=ts)
        # the coloured style (text booleans, "inf\t") belongs to the coloured xlsx only
        style = table.Style(text_booleans=coloured and fmt == "xlsx")
        columns: list[table.Column] | table.ColumnBlocks
        if style.text_booleans:
            columns = table.column_data(outcome, style)
        elif fmt != "xlsx" and "html" not in formats:  # built a block at a time by the writer, in its processes
            columns = table.column_blocks(outcome, style)
        else:
            columns = plain = plain or table.column_data(outcome, style)
        if fmt == "xlsx":
            console.info(f"Saving result excel file in progress. The file path is: {path}.")
        with atomic_output(path) as tmp:
            if fmt == "xlsx":
                _result_xlsx(tmp, outcome, header, columns, colours, coloured,
                             [(what, name) for what, name in others if name != path.name])  # fmt: skip
            else:
                TABLE_WRITERS[fmt](tmp, header, columns, colours, coloured)
        del columns
        console.info(f"Compare result is {path}")
        first = first or path
    html_path = None
    if "html" in formats:
        html_path = out_dir / html_name.format(ts=ts)
        with atomic_output(html_path) as tmp:
            tables = tuple(str(out_dir / name.format(ts=ts)) for name in names.values())
            write_html(tmp, outcome, report_title(compared, suffix), columns=plain, compared=compared, tables=tables)
        console.info(f"The HTML report is saved in: {html_path}")
    del plain
    if outcome.derived_mapping is not None:  # -lm: the row mapping it derived, published with the rest
        mapping_path = out_dir / f"data_mapping_{ts}.yaml"
        with atomic_output(mapping_path) as tmp:
            from msprobe_compare.pair.mapping_file import mapping_yaml  # only with -lm (start-up speed)

            tmp.write_text(mapping_yaml(outcome.derived_mapping), encoding="utf-8")
        console.info(f"The data mapping is saved in: {mapping_path}")
    if outcome.alignment is not None:  # runs of different code: the module alignment, for --alignment
        from msprobe_compare.render.alignment import alignment_yaml  # only then (start-up speed)

        align_path = out_dir / f"module_alignment{suffix}_{ts}.yaml"
        with atomic_output(align_path) as tmp:
            tmp.write_text(alignment_yaml(outcome.alignment), encoding="utf-8")
        console.info(f"The module alignment is saved in: {align_path}")
    advisor_path = None
    if outcome.advisor is not None:
        advisor_path = out_dir / advisor_name.format(ts=ts)
    return replace(tell(outcome, console, advisor_path, counted=True), xlsx=first or html_path, html=html_path)


def tell(outcome: CompareOutcome, console: Console, advisor_path: Path | None = None, *,
         bench_path: Path | None = None, counted: bool = False) -> Written:  # fmt: skip
    """The story of one compare after its tables: the counts (unless `counted`: said already), the reference's
    advisor (written to `advisor_path` when given), the root-cause headline; a Written without table files (what
    the Python API returns for a compare that writes no file)."""
    counts = outcome.counts
    if not counted:
        log_counts(console, counts, bench_path, aligned=outcome.alignment is not None)
    rc = outcome.rootcause
    if outcome.advisor is not None:
        log_advisor(console, outcome.mode, outcome.advisor, counts, rc)
        if advisor_path is not None:
            write_advisor(advisor_path, outcome.advisor, rc, mode=outcome.mode, counts=counts)
            console.info(f"The advisor summary is saved in: {advisor_path}")
    head = story.headline(rc, counts)
    log_rootcause(console, head)
    origin = (
        (rc.entries.index(rc.first.entry), story.origin_description(rc.first)) if rc is not None and rc.first else None
    )
    suspect = (rc.entries.index(rc.suspects[0].entry), story.suspect_text(rc)) if rc is not None and rc.suspects \
        else None  # fmt: skip
    collective, before = _collective_place(rc)
    return Written(None, advisor_path, origin, counts, origins=origin_items(outcome), alignment=outcome.alignment,
                   nothing_compared=head is not None and head.state == "nothing", first_suspect=suspect,
                   noise=rc is not None and story.has_noise(rc), first_collective=collective,
                   collectives_before=before, findings=finding_records(rc))  # fmt: skip


def _other_files(outcome: CompareOutcome, ts: str, tables: dict[str, str], html_name: str | None,
                 advisor_name: str | None, suffix: str) -> list[tuple[str, str]]:  # fmt: skip
    """(what, file name) of every file of the result set, in the order the console names them."""
    files = [(f"Table ({fmt})", name.format(ts=ts)) for fmt, name in tables.items()]
    if html_name is not None:
        files.append(("HTML report", html_name.format(ts=ts)))
    if outcome.derived_mapping is not None:
        files.append(("Data mapping (-lm)", f"data_mapping_{ts}.yaml"))
    if outcome.alignment is not None:
        files.append(("Module alignment", f"module_alignment{suffix}_{ts}.yaml"))
    if advisor_name is not None:
        files.append(("Advisor", advisor_name.format(ts=ts)))
    return files


def _collective_place(rc: RootCause | None) -> tuple[str | None, int]:
    """(the collective the first origin arrives through, None: its own; the collective calls before it)."""
    if rc is None or rc.first is None:
        return None, 0
    at = rc.entries.index(rc.first.entry)
    return rc.first.entry if rc.first.collective else None, int(collective_calls(rc.entries[:at]).sum())


def log_directory_summary(console: Console, summary: Any) -> None:
    """After step folders: first origin per rank, the earliest across ranks, failed and unpaired ranks.

    `summary` is an api.RunSummary (ranks with label, written, error; unpaired rank names).
    """
    written = [r for r in summary.ranks if r.written]
    found = [(r.written.first_origin, r.label) for r in written if r.written.first_origin]
    for (_, text), label in found:
        console.info(f"Root cause of {label}: {text}")
    suspected = [(r.written.first_suspect, r.label) for r in written if r.written.first_suspect and
                 not r.written.first_origin]  # fmt: skip
    for (_, text), label in suspected:
        console.warning(f"Root cause of {label}: {text}")
    blind = [r.label for r in written if r.written.nothing_compared]
    if blind:
        console.warning(f"Nothing compared in {len(blind)} of {len(summary.ranks)} ranks ({', '.join(blind)}): "
                        "none of their NPU rows has a bench counterpart")  # fmt: skip
    if written:
        total = sum((r.written.counts for r in written), LevelCounts())
        console.info(f"All ranks: {story.count_line(total)}")
    if found:
        source = collective_source(written)
        if source is not None:
            carried, origin = source
            receives = ", ".join(f"{r.label} first receives it at {r.written.first_collective}" for r in carried)
            console.warning(f"Root cause across ranks: {origin.label}: {origin.written.first_origin[1]}; {receives}")
        else:
            (_, text), label = min(found, key=lambda item: item[0][0])
            console.warning(f"Earliest root cause across ranks: {label}: {text}")
    elif written and len(blind) == len(written):
        console.warning("Root cause: nothing compared in any rank.")
    elif written:
        among = f" among the {len(written) - len(blind)} ranks compared" if blind else ""
        if suspected:
            console.warning(f"Root cause: no origin{among} the precision can support; {len(suspected)} rank(s) "
                            "with a suspect (above)")  # fmt: skip
        else:
            console.info(
                f"Root cause: no origin{among}; every compared call agrees within tolerance"
                f"{' or within the noise floor' if any(r.written.noise for r in written) else ''}."
            )
    failed = [r for r in summary.ranks if r.error is not None]
    for rank in failed:
        console.error(f"{rank.label} failed: {rank.error}")
    if failed or summary.unpaired:
        unpaired = f"; not paired: {', '.join(summary.unpaired)}" if summary.unpaired else ""
        console.error(f"{len(failed)} of {len(summary.ranks)} ranks failed{unpaired}")


def collective_source(ranks: list[Any]) -> tuple[list[Any], Any] | None:
    """Across ranks: the ranks whose first origin is a collective bringing another rank's difference, and the rank
    whose own origin comes first (fewest collectives before it) among the others; None when there is no such pair.
    `ranks`: api.RankOutcome with a `written`."""
    carried = [r for r in ranks if r.written.first_origin and r.written.first_collective]
    own = [r for r in ranks if r.written.first_origin and not r.written.first_collective]
    if not carried or not own:
        return None
    origin = min(own, key=lambda r: (r.written.collectives_before, r.written.first_origin[0]))
    carried = [r for r in carried if r.written.collectives_before >= origin.written.collectives_before]
    return (carried, origin) if carried else None


def write_origins_json(console: Console, out_dir: Path, per_rank: dict[str, list[dict[str, Any]]]) -> None:
    """-da: diff_analyze_{ts}.json, or a note when no rank has an origin."""
    if not any(per_rank.values()):
        console.info("Cannot find any diff node, no need to generate analyze file.")
        return
    console.info(f"The analyze result is saved in: {write_diff_analyze(out_dir, per_rank)}")
