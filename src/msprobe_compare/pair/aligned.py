"""The tables an alignment (pair/align.py) is compared on: merged parts as one row, and the match.

Parts merged on one side (q/k/v against qkv) become one entry named by their names joined with `;` (as 26.x's
consistent check names its aggregated rows), placed where the last part ends; its rows are the parts' tensors
combined: concatenated (outputs, parameters, the gradients of outputs and parameters: Max, Min exactly, Norm from
the sum of squares, Mean weighted by element counts), read once where every part reads the same tensor (a shared
input), or summed where the parts' gradients of that shared input add up (only the Mean of a sum follows from the
parts'; Max, Min and Norm are left empty, and `Combined.partial` says which rows). Every other row is kept as it is;
rows of calls without a counterpart stay unmatched.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msprobe_compare.load.rows import RowTable
from msprobe_compare.pair.align import Alignment, BoundaryPair, Side, align, inner_calls, module_calls
from msprobe_compare.pair.exact import UNMATCHED
from msprobe_compare.pair.parallel import _Out, combine_partial, combine_split
from msprobe_compare.records import dataclass

CONCAT, SHARED, SUM = "concat", "shared", "sum"


@dataclass
class Built:
    table: RowTable
    rows: dict[tuple[int, str], int]  # (old entry of the side, or the group's first part's, row key) -> new row
    partial: list[int]  # rows that are sums of the parts (only the Mean is known)


def _shape(shapes: list[str], how: str, axis: int) -> str:
    """The shape of the parts combined: concatenated along `axis` (0: parameters, -1: activations) where the other
    dimensions agree, else flat."""
    if how != CONCAT:
        return shapes[0]
    dims = [[int(x) for x in s[1:-1].split(",") if x.strip()] for s in shapes]
    first = dims[0]
    if first and all(len(d) == len(first) for d in dims):
        ax = axis % len(first)
        if all(d[:ax] + d[ax + 1:] == first[:ax] + first[ax + 1:] for d in dims):
            return str([*first[:ax], sum(d[ax] for d in dims), *first[ax + 1:]])
    return str([sum(int(np.prod(d)) if d else 1 for d in dims)])


class _Groups:
    """One side's merged groups: per entry of a part, the group; per group, where its entries go."""

    def __init__(self, side: Side, groups: list[tuple[int, ...]]) -> None:
        self.side = side
        self.groups = groups
        self.part_of: dict[int, tuple[int, str]] = {}  # old entry -> (group, direction)
        self.at: dict[int, tuple[int, str]] = {}  # old entry where a group's entry is written
        for g, calls in enumerate(groups):
            parts = [side.calls[c] for c in calls]
            for direction, entries in (("forward", [c.entry for c in parts]), ("backward", [c.backward for c in parts]),
                                       ("grads", [c.grads for c in parts])):  # fmt: skip
                if any(e < 0 for e in entries):
                    continue
                for e in entries:
                    self.part_of[e] = (g, direction)
                self.at[max(entries)] = (g, direction)


def _shared(t: RowTable, rows: list[int]) -> bool:
    first = rows[0]
    return all(t.shape[r] == t.shape[first] and np.array_equal(t.stats[r], t.stats[first]) and
               np.array_equal(t.stat_kind[r], t.stat_kind[first]) for r in rows[1:])  # fmt: skip


def build_side(side: Side, groups: list[tuple[int, ...]]) -> Built:
    """The side's table with each group's parts as one entry a direction."""
    t = side.table
    g = _Groups(side, groups)
    out = _Out()
    entries: list[str] = []
    rows: dict[tuple[int, str], int] = {}
    partial: list[int] = []
    bounds = t.entry_bounds
    for e, name in enumerate(t.entries):
        if e in g.part_of and e not in g.at:
            continue
        if e not in g.at:
            cut = len(name) + 1
            for r in range(bounds[e], bounds[e + 1]):
                rows[(e, t.names[r][cut:])] = len(out.names)
                out.copy_row(t, r, t.names[r], len(entries))
            entries.append(name)
            continue
        gi, direction = g.at[e]
        calls = [side.calls[c] for c in groups[gi]]
        part_entries = [c.entry if direction == "forward" else c.backward if direction == "backward" else c.grads
                        for c in calls]  # fmt: skip
        fwd_shared = all(_shared(t, [c.slots[k] for c in calls]) for k in calls[0].slots
                         if k.startswith("input") and all(k in c.slots for c in calls))  # fmt: skip
        index = len(entries)
        entries.append(";".join(t.entries[p] for p in part_entries))
        keyed = [{t.names[r][len(t.entries[p]) + 1:]: r for r in range(bounds[p], bounds[p + 1])}
                 for p in part_entries]  # fmt: skip
        for key in keyed[0]:
            parts = [k.get(key, -1) for k in keyed]
            if any(r < 0 for r in parts):  # not every part has it: the first part's row alone, unpaired
                rows[(part_entries[0], key)] = len(out.names)
                out.copy_row(t, parts[0], t.names[parts[0]], index)
                continue
            how = CONCAT
            if direction == "forward" and key.startswith("input") and _shared(t, parts):
                how = SHARED
            elif direction == "backward" and key.startswith("output") and fwd_shared:
                how = SUM
            rows[(part_entries[0], key)] = row = len(out.names)
            out.copy_row(t, parts[0], ";".join(t.names[r] for r in parts), index,
                         shape=_shape([t.shape[r] for r in parts], how, 0 if direction == "grads" or
                                      key.startswith("parameters.") else -1))  # fmt: skip
            out.data_name[row] = "-1"  # no one file holds the combination
            if how == CONCAT:
                shapes = [tuple(int(x) for x in t.shape[r][1:-1].split(",") if x.strip()) if t.shape[r] and
                          t.shape[r][0] == "[" else None for r in parts]  # fmt: skip
                vals, kinds = combine_split([t] * len(parts), parts, shapes)
            elif how == SUM:
                vals, kinds = combine_partial([t] * len(parts), parts)
                partial.append(row)
            else:
                continue
            out.stats[row], out.kinds[row] = vals, kinds
            out.md5[row] = None
    table = out.table(entries, t.stacks, t.has_md5)
    return Built(table, rows, partial)


@dataclass
class AlignedTables:
    npu: Built
    bench: Built
    match: np.ndarray  # per new NPU row: the new bench row or UNMATCHED
    rows_paired: int


def _first(side: Side, calls: tuple[int, ...], direction: str) -> int:
    c = side.calls[calls[0]]
    return c.entry if direction == "forward" else c.backward if direction == "backward" else c.grads


def aligned_tables(al: Alignment, inner: list[tuple[int, int]] | None = None) -> AlignedTables:
    """Both sides' tables and the match of their rows: every slot pair of every boundary pair, forward and
    backward, the parameters and their gradients, and the API calls paired inside (`inner`: npu entry, bench
    entry)."""
    npu = build_side(al.npu, [p.npu for p in al.pairs if len(p.npu) > 1])
    bench = build_side(al.bench, [p.bench for p in al.pairs if len(p.bench) > 1])
    match = np.full(len(npu.table), UNMATCHED, dtype=np.int64)

    def put(e_n: int, k_n: str, e_b: int, k_b: str) -> None:
        a, b = npu.rows.get((e_n, k_n)), bench.rows.get((e_b, k_b))
        if a is not None and b is not None and match[a] == UNMATCHED:
            match[a] = b

    for p in al.pairs:
        _pair_rows(al, p, put)
    by_entry: dict[int, list[str]] = {}
    for e, k in npu.rows:
        by_entry.setdefault(e, []).append(k)
    for e_n, e_b in inner or []:
        for k in by_entry.get(e_n, []):
            b = bench.rows.get((e_b, k))
            if b is not None and al.npu.numel[_old(al.npu, e_n, k)] == al.bench.numel[_old(al.bench, e_b, k)]:
                put(e_n, k, e_b, k)
    return AlignedTables(npu, bench, match, int(np.count_nonzero(match != UNMATCHED)))


def _old(side: Side, e: int, key: str) -> int:
    """The row of an entry's slot in the side's own table."""
    t = side.table
    name = f"{t.entries[e]}.{key}"
    for r in range(t.entry_bounds[e], t.entry_bounds[e + 1]):
        if t.names[r] == name:
            return r
    return -1


def _pair_rows(al: Alignment, p: BoundaryPair, put: object) -> None:
    f_n, f_b = _first(al.npu, p.npu, "forward"), _first(al.bench, p.bench, "forward")
    for sp in p.slots:
        put(f_n, sp.npu, f_b, sp.bench)  # type: ignore[operator]
    params_n = sorted(k for k in al.npu.calls[p.npu[0]].slots if k.startswith("parameters."))
    params_b = sorted(k for k in al.bench.calls[p.bench[0]].slots if k.startswith("parameters."))
    if p.how == "parameters":
        pairs = [(k, k) for k in params_n if k in params_b] or (
            [(params_n[0], params_b[0])] if len(params_n) == 1 and len(params_b) == 1 else [])
        b_n, b_b = _first(al.npu, p.npu, "grads"), _first(al.bench, p.bench, "grads")
        for k_n, k_b in pairs:
            put(f_n, k_n, f_b, k_b)  # type: ignore[operator]
            if b_n >= 0 and b_b >= 0:
                put(b_n, k_n.split(".", 1)[1], b_b, k_b.split(".", 1)[1])  # type: ignore[operator]
    w_n, w_b = _first(al.npu, p.npu, "backward"), _first(al.bench, p.bench, "backward")
    if w_n >= 0 and w_b >= 0:
        for sp in p.grads:
            put(w_n, sp.npu, w_b, sp.bench)  # type: ignore[operator]


def plan(npu: RowTable, bench: RowTable, npu_tree: dict[str, str | None] | None,
         bench_tree: dict[str, str | None] | None, user: Any = None, user_path: Any = None,
         backend: str | None = None) -> tuple[Alignment, AlignedTables]:  # fmt: skip
    """Align the two sides (the user's pairs first, when given; then, with `backend`, 26.x's consistent-check
    pairs for the calls the user's leave) and build the tables to compare."""
    n, b = module_calls(npu, npu_tree), module_calls(bench, bench_tree)
    if backend is not None:
        from msprobe_compare.pair.consistent import consistent_pairs

        extra = consistent_pairs(n, b, backend)["pairs"]
        given = user["pairs"] if isinstance(user, dict) and isinstance(user.get("pairs"), list) else []
        taken = {name for p in given if isinstance(p, dict) for side in ("npu", "bench")
                 for name in str(p.get(side, "")).split(";")}  # fmt: skip
        extra = [p for p in extra if not any(x in taken for x in (*p["npu"].split(";"), *p["bench"].split(";")))]
        user = {"pairs": [*given, *extra]}
    al = align(n, b, user=user, user_path=user_path)
    return al, aligned_tables(al, inner_calls(al, npu_tree, bench_tree))
