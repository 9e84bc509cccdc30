"""Colour marks (spec §4.7), vectorised over rows with per-entry reductions.

Each row gets a set of reasons (bit flags); red reasons make the row red, otherwise yellow reasons
make it yellow. Each distinct reason appears once per row (decision D4), and NaN in the NPU max/min
is red like +-inf (decision D3).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

import numpy as np

from msprobe_compare.load.rows import RowTable, State, StatKind
from msprobe_compare.records import dataclass

MAX_ABS_ERR_RED = 1e10
ORDER_OF_MAGNITUDE = 1.0
ONE_K_IN_RED, ONE_K_OUT_RED, ONE_K_DROP = 0.9, 0.6, 0.1
COSINE_DROP = 0.1
MAX_REL_OUT_RED, MAX_REL_OUT_YELLOW, MAX_REL_IN_YELLOW = 0.5, 0.1, 0.01


class Reason(IntFlag):
    """Highlight reasons in the order they are written (red first, then yellow)."""

    NONE = 0
    RED_NAN_INF = 1 << 0
    RED_MAX_ABS = 1 << 1
    RED_ONE_K = 1 << 2
    RED_MAX_REL = 1 << 3
    YELLOW_REQUIRES_GRAD = 1 << 4
    YELLOW_MAGNITUDE = 1 << 5
    YELLOW_ONE_K = 1 << 6
    YELLOW_COSINE = 1 << 7
    YELLOW_MAX_REL = 1 << 8


RED_MASK = Reason.RED_NAN_INF | Reason.RED_MAX_ABS | Reason.RED_ONE_K | Reason.RED_MAX_REL


class Colour(IntEnum):
    NONE = 0
    YELLOW = 1
    RED = 2


@dataclass(frozen=True)
class Marks:
    reasons: np.ndarray  # int32 (n,) Reason flags actually reported (yellow dropped on red rows)
    colour: np.ndarray  # int8 (n,) Colour


@dataclass(frozen=True)
class HighlightInputs:
    """Numbers the rules read. NaN means "not numeric" (the reference's string cells)."""

    max_diff: np.ndarray  # Max diff (summary) or MaxAbsErr (real data)
    npu_max: np.ndarray
    bench_max: np.ndarray
    consistent: np.ndarray  # bool: Requires_grad Consistent
    max_rel: np.ndarray | None = None  # summary: MaxRelativeErr as a fraction
    one_k: np.ndarray | None = None  # real data: One Thousandth Err Ratio
    cosine: np.ndarray | None = None  # real data: Cosine


def entry_groups(table: RowTable) -> np.ndarray:
    """Group id per row: consecutive rows of one entry, with the reference's substring merge quirk."""
    n = len(table)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ei = table.entry_index
    starts = np.flatnonzero(np.r_[True, ei[1:] != ei[:-1]])
    gid_of_run = np.empty(len(starts), dtype=np.int64)
    gid, current = -1, ""
    for k, s in enumerate(starts.tolist()):
        name = table.entries[ei[s]]
        is_api = ".forward." not in name and ".backward." not in name
        if not (k and is_api and name in current):
            gid += 1
            current = name
        gid_of_run[k] = gid
    run_of_row = np.cumsum(np.r_[True, ei[1:] != ei[:-1]]) - 1
    return gid_of_run[run_of_row]


def _numeric(values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Statistic column as float with NaN where the cell is not a number."""
    ok = (kinds == StatKind.NUMBER) | (kinds == StatKind.INT)
    return np.where(ok, values, np.nan)


def stat_max(table: RowTable, rows: np.ndarray | None = None) -> np.ndarray:
    if rows is None:
        return _numeric(table.stats[:, 0], table.stat_kind[:, 0])
    out = np.full(len(rows), np.nan)
    ok = rows >= 0
    out[ok] = _numeric(table.stats[rows[ok], 0], table.stat_kind[rows[ok], 0])
    return out


def highlight(npu: RowTable, x: HighlightInputs) -> Marks:
    n = len(npu)
    reasons = np.zeros(n, dtype=np.int32)
    if n == 0:
        return Marks(reasons, np.zeros(0, dtype=np.int8))

    # per-row rules
    kmax, kmin = npu.stat_kind[:, 0], npu.stat_kind[:, 1]
    with np.errstate(invalid="ignore"):
        special = (kmax == StatKind.NAN) | (kmin == StatKind.NAN)
        special |= (kmax == StatKind.NUMBER) & np.isinf(npu.stats[:, 0])
        special |= (kmin == StatKind.NUMBER) & np.isinf(npu.stats[:, 1])
        big = ~special & (np.abs(x.max_diff) > MAX_ABS_ERR_RED)
    reasons |= np.where(special, Reason.RED_NAN_INF, 0)
    reasons |= np.where(big, Reason.RED_MAX_ABS, 0)
    reasons |= np.where(x.consistent, 0, Reason.YELLOW_REQUIRES_GRAD)

    # pairwise rules: every output row against every input/parameter row of its entry
    group = entry_groups(npu)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    first = np.zeros(n, dtype=bool)
    first[starts] = True
    state = npu.state
    is_in = first | (state == State.INPUT) | (state == State.PARAMETERS)
    is_out = ~first & (state == State.OUTPUT)
    base = ~np.isnan(x.max_diff) & ~np.isnan(x.npu_max) & ~np.isnan(x.bench_max)
    q_in, q_out = is_in & base, is_out & base
    group_of_row = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))

    def per_group(reduce: np.ufunc, values: np.ndarray, mask: np.ndarray, empty: float) -> np.ndarray:
        """Reduce `values` over the masked rows of each group, broadcast back to its rows."""
        return reduce.reduceat(np.where(mask, values, empty), starts)[group_of_row]

    with np.errstate(all="ignore"):
        a_all = np.abs(x.max_diff)
        a_min = per_group(np.minimum, a_all, q_in & (a_all > ORDER_OF_MAGNITUDE), np.inf)
        magnitude = q_out & (a_all > ORDER_OF_MAGNITUDE) & (a_min <= a_all)
        magnitude &= np.log10(a_all) - np.log10(a_min) >= ORDER_OF_MAGNITUDE
        reasons |= np.where(magnitude, Reason.YELLOW_MAGNITUDE, 0)

        if x.max_rel is not None:
            rel = x.max_rel
            any_in = per_group(np.maximum, np.ones(n), q_in, 0.0) > 0
            reasons |= np.where(q_out & any_in & (rel > MAX_REL_OUT_RED), Reason.RED_MAX_REL, 0)
            rel_in_min = per_group(np.minimum, rel, q_in & ~np.isnan(rel), np.inf)
            yellow = q_out & (rel > MAX_REL_OUT_YELLOW) & (rel_in_min < MAX_REL_IN_YELLOW)
            reasons |= np.where(yellow, Reason.YELLOW_MAX_REL, 0)
        if x.one_k is not None:
            ok = ~np.isnan(x.one_k)
            in_max = per_group(np.maximum, x.one_k, q_in & ok, -np.inf)
            o = np.where(q_out & ok, x.one_k, np.nan)
            red = (in_max > ONE_K_IN_RED) & (o < ONE_K_OUT_RED)
            reasons |= np.where(red, Reason.RED_ONE_K, 0)
            reasons |= np.where(in_max - o > ONE_K_DROP, Reason.YELLOW_ONE_K, 0)
        if x.cosine is not None:
            ok = ~np.isnan(x.cosine)
            in_max = per_group(np.maximum, x.cosine, q_in & ok, -np.inf)
            o = np.where(q_out & ok, x.cosine, np.nan)
            reasons |= np.where(in_max - o > COSINE_DROP, Reason.YELLOW_COSINE, 0)

    red = (reasons & RED_MASK) != 0
    yellow = ~red & (reasons != 0)
    reasons = np.where(red, reasons & RED_MASK, reasons).astype(np.int32)
    colour = np.where(red, Colour.RED, np.where(yellow, Colour.YELLOW, Colour.NONE)).astype(np.int8)
    return Marks(reasons, colour)
