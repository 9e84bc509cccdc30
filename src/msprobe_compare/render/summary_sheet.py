"""The workbook's Summary sheet: the answer beside the table. The verdict (the unmatched warning first where most
rows have no counterpart), the reference's advisor as the console shows it, the counts, the origins and suspects
with their evidence and threshold (each linked to its row in the table), how the table marks their rows, the other
files of the run and the noise model. Its sentences are story.py's, so it tells what the console and the advisor
file tell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.judge.rootcause import CallState
from msprobe_compare.model import CompareOutcome
from msprobe_compare.render import story
from msprobe_compare.render.findings import Finding, finding_records
from msprobe_compare.render.xlsx import (
    XF_COUNT,
    XF_LABEL,
    XF_NUMBER,
    XF_SECTION,
    XF_TITLE,
    XF_WRAP,
    TextSheet,
    table_location,
)

SHEET_NAME = "Summary"  # after the table's sheets; readers of the table skip it (merge_result)
MAX_LISTED = 200  # origins (and suspects) listed; a last row counts the rest
WIDTHS = [30.0, 100.0]  # two columns, labels and values: one page wide on screen and on paper
# the lines of an origin or a suspect under its call: (label, Finding field, XF id); numbers stay numbers
FIELDS: tuple[tuple[str, str, int], ...] = (
    ("Description", "description", XF_WRAP),
    ("Kind", "kind", 0),
    ("Phase", "phase", 0),
    ("Metric", "metric", 0),
    ("Inputs", "inputs", XF_NUMBER),
    ("Outputs", "outputs", XF_NUMBER),
    ("Noise floor", "floor", XF_NUMBER),
    ("Floor source", "floor_source", XF_WRAP),
    ("Threshold", "threshold", XF_NUMBER),
    ("Ratio to floor", "ratio", XF_NUMBER),
    ("Deciding row", "row", XF_WRAP),  # linked to its place in the table
    ("NPU dtype", "npu_dtype", 0),
    ("Bench dtype", "bench_dtype", 0),
    ("Advice", "advice", XF_WRAP),
)
UNMARKED_TEXT = "None: the table is plain (highlighting off), the rows of the calls above are listed here only."
MARKS_TEXT = (
    "Rows of an origin's call are bold, framed by solid lines; rows of a suspect's call italic, framed by "
    "dashed lines. Red and yellow fills are the reference tool's colour rules; their cells are unchanged."
)


def _pair(label: str, value: Any, xf: int = XF_WRAP) -> list[tuple[Any, int]]:
    return [(label, XF_SECTION), (value, xf if isinstance(value, str) else 0)]


def _listed(title: str, one: str, advice: str, items: Sequence[Finding], outcome: CompareOutcome, sheet_name: str,
            sheet: TextSheet) -> None:  # fmt: skip
    """Origins or suspects: a title row, then per item (`one` and its number) its call and a line per field
    (`advice`: the label of the advice line), the deciding row linked to the table."""
    rows = sheet.rows
    rows.append([(f"{title} ({len(items):,})", XF_SECTION)])
    if not items:
        rows.append([("none", 0)])
        return
    where = _row_numbers(outcome, items[:MAX_LISTED])
    for k, (item, at) in enumerate(zip(items[:MAX_LISTED], where), start=1):
        rows.append([(f"{one} {k}", XF_SECTION), (item.call, XF_SECTION)])
        for label, field, xf in FIELDS:
            if field == "row" and at is not None:
                sheet.links.append((len(rows), 1, table_location(sheet_name, len(outcome), at)))
            rows.append([(advice if field == "advice" else label, XF_LABEL), (getattr(item, field), xf)])
    if len(items) > MAX_LISTED:
        rows.append([(f"... and {len(items) - MAX_LISTED:,} more (the advisor file, the HTML report and the Python "
                      "API list them)", 0)])  # fmt: skip


def _row_numbers(outcome: CompareOutcome, items: Sequence[Finding]) -> list[int | None]:
    """The table row (0-based) of each item's deciding row, else of its call's first row; None when not found."""
    npu = outcome.npu
    if not len(npu):
        return [None] * len(items)
    starts = npu.entry_bounds
    wanted = {item.call for item in items}
    at_entry = {name: e for e, name in enumerate(npu.entries) if name in wanted}
    out: list[int | None] = []
    for item in items:
        e = at_entry.get(item.call)
        if e is None:
            out.append(None)
            continue
        lo, hi = int(starts[e]), int(starts[e + 1])
        names = npu.names[lo:hi]
        out.append(lo + names.index(item.row) if item.row in names else lo)
    return out


def summary_sheet(outcome: CompareOutcome, sheet_name: str, files: Sequence[tuple[str, str]]) -> TextSheet:
    """The Summary sheet of one compare whose table is written as `sheet_name` (split tables: its parts); `files`:
    (what, file name) of the run's other files."""
    counts = outcome.counts
    rc = outcome.rootcause
    sheet = TextSheet(SHEET_NAME, [], WIDTHS)
    rows = sheet.rows
    rows.append([("msprobe-compare: where the two runs part", XF_TITLE)])
    rows.append(_pair("This sheet", "The answer beside the table (the first sheet); the advisor file and the HTML "
                                    "report tell the same."))  # fmt: skip
    rows.append([])
    warning = story.unmatched_warning(counts, None, outcome.alignment is not None)
    if warning:
        rows.append(_pair("Warning", warning))
    head = story.headline(rc, counts)
    rows.append(_pair("Root cause", head.text if head is not None else "not analysed"))
    if outcome.advisor is not None:
        shown = story.advisor_shown_lines(outcome.advisor, counts, outcome.mode, rc)
        rows.append(_pair("Reference advisor", story.advisor_rule(outcome.mode)))
        rows += [[(None, 0), (line, XF_WRAP)] for line in shown]
    rows.append([])
    rows.append([("Counts", XF_SECTION)])
    colour = outcome.marks.colour if outcome.marks is not None else None
    counted: list[tuple[str, int]] = [
        ("NPU rows", counts.rows), ("Matched (with a bench counterpart)", counts.matched),
        ("Unmatched (no bench counterpart)", counts.unmatched),
        ("Red rows", int(np.count_nonzero(colour == Colour.RED)) if colour is not None else 0),
        ("Yellow rows", int(np.count_nonzero(colour == Colour.YELLOW)) if colour is not None else 0),
        ("Error rows (--fail-on error)", counts.errors), ("Warning rows (--fail-on warning)", counts.warnings),
    ]  # fmt: skip
    if counts.excluded:
        counted.append(("Not counted (in-place inputs recorded after the write)", counts.excluded))
    if counts.layout_only:
        counted.append(("Rows of calls the parallel layout adds", counts.layout_only))
    rows += [[(label, 0), (value, XF_COUNT)] for label, value in counted]
    rows.append([])
    found = finding_records(rc)
    _listed(
        "Origins",
        "Origin",
        "Advice",
        [f for f in found if f.state == CallState.ORIGIN.value],
        outcome,
        sheet_name,
        sheet,
    )
    rows.append([])
    _listed("Suspects", "Suspect", "To decide", [f for f in found if f.state == CallState.SUSPECT.value], outcome,
            sheet_name, sheet)  # fmt: skip
    rows.append([])
    rows.append(_pair("Marks in the table", MARKS_TEXT if outcome.marks is not None else UNMARKED_TEXT))
    rows.append([])
    rows.append([("Other files of this run", XF_SECTION), ("(in the folder of this workbook)", 0)])
    rows += [[(what, 0), (name, 0)] for what, name in files] or [[("none", 0)]]
    if rc is not None and rc.entries:
        rows.append([])
        rows.append(_pair("Noise model", story.noise_model_line(rc)))
    return sheet
