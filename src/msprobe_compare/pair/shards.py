"""One side's ranks of a tensor-parallel group, their rows aligned by name (`Shards`): which rows feed a
sum-reduction, and whether the ranks' rows of a logical row agree. pair/layout_rules.py decides from them how each
row's shards add up; pair/parallel.py combines them."""

from __future__ import annotations

from dataclasses import field
from typing import Any

import numpy as np

from msprobe_compare.load.names import is_sum_reduction
from msprobe_compare.load.parallel_layout import parse_shape
from msprobe_compare.load.rows import RowTable, State, StatKind, is_scalar_dtype
from msprobe_compare.records import dataclass

STAT_TOLERANCE = 1e-4  # relative: replicated ranks agree within this (TP changes summation orders)


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


def stat_key(t: RowTable, i: int) -> tuple[Any, ...] | None:
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
            if is_sum_reduction(entry) and state == State.INPUT:
                key = stat_key(t, i)
                hint[logical[i]] = True
                if key is not None and key in recent:
                    hint[logical[recent[key]]] = True
            elif state == State.OUTPUT:
                key = stat_key(t, i)
                if key is not None:
                    recent[key] = i
    return hint


def agree(t: list[RowTable], rows: list[int]) -> bool:
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
            if first_t.dtype[first] == tab.dtype[i] and not is_scalar_dtype(first_t.dtype[first]):
                return False
    return True


_NUMBER, _INT, _RAW = int(StatKind.NUMBER), int(StatKind.INT), int(StatKind.RAW)


def agree_mask(side: Shards) -> np.ndarray:
    """`agree` of every logical row over the ranks that have it, vectorised (rows with raw values or md5 checked
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
        out[i] = agree([side.tables[r] for r in cols], [int(side.rows[i, r]) for r in cols])
    side.agrees = out
    return out


def state_of(side: Shards, i: int) -> int:
    """The row's state (input, output, ...) on the first rank that has it (-1: none)."""
    for r in range(len(side.tables)):
        j = int(side.rows[i, r])
        if j >= 0:
            return int(side.tables[r].state[j])
    return -1
