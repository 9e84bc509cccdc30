"""The analysis's pairing of calls (issue #13, #29): rows paired by (enclosing module, call, k-th call inside the
module) where the result table's pairing by name would join unrelated calls (an extra call on one side renumbers the
later ones; a fused kernel on one side against its parts on the other). The result table keeps its own pairing; the
root cause (judge/rootcause.py) reads this one. The module trees (construct.json) are compared here too
(`tree_diff`, `tree_beside`).
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Callable, Iterable, Set as AbstractSet
from typing import Any

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.dumpjson import construct_beside
from msprobe_compare.load.rows import RowTable, State, StatKind, is_scalar_dtype
from msprobe_compare.pair.exact import dtype_category
from msprobe_compare.pair.param_grad import grad_entries
from msprobe_compare.records import dataclass


_C: Any = native.built("_sharednames")


# a floating dtype named as a value (the argument of a cast: MindSpore `Float16`, PyTorch `torch.bfloat16`)
_FLOAT_DTYPE_NAME = re.compile(r"(?:torch\.|mindspore\.)?(?:b?float(?:16|32|64)?|half|double|bf16|fp(?:16|32))", re.I)


def is_float_dtype_name(text: str) -> bool:
    """A text that names a floating dtype: a cast to it is part of the precision the two runs differ in."""
    return _FLOAT_DTYPE_NAME.fullmatch(text.strip().strip("'\"")) is not None


def call_key(name: str) -> str:
    """The call without its counter: `Functional.linear.3.forward` -> `Functional.linear..forward`,
    `Module.a.Linear.forward.0` -> `Module.a.Linear.forward.`."""
    head, _, last = name.rpartition(".")
    if last in ("forward", "backward"):
        stem, _, count = head.rpartition(".")
        if count.isdigit():
            return f"{stem}..{last}"
    elif last.isdigit() and head.endswith((".forward", ".backward")):
        return head + "."
    return name


_API_COUNTER = re.compile(r"\.\d+\.(?=forward$|backward$)", re.M)  # constant replacements: no per-match Python
_MODULE_COUNTER = re.compile(r"(?:(?<=\.forward\.)|(?<=\.backward\.))\d+$", re.M)


def _py_call_keys(names: list[str]) -> list[str]:
    """`call_key` of many names at once (two regex passes over the joined text instead of a call per name)."""
    text = "\n".join(names)
    if not names or text.count("\n") != len(names) - 1:
        return [call_key(n) for n in names]
    return _MODULE_COUNTER.sub("", _API_COUNTER.sub("..", text)).split("\n")


def _c_call_keys(names: list[str]) -> list[str]:
    """_py_call_keys' two substitutions name by name, in C (`_sharednames.call_keys`; a list without line breaks)."""
    keys = _C.call_keys(names) if type(names) is list else None
    return _py_call_keys(names) if keys is None else keys


call_keys = native.twin("_sharednames", _c_call_keys, _py_call_keys)


class _Groups:
    """Calls of one side grouped by (enclosing module, call without counter), in execution order."""

    def __init__(self, entries: list[str], parents: dict[str, str | None]) -> None:
        self.entries = entries
        self.names = list(zip(map(parents.get, entries), call_keys(entries)))
        ids = {g: i for i, g in enumerate(dict.fromkeys(self.names))}
        self.gid = np.fromiter(map(ids.__getitem__, self.names), dtype=np.int64, count=len(entries))
        self.ids = ids
        order = np.argsort(self.gid, kind="stable")  # calls of a group together, in execution order
        self.count = np.bincount(self.gid, minlength=len(ids)) if len(entries) else np.zeros(0, dtype=np.int64)
        self.start = np.r_[0, np.cumsum(self.count)[:-1]] if len(ids) else np.zeros(0, dtype=np.int64)
        self.rank = np.empty(len(entries), dtype=np.int64)
        self.rank[order] = np.arange(len(entries)) - self.start[self.gid[order]]
        self.order = order


def _py_children(tree: dict[str, str | None], modules: AbstractSet[str | None]) -> list[tuple[str, str | None]]:
    """The (name, parent) items of a construct.json tree whose parent is one of `modules`, in the tree's order."""
    return list(itertools.compress(tree.items(), map(modules.__contains__, tree.values())))


def _c_children(tree: dict[str, str | None], modules: AbstractSet[str | None]) -> list[tuple[str, str | None]]:
    """_py_children in one pass over the dict in C (`_sharednames.children`; a dict and a set)."""
    if type(tree) is dict and isinstance(modules, (set, frozenset)):
        return _C.children(tree, modules)
    return _py_children(tree, modules)


children = native.twin("_sharednames", _c_children, _py_children)


class _PyNameIndex:
    """`_sharednames.NameIndex`'s Python twin: each name's first position in a dict."""

    def __init__(self, names: list[str]) -> None:
        self._pos: dict[str, int] = {}
        for i, name in enumerate(names):
            self._pos.setdefault(name, i)
        self.repeated = len(names) - len(self._pos)

    def find(self, keys: list[str], out: np.ndarray) -> None:
        out[:] = np.fromiter(map(self._pos.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys))

    def get(self, name: str) -> int:
        return self._pos.get(name, -1)


def _py_name_index(names: list[str]) -> Any:
    """An index of the names: `find(keys, out)` (each key's first position, -1: absent), `get`, `repeated`."""
    return _PyNameIndex(names)


def _c_name_index(names: list[str]) -> Any:
    """_py_name_index as a hash table in C (`_sharednames.NameIndex`; a list of texts with a UTF-8 form)."""
    if type(names) is list:
        try:
            return _C.NameIndex(names)
        except UnicodeEncodeError:  # a name without a UTF-8 form: the dict
            pass
    return _py_name_index(names)


name_index = native.twin("_sharednames", _c_name_index, _py_name_index)


class Names:
    """The positions of one side's entry names, for the analysis's many lookups: a table over the names built once
    (`name_index`). `find(keys)`: each key's first position (-1: absent), `get`, `in`; `repeated`: how many names
    repeat an earlier one (none in a dump: they are the keys of its data)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self._index = name_index(names)
        self.repeated = int(self._index.repeated)

    def find(self, keys: list[str]) -> np.ndarray:
        out = np.empty(len(keys), dtype=np.int64)
        self._index.find(keys if type(keys) is list else list(keys), out)
        return out

    def get(self, name: str) -> int:
        return int(self._index.get(name))

    def find_at(self, texts: list[str], positions: np.ndarray, cut: int = 0, tail: str = "") -> np.ndarray:
        """`find` of texts[p][:len - cut] + tail for each p of `positions` (`X.3.forward` -> `X.3.backward`: cut 7,
        tail "backward"); in C (`NameIndex.find_at`) no key text is made."""
        at = np.ascontiguousarray(positions, dtype=np.int64)
        out = np.empty(len(at), dtype=np.int64)
        c_find_at = getattr(self._index, "find_at", None)  # the C index's only
        if c_find_at is None or type(texts) is not list or c_find_at(texts, at, cut, tail, out) is None:
            out = self.find([t[: max(len(t) - cut, 0)] + tail for t in map(texts.__getitem__, at.tolist())])
        return out

    def __contains__(self, name: object) -> bool:
        return self.get(name) >= 0  # type: ignore[arg-type]

    def places(self, chosen: set[str]) -> list[int]:
        """Every position whose name is one of `chosen`, in order (each place of a repeated name too)."""
        return np.flatnonzero(np.fromiter(map(chosen.__contains__, self.names), dtype=bool,
                                          count=len(self.names))).tolist()  # fmt: skip


def entry_names(table: RowTable) -> Names:
    """`Names` of a table's entries, made once per table and kept with it (the aligner asks for them in more than one
    stage)."""
    got = vars(table).get("_entry_names")
    if got is None or got.names is not table.entries:
        got = vars(table)["_entry_names"] = Names(table.entries)
    return got


def named_rows_bound(npu: RowTable, bench: RowTable) -> int:
    """At least as many rows as `match_exact` pairs by their names (no -cm/-am keys), at a fraction of its cost: the
    rows of the NPU entries the bench dump holds too (a row's name is its entry's and its key), and every row of a
    parameter-gradient entry (the one name param_grad_keys rewrites)."""
    held = entry_names(bench).find(npu.entries) >= 0
    held[grad_entries(npu.entries)] = True
    return int(np.diff(npu.entry_bounds)[held].sum())


class _ThroughOther(Names):
    """One side's `Names` read through the other side's (`other`, whose names occur once each): a name the other
    side has is at `back[its position there]`; the few names of this side only are in a dict (first positions).
    No second table over all the names is built."""

    def __init__(self, names: list[str], other: Names, back: np.ndarray, only: np.ndarray) -> None:
        self.names, self._other, self._back = names, other, back
        self._index = None
        self._pos: dict[str, int] = {}
        for i in only.tolist():
            self._pos.setdefault(names[i], i)
        self.repeated = len(only) - len(self._pos)  # names of both sides occur once here too (_Sides checks)

    def find(self, keys: list[str]) -> np.ndarray:
        keys = keys if type(keys) is list else list(keys)
        at = self._other.find(keys)
        out = np.where(at >= 0, self._back[np.maximum(at, 0)], -1) if len(self._back) else np.full(len(keys), -1)
        miss = np.flatnonzero(at < 0)
        if len(miss) and self._pos:
            get = self._pos.get
            out[miss] = np.fromiter((get(keys[k], -1) for k in miss.tolist()), dtype=np.int64, count=len(miss))
        return out

    def get(self, name: str) -> int:
        at = self._other.get(name)
        return int(self._back[at]) if at >= 0 else self._pos.get(name, -1)


class _Sides:
    """Both sides' entry names for the analysis pairing: each side's `Names` (the NPU side's made when first asked
    for) and each entry's position on the other side (-1: a call of that side only)."""

    def __init__(self, npu: RowTable, bench: RowTable) -> None:
        self._npu_entries = npu.entries
        self.bench = Names(bench.entries)
        self.bench_of_npu = self.bench.find(npu.entries)
        hit = np.flatnonzero(self.bench_of_npu >= 0)
        found = self.bench_of_npu[hit]
        self._unique = not self.bench.repeated and not (np.bincount(found, minlength=1) > 1).any()
        if self._unique:
            # names once on each side that both have: the one lookup read backwards
            self.npu_of_bench = np.full(len(bench.entries), -1, dtype=np.int64)
            self.npu_of_bench[found] = hit
        else:
            self.npu_of_bench = self.npu.find(bench.entries)

    @functools.cached_property
    def npu(self) -> Names:
        if self._unique:  # through the bench side's table and npu_of_bench
            return _ThroughOther(self._npu_entries, self.bench, self.npu_of_bench,
                                 np.flatnonzero(self.bench_of_npu < 0))  # fmt: skip
        return Names(self._npu_entries)

    def only_npu(self) -> set[str]:
        return {self._npu_entries[i] for i in np.flatnonzero(self.bench_of_npu < 0).tolist()}

    def only_bench(self) -> set[str]:
        return {self.bench.names[i] for i in np.flatnonzero(self.npu_of_bench < 0).tolist()}

    def same(self) -> bool:
        """Both sides hold the same names (as sets)."""
        return bool((self.bench_of_npu >= 0).all() and (self.npu_of_bench >= 0).all())


class TreeDiff:
    """How the two construct.json trees differ: whether they are equal, and the names both hold whose enclosing
    modules differ (in the NPU tree's order). Made once per compare, where the trees are read (`tree_diff`).
    `moved` may be given as a function, called on first read: runs of different code (whose every name moved) are
    aligned instead, and never read it."""

    __slots__ = ("equal", "_moved", "_make")

    def __init__(self, equal: bool, moved: tuple[str, ...] | Callable[[], tuple[str, ...]]) -> None:
        self.equal = equal
        self._moved: tuple[str, ...] | None = None if callable(moved) else moved
        self._make: Callable[[], tuple[str, ...]] | None = moved if callable(moved) else None

    @property
    def moved(self) -> tuple[str, ...]:
        if self._moved is None:
            assert self._make is not None
            self._moved, self._make = self._make(), None
        return self._moved

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TreeDiff) and (self.equal, self.moved) == (other.equal, other.moved)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TreeDiff(equal={self.equal}, moved={self.moved!r})"


def tree_diff(npu_parents: dict[str, str | None], bench_parents: dict[str, str | None]) -> TreeDiff:
    """The two trees compared item by item (in C: one pass of hash lookups over the NPU tree's names)."""
    if npu_parents is bench_parents:
        return TreeDiff(True, ())
    moved = itertools.compress(npu_parents, map(operator.ne, npu_parents.values(), map(bench_parents.get, npu_parents)))
    return TreeDiff(npu_parents == bench_parents, tuple(k for k in moved if k in bench_parents))


def tree_beside(raw: bytes, base: dict[str, str | None]) -> tuple[dict[str, str | None], TreeDiff] | None:
    """A construct.json's bytes read beside `base`, the other side's tree (`load.dumpjson.construct_beside`: in C,
    one pass, the parents both hold shared), and the two trees' `tree_diff`. None without C or for a file outside
    the plain subset the C reader takes, which dumpjson.read_construct_json then reads or reports."""
    got = construct_beside(raw, base)
    if got is None:
        return None
    tree, maybe, fresh = got

    def moved() -> tuple[str, ...]:  # made when read, in base's order (runs of different code: every name, unread)
        names = {k for k in maybe if tree[k] != base[k]}
        return tuple(k for k in base if k in names) if names else ()

    equal = not fresh and len(tree) == len(base) and not any(tree[k] != base[k] for k in maybe)
    return tree, TreeDiff(equal, moved)


@dataclass(frozen=True)
class CallPairing:
    """The analysis's pairing: the bench row of each NPU row (-1: none), how many calls it pairs otherwise than the
    result table, and per NPU call whether it is one-sided (None: none is)."""

    match: np.ndarray
    repaired: int
    one_sided: np.ndarray | None


def analysis_pairing(npu: RowTable, bench: RowTable, match: np.ndarray, npu_parents: dict[str, str | None] | None,
                     bench_parents: dict[str, str | None] | None, trees: TreeDiff | None = None,
                     raw_values: RawArgs | None = None) -> CallPairing:  # fmt: skip
    """Rows paired by (enclosing module, call, k-th call inside the module) and the row's place in its call.

    Only APIs whose counters were renumbered (an extra call on one side shifts the later ones) or whose calls sit
    under another module pair otherwise than by name; their calls are re-paired. Where a (module, API) group's
    call count differs (a fused kernel on one side, its parts on the other) its calls are aligned by input shapes
    and arguments, and the rest stay unpaired; where the counts agree but the counters pair calls of differing
    signatures (an extra and a missing call inside one module), by signature (`_align_by_signature`). Returns the
    bench row per NPU row (-1: none), the number of calls paired differently from the table, and per NPU call
    whether it is one-sided (None: none is): a call of a re-paired API inside a module call both sides have whose
    (module, API) group the bench lacks, left unpaired. `trees`: the two trees' `tree_diff`, when the caller made
    it already (while the bench side was being read); `raw_values`: the sides' argument values, when the caller
    reads them too.
    """
    if not npu_parents or not bench_parents or not len(npu) or not len(bench):
        return CallPairing(match, 0, None)
    sides = _Sides(npu, bench)
    if sides.same() and (trees.equal if trees is not None else npu_parents == bench_parents):
        out, moved, sided = match, None, None
    else:
        trees = trees if trees is not None else tree_diff(npu_parents, bench_parents)
        out, moved, sided = _repair_renumbered(npu, bench, match, npu_parents, bench_parents, sides, trees.moved)
    out, moved = _align_by_signature(npu, bench, match, out, moved, npu_parents, bench_parents, sides,
                                     raw_values or RawArgs(npu, bench))  # fmt: skip
    return CallPairing(out, int(np.count_nonzero(moved)) if moved is not None else 0, sided)


def analysis_match(npu: RowTable, bench: RowTable, match: np.ndarray, npu_parents: dict[str, str | None] | None,
                   bench_parents: dict[str, str | None] | None,
                   trees: TreeDiff | None = None) -> tuple[np.ndarray, int]:  # fmt: skip
    """`analysis_pairing`'s rows and count of calls paired otherwise than in the table."""
    pairing = analysis_pairing(npu, bench, match, npu_parents, bench_parents, trees)
    return pairing.match, pairing.repaired


def _repair_renumbered(npu: RowTable, bench: RowTable, match: np.ndarray, npu_parents: dict[str, str | None],
                       bench_parents: dict[str, str | None], sides: _Sides,
                       moved: Iterable[str]) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:  # fmt: skip
    """analysis_match for the APIs renumbered between the sides or moved under another module: their calls
    re-paired by (module, API, k-th call). Returns the rows' bench rows and, per NPU call, whether it is paired
    otherwise than in the table (None: no call is) and whether it is one-sided (None: none is)."""
    n_entries = len(npu.entries)
    nset, bset = sides.npu, sides.bench  # membership by name: `in`
    only_n, only_b = sides.only_npu(), sides.only_bench()
    stems = _shifted(only_n, bset) | _shifted(only_b, nset)
    # a call sits under another module where its module call exists on one side only
    odd_modules = {n for n in only_n | only_b if call_key(n).endswith(".")}
    if odd_modules:
        for tree, other in ((npu_parents, bench_parents), (bench_parents, npu_parents)):
            under = children(tree, odd_modules)  # in C, not per item
            stems |= {call_key(k) for k, parent in under if k in nset and k in bset and other.get(k) != parent}
    # an extra call on one side and a missing one on the other of the same API leave the same names on both sides:
    # construct.json then puts a name under another module on each side (`moved`: tree_diff's)
    stems |= {call_key(k) for k in moved if k in nset and k in bset}
    if not stems:
        return match, None, None
    nsub, bsub = _calls_of(nset, stems), _calls_of(bset, stems)
    ng = _Groups([npu.entries[e] for e in nsub], npu_parents)
    bg = _Groups([bench.entries[b] for b in bsub], bench_parents)
    nsub_a, bsub_a = np.asarray(nsub, dtype=np.int64), np.asarray(bsub, dtype=np.int64)
    in_b = np.fromiter(map(bg.ids.get, ng.names, itertools.repeat(-1)), dtype=np.int64, count=len(nsub))
    has = in_b >= 0
    b_count = np.where(has, bg.count[np.maximum(in_b, 0)], -1) if len(bg.count) else np.full(len(nsub), -1)
    even = has & (b_count == ng.count[ng.gid])
    paired = np.full(n_entries, -1, dtype=np.int64)
    paired[nsub_a[even]] = bsub_a[bg.order[bg.start[in_b[even]] + ng.rank[even]]]
    uneven: dict[int, list[int]] = {}
    for k in np.flatnonzero(has & ~even).tolist():
        uneven.setdefault(int(in_b[k]), []).append(int(nsub_a[k]))
    if uneven:
        _align_uneven(npu, bench, bg, bsub_a, uneven, paired)
    # the table's own pairing of the re-paired calls (their first matched row), to see which calls change
    ei = npu.entry_index
    table_pair = _first_pairs(npu, bench, match, nsub_a)
    keep = np.ones(n_entries, dtype=bool)
    names_b = np.array([bench.entries[b] if b >= 0 else None for b in paired[nsub_a].tolist()], dtype=object)
    # a call whose (module, API) group has no counterpart at all keeps the table's pairing by name where its module
    # is renamed on one side; inside a module call both sides have (or at the top), it is one-sided: never paired
    # with a call elsewhere (issue #29), nor with a bench call the re-pairing gives to another NPU call
    one_sided = ~has & np.fromiter((p is None or p in bset for p in map(npu_parents.get, ng.entries)), dtype=bool,
                                   count=len(nsub))  # fmt: skip
    claimed = np.isin(table_pair[nsub_a], paired[nsub_a][paired[nsub_a] >= 0])
    keep[nsub_a] = (~has & ~one_sided & ~claimed) | (has & (names_b == np.array(ng.entries, dtype=object)) &
                                                     (table_pair[nsub_a] == paired[nsub_a]))  # fmt: skip
    out = np.where(keep[ei], match, -1)
    changed = np.flatnonzero(~keep & (paired >= 0)).tolist()
    _pair_rows(npu, bench, out, zip(changed, paired[changed].tolist()))
    sided = np.zeros(n_entries, dtype=bool)
    sided[nsub_a[~has & (one_sided | claimed)]] = True
    return out, ~keep & ((paired >= 0) | (table_pair >= 0)), sided


def _first_pairs(npu: RowTable, bench: RowTable, match: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Per NPU call, the bench call of its first matched row in `match` (-1: none), filled for `calls` only."""
    out = np.full(len(npu.entries), -1, dtype=np.int64)
    ei = npu.entry_index
    if not len(calls):
        return out
    if not _ordered(ei):  # every row looked at
        rows = np.flatnonzero(match >= 0)[::-1]
        out[ei[rows]] = bench.entry_index[match[rows]]  # the first matched row wins
        keep = np.zeros(len(out), dtype=bool)
        keep[calls] = True
        out[~keep] = -1
        return out
    bounds = npu.entry_bounds
    lens = bounds[calls + 1] - bounds[calls]
    seg = np.repeat(np.arange(len(calls)), lens)  # the rows of `calls`, call by call
    rows = np.repeat(bounds[calls] - np.r_[0, np.cumsum(lens)[:-1]], lens) + np.arange(int(lens.sum()))
    hit = match[rows] >= 0
    found, first = np.unique(seg[hit], return_index=True)
    out[calls[found]] = bench.entry_index[match[rows[hit][first]]]
    return out


def _pair_rows(npu: RowTable, bench: RowTable, out: np.ndarray, pairs: Iterable[tuple[int, int]]) -> None:
    """For each (NPU call, bench call) of `pairs`, the call's rows paired in `out` with the bench call's rows of the
    same place (bench call -1: every row unpaired)."""
    ei, bei = npu.entry_index, bench.entry_index
    nstart = npu.entry_bounds if _ordered(ei) else None
    bstart = bench.entry_bounds if _ordered(bei) else None
    for e, b in pairs:
        nrows = range(nstart[e], nstart[e + 1]) if nstart is not None else np.flatnonzero(ei == e).tolist()
        if b < 0:
            out[list(nrows)] = -1
            continue
        brows = range(bstart[b], bstart[b + 1]) if bstart is not None else np.flatnonzero(bei == b).tolist()
        nlen, blen = len(npu.entries[e]), len(bench.entries[b])
        suffix = {bench.names[j][blen:]: j for j in brows}
        for i in nrows:
            out[i] = suffix.get(npu.names[i][nlen:], -1)


SIGNATURE_ROWS = 1 << 17  # rows whose signatures the same-count alignment reads per compare; beyond: counters


def _align_by_signature(npu: RowTable, bench: RowTable, table_match: np.ndarray, out: np.ndarray,
                        moved: np.ndarray | None, npu_parents: dict[str, str | None],
                        bench_parents: dict[str, str | None], sides: _Sides,
                        raw_values: RawArgs) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """Inside one module, the calls of one API with as many calls on both sides but signatures that do not line
    up by counter (an extra call of the API and a missing one inside the same module leave every name and parent
    as it was, and shift the calls between the two): aligned by signature (`_call_signature`) with a sequence
    alignment, so only the extra call stays unpaired. Looked at only where the pairing so far leaves a row of a
    call unpaired or pairs differing argument values; groups whose signatures agree in order, or whose size
    passes ALIGN_LIMIT or the SIGNATURE_ROWS budget, keep their counters."""
    import difflib

    ei, entries = npu.entry_index, npu.entries
    odd = np.zeros(len(entries), dtype=bool)
    unpaired = np.flatnonzero(out < 0)
    if len(unpaired):
        calls = np.flatnonzero(np.bincount(ei[unpaired], minlength=len(entries))).tolist()
        calls_a = np.asarray(calls, dtype=np.int64)
        odd[calls_a[sides.bench_of_npu[calls_a] >= 0]] = True  # calls the bench side has too
    rows = np.flatnonzero(npu.dtype_mask(_is_arg_dtype) & (out >= 0))
    if len(rows):
        odd[ei[rows[_values_differ(npu, bench, rows, out[rows], raw_values)]]] = True
    if not odd.any():
        return out, moved
    odd_names = [entries[e] for e in np.flatnonzero(odd).tolist()]
    wanted = set(zip(map(npu_parents.get, odd_names), call_keys(odd_names)))
    ngroups = _members(sides.npu, npu_parents, wanted)
    bgroups = _members(sides.bench, bench_parents, wanted)
    budget = SIGNATURE_ROWS
    nb, bb = npu.entry_bounds, bench.entry_bounds
    for group, es in ngroups.items():
        bs = bgroups.get(group, [])
        if len(es) != len(bs) or len(es) < 2 or len(es) * len(bs) > ALIGN_LIMIT:
            continue  # calls on one side only are the renumbering's (_repair_renumbered)
        budget -= int(nb[es[-1] + 1] - nb[es[0]] + bb[bs[-1] + 1] - bb[bs[0]])
        if budget < 0:
            break
        nsig, bsig = [_call_signature(npu, e) for e in es], [_call_signature(bench, b) for b in bs]
        if nsig == bsig:
            continue
        new = np.full(len(es), -1, dtype=np.int64)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, nsig, bsig, autojunk=False).get_opcodes():
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):  # differing alike: by counter
                new[i1:i2] = bs[j1:j2]
        if (new == np.asarray(bs)).all():
            continue
        if moved is None:
            moved = np.zeros(len(entries), dtype=bool)
        if out is table_match:  # the table's pairing stays as it is
            out = table_match.copy()
        paired = {}
        for e, b in zip(es, new.tolist()):
            table_pair = _first_pair(bench, table_match, nb, e)
            if b == table_pair:
                out[nb[e] : nb[e + 1]] = table_match[nb[e] : nb[e + 1]]
            elif b != _first_pair(bench, out, nb, e):
                paired[e] = b
            moved[e] = b != table_pair
        _pair_rows(npu, bench, out, paired.items())
    return out, moved


def _first_pair(bench: RowTable, match: np.ndarray, bounds: np.ndarray, e: int) -> int:
    """The bench call of NPU call e's first paired row (-1: none)."""
    hits = match[bounds[e] : bounds[e + 1]]
    hits = hits[hits >= 0]
    return int(bench.entry_index[hits[0]]) if len(hits) else -1


def _members(present: Names, parents: dict[str, str | None],
             wanted: set[tuple[str | None, str]]) -> dict[tuple[str | None, str], list[int]]:  # fmt: skip
    """The calls of each wanted (enclosing module, API) group, in execution order: the children of the wanted
    modules in construct.json (filtered in C), those of a wanted group, then their place in the dump."""
    kids = children(parents, {m for m, _ in wanted})
    if not kids:
        return {}
    names = [k for k, _ in kids]
    keys = call_keys(names)
    wanted_keys = {key for _, key in wanted}
    maybe = [i for i, key in enumerate(keys) if key in wanted_keys]  # then the (module, API) pair
    groups = {i: (kids[i][1], keys[i]) for i in maybe}
    keep = [i for i in maybe if groups[i] in wanted]
    if present.repeated:  # a name twice in the dump: every place of it, in order
        calls = present.places({names[i] for i in keep})
        group_of = {names[i]: groups[i] for i in keep}
        pairs = [(e, group_of[present.names[e]]) for e in calls]
    else:
        pos = present.find([names[i] for i in keep]).tolist()
        pairs = sorted((e, groups[i]) for e, i in zip(pos, keep) if e >= 0)
    out: dict[tuple[str | None, str], list[int]] = {}
    for e, group in pairs:
        out.setdefault(group, []).append(e)
    return out


def _is_arg_dtype(dtype: str) -> bool:
    return is_scalar_dtype(dtype)


def _arg_value(value: object) -> object:
    """A non-tensor argument as it counts for a signature: a floating dtype named as a value (a cast's target) is
    the precision the runs differ in, not part of the call's identity."""
    return "<floating dtype>" if isinstance(value, str) and is_float_dtype_name(value) else value


def _values_differ(npu: RowTable, bench: RowTable, rows: np.ndarray, brows: np.ndarray,
                   raw_values: RawArgs) -> np.ndarray:  # fmt: skip
    """Per non-tensor argument row paired with bench row `brows`: whether the recorded values differ."""
    nk, bk = npu.stat_kind[rows, 0], bench.stat_kind[brows, 0]
    numeric = (nk <= StatKind.INT) & (bk <= StatKind.INT)
    differ = np.where(numeric, npu.stats[rows, 0] != bench.stats[brows, 0], nk != bk)  # None, NaN: by kind
    raw = np.flatnonzero((nk == StatKind.RAW) & (bk == StatKind.RAW))
    if len(raw):  # bool, str: compared as values, a floating dtype name as any other
        a, b = raw_values.npu[rows[raw]], raw_values.bench[brows[raw]]
        ne = np.fromiter(map(operator.ne, a, b), dtype=bool, count=len(raw))
        for k in np.flatnonzero(ne).tolist():
            ne[k] = _arg_value(a[k]) != _arg_value(b[k])
        differ[raw] = ne
    return differ


def raw_args(table: RowTable) -> np.ndarray:
    """Each row's raw value in the first statistic column (object array; None where the row has none): the values
    of bool and str arguments."""
    out = np.empty(len(table.names), dtype=object)
    rows, values = table.raw.first_column()
    out[rows] = values
    return out


class RawArgs:
    """Both sides' `raw_args`, read once per analysis (each side when first asked for) for its two comparisons of
    argument values: the pairing's `_values_differ` and the root cause's configuration rows."""

    def __init__(self, npu: RowTable, bench: RowTable) -> None:
        self._npu, self._bench = npu, bench

    @functools.cached_property
    def npu(self) -> np.ndarray:
        return raw_args(self._npu)

    @functools.cached_property
    def bench(self) -> np.ndarray:
        return raw_args(self._bench)


def _call_signature(table: RowTable, e: int) -> tuple:
    """What identifies a call among the calls of its API in one module: per row, its place (`input.0`,
    `output.1`), shape, dtype kind (float/int/bool: the precision may differ between the sides) and, for
    non-tensor arguments, the value."""
    lo, hi = table.entry_bounds[e], table.entry_bounds[e + 1]
    skip = len(table.entries[e])
    return tuple((table.names[i][skip:], table.shape[i], dtype_category(table.dtype[i]),
                  _arg_value(table.stat_display(i, 0)) if is_scalar_dtype(table.dtype[i]) else None)
                 for i in range(lo, hi))  # fmt: skip


def _successor(name: str) -> str | None:
    """The name of the next call of the same API or module (counter + 1), None when the name has no counter."""
    head, _, last = name.rpartition(".")
    if last in ("forward", "backward"):
        stem, _, count = head.rpartition(".")
        return f"{stem}.{int(count) + 1}.{last}" if count.isdigit() else None
    if last.isdigit() and head.endswith((".forward", ".backward")):
        return f"{head}.{int(last) + 1}"
    return None


def _shifted(odd: set[str], other: Names) -> set[str]:
    """APIs renumbered between the sides: a call on one side only whose successor is missing on the other too
    (the counters of one side run further). A call missing in the middle of a run that goes on (the other side
    has its successor) left the later names where they were."""
    out = set()
    for name in odd:
        nxt = _successor(name)
        if nxt is not None and nxt not in other:
            out.add(call_key(name))
    return out


PROBE_MISSES = 256  # counters probed past the last call found (dumps number calls without gaps; tolerate a few)


def _calls_of(present: Names, stems: set[str]) -> list[int]:
    """Positions of the calls whose call_key is in `stems`, in execution order: their names are probed by
    counter (`X.0.forward`, `X.1.forward`, ...) instead of taking every name apart."""
    found: set[int] = set()
    for key in stems:
        if ".." in key:
            stem, direction = key.split("..", 1)
            make = f"{stem}.{{}}.{direction}".format
        elif key.endswith("."):
            make = (key + "{}").format
        else:
            at = present.get(key)
            if at >= 0:
                found.add(at)
            continue
        k, last = 0, -1
        while k - last <= PROBE_MISSES:
            at = present.get(make(k))
            if at >= 0:
                found.add(at)
                last = k
            k += 1
    if not found:
        return []
    if present.repeated:  # a name twice in the dump: every place of it
        return present.places({present.names[e] for e in found})
    return sorted(found)


ALIGN_LIMIT = 1 << 20  # calls^2 of one uneven group above which it stays unpaired (alignment cost)


def _align_uneven(npu: RowTable, bench: RowTable, bg: _Groups, bsub: np.ndarray, uneven: dict[int, list[int]],
                  paired: np.ndarray) -> None:  # fmt: skip
    """Inside a (module, API) group whose call count differs (a fused kernel against its parts): pair the calls
    whose signatures (input shapes and non-tensor arguments) line up in order; the others stay unpaired."""
    import difflib

    bgroups = {g: bsub[bg.order[bg.start[g] : bg.start[g] + bg.count[g]]].tolist() for g in uneven}
    nsig = _signatures(npu, {e for es in uneven.values() for e in es})
    bsig = _signatures(bench, {b for bs in bgroups.values() for b in bs})
    for g, es in uneven.items():
        bs = bgroups[g]
        if not bs or len(es) * len(bs) > ALIGN_LIMIT:
            continue
        sm = difflib.SequenceMatcher(None, [nsig[e] for e in es], [bsig[b] for b in bs], autojunk=False)
        for block in sm.get_matching_blocks():
            for k in range(block.size):
                paired[es[block.a + k]] = bs[block.b + k]


def _signatures(table: RowTable, wanted: set[int]) -> dict[int, tuple]:
    """Per call of `wanted`: its input rows' (place, shape) and non-tensor argument values (dtype left out: one side
    may run in another precision)."""
    out: dict[int, list] = {e: [] for e in wanted}
    ei = table.entry_index
    rows = np.flatnonzero(np.isin(ei, np.fromiter(wanted, dtype=np.int64)) & input_rows(table))
    for i in rows.tolist():
        e = int(ei[i])
        name = table.names[i][len(table.entries[e]) :]
        value = table.stat_display(i, 0) if is_scalar_dtype(table.dtype[i]) else None
        out[e].append((name, table.shape[i], value))
    return {e: tuple(v) for e, v in out.items()}


def _ordered(ei: np.ndarray) -> bool:
    return not len(ei) or bool(np.all(ei[1:] >= ei[:-1]))


def input_rows(table: RowTable) -> np.ndarray:
    return (table.state == State.INPUT) | (table.state == State.PARAMETERS)
