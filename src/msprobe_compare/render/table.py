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
from msprobe_compare.load.rows import RG_FALSE, RG_TRUE, RowTable, StatKind
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


def _take(values: list[Any], match: np.ndarray) -> list[Any]:
    """Bench values aligned to NPU rows, N/A where unmatched."""
    return [values[j] if j >= 0 else NA for j in match.tolist()]


def _numbers(values: np.ndarray, style: Style) -> np.ndarray:
    """float array -> object array of cell values (+-inf as the style's text)."""
    out = values.astype(object)
    bad = ~np.isfinite(values)
    if bad.any():
        out[bad] = [style.number(x) for x in values[bad].tolist()]
    return out


class Cells(list):  # type: ignore[type-arg]
    """A column's cell values (a plain list to the writers) that also keeps them in numeric form.

    `kind` per cell: 0 a float, 1 an int, 2 a float written as f"{x!r}%", 3 anything else (the cell
    itself tells); `values` holds the number of kinds 0-2 (float64). The HTML report reads these.
    """

    kind: np.ndarray
    values: np.ndarray


KIND_FLOAT, KIND_INT, KIND_PERCENT, KIND_OTHER = 0, 1, 2, 3
_SAFE_INT = 2.0**53  # larger integers do not survive a float64


def _cells(out: np.ndarray, values: np.ndarray, kind: np.ndarray) -> Cells:
    cells = Cells(out.tolist())
    cells.values, cells.kind = values, kind.astype(np.int8)
    return cells


def _int_kind(values: np.ndarray, ints: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return ints & (np.abs(values) <= _SAFE_INT)


def _stat_column(table: RowTable, col: int, style: Style, rows_idx: np.ndarray | None = None) -> list[Any]:
    """A statistic column of `table` (rows `rows_idx`, -1 = N/A) as cell values."""
    idx = np.arange(len(table)) if rows_idx is None else rows_idx
    hit = idx >= 0
    safe = np.where(hit, idx, 0)
    if len(table) == 0:
        return [NA] * len(idx)
    vals, kinds = table.stats[safe, col], table.stat_kind[safe, col]
    out = _numbers(vals, style)
    ints = kinds == StatKind.INT
    out[ints] = vals[ints].astype(np.int64).astype(object)
    out[kinds == StatKind.NAN] = "Nan"
    out[kinds == StatKind.NONE] = "None"
    for k in np.flatnonzero(kinds == StatKind.RAW).tolist():
        out[k] = style.raw(table.raw[(int(safe[k]), col)])
    out[~hit] = NA
    kind = np.where((kinds == StatKind.NUMBER) & np.isfinite(vals), KIND_FLOAT, KIND_OTHER)
    kind[_int_kind(vals, ints)] = KIND_INT
    kind[~hit] = KIND_OTHER
    return _cells(out, vals, kind)


def _diff_column(values: np.ndarray, kinds: np.ndarray, style: Style, percent: bool) -> list[Any]:
    if percent:
        out = np.empty(len(values), dtype=object)
        ok = kinds == Cell.VALUE
        out[ok] = [f"{x!r}%" for x in values[ok].tolist()]
        kind = np.where(ok, KIND_PERCENT, KIND_OTHER)
    else:
        out = _numbers(values, style)
        ints = kinds == Cell.INT
        out[ints] = values[ints].astype(np.int64).astype(object)
        kind = np.where((kinds == Cell.VALUE) & np.isfinite(values), KIND_FLOAT, KIND_OTHER)
        kind[_int_kind(values, ints)] = KIND_INT
    out[kinds == Cell.NAN] = "Nan"
    out[kinds == Cell.NA] = NA
    kind[(kinds == Cell.NAN) | (kinds == Cell.NA)] = KIND_OTHER
    return _cells(out, values, kind)


def _lookup(codes: np.ndarray, table: dict[int, Any]) -> list[Any]:
    return [table[c] for c in codes.tolist()]


def colours(outcome: CompareOutcome) -> list[Colour]:
    marks = outcome.marks
    return [Colour(c) for c in marks.colour.tolist()] if marks is not None else [Colour.NONE] * len(outcome)


def rows(outcome: CompareOutcome, style: Style) -> Iterator[tuple[tuple[Any, ...], Colour]]:
    """Yield (cells, colour) for every result row, in NPU order. Columns are built vectorised first."""
    return zip(zip(*columns(outcome, style)), colours(outcome))


def columns(outcome: CompareOutcome, style: Style) -> list[list[Any]]:
    """The cell values of each column of `header(outcome)`, one list per column, in NPU row order."""
    npu, bench, match = outcome.npu, outcome.bench, outcome.match
    v = outcome.verdict
    n = len(npu)
    rg = {RG_TRUE: "True", RG_FALSE: "False", -1: NA}
    consistent = _lookup(v.requires_grad_consistent.astype(np.int8), {1: style.boolean(True), 0: style.boolean(False)})
    bench_rg = np.where(match >= 0, bench.requires_grad[np.maximum(match, 0)] if len(bench) else -1, -1)
    cols: list[list[Any]] = [
        npu.names, _take(bench.names, match), npu.dtype, _take(bench.dtype, match),
        npu.shape, _take(bench.shape, match), _lookup(npu.requires_grad, rg), _lookup(bench_rg, rg),
    ]  # fmt: skip
    if outcome.mode is Mode.MD5:
        cols += [[m or NA for m in npu.md5], [m or NA for m in _take(bench.md5, match)], consistent,
                 _lookup(v.result, texts.RESULT_TEXT)]  # fmt: skip
    else:
        if outcome.mode is Mode.SUMMARY:
            d = outcome.diffs
            assert d is not None
            cols += [_diff_column(d.diff[:, c], d.diff_kind[:, c], style, False) for c in range(4)]
            cols += [_diff_column(d.rel[:, c], d.rel_kind[:, c], style, True) for c in range(4)]
        else:
            cols += [list(c) for c in zip(*(outcome.tensors.metric_cells(i, style) for i in range(n)))] or [[]] * 6
        cols += [_stat_column(npu, c, style) for c in range(4)]
        cols += [_stat_column(bench, c, style, match) for c in range(4)]
        cols.append(consistent)
        if outcome.mode is Mode.SUMMARY:
            cols.append(_lookup(v.result, texts.RESULT_TEXT))
        else:
            cols.append([outcome.tensors.accuracy_text(i) for i in range(n)])
        cols.append(_messages(outcome))
    if outcome.show_stack:
        cols.append(_stack_cells(outcome))
    if outcome.mode is Mode.ALL:
        cols.append([outcome.tensors.data_name_cell(i) for i in range(n)])
    return cols


def _messages(outcome: CompareOutcome) -> list[str]:
    """Err_message per row: base message (+ real-data sentences, fuzzy note), then highlight reasons."""
    v, marks, n = outcome.verdict, outcome.marks, len(outcome)
    reasons = marks.reasons if marks is not None else np.zeros(n, dtype=np.int32)
    fuzzy = outcome.fuzzy if outcome.fuzzy is not None else np.zeros(n, dtype=bool)
    if outcome.mode is Mode.ALL:
        out = []
        for i, (flags, why, fz) in enumerate(zip(v.messages.tolist(), reasons.tolist(), fuzzy.tolist())):
            base = outcome.tensors.message(i, texts.base_message(flags)) + (texts.FUZZY_TEXT if fz else "")
            out.append(texts.join_message(base, texts.reason_lines(why)))
        return out
    cache: dict[tuple[int, int, bool], str] = {}
    out = []
    for key in zip(v.messages.tolist(), reasons.tolist(), fuzzy.tolist()):
        text = cache.get(key)
        if text is None:
            base = texts.base_message(key[0]) + (texts.FUZZY_TEXT if key[2] else "")
            text = cache[key] = texts.join_message(base, texts.reason_lines(key[1]))
        out.append(text)
    return out
