"""The result table: column schema per mode and the cell values of each row (spec §4.1-§4.4, §4.9).

Cells are Python values ready for a writer: str, int, float (finite) or bool. Two styles exist, as in
the reference: the coloured style writes booleans as text and +-inf as "inf\\t"; the plain style
writes real booleans and "inf".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.load.rows import RG_FALSE, RG_TRUE
from msprobe_compare.measure.stats import Cell
from msprobe_compare.model import CompareOutcome, Mode
from msprobe_compare.render import texts

COMMON = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU Requires_grad", "Bench Requires_grad",
]  # fmt: skip
STAT_NAMES = ["NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm"]
SUMMARY = COMMON + [
    "Max diff", "Min diff", "Mean diff", "L2norm diff",
    "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr",
] + STAT_NAMES + ["Requires_grad Consistent", "Result", "Err_message"]  # fmt: skip
REAL = COMMON + [
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio",
] + STAT_NAMES + ["Requires_grad Consistent", "Accuracy Reached or Not", "Err_message"]  # fmt: skip
MD5 = COMMON + ["NPU MD5", "BENCH MD5", "Requires_grad Consistent", "Result"]
STACK = "NPU_Stack_Info"
DATA_NAME = "Data_name"
NA = "N/A"
MAX_CELL_CHARS = 32767  # Excel's limit for one cell


def header(outcome: CompareOutcome) -> list[str]:
    cols = {Mode.SUMMARY: SUMMARY, Mode.MD5: MD5, Mode.ALL: REAL}[outcome.mode][:]
    if outcome.show_stack:
        cols.append(STACK)
    if outcome.mode is Mode.ALL:
        cols.append(DATA_NAME)
    return cols


@dataclass(frozen=True)
class Style:
    text_booleans: bool  # True: booleans written as "True"/"False" text (coloured style)

    def boolean(self, value: bool) -> Any:
        return ("True" if value else "False") if self.text_booleans else bool(value)

    def number(self, value: float) -> Any:
        if math.isfinite(value):
            return value
        text = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return text + "\t" if self.text_booleans else text

    def raw(self, value: Any) -> Any:
        if isinstance(value, bool):
            return self.boolean(value)
        if isinstance(value, float):
            return self.number(value)
        if isinstance(value, (int, str)):
            return value
        return str(value)


def _rg_text(code: int) -> str:
    return "True" if code == RG_TRUE else "False" if code == RG_FALSE else NA


def _stack_cells(outcome: CompareOutcome) -> list[str]:
    """Stack text on the first row of each entry, N/A elsewhere (spec §3.1 step 5)."""
    npu = outcome.npu
    cells = [NA] * len(npu)
    ei = npu.entry_index
    for i in np.flatnonzero(np.r_[True, ei[1:] != ei[:-1]] if len(ei) else []).tolist():
        lines = npu.stacks.get(npu.entries[ei[i]])
        if lines is not None:
            cells[i] = str(lines)[:MAX_CELL_CHARS]
    return cells


def _diff_cell(value: float, kind: int, style: Style, percent: bool) -> Any:
    if kind == Cell.NA:
        return NA
    if kind == Cell.NAN:
        return "Nan"
    if percent:
        return f"{float(value)!r}%"
    if kind == Cell.INT:
        return int(value)
    return style.number(float(value))


def rows(outcome: CompareOutcome, style: Style) -> Iterator[tuple[list[Any], Colour]]:
    """Yield (cells, colour) for every result row, in NPU order."""
    npu, bench, match = outcome.npu, outcome.bench, outcome.match
    v = outcome.verdict
    stacks = _stack_cells(outcome) if outcome.show_stack else None
    marks = outcome.marks
    diffs = outcome.diffs
    tensors = outcome.tensors
    for i in range(len(npu)):
        j = int(match[i])
        hit = j >= 0
        cells: list[Any] = [
            npu.names[i],
            bench.names[j] if hit else NA,
            npu.dtype[i],
            bench.dtype[j] if hit else NA,
            npu.shape[i],
            bench.shape[j] if hit else NA,
            _rg_text(npu.requires_grad[i]),
            _rg_text(bench.requires_grad[j]) if hit else NA,
        ]
        if outcome.mode is Mode.MD5:
            cells += [
                npu.md5[i] or NA,
                (bench.md5[j] or NA) if hit else NA,
                style.boolean(bool(v.requires_grad_consistent[i])),
                texts.RESULT_TEXT[v.result[i]],
            ]
        else:
            if outcome.mode is Mode.SUMMARY:
                assert diffs is not None
                cells += [_diff_cell(diffs.diff[i, c], diffs.diff_kind[i, c], style, False) for c in range(4)]
                cells += [_diff_cell(diffs.rel[i, c], diffs.rel_kind[i, c], style, True) for c in range(4)]
            else:
                cells += tensors.metric_cells(i, style)
            cells += [style.raw(npu.stat_display(i, c)) for c in range(4)]
            cells += [style.raw(bench.stat_display(j, c)) if hit else NA for c in range(4)]
            cells.append(style.boolean(bool(v.requires_grad_consistent[i])))
            if outcome.mode is Mode.SUMMARY:
                cells.append(texts.RESULT_TEXT[v.result[i]])
                base = texts.base_message(int(v.messages[i]))
            else:
                cells.append(tensors.accuracy_text(i))
                base = tensors.message(i, texts.base_message(int(v.messages[i])))
            if outcome.fuzzy is not None and outcome.fuzzy[i]:
                base += texts.FUZZY_TEXT
            reasons = texts.reason_lines(int(marks.reasons[i])) if marks is not None else []
            cells.append(texts.join_message(base, reasons))
        if stacks is not None:
            cells.append(stacks[i])
        if outcome.mode is Mode.ALL:
            cells.append(tensors.data_name_cell(i))
        colour = Colour(int(marks.colour[i])) if marks is not None else Colour.NONE
        yield cells, colour
