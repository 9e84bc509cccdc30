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
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

import numpy as np

from msprobe_compare.load.names import API_PREFIXES, COMMUNICATION_PREFIXES, api_call_pattern
from msprobe_compare.load.parallel_layout import parse_shape, plain_class_name
from msprobe_compare.load.rows import _ABSENT, RawCells, RowTable, State, StatKind
from msprobe_compare.records import dataclass

STAT_TOLERANCE = 1e-4  # relative: replicated ranks agree within this (TP changes summation orders)
REDUCE_APIS = ("Distributed.all_reduce.", "Distributed.reduce_scatter", "Distributed.all_gather",
               "Distributed.broadcast.", "Distributed.reduce.", "Distributed.send.", "Distributed.recv.",
               "Distributed.isend.", "Distributed.irecv.", "Distributed.batch_isend_irecv.",
               "Distributed._all_gather_base", "Distributed._reduce_scatter_base",
               "Communication.", "Primitive.all_reduce.", "Primitive.all_gather.", "Primitive.reduce_scatter.",
               "Primitive.broadcast.", "Primitive.send.", "Primitive.receive.", "Mint.distributed.")  # fmt: skip
SUM_APIS = ("Distributed.all_reduce.", "Distributed.reduce_scatter", "Distributed._reduce_scatter_base",
            "Communication.comm.all_reduce", "Distributed.reduce.", "Primitive.all_reduce.",
            "Primitive.reduce_scatter.")  # fmt: skip

REPLICATED, SPLIT, PARTIAL, NPU_ONLY, UNPAIRED, MISMATCH, SIZE_ARG, LOCAL = (
    "replicated", "split", "partial_sum", "npu_only", "unpaired", "not_combined", "size_argument",
    "rank_local")  # fmt: skip
ARGS = "other_arguments"  # the other side's call takes a tensor input this one does not
SINGLE = "single"  # one rank holds the row (no tensor parallelism on this side, or a pipeline stage's own rank)


@dataclass
class Shards:
    """One side's rows of a group of ranks aligned by name: `rows[i, r]` is rank r's row of logical row i (-1 when
    rank r has no such row)."""

    tables: list[RowTable]
    ranks: list[str]  # rank labels ("rank0", ...)
    names: list[str]
    entries: list[str]
    entry_index: np.ndarray
    rows: np.ndarray  # int64 (n, k)
    partial_hint: np.ndarray  # bool (n,): the row feeds a sum-reduction (or is its input)
    stacks: dict[str, list[str]] = field(default_factory=dict)
    tp: int = 0  # ranks per stage when the tables hold several pipeline stages (0: all tables are one group)
    renames: dict[int, dict[str, str]] = field(default_factory=dict)  # per table: local entry name -> global one
    dirs: list[Any] = field(default_factory=list)  # per table: its rank folder (real data: dump_tensor_data there)
    agrees: Any = None  # bool (n,), computed once by agree_mask: the ranks' rows of each logical row agree

    def __len__(self) -> int:
        return len(self.names)

    @property
    def group(self) -> int:
        """Ranks per tensor-parallel group (each row comes from one group: one pipeline stage)."""
        return self.tp or len(self.tables)

    def shapes(self, i: int) -> list[tuple[int, ...] | None]:
        """The shapes of the row on the ranks that have it."""
        return [parse_shape(self.tables[r].shape[j]) for r, j in enumerate(self.rows[i].tolist()) if j >= 0]


def align(tables: list[RowTable], ranks: list[str]) -> Shards:
    """Rows of the ranks' tables aligned by name (rank 0's order; rows only some later rank has follow)."""
    names: list[str] = []
    entries: list[str] = []
    entry_pos: dict[str, int] = {}
    entry_of: list[int] = []
    position: dict[str, int] = {}
    per_rank: list[list[int]] = []
    k = len(tables)
    for r, t in enumerate(tables):
        for i, name in enumerate(t.names):
            p = position.get(name)
            if p is None:
                p = position[name] = len(names)
                names.append(name)
                entry = t.entries[t.entry_index[i]]
                e = entry_pos.get(entry)
                if e is None:
                    e = entry_pos[entry] = len(entries)
                    entries.append(entry)
                entry_of.append(e)
                per_rank.append([-1] * k)
            if per_rank[p][r] < 0:
                per_rank[p][r] = i
    rows = np.array(per_rank, dtype=np.int64).reshape(len(names), k)
    entry_index = np.array(entry_of, dtype=np.int32)
    order = np.argsort(entry_index, kind="stable")  # rows of an entry together, entries in first-seen order
    if not np.array_equal(order, np.arange(len(order))):
        names = [names[i] for i in order.tolist()]
        rows, entry_index = rows[order], entry_index[order]
    stacks: dict[str, list[str]] = {}
    for t in reversed(tables):
        stacks.update(t.stacks)
    out = Shards(tables, ranks, names, entries, entry_index, rows, np.zeros(len(names), dtype=bool), stacks)
    out.partial_hint = _partial_hints(out)
    return out


def _stat_key(t: RowTable, i: int) -> tuple[Any, ...] | None:
    if not np.all(t.stat_kind[i] == StatKind.NUMBER):
        return None
    return (t.shape[i], *t.stats[i].tolist())


def _partial_hints(s: Shards) -> np.ndarray:
    """Rows that feed a sum-reduction on every rank that has them: the reduction's input rows, and the output rows
    of earlier calls with the same shape and statistics (the tensor handed to the all-reduce)."""
    hint = np.zeros(len(s), dtype=bool)
    for r, t in enumerate(s.tables):
        col = s.rows[:, r]
        logical = np.full(len(t), -1, dtype=np.int64)
        logical[col[col >= 0]] = np.flatnonzero(col >= 0)
        recent: dict[tuple[Any, ...], int] = {}  # stat key of output rows -> latest row
        for i in range(len(t)):
            entry = t.entries[t.entry_index[i]]
            state = int(t.state[i])
            if entry.startswith(SUM_APIS) and state == State.INPUT:
                key = _stat_key(t, i)
                hint[logical[i]] = True
                if key is not None and key in recent:
                    hint[logical[recent[key]]] = True
            elif state == State.OUTPUT:
                key = _stat_key(t, i)
                if key is not None:
                    recent[key] = i
    return hint


def is_layout_call(entry: str) -> bool:
    return entry.startswith(REDUCE_APIS)


# -- per-row decisions --------------------------------------------------------------------------------------------


def _combined(shapes: list[tuple[int, ...] | None], dim: int | None) -> tuple[int, ...] | None:
    """The logical shape of shards: the shared shape (dim None) or the sum along `dim`; None when they do not fit."""
    present = [s for s in shapes if s is not None]
    if not present or len(present) != len(shapes):
        return None
    first = present[0]
    if any(len(s) != len(first) for s in present):
        return None
    if dim is None:
        return first if all(s == first for s in present) else None
    if dim >= len(first):
        return None
    if any(s[:dim] + s[dim + 1 :] != first[:dim] + first[dim + 1 :] for s in present):
        return None
    return first[:dim] + (sum(s[dim] for s in present),) + first[dim + 1 :]


def decide_shapes(npu: list[tuple[int, ...] | None], bench: list[tuple[int, ...] | None]
                  ) -> tuple[int | None, int | None, tuple[int, ...]] | None:  # fmt: skip
    """(npu split dim or None, bench split dim or None, logical shape) such that both sides' shards add up to the
    same logical shape; whole on both sides first, then one split dim. None when no reading fits."""
    whole_n, whole_b = _combined(npu, None), _combined(bench, None)
    if whole_n is not None and whole_n == whole_b:
        return None, None, whole_n
    rank = len(next((s for s in npu if s is not None), ()) or ())
    for d in range(rank):
        split_n = _combined(npu, d) if len(npu) > 1 else whole_n
        split_b = _combined(bench, d) if len(bench) > 1 else whole_b
        if split_n is not None and split_n == split_b:
            return (d if len(npu) > 1 else None), (d if len(bench) > 1 else None), split_n
        if split_n is not None and split_n == whole_b:
            return (d if len(npu) > 1 else None), None, split_n
        if whole_n is not None and whole_n == split_b:
            return None, (d if len(bench) > 1 else None), whole_n
    return None


def _agree(t: list[RowTable], rows: list[int]) -> bool:
    """The ranks' rows hold the same values (statistics within STAT_TOLERANCE, md5 and raw values equal)."""
    first_t, first = t[0], rows[0]
    for tab, i in zip(t[1:], rows[1:]):
        if not np.array_equal(first_t.stat_kind[first], tab.stat_kind[i]):
            return False
        a, b = first_t.stats[first], tab.stats[i]
        num = first_t.stat_kind[first] == StatKind.NUMBER
        if np.any(num):
            with np.errstate(all="ignore"):
                scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), abs(float(first_t.stats[first, 3])) * 1e-3)
                rel = np.where(a == b, 0.0, np.abs(a - b) / np.where(scale > 0, scale, 1.0))
            if np.any(rel[num] > STAT_TOLERANCE):
                return False
        ints = first_t.stat_kind[first] == StatKind.INT
        if np.any(ints) and not np.array_equal(a[ints], b[ints]):
            return False
        if np.any(first_t.stat_kind[first] == StatKind.RAW):
            if any(first_t.stat_display(first, c) != tab.stat_display(i, c) for c in range(4)
                   if first_t.stat_kind[first, c] == StatKind.RAW):  # fmt: skip
                return False
        if first_t.md5[first] is not None and first_t.md5[first] != tab.md5[i]:
            if first_t.dtype[first] == tab.dtype[i] and not first_t.dtype[first].startswith("<class"):
                return False
    return True


_NUMBER, _INT, _RAW = int(StatKind.NUMBER), int(StatKind.INT), int(StatKind.RAW)


def agree_mask(side: Shards) -> np.ndarray:
    """`_agree` of every logical row over the ranks that have it, vectorised (rows with raw values or md5 checked
    one by one)."""
    if side.agrees is not None:
        return side.agrees
    n, k = side.rows.shape
    out = np.ones(n, dtype=bool)
    if n == 0:
        side.agrees = out
        return out
    present = side.rows >= 0
    first = np.argmax(present, axis=1)
    base = np.zeros((n, 4))
    base_kind = np.zeros((n, 4), dtype=np.int8)
    for r in range(k):
        sel = present[:, r] & (first == r)
        if sel.any():
            idx = side.rows[sel, r]
            base[sel], base_kind[sel] = side.tables[r].stats[idx], side.tables[r].stat_kind[idx]
    slow = np.zeros(n, dtype=bool)
    for r in range(k):
        sel = present[:, r] & (first != r)
        if not sel.any():
            continue
        t, idx = side.tables[r], side.rows[sel, r]
        a, ka, b, kb = base[sel], base_kind[sel], t.stats[idx], t.stat_kind[idx]
        with np.errstate(all="ignore"):
            scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), np.abs(a[:, 3:4]) * 1e-3)
            rel = np.where(a == b, 0.0, np.abs(a - b) / np.where(scale > 0, scale, 1.0))
        ok = np.all(ka == kb, axis=1) & ~np.any((ka == _NUMBER) & (rel > STAT_TOLERANCE), axis=1)
        ok &= ~np.any((ka == _INT) & (a != b), axis=1)
        out[sel] &= ok
        md5 = np.fromiter((t.md5[j] is not None for j in idx.tolist()), dtype=bool, count=len(idx))
        slow[np.flatnonzero(sel)[np.any(kb == _RAW, axis=1) | md5]] = True
    for i in np.flatnonzero(slow & out).tolist():
        cols = np.flatnonzero(present[i]).tolist()
        out[i] = _agree([side.tables[r] for r in cols], [int(side.rows[i, r]) for r in cols])
    side.agrees = out
    return out


@dataclass
class Combined:
    """One side's logical rows as a RowTable, with the rule of each row."""

    table: RowTable
    rule: list[str]  # REPLICATED, SPLIT, PARTIAL, NPU_ONLY, UNPAIRED, MISMATCH
    split_dim: list[int | None]
    ranks: list[str]  # the ranks combined into each row ("rank0+rank1")
    disagree: list[str | None]  # replicated rows whose ranks disagree: which ranks differ
    shards: Shards
    source: np.ndarray  # int64 (n,): the Shards row of each logical row
    shown: list[int] = field(default_factory=list)  # per row, the table (rank column) whose row is shown as is
    interleaved: dict[int, bool] = field(default_factory=dict)  # real data: split rows whose shards interleave


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


def _shape_text(shape: tuple[int, ...]) -> str:
    return str(list(shape))


@dataclass
class Decision:
    dim_npu: int | None
    dim_bench: int | None
    shape: str | None  # the logical shape text; None: the shapes do not add up


_API_CALL = api_call_pattern(tuple(p for p in API_PREFIXES if p not in COMMUNICATION_PREFIXES))


def module_local_keys(entries: list[str], parents: dict[str, str | None] | None) -> dict[str, str]:
    """API calls keyed by their module and their place among that module's calls of the same API
    (`Module.x.o_proj.Linear.forward.0|Tensor.__add__|0|forward`), from construct.json's parents. A call the layout
    adds inside a module (Megatron's bias add after the all-reduce) then shifts no counter outside that module.
    Calls without a recorded parent keep their names."""
    if not parents:
        return {}
    keys: dict[str, str] = {}
    seen: dict[tuple[str, str], int] = {}
    for e in entries:
        m = _API_CALL.match(e)
        if not m or m.group(3) != "forward" or e not in parents or is_layout_call(e):
            continue
        parent = parents[e]
        scope = plain_class_name(parent) if parent else ""
        k = seen.get((scope, m.group(1)), 0)
        seen[(scope, m.group(1))] = k + 1
        keys[e] = f"{scope}|{m.group(1)}|{k}|forward"
    for e in entries:
        m = _API_CALL.match(e)
        if m and m.group(3) == "backward":
            fwd = keys.get(f"{m.group(1)}.{m.group(2)}.forward")
            if fwd is not None:
                keys[e] = fwd[: -len("forward")] + "backward"
    return keys


def _row_key(side: Shards, i: int, keys: dict[str, str]) -> str:
    name = side.names[i]
    entry = side.entries[side.entry_index[i]]
    key = keys.get(entry)
    if key is not None and name.startswith(entry):
        return key + name[len(entry):]
    return plain_class_name(name)


def pair_logical(npu: Shards, bench: Shards, npu_keys: dict[str, str] | None = None,
                 bench_keys: dict[str, str] | None = None) -> tuple[np.ndarray, list[Decision | None]]:  # fmt: skip
    """For each npu logical row, the bench logical row with the same plain name (or the same call key, see
    `module_local_keys`, when both sides have them) and the decision how both sides' shards add up (-1 / None when
    unpaired)."""
    if not (npu_keys and bench_keys):
        npu_keys = bench_keys = {}
    index: dict[str, int] = {}
    for j in range(len(bench)):
        index.setdefault(_row_key(bench, j, bench_keys), j)
    match = np.full(len(npu), -1, dtype=np.int64)
    decisions: list[Decision | None] = [None] * len(npu)
    for i in range(len(npu)):
        if is_layout_call(npu.entries[npu.entry_index[i]]):
            continue  # communication calls belong to a layout: their counters and operands differ between layouts
        j = index.get(_row_key(npu, i, npu_keys), -1)
        if j < 0:
            continue
        match[i] = j
        texts = {npu.tables[r].shape[k] for r, k in enumerate(npu.rows[i].tolist()) if k >= 0}
        texts |= {bench.tables[r].shape[k] for r, k in enumerate(bench.rows[j].tolist()) if k >= 0}
        if len(texts) == 1:  # the same shape text everywhere (also scalars and None leaves)
            decisions[i] = Decision(None, None, texts.pop())
            continue
        found = decide_shapes(npu.shapes(i), bench.shapes(j))
        decisions[i] = (Decision(found[0], found[1], _shape_text(found[2])) if found is not None else
                        Decision(None, None, None))  # fmt: skip
    return match, decisions


def alone_decisions(side: Shards) -> list[Decision | None]:
    """How one side's shards add up without the other side to match (runs of different code, whose call names do
    not pair: pair/align.py aligns the combined tables afterwards). Ranks that agree hold the whole tensor; a row
    feeding a sum-reduction is a partial sum; shards that differ are split: parameters of a row-parallel class
    along their input dim (1), other parameters along dim 0, activations along the last dim. The statistics of a
    concatenation do not depend on the dim; its shape text is the guess. Rows missing on some rank: None."""
    agrees = agree_mask(side)
    out: list[Decision | None] = []
    group = side.group
    for i in range(len(side)):
        present = [(r, int(j)) for r, j in enumerate(side.rows[i].tolist()) if j >= 0]
        texts = {side.tables[r].shape[j] for r, j in present}
        if len(present) < group:
            out.append(None)
            continue
        if len(present) == 1 or agrees[i] or side.partial_hint[i]:  # whole (a partial sum: _rule_for_whole says)
            out.append(Decision(None, None, texts.pop() if len(texts) == 1 else None))
            continue
        shapes = side.shapes(i)
        first = shapes[0]
        if first is None or not first:
            out.append(Decision(None, None, None))
            continue
        dim = len(first) - 1
        if _state(side, i) in (State.PARAMETERS, State.PARAMETERS_GRAD):
            dim = 1 if "RowParallel" in side.entries[side.entry_index[i]] and len(first) > 1 else 0
        differ = [d for d in range(len(first)) if any(s is not None and len(s) == len(first) and s[d] != first[d]
                                                     for s in shapes)]  # fmt: skip
        if len(differ) == 1:  # uneven shards show their dim
            dim = differ[0]
        got = _combined(shapes, dim)
        out.append(Decision(dim, dim, _shape_text(got)) if got is not None else Decision(None, None, None))
    return out


def _rule_for_whole(side: Shards, i: int, rows: list[int], tables: list[RowTable], split_input: bool) -> str:
    if len(rows) == 1:
        return SINGLE
    if agree_mask(side)[i]:
        return REPLICATED
    if side.partial_hint[i] or split_input:
        return PARTIAL
    return REPLICATED  # the ranks disagree where they must not


def combine(side: Shards, match: np.ndarray, decisions: list[Decision | None], *, is_npu: bool,
            other_rows: Any = None, other_differs: Any = None) -> Combined:  # fmt: skip
    """The logical RowTable of one side. `decisions` per row of this side (from pair_logical, for the bench side
    re-indexed to bench rows); rows of the npu side without a counterpart that are calls added by the layout become
    npu-only rows."""
    out = _Out()
    rules: list[str] = []
    dims: list[int | None] = []
    ranks_text: list[str] = []
    disagree: list[str | None] = []
    k = len(side.tables)
    # per entry: does some input row of this call come split? (a contraction of a split dim gives a partial sum)
    split_in = np.zeros(len(side.entries), dtype=bool)
    for i, dec in enumerate(decisions):
        if dec is not None and dec.shape is not None and side_dim(dec, is_npu) is not None:
            if _state(side, i) in (State.INPUT, State.PARAMETERS):
                split_in[side.entry_index[i]] = True
    shown: list[int] = []
    agrees = agree_mask(side)
    added = _added_calls(side, decisions) if is_npu else set()
    local = _local_calls(side, decisions, is_npu)
    for i in range(len(side)):
        present = [r for r in range(k) if side.rows[i, r] >= 0]
        tables = [side.tables[r] for r in present]
        rows = [int(side.rows[i, r]) for r in present]
        label = "+".join(side.ranks[r] for r in present)
        shown.append(present[0])
        t0, r0 = tables[0], rows[0]
        name = side.names[i]
        entry = int(side.entry_index[i])
        dec = decisions[i]
        bad: str | None = None
        if dec is None or dec.shape is None:
            dim = None
            layout_call = entry in added
            out.copy_row(t0, r0, name, entry)
            if dec is not None:  # a counterpart, but the shapes do not add up
                rule = MISMATCH
            elif len(rows) == 1 or agrees[i]:
                rule = NPU_ONLY if layout_call else UNPAIRED
            elif side.partial_hint[i]:
                out.stats[-1], out.kinds[-1] = combine_partial(tables, rows)
                out.md5[-1] = None
                rule = NPU_ONLY + "/" + PARTIAL if layout_call else PARTIAL
            else:  # no counterpart and the ranks differ: shown as rank 0's row, not combined
                rule = (NPU_ONLY if layout_call else UNPAIRED) + "/rank0"
                label = side.ranks[present[0]]
        else:
            dim = side_dim(dec, is_npu)
            shape_text = dec.shape
            if dim is not None and len(rows) == side.group:
                out.copy_row(t0, r0, name, entry, shape_text)
                shapes = [parse_shape(t.shape[j]) for t, j in zip(tables, rows)]
                out.stats[-1], out.kinds[-1] = combine_split(tables, rows, shapes)
                out.md5[-1] = None
                rule = SPLIT
            else:
                rule = _rule_for_whole(side, i, rows, tables, bool(split_in[entry]) and _state(side, i) == State.OUTPUT)
                if rule != SPLIT and not side.partial_hint[i] and not agrees[i] and (
                        entry in local or (other_differs is not None and other_differs(i))):
                    rule = LOCAL  # rank-dependent by design (on both sides, when both are sharded)
                if rule == LOCAL:
                    out.copy_row(t0, r0, name, entry, shape_text)
                    label = side.ranks[present[0]]
                elif rule == PARTIAL:
                    out.copy_row(t0, r0, name, entry, shape_text)
                    out.stats[-1], out.kinds[-1] = combine_partial(tables, rows)
                    out.md5[-1] = None
                else:
                    pick = 0
                    if len(rows) > 1 and not agrees[i] and not _inplace_input(side, i):
                        pick = _farthest(tables, rows, other_rows, i)
                        differ = [side.ranks[present[p]] for p in range(len(rows)) if p != 0 and
                                  not _agree([tables[0], tables[p]], [rows[0], rows[p]])]  # fmt: skip
                        bad = f"{side.ranks[present[0]]} vs {', '.join(differ)}"
                    out.copy_row(tables[pick], rows[pick], name, entry, shape_text)
                    shown[-1] = present[pick]
                    if bad is not None:
                        label = label + f" (shown: {side.ranks[present[pick]]})"
        rules.append(rule)
        dims.append(dim)
        ranks_text.append(label)
        disagree.append(bad)
    has_md5 = any(t.has_md5 for t in side.tables)
    table = out.table(list(side.entries), side.stacks, has_md5)
    return Combined(table, rules, dims, ranks_text, disagree, side, np.arange(len(side), dtype=np.int64), shown)


def scale_size_args(npu: Combined, bench: Combined, match: np.ndarray, tp_npu: int, tp_bench: int) -> None:
    """Integer arguments of a call with split tensors whose npu value is the bench value scaled by the layout (a
    `reshape(4, 8, 2, 8)` of a head count split over 2 ranks): shown at their logical value, rule SIZE_ARG."""
    if tp_npu == tp_bench:
        return
    t, b = npu.table, bench.table
    split_entries = {int(t.entry_index[i]) for i, rule in enumerate(npu.rule) if rule == SPLIT}
    for i in np.flatnonzero(match >= 0).tolist():
        j = int(match[i])
        if int(t.entry_index[i]) not in split_entries or not t.dtype[i] == b.dtype[j] == "<class 'int'>":
            continue
        if t.stat_kind[i, 0] != StatKind.INT or b.stat_kind[j, 0] != StatKind.INT or npu.rule[i] != REPLICATED:
            continue
        v, w = int(t.stats[i, 0]), int(b.stats[j, 0])
        if v != w and v * tp_npu == w * tp_bench:
            t.stats[i, :] = float(w)
            t.md5[i] = b.md5[j]
            npu.rule[i] = SIZE_ARG
            npu.ranks[i] += f" (value {v} on each rank)"


def _inplace_input(side: Shards, i: int) -> bool:
    """An input row of an in-place API (`add_`): the dumper may record it after the write, on some ranks only."""
    if _state(side, i) != State.INPUT:
        return False
    api = side.entries[side.entry_index[i]].rsplit(".", 2)[0].rsplit(".", 1)[-1]
    return api.endswith("_") and not api.endswith("__")


def _is_index(dtype: str) -> bool:
    base = dtype.removeprefix("torch.").lower()
    return base.startswith(("int", "uint", "long", "bool"))


def _local_calls(side: Shards, decisions: list[Decision | None], is_npu: bool) -> set[int]:
    """Entries of calls that read rank-local indices: an integer input that differs between the ranks of a call with
    a split row (a vocab-parallel lookup shifts the token ids into the rank's vocabulary range and masks the
    others), and the backward call of such a call. Their whole-shaped rows that differ between the ranks are rank-
    local: not compared."""
    split_entries = {int(side.entry_index[i]) for i, d in enumerate(decisions)
                     if d is not None and d.shape is not None and side_dim(d, is_npu) is not None}  # fmt: skip
    out: set[int] = set()
    for i in range(len(side)):
        e = int(side.entry_index[i])
        if e not in split_entries or e in out or _state(side, i) != State.INPUT:
            continue
        present = [r for r in range(len(side.tables)) if side.rows[i, r] >= 0]
        tables = [side.tables[r] for r in present]
        rows = [int(side.rows[i, r]) for r in present]
        if len(rows) > 1 and _is_index(tables[0].dtype[rows[0]]) and not agree_mask(side)[i]:
            out.add(e)
    position = {name: k for k, name in enumerate(side.entries)}
    for e in list(out):
        name = side.entries[e]
        if name.endswith(".forward"):
            back = position.get(name[: -len("forward")] + "backward")
            if back is not None:
                out.add(back)
    return out


def unmatch_other_signatures(npu: Combined, bench: Combined, match: np.ndarray) -> None:
    """Calls whose bench counterpart takes a tensor input that this call does not (Megatron's row-parallel F.linear
    without its bias, which is added after the all-reduce): their outputs are other quantities, rule ARGS."""
    b = bench.table
    paired = np.zeros(len(b), dtype=bool)
    paired[match[match >= 0]] = True
    extra = {int(b.entry_index[j]) for j in np.flatnonzero(~paired).tolist()
             if b.state[j] == State.INPUT and b.dtype[j] != "None" and not b.dtype[j].startswith("<class")}  # fmt: skip
    if not extra:
        return
    t = npu.table
    for i in np.flatnonzero(match >= 0).tolist():
        if int(b.entry_index[int(match[i])]) in extra and t.state[i] in (State.OUTPUT, State.PARAMETERS_GRAD):
            npu.rule[i] = ARGS


def _added_calls(side: Shards, decisions: list[Decision | None]) -> set[int]:
    """Entries the layout adds: no row has a counterpart, and the call communicates (all-reduce, ...) or is an
    identity on every rank (each output row equals an input row: view_as and the like of the copy-to-region
    functions)."""
    paired = np.zeros(len(side.entries), dtype=bool)
    for i, dec in enumerate(decisions):
        if dec is not None:
            paired[side.entry_index[i]] = True
    out: set[int] = set()
    order = np.argsort(side.entry_index, kind="stable")
    bounds = np.searchsorted(side.entry_index[order], np.arange(len(side.entries) + 1))
    for e in np.flatnonzero(~paired).tolist():
        if is_layout_call(side.entries[e]):
            out.add(e)
            continue
        rows = order[bounds[e]:bounds[e + 1]]
        identity = True
        for r, t in enumerate(side.tables):
            if not np.any(side.rows[rows, r] >= 0):
                continue  # a rank of another pipeline stage
            ins = {_stat_key(t, int(j)) for j in side.rows[rows, r] if j >= 0 and t.state[j] == State.INPUT}
            outs = [_stat_key(t, int(j)) for j in side.rows[rows, r] if j >= 0 and t.state[j] == State.OUTPUT]
            if not outs or any(key is None or key not in ins for key in outs):
                identity = False
                break
        if identity:
            out.add(e)
    return out


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


def side_dim(dec: Decision, is_npu: bool) -> int | None:
    return dec.dim_npu if is_npu else dec.dim_bench


def _state(side: Shards, i: int) -> int:
    for r in range(len(side.tables)):
        j = int(side.rows[i, r])
        if j >= 0:
            return int(side.tables[r].state[j])
    return -1


@dataclass
class LayoutView:
    """What the table shows per NPU row: the ranks combined into it and the rule (`render.table` adds the columns)."""

    ranks: list[str]
    rules: list[str]  # texts
    codes: list[str]  # REPLICATED, SPLIT, ...
    npu_only: np.ndarray  # bool: rows of calls the layout adds (listed, not flagged)
    combined: Combined | None = None  # the npu side
