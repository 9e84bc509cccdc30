"""The result table: column schema per mode and the cell values of each row (spec §4.1-§4.4, §4.9).

Cells are Python values ready for a writer: str, int, float (finite) or bool. Two styles exist, as in
the reference: the coloured style writes booleans as text and +-inf as "inf\\t"; the plain style
writes real booleans and "inf".
"""

from __future__ import annotations

import gc
import math
from typing import TYPE_CHECKING, Any
from collections.abc import Mapping

import numpy as np

from msprobe_compare.load.rows import RG_FALSE, RG_TRUE, RawCells, RowTable, StatKind, coded, identity_codes
from msprobe_compare.measure.stats import Cell
from msprobe_compare.measure.tensor_metrics import MetricState, TensorMetric
from msprobe_compare.model import CompareOutcome, Mode
from msprobe_compare.render import texts
from msprobe_compare.render.cellkind import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT
from msprobe_compare.render.column import Cells, Column, ColumnBlocks, TakenRows, TextRange, object_array
from msprobe_compare.records import dataclass

if TYPE_CHECKING:  # an annotation only: tensor mode imports it (start-up speed)
    from msprobe_compare.measure.tensor_rows import TensorColumns

__all__ = ["Cells", "Column", "KIND_FLOAT", "KIND_INT", "KIND_OTHER", "KIND_PERCENT"]  # re-exported for writers

_SAFE_INT = 2.0**53  # larger integers do not survive a float64

COMMON = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU Requires_grad", "Bench Requires_grad",
]  # fmt: skip
NPU_STATS = ["NPU max", "NPU min", "NPU mean", "NPU l2norm"]
BENCH_STATS = ["Bench max", "Bench min", "Bench mean", "Bench l2norm"]
STAT_NAMES = NPU_STATS + BENCH_STATS
# the real-data metrics' column group: (header, name in the per-row log line) of each metric, in TensorMetric order
# (both are columns of the metrics table, measure/tensor_metrics.py)
METRIC_COLUMNS: dict[TensorMetric, tuple[str, str]] = {m: (m.header, m.log_name) for m in TensorMetric}
METRIC_HEADERS = [header for header, _ in METRIC_COLUMNS.values()]
STAT_DIFFS = ["Max diff", "Min diff", "Mean diff", "L2norm diff"]  # NPU - bench, per statistic
STAT_RELATIVE = ["MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]  # |diff / bench| in %
SUMMARY = COMMON + STAT_DIFFS + STAT_RELATIVE + STAT_NAMES + ["Requires_grad Consistent", "Result", "Err_message"]
REAL = COMMON + METRIC_HEADERS + STAT_NAMES + ["Requires_grad Consistent", "Accuracy Reached or Not", "Err_message"]
MD5 = COMMON + ["NPU MD5", "BENCH MD5", "Requires_grad Consistent", "Result"]
STACK = "NPU_Stack_Info"
DATA_NAME = "Data_name"
LAYOUT = ["NPU Ranks", "Layout Rule"]  # the npu ranks combined into the row and the rule that combined them
NA = "N/A"
MAX_CELL_CHARS = 32767  # Excel's limit for one cell


def header(outcome: CompareOutcome) -> list[str]:
    cols = {Mode.SUMMARY: SUMMARY, Mode.MD5: MD5, Mode.ALL: REAL}[outcome.mode][:]
    if outcome.show_stack:
        cols.append(STACK)
    if outcome.mode is Mode.ALL:
        cols.append(DATA_NAME)
    if outcome.layout is not None:  # runs split differently across cards (layouts.py)
        cols += LAYOUT
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


def _stack_cells(outcome: CompareOutcome, lo: int = 0, hi: int | None = None, memo: dict | None = None) -> Column:
    """Stack text on the first row of each entry, N/A elsewhere (spec §3.1 step 5), coded; rows [lo, hi)."""
    npu = outcome.npu
    hi = len(npu) if hi is None else hi
    codes = np.zeros(hi - lo, dtype=np.int32)
    table = [NA]
    if not npu.stacks:
        return Column(codes=codes, table=table)
    ei = npu.entry_index[lo:hi]
    first = lo == 0 or bool(len(ei)) and ei[0] != npu.entry_index[lo - 1]  # the block's first row starts an entry
    firsts = np.flatnonzero(np.r_[first, ei[1:] != ei[:-1]] if len(ei) else [])
    # entries of one call site share their list of lines: the lists are told apart by identity (in C when built)
    lines = list(map(npu.stacks.get, map(npu.entries.__getitem__, ei[firsts].tolist())))
    entry_codes, distinct = identity_codes(lines)
    made = _memo(memo, "stack texts", dict)  # id of a list of lines -> (the list, its text)
    remap = np.zeros(len(distinct), dtype=np.int32)
    for k, obj in enumerate(distinct):
        if obj is not None:
            remap[k] = len(table)
            known = made.get(id(obj))
            table.append(known[1] if known is not None else str(obj)[:MAX_CELL_CHARS])
            if memo is not None and known is None:
                made[id(obj)] = (obj, table[-1])  # keeps the list alive: its id stays its own
    codes[firsts] = remap[entry_codes]
    return Column(codes=codes, table=table)


def _memo(memo: dict | None, key: str, make: Any) -> Any:
    """`make()`, kept in `memo` under `key` when there is one (the whole table's codes, made once per process)."""
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _take(values: list[Any], match: np.ndarray) -> list[Any]:
    """Bench values aligned to NPU rows, N/A where unmatched."""
    if not len(values):
        return [NA] * len(match)
    table = np.empty(len(values) + 1, dtype=object)
    table[:-1] = values
    table[-1] = NA  # index -1 (unmatched) lands here
    return table[match].tolist()


def _coded(values: list[Any]) -> Column:
    """A column of few distinct (hashable) values, coded: equal values share a code."""
    codes, table = coded(values)
    return Column(codes=codes, table=table)


def _coded_rows(values: list[Any], sl: slice, memo: dict | None, key: str) -> Column:
    """Rows `sl` of a column of few distinct values, coded: from the whole column's codes when there is a `memo`."""
    if memo is None:
        return _coded(values[sl])
    codes, table = _memo(memo, key, lambda: coded(values))
    return Column(codes=codes[sl], table=table)


def _take_coded(values: list[Any], match: np.ndarray, memo: dict | None = None, key: str = "") -> Column:
    """Bench values (few distinct) aligned to NPU rows, N/A where unmatched, coded (the whole column's codes kept
    in `memo` under `key`, if given)."""

    def make() -> tuple[np.ndarray, list[Any]]:
        codes, table = coded(values)
        return np.append(codes, np.int32(len(table))), table + [NA]  # -1 (unmatched) picks the appended N/A

    codes, table = _memo(memo, key, make)
    return Column(codes=codes[match], table=table)


class _Others:
    """The cells of a numeric column that are not numbers, as a code per cell into a list of objects (code 0: None,
    the object of the number cells): codes set later replace earlier ones, as assignments to an object array would."""

    __slots__ = ("codes", "objects")

    def __init__(self, n: int) -> None:
        self.codes = np.zeros(n, dtype=np.int32)
        self.objects: list[Any] = [None]

    def put(self, where: np.ndarray, value: Any) -> None:
        """Cells `where` (a mask) hold `value`."""
        if where.any():
            self.codes[where] = len(self.objects)
            self.objects.append(value)

    def put_each(self, rows: np.ndarray, values: list[Any]) -> None:
        """Cell rows[k] holds values[k]."""
        self.codes[rows] = np.arange(len(self.objects), len(self.objects) + len(rows), dtype=np.int32)
        self.objects.extend(values)

    def column(self, kind: np.ndarray, values: np.ndarray) -> Column:
        return Column(None, kind, values, others=(self.codes, self.objects))


def _mark_ints(others: _Others, kind: np.ndarray, values: np.ndarray, ints: np.ndarray) -> None:
    """Integer cells: KIND_INT up to 2**53, beyond it the int the float64 holds as the cell object (any size: no
    int64 cast to wrap 2**63 round); a non-finite value (a difference beyond the float range) keeps its float text."""
    if not ints.any():
        return
    safe_ints = _int_kind(values, ints)
    kind[safe_ints] = KIND_INT
    big = np.flatnonzero(ints & ~safe_ints & np.isfinite(values))
    if len(big):
        others.put_each(big, [int(x) for x in values[big].tolist()])


def _int_kind(values: np.ndarray, ints: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return ints & (np.abs(values) <= _SAFE_INT)


_NON_FINITE = (math.nan, math.inf, -math.inf)


def _non_finite(others: _Others, values: np.ndarray, where: np.ndarray, style: Style) -> None:
    """Cells `where` (non-finite numbers) as the style's texts."""
    if not where.any():
        return
    texts = [style.number(x) for x in _NON_FINITE]
    if not all(type(t) is str for t in texts):  # numbers of their own (value_columns): each cell its own float
        rows = np.flatnonzero(where)
        others.put_each(rows, [style.number(x) for x in values[rows].tolist()])
        return
    v = values[where]
    nan = np.isnan(v)
    for mask, text in ((nan, texts[0]), (~nan & (v > 0), texts[1]), (~nan & (v < 0), texts[2])):
        if mask.any():
            sel = where.copy()
            sel[where] = mask
            others.put(sel, text)


_NUMBER, _INT, _NAN, _NONE, _RAW = (int(k) for k in (StatKind.NUMBER, StatKind.INT, StatKind.NAN, StatKind.NONE,
                                                      StatKind.RAW))  # fmt: skip
_VALUE, _CELL_INT, _CELL_NAN, _CELL_NA = (int(k) for k in (Cell.VALUE, Cell.INT, Cell.NAN, Cell.NA))


def _stat_column(table: RowTable, col: int, style: Style, rows_idx: np.ndarray | None = None,
                 sl: slice = slice(None)) -> Column:  # fmt: skip
    """A statistic column of `table` (its rows `sl`, or rows `rows_idx`, -1 = N/A) as cells."""
    n = len(range(len(table))[sl]) if rows_idx is None else len(rows_idx)
    if len(table) == 0:
        return Column([NA] * n)
    if rows_idx is None:
        safe = None
        vals, kinds = table.stats[sl, col], table.stat_kind[sl, col]
    else:
        safe = np.maximum(rows_idx, 0)
        vals, kinds = table.stats[safe, col], table.stat_kind[safe, col]
    others = _Others(n)
    finite = np.isfinite(vals)
    number = kinds == _NUMBER
    kind = np.where(number & finite, KIND_FLOAT, KIND_OTHER).astype(np.int8)
    _non_finite(others, vals, number & ~finite, style)
    _mark_ints(others, kind, vals, kinds == _INT)
    others.put(kinds == _NAN, "Nan")
    others.put(kinds == _NONE, "None")
    raw_rows = np.flatnonzero(kinds == _RAW)
    if len(raw_rows):
        rows = raw_rows + (sl.start or 0) if safe is None else safe[raw_rows]
        others.put_each(raw_rows, _raw_cells(table, col, rows, style))
    if rows_idx is not None:
        miss = rows_idx < 0
        others.put(miss, NA)
        kind[miss] = KIND_OTHER
    return others.column(kind, vals)


_RAW_MEMO = (bool, int, str, type(None))  # style.raw of equal values of one of these types is equal (not float)


def _raw_cells(table: RowTable, col: int, rows: np.ndarray, style: Style) -> list[Any]:
    """style.raw of the raw statistics of `rows` in column `col`, converted once per distinct value."""
    raw = table.raw
    if isinstance(raw, RawCells):
        values = raw.column(rows.tolist(), col)
    else:  # any mapping (row, column) -> value
        values = list(map(raw.__getitem__, zip(rows.tolist(), [col] * len(rows))))
    kinds = list(map(type, values))
    if not set(kinds) <= set(_RAW_MEMO):
        return [style.raw(v) for v in values]
    keys = list(zip(kinds, values))  # True == 1: the key holds the type
    memo = {key: style.raw(key[1]) for key in dict.fromkeys(keys)}
    return list(map(memo.__getitem__, keys))


def _diff_column(values: np.ndarray, kinds: np.ndarray, style: Style, percent: bool) -> Column:
    others = _Others(len(values))
    if percent:
        kind = np.where(kinds == _VALUE, KIND_PERCENT, KIND_OTHER).astype(np.int8)
    else:
        finite = np.isfinite(values)
        valued = kinds == _VALUE
        kind = np.where(valued & finite, KIND_FLOAT, KIND_OTHER).astype(np.int8)
        # every non-finite value gets the style's text first, as the marker texts below overwrite it
        _non_finite(others, values, ~finite, style)
        _mark_ints(others, kind, values, kinds == _CELL_INT)
    others.put(kinds == _CELL_NAN, "Nan")
    others.put(kinds == _CELL_NA, NA)
    return others.column(kind, values)


def _lookup(codes: np.ndarray, table: Mapping[Any, Any]) -> Column:
    """The column of table[code] for each code, coded (KeyError for a code the table lacks)."""
    codes = np.asarray(codes)
    if not len(codes):
        return Column([])
    lo, hi = int(codes.min()), int(codes.max())
    if hi - lo > 1 << 16:
        return Column([table[c] for c in codes.tolist()])
    shifted = (codes.astype(np.int64) - lo).astype(np.int32)
    present = np.flatnonzero(np.bincount(shifted)).tolist()
    values = [table[c + lo] for c in present]  # KeyError here for an unknown code
    lut = np.zeros(hi - lo + 1, dtype=np.int32)
    lut[present] = np.arange(len(present), dtype=np.int32)
    return Column(codes=lut[shifted], table=values)


def colour_codes(outcome: CompareOutcome) -> np.ndarray:
    """Colour per row as an int8 array (judge.highlight.Colour values)."""
    marks = outcome.marks
    return np.asarray(marks.colour, dtype=np.int8) if marks is not None else np.zeros(len(outcome), dtype=np.int8)


def column_data(outcome: CompareOutcome, style: Style, lo: int = 0, hi: int | None = None,
                memo: dict | None = None) -> list[Column]:  # fmt: skip
    """Each column of `header(outcome)` in compact form (see `Column`), in NPU row order: rows [lo, hi) (default:
    all). The cells of a row do not depend on the range it is built in. `memo`: where a writer building a table a
    block at a time keeps what is made once for the whole table (codes of the dtype, shape and stack columns)."""
    enabled = gc.isenabled()
    gc.disable()  # many new lists and object arrays, no cycles: a collection would walk the whole heap
    try:
        n = len(outcome.npu)
        hi = n if hi is None else hi
        if not 0 <= lo <= hi <= n:
            raise ValueError(f"rows [{lo}, {hi}) of a table of {n}")
        return _column_data(outcome, style, lo, hi, memo)
    finally:
        if enabled:
            gc.enable()


def column_blocks(outcome: CompareOutcome, style: Style) -> ColumnBlocks:
    """`column_data` of `outcome` built on demand, a range of rows at a time (by the writer that uses them)."""
    memo: dict = {}  # the whole table's codes, made on first use by each process that writes blocks
    return ColumnBlocks(len(outcome.npu), lambda lo, hi: column_data(outcome, style, lo, hi, memo))


def _column_data(outcome: CompareOutcome, style: Style, lo: int, hi: int, memo: dict | None) -> list[Column]:
    npu, bench = outcome.npu, outcome.bench
    sl = slice(lo, hi)
    match = outcome.match[sl]
    v = outcome.verdict
    rg = {RG_TRUE: "True", RG_FALSE: "False", -1: NA}
    consistent = _lookup(v.requires_grad_consistent[sl].astype(np.int8),
                         {1: style.boolean(True), 0: style.boolean(False)})  # fmt: skip
    bench_rg = np.where(match >= 0, bench.requires_grad[np.maximum(match, 0)] if len(bench) else -1, -1)
    cols: list[Column] = [
        Column(TextRange(npu.names, lo, hi) if isinstance(npu.names, list) else npu.names[sl]),
        Column(TakenRows(bench.names, match, NA) if isinstance(bench.names, list) else _take(bench.names, match)),
        _coded_rows(npu.dtype, sl, memo, "npu dtype"), _take_coded(bench.dtype, match, memo, "bench dtype"),
        _coded_rows(npu.shape, sl, memo, "npu shape"), _take_coded(bench.shape, match, memo, "bench shape"),
        _lookup(npu.requires_grad[sl], rg), _lookup(bench_rg, rg),
    ]  # fmt: skip
    if outcome.mode is Mode.MD5:
        cols += [Column([m or NA for m in npu.md5[sl]]), Column([m or NA for m in _take(bench.md5, match)]),
                 consistent, _lookup(v.result[sl], texts.RESULT_TEXT)]  # fmt: skip
    else:
        if outcome.mode is Mode.SUMMARY:
            d = outcome.diffs
            assert d is not None
            cols += [_diff_column(d.diff[sl, c], d.diff_kind[sl, c], style, False) for c in range(4)]
            cols += [_diff_column(d.rel[sl, c], d.rel_kind[sl, c], style, True) for c in range(4)]
        else:
            tensors = outcome.tensors
            assert tensors is not None
            metric = [list(c) for c in zip(*(_metric_cells(tensors, i, style) for i in range(lo, hi)))]
            cols += [Column(c) for c in metric or [[]] * len(TensorMetric)]
        cols += [_stat_column(npu, c, style, sl=sl) for c in range(4)]
        cols += [_stat_column(bench, c, style, match) for c in range(4)]
        cols.append(consistent)
        if outcome.mode is Mode.SUMMARY:
            cols.append(_lookup(v.result[sl], texts.RESULT_TEXT))
        else:
            assert outcome.accuracy is not None
            cols.append(Column([texts.ACCURACY_TEXT[a] for a in outcome.accuracy[sl].tolist()]))
        cols.append(_messages(outcome, lo, hi))
    if outcome.show_stack:
        cols.append(_stack_cells(outcome, lo, hi, memo))
    if outcome.mode is Mode.ALL:
        t = outcome.tensors
        assert t is not None
        cols.append(Column([str([t.npu_files[i], NA if t.bench_files[i] is None else t.bench_files[i]])
                            for i in range(lo, hi)]))  # fmt: skip
    if outcome.layout is not None:
        cols += [_coded(outcome.layout.ranks[sl]), _coded(outcome.layout.rules[sl])]
    return cols


def _messages(outcome: CompareOutcome, lo: int, hi: int) -> Column:
    """Err_message of rows [lo, hi): base message (+ real-data sentences, fuzzy note), then highlight reasons."""
    v, marks, n = outcome.verdict, outcome.marks, hi - lo
    sl = slice(lo, hi)
    reasons = marks.reasons[sl] if marks is not None else np.zeros(n, dtype=np.int32)
    fuzzy = outcome.fuzzy[sl] if outcome.fuzzy is not None else np.zeros(n, dtype=bool)
    if outcome.mode is Mode.ALL:
        tensors = outcome.tensors
        assert tensors is not None
        out = []
        for i, (flags, why, fz) in enumerate(zip(v.messages[sl].tolist(), reasons.tolist(), fuzzy.tolist()), lo):
            base = _tensor_message(tensors, i, texts.base_message(flags)) + (texts.FUZZY_TEXT if fz else "")
            out.append(texts.join_message(base, texts.reason_lines(why)))
        return Column(out)
    if not n:
        return Column([])
    # one text per distinct (flags, reasons, fuzzy): a key of three small non-negative codes
    key = (np.asarray(v.messages[sl], dtype=np.int64) << 40) | (np.asarray(reasons, dtype=np.int64) << 1)
    key |= np.asarray(fuzzy, dtype=bool)
    uniq, inverse = np.unique(key, return_inverse=True)
    table = []
    for code in uniq.tolist():
        base = texts.base_message(code >> 40) + (texts.FUZZY_TEXT if code & 1 else "")
        table.append(texts.join_message(base, texts.reason_lines((code >> 1) & ((1 << 39) - 1))))
    return Column(codes=inverse.reshape(-1).astype(np.int32), table=table)


@dataclass(frozen=True)
class _ValueStyle(Style):
    """Cells as Python values: real booleans, non-finite numbers as floats (not texts)."""

    def number(self, value: float) -> Any:
        return float(value)


VALUES = _ValueStyle(text_booleans=False)


NUMERIC = frozenset(SUMMARY[len(COMMON) : -3] + REAL[len(COMMON) : -3])  # the metric, diff and statistic columns
NAN_TEXT = "Nan"  # the reference's text for a NaN statistic, difference or metric


def value_columns(outcome: CompareOutcome) -> dict[str, list[Any]]:
    """The table as {column name: cell values}, for Python callers: the plain-style cells of the result files, except
    that every number is an int or a float (percent cells are the number before the `%`; nan, inf and the "Nan"
    marker of the numeric columns are floats)."""
    return {name: _values(col, name in NUMERIC) for name, col in zip(header(outcome), column_data(outcome, VALUES))}


def _values(col: Column, numeric: bool) -> list[Any]:
    if col.kind is None:
        objects = col.objects
        cells = objects if isinstance(objects, list) else list(objects)
    else:
        assert col.values is not None
        out = col.objects.copy()
        number = col.kind != KIND_OTHER
        out[number] = col.values[number].astype(object)
        ints = col.kind == KIND_INT
        out[ints] = object_array([int(v) for v in col.values[ints].tolist()])
        cells = out.tolist()
    if numeric:
        cells = [math.nan if type(v) is str and v == NAN_TEXT else v for v in cells]
    return cells


def _metric_cells(t: TensorColumns, i: int, style: Style) -> list[Any]:
    """The six metric cells of row i: numbers, or the texts of their states."""
    out: list[Any] = []
    for k in range(len(TensorMetric)):
        state = MetricState(int(t.states[i, k]))
        out.append(style.number(float(t.values[i, k])) if state is MetricState.VALUE else texts.STATE_TEXT[state])
    return out


def _tensor_message(t: TensorColumns, i: int, base: str) -> str:
    """Err_message of a real-data row: the base message, then the metrics' own, then why a file failed."""
    files, why = t.read_failed.get(i, ("", ""))
    return base + texts.messages_text(t.metrics[i].messages, files) + why
