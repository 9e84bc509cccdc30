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

import functools
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.names import Direction
from msprobe_compare.load.rows import NO_DATA_FILE, RawCells, RowTable
from msprobe_compare.pair.align import Alignment, Side, align, inner_calls, module_calls, scan, shape_numel, spread
from msprobe_compare.pair.exact import UNMATCHED
from msprobe_compare.records import dataclass
from msprobe_compare.runtime import Later

_C: Any = native.built("_sharednames")

CONCAT, SHARED, SUM = "concat", "shared", "sum"
FORK_ENTRIES = 100_000  # from this many bench entries on, their module calls are scanned in a forked child
FORWARD, BACKWARD, GRADS = Direction.FORWARD, Direction.BACKWARD, Direction.PARAMETERS_GRAD  # a module call's entries


class Built:
    """One side's table to compare: its own rows, with each merged group's parts as one entry a direction."""

    def __init__(self, table: RowTable, old: RowTable, new_of_old: np.ndarray, merged: dict[tuple[int, str], int],
                 partial: list[int]) -> None:  # fmt: skip
        self.table = table
        self.old = old  # the side's own table
        self.new_of_old = new_of_old  # per row of `old`: its row here (-1: a part's, combined into its group's)
        self.merged = merged  # (a group's first part's entry, row key) -> its row here
        self.partial = partial  # rows that are sums of the parts (only the Mean is known)
        self._keyed: dict[int, dict[str, int]] = {}

    def keys(self, e: int) -> dict[str, int]:
        """Entry `e` of the side's own table: its rows by key ("input.0"), read once an entry."""
        got = self._keyed.get(e)
        if got is None:
            t = self.old
            got = self._keyed[e] = _row_keys(t.names, t.entry_bounds, t.entries, e)
        return got

    def rows(self, want_e: np.ndarray, want_k: list[str]) -> np.ndarray:
        """The row here of each (entry of the side's own table, row key), -1 for none (a merged group's: by its first
        part's entry): the rows of the side's own table looked up, then moved here at once."""
        t = self.old
        old = keyed_rows(t.names, t.entry_bounds, t.entries, want_e, want_k)
        got = np.where(old >= 0, self.new_of_old[np.maximum(old, 0)], -1) if len(old) else old
        if self.merged:
            merged = self.merged
            for i, ek in enumerate(zip(want_e.tolist(), want_k)):
                m = merged.get(ek)
                if m is not None:
                    got[i] = m
        return got


def _row_keys(names: list[str], bounds: np.ndarray, entries: list[str], e: int) -> dict[str, int]:
    """Entry `e`'s rows by key (a row's name less the entry's name and a dot; a key given twice: its first row)."""
    cut = len(entries[e]) + 1
    got: dict[str, int] = {}
    for r in range(int(bounds[e]), int(bounds[e + 1])):
        got.setdefault(names[r][cut:], r)
    return got


def _py_keyed_rows(names: list[str], bounds: np.ndarray, entries: list[str], want: np.ndarray,
                   keys: list[str]) -> np.ndarray:  # fmt: skip
    """Per (entry want[i], key keys[i]): the first row of the entry whose key is keys[i] (`_row_keys`), -1 for
    none."""
    keyed: dict[int, dict[str, int]] = {}
    out = np.full(len(keys), -1, dtype=np.int64)
    for i, (e, k) in enumerate(zip(want.tolist(), keys)):
        got = keyed.get(e)
        if got is None:
            got = keyed[e] = _row_keys(names, bounds, entries, e)
        out[i] = got.get(k, -1)
    return out


def _c_keyed_rows(names: list[str], bounds: np.ndarray, entries: list[str], want: np.ndarray,
                  keys: list[str]) -> np.ndarray:  # fmt: skip
    """_py_keyed_rows in C (`_sharednames.keyed_rows`: each entry's few rows scanned; lists)."""
    if type(names) is not list or type(entries) is not list or type(keys) is not list:
        return _py_keyed_rows(names, bounds, entries, want, keys)
    got = _C.keyed_rows(names, np.ascontiguousarray(bounds, dtype=np.int64), entries,
                        np.ascontiguousarray(want, dtype=np.int64), keys)  # fmt: skip
    return np.frombuffer(got, dtype=np.int64).copy()


keyed_rows = native.twin("_sharednames", _c_keyed_rows, _py_keyed_rows)


def _py_rows_alike(tn: RowTable, tb: RowTable, e_n: np.ndarray, e_b: np.ndarray) -> np.ndarray:
    """Per entry pair (e_n[i] of `tn`, e_b[i] of `tb`): 2 when their rows hold the same keys (names less the entry's
    name and a dot) and shapes in the same order, 1 the same keys in the same order, else 0 (int8)."""
    bn, bb = tn.entry_bounds.tolist(), tb.entry_bounds.tolist()
    names_n, names_b, shape_n, shape_b = tn.names, tb.names, tn.shape, tb.shape
    out = np.zeros(len(e_n), dtype=np.int8)
    for i, (a, b) in enumerate(zip(e_n.tolist(), e_b.tolist())):
        lo_n, hi_n, lo_b, hi_b = bn[a], bn[a + 1], bb[b], bb[b + 1]
        if hi_n - lo_n != hi_b - lo_b:
            continue
        cut_n, cut_b = len(tn.entries[a]) + 1, len(tb.entries[b]) + 1
        if [x[cut_n:] for x in names_n[lo_n:hi_n]] == [x[cut_b:] for x in names_b[lo_b:hi_b]]:
            out[i] = 2 if shape_n[lo_n:hi_n] == shape_b[lo_b:hi_b] else 1
    return out


def _c_rows_alike(tn: RowTable, tb: RowTable, e_n: np.ndarray, e_b: np.ndarray) -> np.ndarray:
    """_py_rows_alike in C (`_sharednames.rows_alike`; lists)."""
    if not all(type(x) is list for x in (tn.names, tn.entries, tn.shape, tb.names, tb.entries, tb.shape)):
        return _py_rows_alike(tn, tb, e_n, e_b)
    i64 = np.int64
    got = _C.rows_alike(tn.names, np.ascontiguousarray(tn.entry_bounds, dtype=i64), tn.entries, tn.shape, tb.names,
                        np.ascontiguousarray(tb.entry_bounds, dtype=i64), tb.entries, tb.shape,
                        np.ascontiguousarray(e_n, dtype=i64), np.ascontiguousarray(e_b, dtype=i64))  # fmt: skip
    return np.frombuffer(got, dtype=np.int8).copy()


rows_alike = native.twin("_sharednames", _c_rows_alike, _py_rows_alike)


def _shape(shapes: list[str], how: str, axis: int) -> str:
    """The shape of the parts combined: concatenated along `axis` (0: parameters, -1: activations) where the other
    dimensions agree, else flat."""
    if how != CONCAT:
        return shapes[0]
    dims = [[int(x) for x in s[1:-1].split(",") if x.strip()] for s in shapes]
    first = dims[0]
    if first and all(len(d) == len(first) for d in dims):
        ax = axis % len(first)
        if all(d[:ax] + d[ax + 1 :] == first[:ax] + first[ax + 1 :] for d in dims):
            return str([*first[:ax], sum(d[ax] for d in dims), *first[ax + 1 :]])
    return str([sum(int(np.prod(d)) if d else 1 for d in dims)])


class _Groups:
    """One side's merged groups: per entry of a part, the group; per group, where its entries go."""

    def __init__(self, side: Side, groups: list[tuple[int, ...]]) -> None:
        self.side = side
        self.groups = groups
        self.part_of: dict[int, tuple[int, Direction]] = {}  # old entry -> (group, direction)
        self.at: dict[int, tuple[int, Direction]] = {}  # old entry where a group's entry is written
        for g, calls in enumerate(groups):
            parts = [side.calls[c] for c in calls]
            for direction, entries in ((FORWARD, [c.entry for c in parts]), (BACKWARD, [c.backward for c in parts]),
                                       (GRADS, [c.grads for c in parts])):  # fmt: skip
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
    """The side's table with each group's parts as one entry a direction: the side's rows as they are, in blocks,
    with the groups' combined rows spliced in where each group's last part ends."""
    t = side.table
    if not groups:
        return Built(t, t, np.arange(len(t), dtype=np.int64), {}, [])
    g = _Groups(side, groups)
    from msprobe_compare.pair.parallel import _Out, combine_partial, combine_split  # merged groups only (start-up)

    out = _Out()
    m_entries: list[str] = []
    m_rows: dict[tuple[int, str], int] = {}  # -> row of the combined rows' table
    m_partial: list[int] = []
    bounds = t.entry_bounds
    for e in sorted(g.at):
        gi, direction = g.at[e]
        calls = [side.calls[c] for c in groups[gi]]
        part_entries = [c.entry if direction is FORWARD else c.backward if direction is BACKWARD else c.grads
                        for c in calls]  # fmt: skip
        fwd_shared = all(_shared(t, [c.slots[k] for c in calls]) for k in calls[0].slots
                         if k.startswith("input") and all(k in c.slots for c in calls))  # fmt: skip
        index = len(m_entries)
        m_entries.append(";".join(t.entries[p] for p in part_entries))
        keyed = [{t.names[r][len(t.entries[p]) + 1:]: r for r in range(bounds[p], bounds[p + 1])}
                 for p in part_entries]  # fmt: skip
        for key in keyed[0]:
            parts = [k.get(key, -1) for k in keyed]
            if any(r < 0 for r in parts):  # not every part has it: the first part's row alone, unpaired
                m_rows[(part_entries[0], key)] = len(out.names)
                out.copy_row(t, parts[0], t.names[parts[0]], index)
                continue
            how = CONCAT
            if direction is FORWARD and key.startswith("input") and _shared(t, parts):
                how = SHARED
            elif direction is BACKWARD and key.startswith("output") and fwd_shared:
                how = SUM
            m_rows[(part_entries[0], key)] = row = len(out.names)
            out.copy_row(t, parts[0], ";".join(t.names[r] for r in parts), index,
                         shape=_shape([t.shape[r] for r in parts], how, 0 if direction is GRADS or
                                      key.startswith("parameters.") else -1))  # fmt: skip
            out.data_name[row] = NO_DATA_FILE  # no one file holds the combination
            if how == CONCAT:
                shapes = [tuple(int(x) for x in t.shape[r][1:-1].split(",") if x.strip()) if t.shape[r] and
                          t.shape[r][0] == "[" else None for r in parts]  # fmt: skip
                vals, kinds = combine_split([t] * len(parts), parts, shapes)
            elif how == SUM:
                vals, kinds = combine_partial([t] * len(parts), parts)
                m_partial.append(row)
            else:
                continue
            out.stats[row], out.kinds[row] = vals, kinds
            out.md5[row] = None
    m = out.table(m_entries, {}, t.has_md5)
    return _splice(t, m, sorted(g.part_of), set(g.at), m_rows, m_partial)


def _splice(t: RowTable, m: RowTable, parts: list[int], at: set[int], m_rows: dict[tuple[int, str], int],
            m_partial: list[int]) -> Built:  # fmt: skip
    """`t` without the entries `parts`, the k-th entry of `m` (a group's combined rows) in place of the k-th of
    `at` (in order): list slices and array blocks, no pass over the rows in Python."""
    bounds, m_bounds = t.entry_bounds, m.entry_bounds
    new_of_old = np.full(len(t), -1, dtype=np.int64)
    m_new = np.full(len(m), -1, dtype=np.int64)
    entry_new = np.full(len(t.entries), -1, dtype=np.int64)
    blocks: list[tuple[RowTable, int, int, np.ndarray]] = []  # table, rows [lo, hi), their new entry indices
    entries: list[str] = []
    pos = 0

    def keep(e0: int, e1: int) -> None:
        nonlocal pos
        lo, hi = int(bounds[e0]), int(bounds[e1])
        entry_new[e0:e1] = np.arange(len(entries), len(entries) + e1 - e0)
        entries.extend(t.entries[e0:e1])
        new_of_old[lo:hi] = np.arange(pos, pos + hi - lo)
        blocks.append((t, lo, hi, entry_new[t.entry_index[lo:hi]]))
        pos += hi - lo

    prev, k = 0, 0
    for e in parts:
        keep(prev, e)
        prev = e + 1
        if e in at:
            lo, hi = int(m_bounds[k]), int(m_bounds[k + 1])
            m_new[lo:hi] = np.arange(pos, pos + hi - lo)
            blocks.append((m, lo, hi, np.full(hi - lo, len(entries), dtype=np.int64)))
            entries.append(m.entries[k])
            pos += hi - lo
            k += 1
    keep(prev, len(t.entries))
    raw = RawCells()
    t.raw.moved(new_of_old, raw)
    m.raw.moved(m_new, raw)
    raw.sort()

    def cat_list(col: str) -> list[Any]:
        got: list[Any] = []
        for tb, lo, hi, _ in blocks:
            got.extend(getattr(tb, col)[lo:hi])
        return got

    def cat_array(col: str) -> np.ndarray:
        return np.concatenate([getattr(tb, col)[lo:hi] for tb, lo, hi, _ in blocks])

    table = RowTable(
        entries=entries, names=cat_list("names"), entry_index=np.concatenate([b[3] for b in blocks]).astype(np.int32),
        state=cat_array("state"), dtype=cat_list("dtype"), shape=cat_list("shape"), stats=cat_array("stats"),
        stat_kind=cat_array("stat_kind"), raw=raw, requires_grad=cat_array("requires_grad"), md5=cat_list("md5"),
        data_name=cat_list("data_name"), stacks=t.stacks, has_md5=t.has_md5,
    )  # fmt: skip
    return Built(
        table, t, new_of_old, {key: int(m_new[r]) for key, r in m_rows.items()}, [int(m_new[r]) for r in m_partial]
    )


@dataclass
class AlignedTables:
    npu: Built
    bench: Built
    match: np.ndarray  # per new NPU row: the new bench row or UNMATCHED
    rows_paired: int


def aligned_tables(al: Alignment, inner: np.ndarray | list[tuple[int, int]] | None = None) -> AlignedTables:
    """Both sides' tables and the match of their rows: every slot pair of every boundary pair, forward and
    backward, the parameters and their gradients, and the API calls paired inside (`inner`: npu entry, bench
    entry)."""
    merged = [p for p in al.pairs if len(p.npu) > 1 or len(p.bench) > 1]
    npu = build_side(al.npu, [p.npu for p in merged if len(p.npu) > 1])
    bench = build_side(al.bench, [p.bench for p in merged if len(p.bench) > 1])
    e_n, k_n, e_b, k_b = _slot_rows(al)
    old_n, old_b = _inner_rows(npu, bench, np.asarray(inner if inner is not None else [], dtype=np.int64))
    a = np.concatenate([npu.rows(e_n, k_n), npu.new_of_old[old_n]])
    b = np.concatenate([bench.rows(e_b, k_b), bench.new_of_old[old_b]])
    keep = (a >= 0) & (b >= 0)
    a, b = a[keep], b[keep]
    match = np.full(len(npu.table), UNMATCHED, dtype=np.int64)
    if len(a) and np.bincount(a).max() > 1:  # a row paired twice keeps its first counterpart
        first = np.unique(a, return_index=True)[1]
        a, b = a[first], b[first]
    match[a] = b
    return AlignedTables(npu, bench, match, int(np.count_nonzero(match != UNMATCHED)))


def _inner_rows(npu: Built, bench: Built, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows (of each side's own table) of the API calls paired inside paired modules: rows of the same key
    whose element counts agree. Calls whose rows have the same keys in the same order pair row by row."""
    tn, tb = npu.old, bench.old
    pairs = inner.reshape(-1, 2)
    e_n, e_b = pairs[:, 0], pairs[:, 1]
    alike = rows_alike(tn, tb, e_n, e_b)
    spans = np.flatnonzero(alike == 2)
    shape_n, shape_b = tn.shape, tb.shape
    old_n: list[int] = []
    old_b: list[int] = []
    for i in np.flatnonzero(alike != 2).tolist():
        a, b = int(e_n[i]), int(e_b[i])
        got: Iterable[tuple[int, int]]
        if alike[i] == 1:
            got = zip(range(int(tn.entry_bounds[a]), int(tn.entry_bounds[a + 1])),
                      range(int(tb.entry_bounds[b]), int(tb.entry_bounds[b + 1])))  # fmt: skip
        else:
            got = _by_key(npu, bench, a, b)
        for i_, j in got:
            if shape_n[i_] == shape_b[j] or shape_numel(shape_n[i_]) == shape_numel(shape_b[j]):
                old_n.append(i_)
                old_b.append(j)
    lo = tn.entry_bounds[e_n[spans]].astype(np.int64)
    return _with_spans(old_n, old_b, lo, tn.entry_bounds[e_n[spans] + 1].astype(np.int64),
                       tb.entry_bounds[e_b[spans]].astype(np.int64))  # fmt: skip


def _by_key(npu: Built, bench: Built, e_n: int, e_b: int) -> Iterator[tuple[int, int]]:
    keys_b = bench.keys(e_b)
    return ((i, keys_b[k]) for k, i in npu.keys(e_n).items() if k in keys_b)


def _with_spans(old_n: list[int], old_b: list[int], lo: np.ndarray, hi: np.ndarray,
                lo_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The row pairs, then every row of each span (npu rows [lo, hi) with bench rows from lo_b on), vectorised."""
    size = hi - lo
    return (
        np.concatenate([np.array(old_n, dtype=np.int64), spread(lo, size)]),
        np.concatenate([np.array(old_b, dtype=np.int64), spread(lo_b, size)]),
    )


def _slot_rows(al: Alignment) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """The (entry of each side's own table, row key) pairs that the boundary pairs' slot pairs join, in pair order:
    forward slots, parameters and their gradients, backward slots. Pairs alike (the later calls of a module share
    their first pair's slot lists; parameters by slot layout) share one template of (which entry, keys), made
    once; the entries and keys are then laid out for all pairs at once."""
    calls_n, calls_b = al.npu.calls, al.bench.calls
    index: dict[tuple[Any, ...], int] = {}
    kinds: list[list[int]] = []  # per template, per key: 0 the forward entry, 1 the parameters_grad one, 2 backward
    keys_n: list[list[str]] = []
    keys_b: list[list[str]] = []
    tids: list[int] = []
    ents: list[int] = []  # per pair: npu forward, grads, backward entries, then the bench side's
    for p in al.pairs:
        c_n, c_b = calls_n[p.npu[0]], calls_b[p.bench[0]]
        params = p.how == "parameters" or p.first == "parameters"  # a later call reads the same parameters
        grads = params and c_n.grads >= 0 and c_b.grads >= 0
        back = c_n.backward >= 0 and c_b.backward >= 0 and bool(p.grads)
        key = (id(p.slots), id(p.grads) if back else 0, (c_n.layout, c_b.layout) if params else None, grads)
        t = index.get(key)
        if t is None:
            t = index[key] = len(kinds)
            kind = [0] * len(p.slots)
            kn, kb = [sp.npu for sp in p.slots], [sp.bench for sp in p.slots]
            if params:
                params_n = sorted(k for k in c_n.slots if k.startswith("parameters."))
                params_b = sorted(k for k in c_b.slots if k.startswith("parameters."))
                pairs = [(k, k) for k in params_n if k in params_b] or (
                    [(params_n[0], params_b[0])] if len(params_n) == 1 and len(params_b) == 1 else []
                )
                for k_n, k_b in pairs:
                    kind.append(0)
                    kn.append(k_n)
                    kb.append(k_b)
                    if grads:
                        kind.append(1)
                        kn.append(k_n.split(".", 1)[1])
                        kb.append(k_b.split(".", 1)[1])
            if back:
                kind += [2] * len(p.grads)
                kn += [sp.npu for sp in p.grads]
                kb += [sp.bench for sp in p.grads]
            kinds.append(kind)
            keys_n.append(kn)
            keys_b.append(kb)
        tids.append(t)
        ents += (c_n.entry, c_n.grads, c_n.backward, c_b.entry, c_b.grads, c_b.backward)
    if not tids:
        empty = np.zeros(0, dtype=np.int64)
        return empty, [], empty, []
    sizes = np.array([len(k) for k in kinds], dtype=np.int64)
    at = np.cumsum(sizes) - sizes  # each template's first key in the flat lists
    tid = np.array(tids, dtype=np.int64)
    count = sizes[tid]
    pair = np.repeat(np.arange(len(tid)), count)
    flat = spread(at[tid], count)  # each pair's keys in its template's run of the flat lists
    which = np.array(list(itertools.chain.from_iterable(kinds)), dtype=np.int64)[flat]
    e = np.array(ents, dtype=np.int64).reshape(-1, 2, 3)
    flat_n = np.array(list(itertools.chain.from_iterable(keys_n)), dtype=object)
    flat_b = np.array(list(itertools.chain.from_iterable(keys_b)), dtype=object)
    return e[pair, 0, which], flat_n[flat].tolist(), e[pair, 1, which], flat_b[flat].tolist()


def plan(npu: RowTable, bench: RowTable, npu_tree: dict[str, str | None] | None,
         bench_tree: dict[str, str | None] | None, user: Any = None, user_path: Any = None,
         backend: str | None = None) -> tuple[Alignment, AlignedTables]:  # fmt: skip
    """Align the two sides (the user's pairs first, when given; then, with `backend`, 26.x's consistent-check
    pairs for the calls the user's leave) and build the tables to compare. Large sides: the bench side's module
    calls are scanned in a forked child (runtime.Later) while this process scans the NPU side's."""
    bench_scan = Later.start(functools.partial(scan, bench, bench_tree), what="the bench side's module calls",
                             fork=len(bench.entries) >= FORK_ENTRIES)  # fmt: skip
    n = module_calls(npu, npu_tree)
    b = module_calls(bench, bench_tree, bench_scan.get())
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
