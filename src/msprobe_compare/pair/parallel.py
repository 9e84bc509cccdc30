"""Unsharding: the rows of the ranks of one tensor-parallel group (and pipeline stages) as logical rows.

Every rank of a TP group runs the same calls, so its rows carry the same names. For each name the ranks' rows
(shards) are combined into one logical row by a rule, decided per row from the shapes of both sides:

- `replicated`: every rank holds the whole tensor (the shards' shapes are the other side's); the ranks must agree
  (within STAT_TOLERANCE), and when they do not, the row says so: that is a bug in itself;
- `split` along dim d: the shards' dim d adds up to the other side's (other dims equal). Statistics combine exactly:
  Max = max, Min = min, Mean = mean weighted by element counts, Norm = sqrt(sum of Norm^2); md5 cannot be combined;
- `partial_sum`: the whole shape on every rank but the ranks' tensors add up to the logical one (row-parallel outputs
  before their all-reduce: rows that feed a `Distributed.all_reduce`, or outputs of a call that contracts a split
  input). Only the Mean adds up; Max, Min and Norm of a sum are not derivable from the ranks' statistics: they are
  left empty (None) and the row says why;
- `npu_only`: communication and identity calls the layout adds (all-reduce, view_as), with no counterpart on the
  other side: listed, not flagged.

Pipeline stages are concatenated in stage order after layer indices and API call counters are moved to their global
positions (see `merge_stages`).

The rows of each side are aligned by name in pair/shards.py, each row's decision and rule made in
pair/layout_rules.py; this module combines the rows' statistics by them (`combine`).
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

import numpy as np

from msprobe_compare.load.parallel_layout import parse_shape
from msprobe_compare.load.rows import (
    _ABSENT,
    INT_DTYPE,
    NONE_DTYPE,
    RawCells,
    RowTable,
    State,
    StatKind,
    is_scalar_dtype,
)
from msprobe_compare.pair.layout_rules import (
    Decision,
    Rule,
    added_calls,
    alone_decisions,
    decide_shapes,
    inplace_input,
    local_calls,
    module_local_keys,
    pair_logical,
    rule_for_whole,
    side_dim,
)
from msprobe_compare.pair.shards import STAT_TOLERANCE, Shards, agree, agree_mask, align, state_of
from msprobe_compare.records import dataclass

__all__ = ["STAT_TOLERANCE", "Combined", "Decision", "LayoutView", "Rule", "Shards", "align", "alone_decisions",
           "combine", "combine_partial", "combine_split", "decide_shapes", "module_local_keys", "pair_logical",
           "scale_size_args", "unmatch_other_signatures"]  # fmt: skip

# the rules by their former names (tests and the layouts' modules use them)
REPLICATED, SPLIT, PARTIAL, NPU_ONLY, UNPAIRED, MISMATCH, SIZE_ARG, LOCAL, ARGS, SINGLE = (
    Rule.REPLICATED, Rule.SPLIT, Rule.PARTIAL, Rule.NPU_ONLY, Rule.UNPAIRED, Rule.MISMATCH, Rule.SIZE_ARG, Rule.LOCAL,
    Rule.ARGS, Rule.SINGLE)  # fmt: skip

_NUMBER, _INT = int(StatKind.NUMBER), int(StatKind.INT)


@dataclass
class Combined:
    """One side's logical rows as a RowTable, with the rule of each row."""

    table: RowTable
    rule: list[Rule]
    split_dim: list[int | None]
    ranks: list[tuple[int, ...]]  # per row, the tables (rank columns of `shards`) its rank label names
    disagree: list[tuple[int, ...] | None]  # replicated rows whose ranks disagree: the first table, then those that
    #                                         differ from it (render/layout_rules.py says it in words)
    shards: Shards
    source: np.ndarray  # int64 (n,): the Shards row of each logical row
    shown: list[int] = field(default_factory=list)  # per row, the table (rank column) whose row is shown as is
    interleaved: dict[int, bool] = field(default_factory=dict)  # real data: split rows whose shards interleave
    size_value: dict[int, int] = field(default_factory=dict)  # SIZE_ARG rows: the value on each rank


class _Out:
    """Columns of a RowTable under construction."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.entry_index: list[int] = []
        self.state: list[int] = []
        self.dtype: list[str] = []
        self.shape: list[str] = []
        self.stats: list[np.ndarray] = []
        self.kinds: list[np.ndarray] = []
        self.raw = RawCells()
        self.rg: list[int] = []
        self.md5: list[str | None] = []
        self.data_name: list[str] = []

    def copy_row(self, t: RowTable, i: int, name: str, entry: int, shape: str | None = None) -> None:
        row = len(self.names)
        self.names.append(name)
        self.entry_index.append(entry)
        self.state.append(int(t.state[i]))
        self.dtype.append(t.dtype[i])
        self.shape.append(t.shape[i] if shape is None else shape)
        self.stats.append(t.stats[i].copy())
        self.kinds.append(t.stat_kind[i].copy())
        if np.any(t.stat_kind[i] == StatKind.RAW):
            self.raw.put(row, [t.raw[(i, c)] if t.stat_kind[i, c] == StatKind.RAW else _ABSENT for c in range(4)])
        self.rg.append(int(t.requires_grad[i]))
        self.md5.append(t.md5[i])
        self.data_name.append(t.data_name[i])

    def table(self, entries: list[str], stacks: dict[str, list[str]], has_md5: bool) -> RowTable:
        n = len(self.names)
        return RowTable(
            entries=entries, names=self.names, entry_index=np.array(self.entry_index, dtype=np.int32),
            state=np.array(self.state, dtype=np.int8), dtype=self.dtype, shape=self.shape,
            stats=np.array(self.stats, dtype=np.float64).reshape(n, 4),
            stat_kind=np.array(self.kinds, dtype=np.int8).reshape(n, 4), raw=self.raw,
            requires_grad=np.array(self.rg, dtype=np.int8), md5=self.md5, data_name=self.data_name,
            stacks=stacks, has_md5=has_md5,
        )  # fmt: skip


def _numel(shape: tuple[int, ...] | None) -> int:
    return int(np.prod(shape)) if shape else 1


def combine_split(tables: list[RowTable], rows: list[int], shapes: list[tuple[int, ...] | None]
                  ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Statistics of the concatenation of shards: Max = max, Min = min, Mean = count-weighted mean,
    Norm = sqrt(sum of Norm^2). A NaN in any shard's statistic makes it NaN; a missing one makes it None."""
    vals = np.array([t.stats[i] for t, i in zip(tables, rows)])
    kinds = np.array([t.stat_kind[i] for t, i in zip(tables, rows)])
    counts = np.array([_numel(s) for s in shapes], dtype=np.float64)
    out = np.zeros(4)
    kind = np.full(4, StatKind.NUMBER, dtype=np.int8)
    numeric = (kinds == _NUMBER) | (kinds == _INT)
    if numeric.all():  # the common case: four numbers on every rank
        v = vals
        total = counts.sum()
        out[:] = (v[:, 0].max(), v[:, 1].min(), float(np.dot(v[:, 2], counts) / total) if total else
                  float(v[:, 2].mean()), math.sqrt(float(np.dot(v[:, 3], v[:, 3]))))  # fmt: skip
        kind[:2] = np.where(np.all(kinds[:, :2] == _INT, axis=0), _INT, _NUMBER)
        return out, kind
    for c in range(4):
        if np.any(kinds[:, c] == StatKind.NAN):
            kind[c] = StatKind.NAN
            continue
        if not np.all(numeric[:, c]):
            kind[c] = StatKind.NONE
            continue
        v = vals[:, c]
        if c == 0:
            out[c] = v.max()
        elif c == 1:
            out[c] = v.min()
        elif c == 2:
            out[c] = float(np.dot(v, counts) / counts.sum()) if counts.sum() else float(v.mean())
        else:
            out[c] = math.sqrt(float(np.dot(v, v)))
        if c < 2 and np.all(kinds[:, c] == StatKind.INT):
            kind[c] = StatKind.INT
    return out, kind


def combine_partial(tables: list[RowTable], rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Statistics of the sum of same-shaped tensors: only the Mean adds up; Max, Min and Norm are not derivable."""
    vals = np.array([t.stats[i] for t, i in zip(tables, rows)])
    kinds = np.array([t.stat_kind[i] for t, i in zip(tables, rows)])
    out = np.zeros(4)
    kind = np.full(4, StatKind.NONE, dtype=np.int8)
    if np.any(kinds[:, 2] == StatKind.NAN):
        kind[2] = StatKind.NAN
    elif np.all(np.isin(kinds[:, 2], (StatKind.NUMBER, StatKind.INT))):
        out[2], kind[2] = float(vals[:, 2].sum()), StatKind.NUMBER
    return out, kind


def combine(side: Shards, match: np.ndarray, decisions: list[Decision | None], *, is_npu: bool,
            other_rows: Any = None, other_differs: Any = None) -> Combined:  # fmt: skip
    """The logical RowTable of one side. `decisions` per row of this side (from pair_logical, for the bench side
    re-indexed to bench rows); rows of the npu side without a counterpart that are calls added by the layout become
    npu-only rows."""
    out = _Out()
    rules: list[Rule] = []
    dims: list[int | None] = []
    labels: list[tuple[int, ...]] = []
    disagree: list[tuple[int, ...] | None] = []
    k = len(side.tables)
    # per entry: does some input row of this call come split? (a contraction of a split dim gives a partial sum)
    split_in = np.zeros(len(side.entries), dtype=bool)
    for i, dec in enumerate(decisions):
        if dec is not None and dec.shape is not None and side_dim(dec, is_npu) is not None:
            if state_of(side, i) in (State.INPUT, State.PARAMETERS):
                split_in[side.entry_index[i]] = True
    shown: list[int] = []
    agrees = agree_mask(side)
    added = added_calls(side, decisions) if is_npu else set()
    local = local_calls(side, decisions, is_npu)
    for i in range(len(side)):
        present = [r for r in range(k) if side.rows[i, r] >= 0]
        tables = [side.tables[r] for r in present]
        rows = [int(side.rows[i, r]) for r in present]
        label = tuple(present)
        shown.append(present[0])
        t0, r0 = tables[0], rows[0]
        name = side.names[i]
        entry = int(side.entry_index[i])
        dec = decisions[i]
        bad: tuple[int, ...] | None = None
        if dec is None or dec.shape is None:
            dim = None
            layout_call = entry in added
            out.copy_row(t0, r0, name, entry)
            if dec is not None:  # a counterpart, but the shapes do not add up
                rule = Rule.MISMATCH
            elif len(rows) == 1 or agrees[i]:
                rule = Rule.NPU_ONLY if layout_call else Rule.UNPAIRED
            elif side.partial_hint[i]:
                out.stats[-1], out.kinds[-1] = combine_partial(tables, rows)
                out.md5[-1] = None
                rule = Rule.NPU_ONLY_PARTIAL if layout_call else Rule.PARTIAL
            else:  # no counterpart and the ranks differ: shown as rank 0's row, not combined
                rule = Rule.NPU_ONLY_RANK0 if layout_call else Rule.UNPAIRED_RANK0
                label = (present[0],)
        else:
            dim = side_dim(dec, is_npu)
            shape_text = dec.shape
            if dim is not None and len(rows) == side.group:
                out.copy_row(t0, r0, name, entry, shape_text)
                shapes = [parse_shape(t.shape[j]) for t, j in zip(tables, rows)]
                out.stats[-1], out.kinds[-1] = combine_split(tables, rows, shapes)
                out.md5[-1] = None
                rule = Rule.SPLIT
            else:
                split_input = bool(split_in[entry]) and state_of(side, i) == State.OUTPUT
                rule = rule_for_whole(side, i, rows, tables, split_input)
                if (
                    rule is not Rule.SPLIT
                    and not side.partial_hint[i]
                    and not agrees[i]
                    and (entry in local or (other_differs is not None and other_differs(i)))
                ):
                    rule = Rule.LOCAL  # rank-dependent by design (on both sides, when both are sharded)
                if rule is Rule.LOCAL:
                    out.copy_row(t0, r0, name, entry, shape_text)
                    label = (present[0],)
                elif rule is Rule.PARTIAL:
                    out.copy_row(t0, r0, name, entry, shape_text)
                    out.stats[-1], out.kinds[-1] = combine_partial(tables, rows)
                    out.md5[-1] = None
                else:
                    pick = 0
                    if len(rows) > 1 and not agrees[i] and not inplace_input(side, i):
                        pick = _farthest(tables, rows, other_rows, i)
                        differ = [present[p] for p in range(len(rows)) if p != 0 and
                                  not agree([tables[0], tables[p]], [rows[0], rows[p]])]  # fmt: skip
                        bad = (present[0], *differ)
                    out.copy_row(tables[pick], rows[pick], name, entry, shape_text)
                    shown[-1] = present[pick]
        rules.append(rule)
        dims.append(dim)
        labels.append(label)
        disagree.append(bad)
    has_md5 = any(t.has_md5 for t in side.tables)
    table = out.table(list(side.entries), side.stacks, has_md5)
    return Combined(table, rules, dims, labels, disagree, side, np.arange(len(side), dtype=np.int64), shown)


def scale_size_args(npu: Combined, bench: Combined, match: np.ndarray, tp_npu: int, tp_bench: int) -> None:
    """Integer arguments of a call with split tensors whose npu value is the bench value scaled by the layout (a
    `reshape(4, 8, 2, 8)` of a head count split over 2 ranks): shown at their logical value, rule SIZE_ARG."""
    if tp_npu == tp_bench:
        return
    t, b = npu.table, bench.table
    split_entries = {int(t.entry_index[i]) for i, rule in enumerate(npu.rule) if rule is Rule.SPLIT}
    for i in np.flatnonzero(match >= 0).tolist():
        j = int(match[i])
        if int(t.entry_index[i]) not in split_entries or not t.dtype[i] == b.dtype[j] == INT_DTYPE:
            continue
        if t.stat_kind[i, 0] != StatKind.INT or b.stat_kind[j, 0] != StatKind.INT or npu.rule[i] is not Rule.REPLICATED:
            continue
        v, w = int(t.stats[i, 0]), int(b.stats[j, 0])
        if v != w and v * tp_npu == w * tp_bench:
            t.stats[i, :] = float(w)
            t.md5[i] = b.md5[j]
            npu.rule[i] = Rule.SIZE_ARG
            npu.size_value[i] = v


def unmatch_other_signatures(npu: Combined, bench: Combined, match: np.ndarray) -> None:
    """Calls whose bench counterpart takes a tensor input that this call does not (Megatron's row-parallel F.linear
    without its bias, which is added after the all-reduce): their outputs are other quantities, rule ARGS."""
    b = bench.table
    paired = np.zeros(len(b), dtype=bool)
    paired[match[match >= 0]] = True
    extra = {int(b.entry_index[j]) for j in np.flatnonzero(~paired).tolist()
             if b.state[j] == State.INPUT and b.dtype[j] != NONE_DTYPE and not is_scalar_dtype(b.dtype[j])}  # fmt: skip
    if not extra:
        return
    t = npu.table
    for i in np.flatnonzero(match >= 0).tolist():
        if int(b.entry_index[int(match[i])]) in extra and t.state[i] in (State.OUTPUT, State.PARAMETERS_GRAD):
            npu.rule[i] = Rule.ARGS


def _farthest(tables: list[RowTable], rows: list[int], other: Any, i: int) -> int:
    """Of disagreeing replicated rows, the one farthest from the other side's row (its statistics), else rank 0."""
    if other is None:
        return 0
    ref = other(i)
    if ref is None:
        return 0
    best, worst = 0, -1.0
    for p, (t, j) in enumerate(zip(tables, rows)):
        with np.errstate(all="ignore"):
            d = np.nanmax(np.abs(t.stats[j] - ref) / np.maximum(np.abs(ref), 1e-30))
        if np.isfinite(d) and d > worst:
            best, worst = p, float(d)
    return best


@dataclass
class LayoutView:
    """What the table shows per NPU row: the ranks combined into it and the rule (`render.table` adds the columns)."""

    ranks: list[str]
    rules: list[str]  # texts (render/layout_rules.py's words)
    codes: list[Rule | None]  # None: a row no combined row stands behind (an aligned table's own rows)
    npu_only: np.ndarray  # bool: rows of calls the layout adds (listed, not flagged)
    combined: Combined | None = None  # the npu side
