"""Aligning two module trees that run different code (issue #30): a training engine against an inference engine
(renamed, wrapped, merged q/k/v or gate/up, flattened or transposed tokens), an NPU port against its GPU original.

No name map is written by hand. The aligner reads what both runs share:

1. **parameters** (anchors): both runs load the same weights, and a forward bug does not change them. A module whose
   parameters' statistics equal a module's on the other side is its counterpart; N sibling modules whose parameters,
   concatenated, equal one module's are merged into it (q/k/v into qkv, gate/up into gate_up). Tied or repeated
   weights pair in call order;
2. **the tree**: a module whose paired descendants are exactly another's is its counterpart; the wrappers around
   the same descendants (`_fsdp_wrapped_module`, `module.module`) are recorded as the same boundary;
3. **the tensors** at the boundaries of the modules left: their statistics (Max, Min, Mean, Norm and the element
   count, which a reshape or transpose keeps), where the runs still agree;
4. **the layers**: what one decoder layer shows (`layers.N`) holds for the other layers, unless a layer where the
   runs still agree says otherwise. This is how the boundaries after a bug, where the statistics part, are paired.

Each module pair's tensors (slots) are then paired the same way: by value where the runs agree, by the other layers'
evidence where they part, by the backward mirror of the forward slots for gradients. Planning only: the tables the
rest of the pipeline reads are built from the `Alignment` by `pair/aligned.py`.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import defaultdict
from dataclasses import field
from typing import Any

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.names import MODULE_PREFIXES
from msprobe_compare.load.rows import RowTable, StatKind
from msprobe_compare.pair.calls import Names, entry_names
from msprobe_compare.records import dataclass

_C: Any = native.built("_sharednames")

CANDIDATES = 64  # the most calls of the other side one output is checked against (repeated identical outputs)
MERGE_LIMIT = 8  # the most sibling modules merged into one (q/k/v: 3; experts' gate/up: 2)
LAYER = re.compile(r"(?<=\.layers\.)\d+(?=\.|$)|(?<=^layers\.)\d+(?=\.|$)")
MODULES = tuple(f"{p}." for p in MODULE_PREFIXES)  # the entry names of PyTorch modules and MindSpore cells
WRAPPERS = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod", "module")
LOW_PRECISION = ("bfloat16", "float16", "half", "bf16", "fp16")
TOL_LOW, TOL_FP32, TOL_PARAM = 0.03, 2e-3, 1e-5


@dataclass
class ModuleCall:
    """One forward call of a module (`Module.<path>.<Class>.forward.<n>`; a MindSpore cell's: `Cell.`) and what
    belongs to it."""

    entry: int  # its forward entry
    path: str
    cls: str
    count: int
    parent: int  # the enclosing module call (index into the side's calls), -1 at the root
    start: int  # the first entry inside it (the time its inputs exist); its entry is the time of its outputs
    slots: dict[str, int]  # forward row name suffix ("input.0", "output.1", "parameters.weight") -> row
    backward: int = -1  # its backward entry, -1 when none
    grads: int = -1  # its parameters_grad entry (the first call of the module only)
    layout: int = -1  # its slots' keys in order, numbered: calls of the same layout hold the same keys

    @property
    def layer(self) -> int | None:
        m = LAYER.search(self.path)
        return int(m.group()) if m else None

    @property
    def template(self) -> str:
        """The path with its layer index replaced: the same module in every layer."""
        return LAYER.sub("*", self.path)


@dataclass
class Side:
    table: RowTable
    calls: list[ModuleCall]
    numel: np.ndarray  # per row: element count (-1 without a shape, and for rows of no module call's forward slots)
    low: bool = False  # the run computes in a low precision somewhere (autocast): its fp32 tensors carry that noise
    ok: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # per row: a size and 4 finite numbers
    up_call: np.ndarray | None = None  # per entry: the call (index into calls) the tree puts it in, -1 for none
    api: np.ndarray | None = None  # per entry: the forward of a call that is no module's (`X.3.forward`)


@dataclass
class SlotPair:
    npu: str  # slot key on the npu side ("output.0"; of the first part for merged groups)
    bench: str
    how: str  # "value" (the statistics agree), "layers" (the other layers' evidence), "mirror" (backward of a pair)


@dataclass
class BoundaryPair:
    """Module calls that carry the same tensors: one or more on each side (merged parts in call order)."""

    npu: tuple[int, ...]
    bench: tuple[int, ...]
    how: str  # "parameters", "tree", "value", "layers"
    slots: list[SlotPair]
    grads: list[SlotPair]  # backward slots ("input.0" -> "input.0")
    fixed: bool = False  # slots given by the user's alignment file: kept as they are
    first: str = ""  # a later calls' pair ("repeat"): how the modules' first calls were paired


@dataclass
class Alignment:
    npu: Side
    bench: Side
    pairs: list[BoundaryPair]
    same_as: dict[str, dict[int, int]]  # side -> wrapper call -> the call it carries the same tensors as
    unpaired: dict[str, list[int]]  # side -> module calls left without a counterpart
    parted: int  # the npu entry after which the runs part (the first anchor whose output differs), -1 when none

    def names(self, side: str, calls: tuple[int, ...]) -> str:
        s = self.npu if side == "npu" else self.bench
        return ";".join(call_name(s.calls[c]) for c in calls)


def call_name(c: ModuleCall) -> str:
    """A module call as the alignment file names it: its path, and `#n` for its n-th call after the first."""
    return c.path if c.count == 0 else f"{c.path}#{c.count}"


@dataclass
class Decision:
    """Whether to align: the module calls of each side, and how many carry a name the other side has too."""

    npu_modules: int
    bench_modules: int
    same_names: int

    @property
    def differ(self) -> bool:
        """Fewer than half of either side's module calls have a namesake: the trees are of different code."""
        small = min(self.npu_modules, self.bench_modules)
        return small > 0 and self.same_names * 2 < small


def decide(npu: RowTable, bench: RowTable) -> Decision:
    """Whether the module trees are of different code (`Decision.differ`): a pass over the entry names."""

    def modules(t: RowTable) -> set[str]:
        return {e for e in t.entries if e.startswith(MODULES) and ".forward." in e}

    a, b = modules(npu), modules(bench)
    return Decision(len(a), len(b), len(a & b))


# ---------------------------------------------------------------------------------------------------- reading


def shape_numel(shape: str) -> int:
    if not shape or shape[0] != "[":
        return -1
    inner = shape[1:-1].strip()
    if not inner:
        return 1
    try:
        return math.prod(int(x) for x in inner.split(","))
    except ValueError:
        return -1


ScanCall = tuple[int, str, str, int, int, int, dict[str, int], int, int, int]
"""A forward module call as module_scan finds it: ModuleCall's fields in order."""
ModuleScan = tuple[list[ScanCall], "np.ndarray | None", np.ndarray]
MODULE, API_FORWARD = 1, 2  # module_scan's flags of an entry: a module's or cell's; another call's forward


def _py_module_scan(entries: list[str], names: list[str], bounds: np.ndarray, prefixes: tuple[str, ...],
                    tree: dict[str, str | None] | None) -> ModuleScan:  # fmt: skip
    """One pass over a side's entries. Per forward module call (`<prefix><path>.<Class>.forward.<n>`, n: 1 to 18
    ASCII digits, in entry order): its entry, path, class, counter, parent call (the call `tree` gives as its
    entry's parent, -1 without one), first entry inside it (its own or a descendant's child, at most its entry),
    slots (row name suffix -> row; a suffix given twice: its first row), backward entry (`...backward.<n>`),
    for a first call its parameters_grad entry (-1: none), and its layout (the number of its slots' keys in order,
    numbered as first met). Then per entry the call that is its parent in `tree`
    (int64, -1 for none; None without a tree) and its flags (uint8): MODULE for a `prefixes` name, else
    API_FORWARD for a name ending with `.forward`."""
    index: dict[str, int] = {}
    calls: list[list[Any]] = []
    layouts: dict[tuple[str, ...], int] = {}
    backward: dict[tuple[str, str, int], int] = {}
    grads: dict[tuple[str, str], int] = {}
    starts = bounds.tolist()
    modules = np.fromiter(map(str.startswith, entries, itertools.repeat(prefixes)), dtype=bool, count=len(entries))
    for e in np.flatnonzero(modules).tolist():
        entry = entries[e]
        head, _, last = entry.rpartition(".")
        if last == "parameters_grad":
            path, _, cls = head.partition(".")[2].rpartition(".")
            grads.setdefault((path, cls), e)
            continue
        stem, _, direction = head.rpartition(".")
        path, _, cls = stem.partition(".")[2].rpartition(".")
        if not (last.isascii() and last.isdigit() and len(last) <= 18) or not path:
            continue
        if direction == "backward":
            backward[(path, cls, int(last))] = e
        elif direction == "forward":
            lo, hi, cut = starts[e], starts[e + 1], len(entry) + 1
            slots = dict(zip([x[cut:] for x in names[lo:hi]], range(lo, hi)))
            if len(slots) != hi - lo:  # a key given twice: its first row
                slots = {}
                for r in range(lo, hi):
                    slots.setdefault(names[r][cut:], r)
            index[entry] = len(calls)
            calls.append(
                [e, path, cls, int(last), -1, e, slots, -1, -1, layouts.setdefault(tuple(slots), len(layouts))]
            )
    up_call = None
    first_inside: dict[str, int] = {}
    if tree is not None:
        first_inside, parents = _first_inside(entries, tree)
        up_call = np.fromiter((index.get(p, -1) if p else -1 for p in parents), dtype=np.int64, count=len(entries))
    for c in calls:
        e = c[0]
        if up_call is not None:
            c[4] = int(up_call[e])
        c[5] = min(first_inside.get(entries[e], e), e)
        c[7] = backward.get((c[1], c[2], c[3]), -1)
        if c[3] == 0:
            c[8] = grads.get((c[1], c[2]), -1)
    ends = np.fromiter(map(str.endswith, entries, itertools.repeat(".forward")), dtype=bool, count=len(entries))
    flags = np.where(modules, MODULE, np.where(ends, API_FORWARD, 0)).astype(np.uint8)
    return [tuple(c) for c in calls], up_call, flags


def _c_module_scan(entries: list[str], names: list[str], bounds: np.ndarray, prefixes: tuple[str, ...],
                   tree: dict[str, str | None] | None) -> ModuleScan:  # fmt: skip
    """_py_module_scan in one pass in C (`_sharednames.module_scan`; lists, a dict tree, texts with a UTF-8
    form, else the Python twin)."""
    got = None
    if type(entries) is list and type(names) is list and (tree is None or type(tree) is dict):
        got = _C.module_scan(entries, names, np.ascontiguousarray(bounds, dtype=np.int64), prefixes, tree)
    if got is None:
        return _py_module_scan(entries, names, bounds, prefixes, tree)
    calls, up_call, flags = got
    return calls, None if up_call is None else np.frombuffer(up_call, dtype=np.int64), np.frombuffer(flags, np.uint8)


module_scan = native.twin("_sharednames", _c_module_scan, _py_module_scan)


def scan(table: RowTable, tree: dict[str, str | None] | None) -> ModuleScan:
    """`module_scan` of a side (what module_calls reads)."""
    return module_scan(table.entries, table.names, table.entry_bounds, MODULES, tree)


def module_calls(table: RowTable, tree: dict[str, str | None] | None, scanned: ModuleScan | None = None) -> Side:
    """The side's forward module calls in the order they end (their entries), with their slots and times.
    `scanned`: the side's `scan`, made already (in another process)."""
    found, up_call, flags = scanned if scanned is not None else scan(table, tree)
    calls = [ModuleCall(*c) for c in found]
    slot_rows = np.fromiter(itertools.chain.from_iterable(c.slots.values() for c in calls), dtype=np.int64)
    numel = np.full(len(table), -1, dtype=np.int64)  # the slots' only: no other row is weighed (1M-row dumps)
    shapes = list(map(table.shape.__getitem__, slot_rows.tolist()))
    sizes = {sh: shape_numel(sh) for sh in set(shapes)}  # few distinct shapes
    numel[slot_rows] = np.fromiter(map(sizes.__getitem__, shapes), dtype=np.int64, count=len(shapes))
    low = any(_low(d) for d in table.dtype_codes[0] if d)
    ok = np.zeros(len(table), dtype=bool)  # the slots' only, as numel
    if len(slot_rows):
        kinds = np.asarray(table.stat_kind)[slot_rows]
        numeric = np.all((kinds == StatKind.NUMBER) | (kinds == StatKind.INT), axis=1)
        ok[slot_rows] = (numel[slot_rows] >= 0) & numeric & np.all(np.isfinite(table.stats[slot_rows]), axis=1)
    return Side(table, calls, numel, low, ok, up_call, flags == API_FORWARD)


def _first_inside(entries: list[str], tree: dict[str, str | None]) -> tuple[dict[str, int], list[str | None]]:
    """Per module of the tree: the first entry inside it (its own or any descendant's child); and per entry its
    parent."""
    first: dict[str, int] = {}
    parents: list[str | None] = []
    for e, entry in enumerate(entries):
        parent = tree.get(entry)
        parents.append(parent)
        while parent is not None and parent not in first:
            first[parent] = e
            parent = tree.get(parent)
    return first, parents


# ---------------------------------------------------------------------------------------------------- values


def _low(dtype: str) -> bool:
    return any(p in dtype for p in LOW_PRECISION)


@dataclass
class Stat:
    """A tensor's statistics, one or several rows combined."""

    numel: int
    v: tuple[float, float, float, float]  # Max, Min, Mean, Norm (finite)
    low: bool

    @staticmethod
    def of(side: Side, rows: list[int], shared: bool = False) -> Stat | None:
        """The rows' tensor, concatenated (or one of them when `shared`: the same tensor read by every part)."""
        if not rows or not all(side.ok[r] for r in rows):
            return None
        t = side.table
        low = side.low or any(_low(t.dtype[r]) for r in rows)
        if shared or len(rows) == 1:
            return Stat(int(side.numel[rows[0]]), tuple(t.stats[rows[0]].tolist()), low)
        n = [float(side.numel[r]) for r in rows]
        v = [t.stats[r].tolist() for r in rows]
        total = sum(n)
        mean = sum(x[2] * k for x, k in zip(v, n)) / total if total else 0.0
        return Stat(int(total), (max(x[0] for x in v), min(x[1] for x in v), mean,
                                 math.sqrt(sum(x[3] * x[3] for x in v))), low)  # fmt: skip


def distance(a: Stat | None, b: Stat | None, param: bool = False) -> float:
    """How far apart two tensors' statistics are, in units of the tolerance of their precision (<= 1: the same
    tensor; inf: different sizes or no statistics)."""
    if a is None or b is None or a.numel != b.numel:
        return math.inf
    low = a.low or b.low
    tol = (2.0**-7 if low else TOL_PARAM) if param else TOL_LOW if low else TOL_FP32
    (a0, a1, a2, a3), (b0, b1, b2, b3) = a.v, b.v
    scale = max(abs(a0), abs(a1), abs(b0), abs(b1), 1e-30)
    norm = max(abs(a3), abs(b3), 1e-30)
    return max(abs(a0 - b0) / scale, abs(a1 - b1) / scale, abs(a2 - b2) / scale, abs(a3 - b3) / norm) / tol


class _Index:
    """Tensors by (size, Norm), for the few within a tolerance of one: no pass over all of them per lookup."""

    def __init__(self) -> None:
        self.by_numel: dict[int, list[tuple[float, int]]] = defaultdict(list)
        self.items: list[Any] = []
        self.sorted = False

    def add(self, st: Stat, item: Any) -> None:
        self.by_numel[st.numel].append((st.v[3], len(self.items)))
        self.items.append(item)
        self.sorted = False

    def near(self, st: Stat) -> list[Any]:
        if not self.sorted:
            for v in self.by_numel.values():
                v.sort()
            self.sorted = True
        rows = self.by_numel.get(st.numel, [])
        norm = st.v[3]
        slack = abs(norm) * 2.0**-6 + 1e-30  # wider than any tolerance of `distance`
        lo = bisect.bisect_left(rows, (norm - slack, -1))
        hi = bisect.bisect_right(rows, (norm + slack, len(self.items)))
        return [self.items[i] for _, i in rows[lo:hi]]


# ---------------------------------------------------------------------------------------------------- aligning


class _Aligner:
    def __init__(self, npu: Side, bench: Side) -> None:
        self.s = {"npu": npu, "bench": bench}
        self.pairs: list[BoundaryPair] = []
        self.of: dict[str, dict[int, int]] = {"npu": {}, "bench": {}}  # call -> its pair
        self.same_as: dict[str, dict[int, int]] = {"npu": {}, "bench": {}}
        self.parted = -1
        self._stats: dict[tuple[str, tuple[int, ...], str], Stat | None] = {}
        self._keys: dict[str, dict[int, tuple[float, ...]]] = {"npu": {}, "bench": {}}
        self._param_keys = {
            side: {
                self._key(side, r)
                for c in s.calls
                for k, r in c.slots.items()
                if k.startswith("parameters.") and s.numel[r] > 1
            }
            for side, s in self.s.items()
        }

    # ---- helpers
    def _add(self, npu: tuple[int, ...], bench: tuple[int, ...], how: str) -> None:
        k = len(self.pairs)
        self.pairs.append(BoundaryPair(npu, bench, how, [], []))
        for c in npu:
            self.of["npu"][c] = k
        for c in bench:
            self.of["bench"][c] = k

    def _free(self, side: str, c: int) -> bool:
        return c not in self.of[side] and c not in self.same_as[side]

    def _params(self, side: str, calls: tuple[int, ...]) -> Stat | None:
        """The calls' parameters concatenated; for a call without any, the inputs that are a parameter of the same
        run (a weight passed as an argument: Megatron's output layer is given the embedding's)."""
        s = self.s[side]
        rows = [r for c in calls for k, r in s.calls[c].slots.items() if k.startswith("parameters.")]
        if not rows:
            rows = [r for c in calls for k, r in s.calls[c].slots.items()
                    if k.startswith("input") and self._key(side, r) in self._param_keys[side]]  # fmt: skip
        return Stat.of(s, rows)

    def _key(self, side: str, r: int) -> tuple[float, ...]:
        """A tensor's identity within one run: the same tensor read twice has the same statistics, bit for bit."""
        got = self._keys[side].get(r)
        if got is None:
            s = self.s[side]
            got = self._keys[side][r] = (float(s.numel[r]), *s.table.stats[r].tolist())
        return got

    # ---- 1. parameters
    def anchors(self) -> None:
        """Calls whose parameters agree, in call order within each set of equal parameters (tied or repeated
        weights); then runs of free sibling calls whose parameters, concatenated, agree with one free call of the
        other side (merged). Sorted by (size, Norm): near-linear in the number of calls."""
        sig: dict[str, dict[int, Stat]] = {}
        for side, s in self.s.items():
            sig[side] = {}
            for c in range(len(s.calls)):
                st = self._params(side, (c,))
                if st is not None:
                    sig[side][c] = st
        items = sorted(((st.numel, st.v[3], side, c) for side in sig for c, st in sig[side].items()))
        cluster: list[tuple[str, int]] = []
        last: Stat | None = None
        for _, _, side, c in items:  # runs of equal parameters along the sorted order
            st = sig[side][c]
            if last is not None and distance(last, st, True) > 1:
                self._pair_cluster(cluster)
                cluster = []
            cluster.append((side, c))
            last = st
        self._pair_cluster(cluster)
        for side, other in (("bench", "npu"), ("npu", "bench")):  # merged: runs of siblings against one call
            runs = _Index()
            for run in self._sibling_runs(other, sig[other]):
                st = self._params(other, run)
                if st is not None:
                    runs.add(st, run)
            for c, st in sig[side].items():
                if not self._free(side, c):
                    continue
                for run in runs.near(st):
                    if all(self._free(other, x) for x in run) and distance(self._params(other, run), st, True) <= 1:
                        self._add(run if other == "npu" else (c,), (c,) if other == "npu" else run, "parameters")
                        break

    def _pair_cluster(self, cluster: list[tuple[str, int]]) -> None:
        npu = sorted(c for side, c in cluster if side == "npu" and self._free("npu", c))
        bench = sorted(c for side, c in cluster if side == "bench" and self._free("bench", c))
        for a, b in zip(npu, bench):
            self._add((a,), (b,), "parameters")

    def _sibling_runs(self, side: str, sig: dict[int, Stat]) -> list[tuple[int, ...]]:
        by_parent: dict[int, list[int]] = defaultdict(list)
        for c in sorted(sig):
            if self._free(side, c):
                by_parent[self.s[side].calls[c].parent].append(c)
        runs = []
        for kids in by_parent.values():
            for i in range(len(kids)):
                for n in range(2, min(MERGE_LIMIT, len(kids) - i) + 1):
                    runs.append(tuple(kids[i : i + n]))
        return runs

    # ---- 2. the tree
    def _below(self, side: str) -> list[frozenset[int]]:
        """Per call, the pairs at or below it."""
        s = self.s[side]
        below: list[set[int]] = [set() for _ in s.calls]
        for c in range(len(s.calls)):  # calls end in order: children before their parent
            k = self.of[side].get(c)
            if k is not None:
                below[c].add(k)
            if s.calls[c].parent >= 0:
                below[s.calls[c].parent] |= below[c]
        return [frozenset(b) for b in below]

    def tree(self) -> None:
        below = {side: self._below(side) for side in self.s}
        chains: dict[str, dict[frozenset[int], list[int]]] = {}
        for side in self.s:
            chains[side] = defaultdict(list)
            for c, under in enumerate(below[side]):
                if under:
                    chains[side][under].append(c)
        for key, npu_chain in chains["npu"].items():
            bench_chain = chains["bench"].get(key)
            if not bench_chain:
                continue
            taken = {side: [c for c in ch if not self._free(side, c)] for side, ch in
                     (("npu", npu_chain), ("bench", bench_chain))}  # fmt: skip
            free = {side: [c for c in ch if self._free(side, c)] for side, ch in
                    (("npu", npu_chain), ("bench", bench_chain))}  # fmt: skip
            if taken["npu"] or taken["bench"]:  # the anchor itself is in the chain: the rest wrap it
                for side in ("npu", "bench"):
                    for c in free[side]:
                        if taken[side]:
                            self.same_as[side][c] = taken[side][0]
                continue
            a, b = self._best(free["npu"], free["bench"])
            self._add((a,), (b,), "tree")
            for side, keep in (("npu", a), ("bench", b)):
                for c in free[side]:
                    if c != keep:
                        self.same_as[side][c] = keep

    def _best(self, npu: list[int], bench: list[int]) -> tuple[int, int]:
        """Of two wrapper chains around the same pairs, the calls to pair: the same class where there is one, else
        the innermost of each."""
        for a in npu:
            for b in bench:
                if self.s["npu"].calls[a].cls == self.s["bench"].calls[b].cls:
                    return a, b
        return npu[0], bench[0]

    # ---- 3. values, 4. layers
    def _stat(self, side: str, calls: tuple[int, ...], key: str) -> Stat | None:
        memo = (side, calls, key)
        if memo not in self._stats:
            self._stats[memo] = self._stat_of(side, calls, key)
        return self._stats[memo]

    def _stat_of(self, side: str, calls: tuple[int, ...], key: str) -> Stat | None:
        s = self.s[side]
        rows = [s.calls[c].slots.get(key, -1) for c in calls]
        if any(r < 0 for r in rows):
            return None
        shared = key.startswith("input") and len(rows) > 1
        return Stat.of(s, rows, shared=shared)

    def _slot_keys(self, side: str, calls: tuple[int, ...]) -> list[str]:
        s = self.s[side]
        return [k for k, r in s.calls[calls[0]].slots.items() if not k.startswith("parameters.") and s.numel[r] > 0]

    def _time(self, side: str, calls: tuple[int, ...], key: str) -> int:
        c = self.s[side].calls[calls[-1]]
        return c.start if key.startswith("input") else c.entry

    def parting(self) -> None:
        """The earliest tensor of a parameter-anchored pair where the runs do not agree: the statistics at and after
        it are no evidence of what pairs (they may differ because of the bug the compare looks for)."""
        real: set[tuple[str, ...]] = set()  # slot pairs that agree in some layer: they carry the same tensor
        failed: list[tuple[BoundaryPair, tuple[tuple[str, ...], ...], str]] = []
        for p in self.pairs:
            if p.how not in ("parameters", "user"):  # anchors: the same weights, or the user said so
                continue
            for ka in self._slot_keys("npu", p.npu):
                for kb in self._slot_keys("bench", p.bench):
                    d = self._dist(p, ka, kb)
                    keys: tuple[tuple[str, ...], ...] = (self._tkey(p, ka, kb) or (str(p.npu), str(p.bench), ka, kb),
                                                         self._ckey(p, ka, kb))  # fmt: skip
                    if d <= 1:
                        real.update(keys)
                    elif d < math.inf:
                        failed.append((p, keys, ka))
        outs: dict[int, int] = {}  # pair -> the time it parts: its start when an input parts too, else its end
        for p, seen, ka in failed:  # a slot pair that agrees in another layer, or between the same classes
            if ka.startswith("output") and any(k in real for k in seen):
                outs[id(p)] = self._time("npu", p.npu, ka)
        for p, seen, ka in failed:
            if id(p) in outs and ka.startswith("input") and any(k in real for k in seen):
                outs[id(p)] = self._time("npu", p.npu, ka)
        first = min(outs.values(), default=-1)
        self.parted = first

    def _dist(self, p: BoundaryPair, a: str, b: str) -> float:
        return distance(self._stat("npu", p.npu, a), self._stat("bench", p.bench, b))

    def _clean(self, p: BoundaryPair, a: str) -> bool:
        return self.parted < 0 or self._time("npu", p.npu, a) < self.parted

    def values(self) -> None:
        """Calls left unpaired whose nearest paired ancestors are each other's, paired by the tensors they carry."""
        s_n, s_b = self.s["npu"], self.s["bench"]

        def home(side: str, c: int) -> int:
            p = self.s[side].calls[c].parent
            while p >= 0 and p not in self.of[side]:
                p = self.s[side].calls[p].parent
            return self.of[side].get(p, -1) if p >= 0 else -1

        outputs: dict[int, _Index] = defaultdict(_Index)  # per home: the free bench calls by their outputs
        for b in range(len(s_b.calls)):
            if self._free("bench", b):
                for kb in self._slot_keys("bench", (b,)):
                    st = self._stat("bench", (b,), kb)
                    if kb.startswith("output") and st is not None:
                        outputs[home("bench", b)].add(st, b)
        scored = []
        for a in range(len(s_n.calls)):
            if not self._free("npu", a) or self.parted >= 0 and s_n.calls[a].entry >= self.parted:
                continue
            keys_a = self._slot_keys("npu", (a,))
            index = outputs.get(home("npu", a))
            if index is None:
                continue
            cand: set[int] = set()
            for ka in keys_a:
                st = self._stat("npu", (a,), ka)
                if ka.startswith("output") and st is not None:
                    cand.update(index.near(st)[:CANDIDATES])
            for b in sorted(cand):
                keys_b = self._slot_keys("bench", (b,))
                hits = 0
                out_hit = False
                for ka in keys_a:
                    for kb in keys_b:
                        d = distance(self._stat("npu", (a,), ka), self._stat("bench", (b,), kb))
                        if d <= 1 and (self.parted < 0 or self._time("npu", (a,), ka) < self.parted):
                            hits += 1
                            out_hit |= ka.startswith("output") and kb.startswith("output")
                            break
                if out_hit:
                    scored.append((-hits, abs(s_n.calls[a].layer or 0), a, b))
        for _, _, a, b in sorted(scored):
            if self._free("npu", a) and self._free("bench", b):
                self._add((a,), (b,), "value")

    def layers(self) -> None:
        """A pair found in some layers holds in the others where both calls are unpaired."""
        by_t: dict[tuple[str, str], set[int]] = defaultdict(set)
        for p in self.pairs:
            if len(p.npu) == 1 and len(p.bench) == 1:
                ca, cb = self.s["npu"].calls[p.npu[0]], self.s["bench"].calls[p.bench[0]]
                if ca.layer is not None and ca.layer == cb.layer:
                    by_t[(ca.template, cb.template)].add(ca.layer)
        free = {side: {(c.template, c.layer, c.count): i for i, c in enumerate(self.s[side].calls)
                       if self._free(side, i) and c.layer is not None} for side in self.s}  # fmt: skip
        for (ta, tb), seen in by_t.items():
            for (t, layer, count), a in list(free["npu"].items()):
                if t != ta or layer in seen:
                    continue
                b = free["bench"].get((tb, layer, count))
                if b is not None and self._free("npu", a) and self._free("bench", b):
                    self._add((a,), (b,), "layers")

    # ---- 5. slots
    def slots(self) -> None:
        """Each pair's tensors: by value where the runs agree; where they part, by what the same slots do in the
        other layers (the same module in another layer), else in the other pairs of the same classes; each slot
        once. The evidence of a layer counts only where the runs still agree there."""
        evidence: dict[tuple[str, ...], list[bool]] = defaultdict(list)
        near: dict[int, list[float]] = {}  # per pair (id), the distance of each of its value slot pairs
        for p in self.pairs:
            if p.fixed:
                continue
            p.slots.clear()
            dist = near[id(p)] = []
            for ka in self._slot_keys("npu", p.npu):
                clean = self._clean(p, ka)
                for kb in self._slot_keys("bench", p.bench):
                    d = self._dist(p, ka, kb)
                    if d <= 1:
                        p.slots.append(SlotPair(ka, kb, "value"))
                        dist.append(d)
                    if clean and d < math.inf:
                        for key in (self._tkey(p, ka, kb), self._ckey(p, ka, kb)):
                            if key:
                                evidence[key].append(d <= 1)
        for p in self.pairs:
            if p.fixed:
                continue
            used_a: set[str] = set()
            used_b: set[str] = set()
            kept = []
            dist = near[id(p)]  # the closest first: a normed output as near its input as bf16 can tell (RMS ~1)
            for i in sorted(range(len(dist)), key=dist.__getitem__):  # by value, each slot once
                sp = p.slots[i]
                if sp.npu not in used_a and sp.bench not in used_b:
                    kept.append(i)
                    used_a.add(sp.npu)
                    used_b.add(sp.bench)
            p.slots[:] = [p.slots[i] for i in sorted(kept)]  # in the slots' order
            keys_b = self._slot_keys("bench", p.bench)
            for ka in self._slot_keys("npu", p.npu):
                if ka in used_a or self._clean(p, ka):
                    continue
                for how, make in (("layers", self._tkey), ("classes", self._ckey)):
                    hit = next((kb for kb in keys_b if kb not in used_b and self._numel_equal(p, ka, kb) and
                                all(evidence.get(make(p, ka, kb) or ("",), [False]))), None)  # fmt: skip
                    if hit is not None:
                        p.slots.append(SlotPair(ka, hit, how))
                        used_a.add(ka)
                        used_b.add(hit)
                        break
            self._sole_output(p, used_a, used_b)
            if not p.slots and p.how in ("parameters", "user"):
                self._sole_slots(p)
            if not p.slots and self._same_code(p):  # no evidence at all (a bug before any layer): by position
                for ka in self._slot_keys("npu", p.npu):
                    if ka in keys_b and self._numel_equal(p, ka, ka):
                        p.slots.append(SlotPair(ka, ka, "position"))

    def _sole_slots(self, p: BoundaryPair) -> None:
        """Calls of the same weights, with one input and one output each, of one size a side, where no evidence is
        clean (the runs part before any of their kind): the input they apply the weights to, and the result."""
        faces = [self._slot_keys(side, calls) for side, calls in (("npu", p.npu), ("bench", p.bench))]
        ins = [[k for k in f if k.startswith("input")] for f in faces]
        outs = [[k for k in f if k.startswith("output")] for f in faces]
        if all(len(x) == 1 for x in (*ins, *outs)) and self._numel_equal(p, ins[0][0], ins[1][0]) and \
                self._numel_equal(p, outs[0][0], outs[1][0]):  # fmt: skip
            p.slots += [SlotPair(ins[0][0], ins[1][0], "parameters"), SlotPair(outs[0][0], outs[1][0], "parameters")]

    def _sole_output(self, p: BoundaryPair, used_a: set[str], used_b: set[str]) -> None:
        """Two calls with a paired input and one output each, of one size: their results."""
        if not any(sp.npu.startswith("input") for sp in p.slots) or self._clean(p, "output.0"):
            return
        outs = [[k for k in self._slot_keys(side, calls) if k.startswith("output")]
                for side, calls in (("npu", p.npu), ("bench", p.bench))]  # fmt: skip
        if (
            len(outs[0]) == 1
            and len(outs[1]) == 1
            and outs[0][0] not in used_a
            and outs[1][0] not in used_b
            and self._numel_equal(p, outs[0][0], outs[1][0])
        ):
            p.slots.append(SlotPair(outs[0][0], outs[1][0], "sole output"))

    def _ckey(self, p: BoundaryPair, ka: str, kb: str) -> tuple[str, ...]:
        """The pair's classes (merged parts: their distinct classes) and interfaces: the same kind of module."""
        return ("class", ";".join(sorted({self.s["npu"].calls[c].cls for c in p.npu})),
                ";".join(sorted({self.s["bench"].calls[c].cls for c in p.bench})), *self._faces(p), ka, kb)  # fmt: skip

    # ---- 6. the same tensor read twice in one run
    def dataflow(self) -> None:
        """A tensor one run reads at two boundaries has the same statistics there, bit for bit, whatever a bug did
        to it. So a paired tensor pairs its other readings too: the slots of a pair left unpaired, and the calls
        left unpaired whose outputs are that tensor on both sides (a model body whose output is its final norm's)."""
        ident = {side: self._identities(side) for side in self.s}
        new_pairs: list[tuple[int, int]] = []
        readers: list[tuple[int, int, int, int]] = []
        for p in list(self.pairs):
            for sp in list(p.slots):
                ra = self.s["npu"].calls[p.npu[0]].slots[sp.npu] if len(p.npu) == 1 else -1
                rb = self.s["bench"].calls[p.bench[0]].slots[sp.bench] if len(p.bench) == 1 else -1
                if ra < 0 or rb < 0:
                    continue
                same_a = ident["npu"].get(self._key("npu", ra), [])
                same_b = ident["bench"].get(self._key("bench", rb), [])
                for ca, ka in same_a:
                    for cb, kb in same_b:
                        if ka.split(".")[0] != kb.split(".")[0]:
                            continue
                        k_a, k_b = self.of["npu"].get(ca), self.of["bench"].get(cb)
                        if k_a is not None and k_a == k_b:
                            q = self.pairs[k_a]
                            if len(q.npu) == 1 and len(q.bench) == 1 and not q.fixed and all(x.npu != ka and x.bench != kb
                                                                            for x in q.slots):  # fmt: skip
                                q.slots.append(SlotPair(ka, kb, "dataflow"))
                        elif k_a is None and k_b is None and self._free("npu", ca) and self._free("bench", cb):
                            if ka.startswith("output"):
                                new_pairs.append((ca, cb))
                            else:  # readers of one tensor: only the one free reader a side
                                readers.append((ca, cb, sum(self._free("npu", c) for c, _ in same_a),
                                                sum(self._free("bench", c) for c, _ in same_b)))  # fmt: skip
        new_pairs += [(ca, cb) for ca, cb, na, nb in readers if na == 1 and nb == 1]
        paired: set[tuple[tuple[float, ...], tuple[float, ...]]] = set()
        for q in self.pairs:
            self._paired_keys(q, paired)
        for ca, cb in new_pairs:
            if self._free("npu", ca) and self._free("bench", cb):
                self._add((ca,), (cb,), "dataflow")
                self.slots_of_new(self.pairs[-1], paired)
                self._paired_keys(self.pairs[-1], paired)

    def _paired_keys(self, q: BoundaryPair, into: set[tuple[tuple[float, ...], tuple[float, ...]]]) -> None:
        """The identities of a 1:1 pair's paired tensors, both sides', added to `into`."""
        if len(q.npu) == 1 and len(q.bench) == 1:
            a, b = self.s["npu"].calls[q.npu[0]], self.s["bench"].calls[q.bench[0]]
            for sp in q.slots:
                into.add((self._key("npu", a.slots[sp.npu]), self._key("bench", b.slots[sp.bench])))

    def slots_of_new(self, p: BoundaryPair, paired: set[tuple[tuple[float, ...], tuple[float, ...]]]) -> None:
        """A pair found by dataflow: its slots that are tensors already paired elsewhere (`paired`: identities)."""
        a, b = self.s["npu"].calls[p.npu[0]], self.s["bench"].calls[p.bench[0]]
        for ka in self._slot_keys("npu", p.npu):
            for kb in self._slot_keys("bench", p.bench):
                if (
                    (self._key("npu", a.slots[ka]), self._key("bench", b.slots[kb])) in paired
                    and ka.split(".")[0] == kb.split(".")[0]
                    and all(x.bench != kb for x in p.slots)
                ):
                    p.slots.append(SlotPair(ka, kb, "dataflow"))
                    break
        self._sole_output(p, {x.npu for x in p.slots}, {x.bench for x in p.slots})

    def _identities(self, side: str) -> dict[tuple[float, ...], list[tuple[int, str]]]:
        """Float tensors (more than one element, not all zero) by their statistics: the readings of each tensor."""
        s = self.s[side]
        out: dict[tuple[float, ...], list[tuple[int, str]]] = defaultdict(list)
        for c, call in enumerate(s.calls):
            for k, r in call.slots.items():
                if (
                    k.startswith("parameters.")
                    or s.numel[r] <= 1
                    or s.table.stats[r, 3] == 0
                    or s.table.stat_kind[r, 3] != StatKind.NUMBER
                    or "int" in s.table.dtype[r]
                ):
                    continue
                out[self._key(side, r)].append((c, k))
        return out

    def _same_code(self, p: BoundaryPair) -> bool:
        """One call a side, of the same class and with the same slots: the same code, whose slots pair by place."""
        if len(p.npu) != 1 or len(p.bench) != 1:
            return False
        a, b = self.s["npu"].calls[p.npu[0]], self.s["bench"].calls[p.bench[0]]
        return a.cls == b.cls and a.slots.keys() == b.slots.keys()

    def _numel_equal(self, p: BoundaryPair, ka: str, kb: str) -> bool:
        a, b = self._stat("npu", p.npu, ka), self._stat("bench", p.bench, kb)
        return a is not None and b is not None and a.numel == b.numel

    def _tkey(self, p: BoundaryPair, ka: str, kb: str) -> tuple[str, ...] | None:
        a, b = self.s["npu"].calls[p.npu[-1]], self.s["bench"].calls[p.bench[-1]]
        if a.layer is None or a.layer != b.layer:
            return None
        return (";".join(self.s["npu"].calls[c].template for c in p.npu),
                ";".join(self.s["bench"].calls[c].template for c in p.bench), *self._faces(p), ka, kb)  # fmt: skip

    def _faces(self, p: BoundaryPair) -> tuple[str, str]:
        """Each side's slot names: what one pair shows of another holds only between calls of the same interface
        (vLLM's first decoder layer norms `x` alone, the later ones `(x, residual)`)."""
        return (",".join(self._slot_keys("npu", p.npu)), ",".join(self._slot_keys("bench", p.bench)))

    def _mirror(self, p: BoundaryPair) -> list[SlotPair]:
        """Backward slots from the forward ones: input.i is the gradient of output.i; output.k the gradient of the
        k-th forward input that requires it."""
        out = []
        grad_in = {side: self._grad_inputs(side, calls) for side, calls in (("npu", p.npu), ("bench", p.bench))}
        for sp in p.slots:
            if sp.npu.startswith("output.") and sp.bench.startswith("output."):
                out.append(SlotPair("input." + sp.npu[7:], "input." + sp.bench[7:], "mirror"))
            elif sp.npu.startswith("input") and sp.bench.startswith("input"):
                if sp.npu in grad_in["npu"] and sp.bench in grad_in["bench"]:
                    out.append(SlotPair(f"output.{grad_in['npu'][sp.npu]}", f"output.{grad_in['bench'][sp.bench]}",
                                        "mirror"))  # fmt: skip
        return out

    def _grad_inputs(self, side: str, calls: tuple[int, ...]) -> dict[str, int]:
        s = self.s[side]
        c = s.calls[calls[0]]
        got: dict[str, int] = {}
        for k, r in c.slots.items():
            if k.startswith("input") and s.numel[r] > 0 and s.table.requires_grad[r] == 1:
                got[k] = len(got)
        return got


FOLD = 2  # calls per module at least (on average, both sides) for the later calls to follow the first ones


def align(npu: Side, bench: Side, user: Any = None, user_path: Any = None) -> Alignment:
    """Pair the two sides' module calls and their tensors (see the module's docstring). `user`: an alignment file's
    document (`describe`'s form, read from `user_path`); its pairs come first and stand.

    Runs that call their modules many times (micro-batches, steps: FOLD calls a module or more on both sides) are
    aligned on each module's first call; its later calls then follow (`_repeats`)."""
    if user is None:
        firsts = {side: [c for c, call in enumerate(s.calls) if call.count == 0] for side, s in
                  (("npu", npu), ("bench", bench))}  # fmt: skip
        if all(len(s.calls) >= FOLD * max(len(firsts[side]), 1) for side, s in (("npu", npu), ("bench", bench))):
            return _repeats(npu, bench, _align(_first_calls(npu, firsts["npu"]),
                                               _first_calls(bench, firsts["bench"])), firsts)  # fmt: skip
    return _align(npu, bench, user, user_path)


def _first_calls(side: Side, firsts: list[int]) -> Side:
    """The side with each module's first call only (a later call's parent: its module's first call)."""
    at = {c: i for i, c in enumerate(firsts)}
    first_of = {(call.path, call.cls): i for i, call in ((i, side.calls[c]) for i, c in enumerate(firsts))}
    calls = []
    for c in firsts:
        call = side.calls[c]
        parent = -1
        if call.parent >= 0:
            up = side.calls[call.parent]
            parent = at.get(call.parent, first_of.get((up.path, up.cls), -1))
        calls.append(ModuleCall(call.entry, call.path, call.cls, call.count, parent, call.start, call.slots,
                                call.backward, call.grads, call.layout))  # fmt: skip
    return Side(side.table, calls, side.numel, side.low, side.ok)  # (up_call indexes the whole side's calls)


def _repeats(npu: Side, bench: Side, first: Alignment, firsts: dict[str, list[int]]) -> Alignment:
    """The alignment of the first calls (`first`, over `_first_calls`) on the whole sides: each pair's k-th later
    calls pair where every module of the pair is called as often on its side, with the first pair's slots (those
    the later calls have too); wrappers likewise. Later calls of modules called unequally often pair by value
    where one run makes calls the other does not (`_by_value`)."""
    sides = {"npu": npu, "bench": bench}
    calls_of: dict[str, dict[tuple[str, str], list[int]]] = {side: defaultdict(list) for side in sides}
    for side, s in sides.items():
        for c, call in enumerate(s.calls):
            calls_of[side][(call.path, call.cls)].append(c)

    def series(side: str, firsts_: tuple[int, ...]) -> list[list[int]]:
        s = sides[side]
        return [calls_of[side][(s.calls[c].path, s.calls[c].cls)] for c in firsts_]

    pairs: list[BoundaryPair] = []
    calls_n, calls_b = npu.calls, bench.calls
    layouts = {side: np.fromiter((c.layout for c in s.calls), dtype=np.int64, count=len(s.calls))
               for side, s in sides.items()}  # fmt: skip
    taken = {side: np.zeros(len(s.calls), dtype=bool) for side, s in sides.items()}
    lasts: list[int] = []  # per pair, its last npu call (whose entry orders the pairs)
    for p in first.pairs:
        whole_n, whole_b = tuple(firsts["npu"][c] for c in p.npu), tuple(firsts["bench"][c] for c in p.bench)
        pairs.append(BoundaryPair(whole_n, whole_b, p.how, p.slots, p.grads, p.fixed))
        lasts.append(whole_n[-1])
        taken["npu"][list(whole_n)] = taken["bench"][list(whole_b)] = True
        runs_n, runs_b = series("npu", whole_n), series("bench", whole_b)
        n, m = len(runs_n[0]), len(runs_b[0])
        if any(len(r) != n for r in runs_n) or any(len(r) != m for r in runs_b) or min(n, m) < 2:
            continue
        later_n, later_b = list(zip(*runs_n))[1:], list(zip(*runs_b))[1:]
        if n != m:  # called unequally often (a recomputed layer, other micro-batches): the later calls by value
            got = _by_value(npu, later_n, bench, later_b, p.slots)
            later_n, later_b = [a for a, _ in got], [b for _, b in got]
            if not got:
                continue
        # the k-th calls of each part (k >= 1); their slot and gradient lists are the first pair's where they keep
        # them all (shared: no list is changed once aligned): the first calls' slot layout, or more keys
        parts_n, parts_b = np.array(later_n, dtype=np.int64), np.array(later_b, dtype=np.int64)
        taken["npu"][parts_n.ravel()] = taken["bench"][parts_b.ravel()] = True
        lasts += parts_n[:, -1].tolist()
        alike = (layouts["npu"][parts_n[:, 0]] == calls_n[whole_n[0]].layout) & (
            layouts["bench"][parts_b[:, 0]] == calls_b[whole_b[0]].layout)  # fmt: skip
        need_n, need_b = {sp.npu for sp in p.slots}, {sp.bench for sp in p.slots}
        for got_n, got_b, same in zip(later_n, later_b, alike.tolist()):
            kept_all = same or (need_n <= calls_n[got_n[0]].slots.keys() and need_b <= calls_b[got_b[0]].slots.keys())
            slots = p.slots if kept_all else _kept(p.slots, npu, got_n, bench, got_b)
            pairs.append(BoundaryPair(got_n, got_b, "repeat", slots, p.grads, False, p.how))
    same_as: dict[str, dict[int, int]] = {side: {} for side in sides}
    for side in sides:
        for w, h in first.same_as[side].items():
            ws, hs = series(side, (firsts[side][w], firsts[side][h]))
            for a, b in zip(ws, hs) if len(ws) == len(hs) else zip(ws[:1], hs[:1]):
                same_as[side][a] = b
    entries_n = np.fromiter((c.entry for c in calls_n), dtype=np.int64, count=len(calls_n))
    ends = entries_n[np.array(lasts, dtype=np.int64)]
    pairs = [pairs[i] for i in np.argsort(ends, kind="stable").tolist()]  # as list.sort by the end: stable
    unpaired = {}
    for side in sides:
        free = ~taken[side]
        free[np.fromiter(same_as[side], dtype=np.int64, count=len(same_as[side]))] = False
        unpaired[side] = np.flatnonzero(free).tolist()
    return Alignment(npu, bench, pairs, same_as, unpaired, first.parted)


LOOK_AHEAD = 8  # the most calls in a row one run makes and the other does not, found by value


def _by_value(npu: Side, calls_n: list[tuple[int, ...]], bench: Side, calls_b: list[tuple[int, ...]],
              slots: list[SlotPair]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:  # fmt: skip
    """The later calls of a pair's modules where the two runs call them unequally often (the first calls paired
    already), paired in order. A call of the run with more calls left is passed over (a layer recomputed in the
    backward pass, an extra micro-batch) where the tensors of the first pair's output slots (else of any of its
    slots) show it: the next of its calls agrees with the other run's call and this one does not. Elsewhere calls
    pair in order whatever their values, as calls of modules called equally often do (where the runs part, the
    difference is then shown). The calls left over at the end stay unpaired."""
    probe = [sp for sp in slots if sp.npu.startswith("output")] or list(slots)

    def stats(side: Side, parts: tuple[int, ...], key: str) -> Stat | None:
        rows = [side.calls[c].slots.get(key, -1) for c in parts]
        return None if min(rows) < 0 else Stat.of(side, rows)

    def agree(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
        return bool(probe) and all(distance(stats(npu, a, sp.npu), stats(bench, b, sp.bench)) <= 1 for sp in probe)

    out = []
    i = j = 0
    while i < len(calls_n) and j < len(calls_b):
        surplus = (len(calls_n) - i) - (len(calls_b) - j)  # > 0: the npu run has calls the other does not make
        if surplus and not agree(calls_n[i], calls_b[j]):
            if surplus > 0:
                skip = next((d for d in range(1, min(surplus, LOOK_AHEAD) + 1)
                             if agree(calls_n[i + d], calls_b[j])), 0)  # fmt: skip
                i += skip
            else:
                skip = next((d for d in range(1, min(-surplus, LOOK_AHEAD) + 1)
                             if agree(calls_n[i], calls_b[j + d])), 0)  # fmt: skip
                j += skip
        out.append((calls_n[i], calls_b[j]))
        i, j = i + 1, j + 1
    return out


def _kept(slots: list[SlotPair], npu: Side, a: tuple[int, ...], bench: Side, b: tuple[int, ...]) -> list[SlotPair]:
    """The slot pairs a later call pair keeps: those whose forward slots its calls have too."""
    have_a, have_b = npu.calls[a[0]].slots, bench.calls[b[0]].slots
    return [sp for sp in slots if sp.npu in have_a and sp.bench in have_b]


def _align(npu: Side, bench: Side, user: Any = None, user_path: Any = None) -> Alignment:
    """`align` on every call."""
    al = _Aligner(npu, bench)
    if user is not None:
        _user_pairs(al, user, user_path)
    al.anchors()
    al.tree()
    al.parting()
    al.values()
    al.layers()
    al.tree()
    al.slots()
    al.dataflow()
    for p in al.pairs:
        p.grads = al._mirror(p)
    al.pairs.sort(key=lambda p: npu.calls[p.npu[-1]].entry)
    unpaired = {side: [c for c in range(len(s.calls)) if al._free(side, c)] for side, s in al.s.items()}
    return Alignment(npu, bench, al.pairs, al.same_as, unpaired, al.parted)


def inner_calls(
    al: Alignment, npu_tree: dict[str, str | None] | None, bench_tree: dict[str, str | None] | None
) -> np.ndarray:
    """API calls paired inside paired modules (one call a side): where both run the same APIs in the same order
    directly inside them, call k with call k, forward and backward (rows: npu entry, bench entry)."""
    none = np.zeros((0, 2), dtype=np.int64)
    if not npu_tree or not bench_tree or al.npu.up_call is None or al.bench.up_call is None:
        return none
    single = np.array([(p.npu[0], p.bench[0]) for p in al.pairs if len(p.npu) == 1 and len(p.bench) == 1],
                      dtype=np.int64).reshape(-1, 2)  # fmt: skip
    kids_n, start_n, count_n = _api_children(al.npu)
    kids_b, start_b, count_b = _api_children(al.bench)
    c_n, c_b = single[:, 0], single[:, 1]
    k = count_n[c_n]
    keep = (k > 0) & (k == count_b[c_b])
    c_n, c_b, k = c_n[keep], c_b[keep], k[keep]
    seg_n, seg_b = kids_n[spread(start_n[c_n], k)], kids_b[spread(start_b[c_b], k)]
    entries_n, entries_b = al.npu.table.entries, al.bench.table.entries
    names_n = entry_names(al.npu.table)
    same = names_n.find_at(entries_b, seg_b) == seg_n  # the same names (entries are unique)
    ends = np.cumsum(k)
    alike = np.logical_and.reduceat(same, ends - k) if len(k) else np.zeros(0, dtype=bool)
    for i in np.flatnonzero(~alike).tolist():  # other names (other call counters): the same APIs in the same order
        lo, hi = int(ends[i] - k[i]), int(ends[i])
        alike[i] = [_api(entries_n[e]) for e in seg_n[lo:hi].tolist()] == [_api(entries_b[e]) for e in
                                                                           seg_b[lo:hi].tolist()]  # fmt: skip
    chosen = np.repeat(alike, k)
    fwd_n, fwd_b = seg_n[chosen], seg_b[chosen]
    back_n = _backward_of(names_n, entries_n, fwd_n)
    back_b = _backward_of(entry_names(al.bench.table), entries_b, fwd_b)
    both = (back_n >= 0) & (back_b >= 0)
    out = np.empty((len(fwd_n) + int(np.count_nonzero(both)), 2), dtype=np.int64)  # each forward, then its backward
    at = np.arange(len(fwd_n)) + np.concatenate([[0], np.cumsum(both)[:-1]]) if len(fwd_n) else np.zeros(0, np.int64)
    out[at, 0], out[at, 1] = fwd_n, fwd_b
    out[at[both] + 1, 0], out[at[both] + 1, 1] = back_n[both], back_b[both]
    return out


def spread(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Positions starts[i] .. starts[i] + counts[i] - 1, for each i in turn."""
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts.astype(np.int64), counts) + within


def _api(entry: str) -> str:
    """`Functional.linear.3.forward` -> `Functional.linear`."""
    return entry.rsplit(".", 2)[0]


def _backward_of(names: Names, entries: list[str], forward: np.ndarray) -> np.ndarray:
    """Per forward API entry (`X.3.forward`): the entry of its backward (`X.3.backward`), -1 when none."""
    return names.find_at(entries, forward, 7, "backward")


def _api_children(side: Side) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per module call, the forward API calls directly inside it, in execution order: the entries grouped by call,
    and per call where its group starts and how many it holds."""
    up = side.up_call
    assert up is not None and side.api is not None
    inside = np.flatnonzero(side.api & (up >= 0))
    kids = inside[np.argsort(up[inside], kind="stable")]
    count = np.bincount(up[inside], minlength=len(side.calls)).astype(np.int64)
    return kids, np.cumsum(count) - count, count


def _user_pairs(al: _Aligner, doc: Any, path: Any) -> None:
    from msprobe_compare.errors import InputError

    items = doc.get("pairs") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise InputError("has no 'pairs' list; expected a module alignment file (module_alignment_*.yaml)", path)
    index = {side: {call_name(c): i for i, c in enumerate(s.calls)} for side, s in al.s.items()}
    for n, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("npu"), str) or not isinstance(item.get("bench"), str):
            raise InputError(f"pairs[{n}] needs 'npu' and 'bench' texts (module paths, parts joined by ';')", path)
        calls = {}
        for side in ("npu", "bench"):
            got = []
            for name in item[side].split(";"):
                c = index[side].get(name.strip())
                if c is None:
                    raise InputError(f"pairs[{n}]: no {side} module call '{name.strip()}' in the dump", path)
                if not al._free(side, c):
                    raise InputError(f"pairs[{n}]: the {side} module call '{name.strip()}' is paired twice", path)
                got.append(c)
            calls[side] = tuple(got)
        al._add(calls["npu"], calls["bench"], "user")
        slots = item.get("slots")
        if slots is not None:
            if not isinstance(slots, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in
                                                      slots.items()):  # fmt: skip
                raise InputError(f"pairs[{n}]: 'slots' must map npu slots to bench slots (e.g. output.0: output.0)",
                                 path)  # fmt: skip
            p = al.pairs[-1]
            p.fixed = True
            p.slots[:] = [SlotPair(k, v, "user") for k, v in slots.items()]


def describe(al: Alignment) -> dict[str, Any]:
    """The alignment as plain data (the alignment file, the Python API, the HTML report): `pairs` (npu, bench,
    how, slots), `unpaired` and `same_as` (wrappers: the call whose tensors they carry) per side."""
    names = {"npu": list(map(call_name, al.npu.calls)), "bench": list(map(call_name, al.bench.calls))}
    n, b = names["npu"], names["bench"]

    def joined(side: list[str], calls: tuple[int, ...]) -> str:
        return side[calls[0]] if len(calls) == 1 else ";".join(side[c] for c in calls)

    made: dict[int, dict[str, str]] = {}  # per slot list (the later calls share their first pair's): its mapping

    def slots(p: BoundaryPair) -> dict[str, str]:
        got = made.get(id(p.slots))
        if got is None:
            got = made[id(p.slots)] = {s.npu: s.bench for s in p.slots}
        return dict(got)  # each pair its own dict

    return {
        "pairs": [{"npu": joined(n, p.npu), "bench": joined(b, p.bench), "how": p.how, "slots": slots(p)}
                  for p in al.pairs],
        "unpaired": {side: [names[side][c] for c in al.unpaired[side]] for side in names},
        "same_as": {side: {names[side][c]: names[side][h] for c, h in sorted(al.same_as[side].items())}
                    for side in names},
    }  # fmt: skip
