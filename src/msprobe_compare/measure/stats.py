"""Statistics diffs of matched rows, vectorised over rows (spec §4.5)."""

from __future__ import annotations

import functools
from enum import IntEnum
from typing import Any

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.rows import RowTable, StatKind
from msprobe_compare.measure.legacy_parse import reference_parse
from msprobe_compare.records import dataclass

WARN_MAGNITUDE = 0.5
MAGNITUDE_EPS = 1e-10


class Cell(IntEnum):
    """Kind of a computed cell: a number, or one of the reference's marker texts."""

    VALUE = 0
    INT = 1  # integral value (both statistics were integers)
    NAN = 2  # "Nan"
    NA = 3  # "N/A"


@dataclass(frozen=True)
class StatDiffs:
    diff: np.ndarray  # float64 (n, 4): NPU - bench
    diff_kind: np.ndarray  # int8 (n, 4) Cell
    rel: np.ndarray  # float64 (n, 4): |(N - B) / B * 100|, rendered with a '%'
    rel_kind: np.ndarray  # int8 (n, 4) Cell
    warning: np.ndarray  # bool (n,): some statistic differs by more than WARN_MAGNITUDE


def gather(bench: RowTable, match: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bench statistics aligned to NPU rows (kind NONE where unmatched)."""
    n = len(match)
    if not len(bench):
        return np.zeros((n, 4)), np.full((n, 4), StatKind.NONE, dtype=np.int8)
    rows = np.maximum(match, 0)  # a plain take (unmatched rows take row 0), then the unmatched rows cleared
    vals, kinds = bench.stats[rows], bench.stat_kind[rows]
    unmatched = np.flatnonzero(match < 0)
    if len(unmatched):
        vals[unmatched] = 0.0
        kinds[unmatched] = StatKind.NONE
    return vals, kinds


CANCELLATION = 1e-3  # below this relative difference, the reference's lossy parse shows in the diffs


def _as_reference_reads(n_num: np.ndarray, b_num: np.ndarray, floats: np.ndarray, parsed_before: int = 0) -> int:
    """Replace, in place, values whose diff cancels so much that the reference's lossy number parse
    (legacy_parse) is visible at 1e-9 relative; elsewhere exact values agree to far better than that.
    Returns how many values it parsed (a chunked caller passes the running total back as `parsed_before`)."""
    close = (
        floats & (n_num != b_num) & (np.abs(n_num - b_num) < CANCELLATION * np.maximum(np.abs(n_num), np.abs(b_num)))
    )
    count = int(np.count_nonzero(close))
    _reparse(n_num, b_num, close, count, parsed_before)
    return 2 * count


def _reparse(n_num: np.ndarray, b_num: np.ndarray, close: np.ndarray, count: int, parsed_before: int) -> None:
    """The `count` cells of `close`, on both sides, replaced by the reference's reading of them (one parse)."""
    if count:
        parsed = reference_parse(np.concatenate((n_num[close], b_num[close])), parsed_before)
        n_num[close] = parsed[:count]
        b_num[close] = parsed[count:]


@functools.cache
def _native_cells(module: Any) -> bool:
    """Whether `_legacyparse`'s statistics cells use our codes and thresholds (checked once per module)."""
    codes = {f"K_{k.name}": int(k) for k in StatKind if k < StatKind.RAW} | {f"C_{c.name}": int(c) for c in Cell}
    return all(getattr(module, name, None) == code for name, code in codes.items()) and getattr(
        module, "CONSTANTS", None) == (CANCELLATION, MAGNITUDE_EPS, WARN_MAGNITUDE)  # fmt: skip


CHUNK_ROWS = 1 << 16  # rows computed at a time: the temporaries stay a few MB, not a dozen (n, 4) arrays


def stat_diffs(npu: RowTable, bench: RowTable, match: np.ndarray) -> StatDiffs:
    """The diffs of every NPU row against its matched bench row, computed CHUNK_ROWS rows at a time into the
    result arrays (every value depends on its own row only: the same values as one pass over all rows)."""
    n = len(match)
    diff, rel = np.empty((n, 4)), np.empty((n, 4))
    diff_kind, rel_kind = np.empty((n, 4), dtype=np.int8), np.empty((n, 4), dtype=np.int8)
    warning = np.empty(n, dtype=bool)
    parsed = 0  # values re-parsed as the reference reads them, over all chunks so far
    for lo in range(0, n, CHUNK_ROWS):
        sl = slice(lo, min(n, lo + CHUNK_ROWS))
        parsed = _diffs(npu.stats[sl], npu.stat_kind[sl], bench, match[sl],
                        (diff[sl], diff_kind[sl], rel[sl], rel_kind[sl], warning[sl]), parsed)  # fmt: skip
    return StatDiffs(diff=diff, diff_kind=diff_kind, rel=rel, rel_kind=rel_kind, warning=warning)


def _diffs(
    n_val: np.ndarray,
    n_kind: np.ndarray,
    bench: RowTable,
    match: np.ndarray,
    out: tuple[np.ndarray, ...],
    parsed_before: int = 0,
) -> int:
    """Some NPU rows (their statistics and kinds) against their matches: their diff, diff_kind, rel, rel_kind and
    warning written into `out` (rows of the result arrays); returns the values re-parsed so far (`parsed_before`:
    those earlier chunks re-parsed)."""
    b_num, b_kind = gather(bench, match)  # fresh arrays: NaN statistics become NaN in place
    return stat_cells(n_val, n_kind, b_num, b_kind, out, parsed_before)


def _c_stat_cells(n_val: np.ndarray, n_kind: np.ndarray, b_num: np.ndarray, b_kind: np.ndarray,
                  out: tuple[np.ndarray, ...], parsed_before: int) -> int:  # fmt: skip
    """_py_stat_cells' cells in C, its operations one cell at a time (`_legacyparse.stat_close`, `stat_cells`)."""
    diff, diff_kind, rel, rel_kind, warning = out
    n_val, n_kind = np.ascontiguousarray(n_val, dtype=np.float64), np.ascontiguousarray(n_kind, dtype=np.int8)
    n_num, close = np.empty(n_val.shape), np.empty(n_kind.shape, dtype=bool)
    count = _C.stat_close(n_val, n_kind, b_num, b_kind, n_num, close)
    _reparse(n_num, b_num, close, count, parsed_before)
    _C.stat_cells(n_num, b_num, n_kind, b_kind, diff, diff_kind, rel, rel_kind, warning)
    return parsed_before + 2 * count


def _py_stat_cells(n_val: np.ndarray, n_kind: np.ndarray, b_num: np.ndarray, b_kind: np.ndarray,
                   out: tuple[np.ndarray, ...], parsed_before: int) -> int:  # fmt: skip
    """NPU statistics and kinds against the gathered bench ones (`b_num` is changed: NaN statistics become NaN):
    diff, diff_kind, rel, rel_kind and warning written into `out`; returns the values re-parsed so far."""
    diff, diff_kind, rel, rel_kind, warning = out
    # NUMBER, INT and NAN are the numeric kinds: the codes below NONE; an unmatched row's bench kinds are NONE
    numeric = (n_kind < StatKind.NONE) & (b_kind < StatKind.NONE)
    n_num = np.where(n_kind == StatKind.NAN, np.nan, n_val)
    np.copyto(b_num, np.nan, where=b_kind == StatKind.NAN)
    with np.errstate(all="ignore"):
        parsed = parsed_before + _as_reference_reads(
            n_num, b_num, (n_kind == StatKind.NUMBER) & (b_kind == StatKind.NUMBER), parsed_before
        )
        np.subtract(n_num, b_num, out=diff)
        np.divide(diff, b_num, out=rel)  # |(N - B) / B * 100|, in this order
        rel *= 100
        np.abs(rel, out=rel)
        magnitude = np.maximum(n_num, b_num, out=n_num)  # |diff| / (|max(N, B)| + eps); n_num is not needed after
        np.abs(magnitude, out=magnitude)
        magnitude += MAGNITUDE_EPS
        np.divide(np.abs(diff), magnitude, out=magnitude)
    ints = (n_kind == StatKind.INT) & (b_kind == StatKind.INT)  # both integers: numeric
    diff_kind[...] = np.where(numeric, np.where(ints, np.int8(Cell.INT), np.int8(Cell.VALUE)), np.int8(Cell.NA))
    np.copyto(diff_kind, np.int8(Cell.NAN), where=numeric & np.isnan(diff))
    np.copyto(rel_kind, diff_kind)
    np.copyto(rel_kind, np.int8(Cell.VALUE), where=rel_kind == Cell.INT)
    np.copyto(rel_kind, np.int8(Cell.NA), where=(rel_kind == Cell.VALUE) & (b_num == 0))
    valued = (diff_kind == Cell.VALUE) | (diff_kind == Cell.INT)
    with np.errstate(invalid="ignore"):
        valued &= magnitude > WARN_MAGNITUDE
    np.any(valued, axis=1, out=warning)
    return parsed


_C: Any = native.built("_legacyparse")
stat_cells = native.twin("_legacyparse", _c_stat_cells, _py_stat_cells, _C is not None and _native_cells(_C))
