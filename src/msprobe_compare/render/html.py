"""A self-contained HTML report: summary, root-cause origins, module tree, metric plot, result table.

The page works offline: CSS and JavaScript are inline (render/assets/), nothing is fetched (its
Content-Security-Policy forbids it). All data travel in one binary payload, base64 in a
`<script type="application/octet-stream">` element (the base64 alphabet cannot end the element),
zlib-compressed when large; the browser inflates it with `DecompressionStream`:

    u32 little-endian length L | L bytes of UTF-8 JSON meta | zero padding to 8 | buffers

Each buffer starts at an 8-byte aligned offset, so the page views it as a typed array without a copy.
The table is columnar. Per column: a code per cell (0 float, 1 int, 2 float shown with "%", 3+k the
k-th string of a dictionary), stored narrow, as one common code plus exceptions when one dominates,
delta-coded for names, and for a "Bench X" column as the difference to its "NPU X" column (with a
shared dictionary); numbers as float32 when exact, else float32 plus float64 exceptions, or float64;
"X diff" and "XRelativeErr" are recomputed by the page from the statistics columns where that gives
the same float64 bit for bit (checked here), exceptions travel. Large string lists (a million names)
travel as one UTF-8 buffer with offsets. The page decodes this in well under a second for a million
rows and renders only the visible rows (virtual scrolling).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html as _html
import math
import operator
import zlib
from itertools import chain
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.pair.calls import Names
from msprobe_compare.load.names import Direction, Kind, parse_entry
from msprobe_compare.judge.rootcause import CallState, Origin, RootCause, Suspect
from msprobe_compare.model import CompareOutcome
from msprobe_compare.render import story
from msprobe_compare.runtime import gc_paused
from msprobe_compare.render import table
from msprobe_compare.render.cellkind import KIND_FLOAT, KIND_INT, KIND_OTHER
from msprobe_compare.render.report_script import STATE_CODE, asset, script

KIND_STR = KIND_OTHER  # text codes of the payload start here (assets/report_codes.js: K_STR)
BIG_DICT = 1024  # dictionaries with more strings travel as one buffer
COMPRESS_ABOVE = 64 * 1024  # payload bytes; smaller reports stay uncompressed
ZLIB_LEVEL = 1  # the payload is mostly float mantissas: higher levels cost time and gain little
MAX_SAFE_INT = 2**53
ROW_LIMIT = 200_000  # past this many rows the page holds the rows that matter plus a sample (issue #31)
SAMPLE_ROWS = 20_000  # the evenly spaced sample of a table past ROW_LIMIT
BLOCK_ROWS = 65_536  # a table past ROW_LIMIT is built a block at a time, only the blocks holding kept rows
_TYPE_NAMES = {
    np.dtype(np.int8): "i1", np.dtype(np.uint8): "u1", np.dtype(np.int16): "i2", np.dtype(np.uint16): "u2",
    np.dtype(np.int32): "i4", np.dtype(np.uint32): "u4", np.dtype(np.float32): "f4", np.dtype(np.float64): "f8",
}  # fmt: skip


class _Blob:
    """Binary buffers at 8-byte aligned offsets, described by references in the meta JSON."""

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def add(self, arr: np.ndarray) -> dict[str, Any]:
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        pad = -self.size % 8
        if pad:
            self.parts.append(bytes(pad))
            self.size += pad
        ref = {"o": self.size, "n": int(arr.size), "t": _TYPE_NAMES[arr.dtype]}
        self.parts.append(arr.data.cast("B"))
        self.size += arr.nbytes
        return ref


def _few(keys: list[Any]) -> bool:
    """Whether a sample of `keys` repeats (at most 3 distinct in 4)."""
    sample = keys[:: max(1, len(keys) // 512)]
    return len(set(sample)) * 4 <= len(sample) * 3


def _few_objects(cells: list[Any] | table.Column) -> bool:
    """Whether the list repeats a few objects (as table columns of texts do) rather than holding distinct ones."""
    return _few(list(map(id, _pick(cells, slice(None, None, max(1, len(cells) // 512))))))


def _coded(cells: Any) -> bool:
    return isinstance(cells, table.Column) and cells.codes is not None


def _pick(cells: list[Any] | table.Column, rows: slice | list[int]) -> list[Any]:
    """Cells at `rows` of a list or of a coded table.Column (whose cells are the objects of its table)."""
    if isinstance(cells, table.Column):  # only coded columns come here
        assert cells.codes is not None and cells.table is not None
        picked = cells.codes[rows] if isinstance(rows, slice) else cells.codes[np.asarray(rows, dtype=np.int64)]
        return list(map(cells.table.__getitem__, picked.tolist()))
    if isinstance(rows, slice):
        return cells[rows]
    return list(map(cells.__getitem__, rows))


def _ids(cells: list[Any] | table.Column) -> np.ndarray:
    """id() of every cell; for a coded column through its table."""
    if isinstance(cells, table.Column):  # only coded columns come here
        assert cells.codes is not None and cells.table is not None
        return np.fromiter(map(id, cells.table), dtype=np.int64, count=len(cells.table))[cells.codes]
    return np.fromiter(map(id, cells), dtype=np.int64, count=len(cells))


class _Dict:
    """Strings of one or more columns, numbered in order of first appearance."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.items: list[str] = []

    def codes(self, texts: list[str]) -> np.ndarray:
        """Code per text: equal texts share a code, except mostly distinct texts (names): appended as they are."""
        if _few_objects(texts):  # code each distinct object once
            ids = np.fromiter(map(id, texts), dtype=np.int64, count=len(texts))
            _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")  # first appearance
            code_of = np.empty(len(first), dtype=np.int64)
            code_of[order] = self.add(list(map(texts.__getitem__, first[order].tolist())))
            return code_of[inverse.reshape(-1)]
        if _few(texts):  # equal texts in distinct objects
            index, items = self.index, self.items
            new = [s for s in dict.fromkeys(texts) if s not in index]
            index.update(zip(new, range(len(items), len(items) + len(new))))
            items.extend(new)
            return np.fromiter(map(index.__getitem__, texts), dtype=np.int64, count=len(texts))
        start = len(self.items)
        self.items.extend(texts)
        return np.arange(start, start + len(texts), dtype=np.int64)

    def add(self, texts: list[str]) -> np.ndarray:
        """Codes of distinct texts, adding the new ones."""
        index, items = self.index, self.items
        out = np.empty(len(texts), dtype=np.int64)
        for k, s in enumerate(texts):
            code = index.get(s)
            if code is None:
                code = index[s] = len(items)
                items.append(s)
            out[k] = code
        return out


def _narrow(values: np.ndarray) -> np.ndarray:
    """The smallest integer type that holds `values`."""
    lo, hi = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return values.astype(t)
    raise ValueError("codes out of range")


def _classify(cells: list[Any]) -> tuple[np.ndarray, np.ndarray, bool]:
    """(kind per cell as table.Cells has it, float64 values, all cells are str) for a plain list."""
    n = len(cells)
    kind = np.full(n, KIND_OTHER, dtype=np.int8)
    values = np.full(n, np.nan)
    if set(map(type, cells)) <= {str}:
        return kind, values, True
    obj = np.empty(n, dtype=object)
    obj[:] = cells
    tid = np.fromiter(map(id, map(type, cells)), dtype=np.int64, count=n)
    is_float, is_int = tid == id(float), tid == id(int)
    if is_float.any():
        values[is_float] = obj[is_float].astype(np.float64)
        kind[is_float] = KIND_FLOAT
    if is_int.any():
        where = np.flatnonzero(is_int)
        safe = np.fromiter((-MAX_SAFE_INT <= v <= MAX_SAFE_INT for v in obj[where].tolist()), bool, len(where))
        values[where[safe]] = obj[where[safe]].astype(np.float64)
        kind[where[safe]] = KIND_INT
    return kind, values, False


def _encode_cells(cells: list[Any] | table.Column, strings: _Dict) -> tuple[np.ndarray, np.ndarray | None]:
    """(code per cell, numbers or None): codes 0-2 are numbers (see table.Column), 3+k the k-th string."""
    if isinstance(cells, table.Column) and not _coded(cells):
        if cells.kind is None:
            return _encode_cells(_as_list(cells), strings)
        kind, values, objects = cells.kind, cells.values, cells.objects
        assert values is not None  # a column with kinds has values
        text_rows = np.flatnonzero(kind == KIND_OTHER)
        if len(text_rows) == len(kind):
            return KIND_STR + strings.codes(list(map(str, objects))), None
        codes = kind.astype(np.int64)
        if len(text_rows):
            codes[text_rows] = KIND_STR + strings.codes(list(map(str, objects[text_rows].tolist())))
        return codes, np.where(kind < KIND_OTHER, values, np.nan)
    if isinstance(cells, table.Cells):
        kind, values = cells.kind, cells.values
    elif _few_objects(cells):  # classify each distinct object once
        _, first, inverse = np.unique(_ids(cells), return_index=True, return_inverse=True)
        objects = _pick(cells, first.tolist())
        kind_u, values_u, _ = _classify(objects)
        codes_u = kind_u.astype(np.int64)
        texts = np.flatnonzero(kind_u == KIND_OTHER)
        texts = texts[np.argsort(first[texts], kind="stable")]  # first appearance
        codes_u[texts] = KIND_STR + strings.add([str(objects[k]) for k in texts.tolist()])
        inverse = inverse.reshape(-1)
        numbers = kind_u < KIND_OTHER
        return codes_u[inverse], (np.where(numbers, values_u, np.nan)[inverse] if numbers.any() else None)
    elif isinstance(cells, table.Column):  # coded: the other shapes returned above
        return _encode_cells(cells.objects, strings)
    else:
        kind, values, texts_only = _classify(cells)
        if texts_only:
            return KIND_STR + strings.codes(cells), None
    text_rows = np.flatnonzero(kind == KIND_OTHER)
    if len(text_rows) == len(cells):
        return KIND_STR + strings.codes(list(map(str, cells))), None
    codes = kind.astype(np.int64)
    if len(text_rows):
        codes[text_rows] = KIND_STR + strings.codes(list(map(str, map(cells.__getitem__, text_rows.tolist()))))
    return codes, np.where(kind < KIND_OTHER, values, np.nan)


def _numbers(nums: np.ndarray, blob: _Blob) -> dict[str, Any]:
    """float32 when the values survive the round trip; float32 plus float64 exceptions when few do not."""
    with np.errstate(over="ignore", invalid="ignore"):
        small = nums.astype(np.float32)
        bad = ~((small.astype(np.float64) == nums) | np.isnan(nums))
    count = int(np.count_nonzero(bad))
    if count == 0:
        return {"v": blob.add(small)}
    if count > len(nums) // 3:
        return {"v": blob.add(nums)}
    where = np.flatnonzero(bad)
    return {"v": blob.add(small), "xi": blob.add(where.astype(np.uint32)), "xv": blob.add(nums[where])}


def _strings(items: list[str], blob: _Blob) -> dict[str, Any]:
    """Strings for the page: a JSON list when few, else one UTF-8 buffer plus UTF-16 end offsets.

    The page decodes the buffer once and cuts the strings out of it (slices of one string), much
    faster than parsing a million JSON strings. A lone surrogate becomes "?" (one unit for one).
    """
    n = len(items)
    if n < BIG_DICT:
        return {"s": items}
    if all(map(str.isascii, items)):
        lens = np.fromiter(map(len, items), dtype=np.int64, count=n)
    else:
        lens = np.fromiter((len(x.encode("utf-16-le", "surrogatepass")) // 2 for x in items), np.int64, n)
    ends = np.cumsum(lens)
    if n and ends[-1] >= 1 << 32:
        return {"s": items}
    return {"b": blob.add(np.frombuffer("".join(items).encode("utf-8", "replace"), dtype=np.uint8)),
            "e": blob.add(ends.astype(np.uint32))}  # fmt: skip


def _codes(stored: np.ndarray, blob: _Blob) -> dict[str, Any]:
    """Codes as an array, or, when one value dominates, as that value plus the exceptions."""
    n = len(stored)
    if n == 0:
        return {"fill": 0, "n": 0}
    counts = np.bincount(stored - stored.min()) if stored.max() - stored.min() < (1 << 20) else None
    if counts is not None:
        common = int(counts.argmax()) + int(stored.min())
        where = np.flatnonzero(stored != common)
        if len(where) * 64 < n:  # indices compress far worse than runs of one code
            at, values = blob.add(where.astype(np.uint32)), blob.add(_narrow(stored[where]))
            return {"fill": common, "n": n, "at": at, "v": values}
    return {"a": blob.add(_narrow(stored))}


def _partner(header: list[str], k: int) -> int | None:
    """Index of "NPU X" for a "Bench X" column (any case), else None."""
    name = header[k].lower()
    if not name.startswith("bench "):
        return None
    want = "npu " + name[len("bench ") :]
    return next((j for j in range(k) if header[j].lower() == want), None)


def _equal(cells: list[Any] | table.Column, ref_cells: list[Any] | table.Column) -> np.ndarray:
    """cells[i] == ref_cells[i] for each row; for two coded columns through a table of their values."""
    if isinstance(cells, table.Column) and isinstance(ref_cells, table.Column) and _coded(cells) and _coded(ref_cells):
        a, b, codes_a, codes_b = cells.table, ref_cells.table, cells.codes, ref_cells.codes
        assert a is not None and b is not None and codes_a is not None and codes_b is not None
        if all(type(x) is str for x in a + b):  # str equality is key equality
            index: dict[str, int] = {}
            for x in a + b:
                index.setdefault(x, len(index))
            va = np.array([index[x] for x in a], dtype=np.int64)
            vb = np.array([index[x] for x in b], dtype=np.int64)
            return va[codes_a] == vb[codes_b]
        eq = np.array([[bool(x == y) for y in b] for x in a], dtype=np.bool_)
        return eq.reshape(len(a), len(b))[codes_a, codes_b]
    left = cells.objects if isinstance(cells, table.Column) else cells  # coded (other shapes do not come here)
    right = ref_cells.objects if isinstance(ref_cells, table.Column) else ref_cells
    return np.fromiter(map(operator.eq, left, right), dtype=bool, count=len(left))


def _encode_like(
    cells: list[Any] | table.Column, ref_cells: list[Any] | table.Column, ref_codes: np.ndarray, strings: _Dict
) -> tuple[np.ndarray, np.ndarray | None]:
    """Encode a "Bench X" column whose cells mostly equal its "NPU X" column's: only the others are coded."""
    same = _equal(cells, ref_cells)
    same &= ref_codes >= KIND_STR  # equal to a text (str == only matches str)
    other = np.flatnonzero(~same)
    codes = ref_codes.copy()
    if len(other):
        sub, nums = _encode_cells(_pick(cells, other.tolist()), strings)
        if nums is not None:
            return _encode_cells(cells, strings)
        codes[other] = sub
    return codes, None


def _as_list(col: Any) -> list[Any]:
    """A column without number kinds as its list of cells."""
    return col.objects if isinstance(col.objects, list) else list(col.objects)


def _numeric(col: Any) -> bool:
    """Whether the column carries number kinds (a table.Column with kinds, or table.Cells)."""
    return isinstance(col, table.Cells) or (isinstance(col, table.Column) and col.kind is not None)


def _encode_table(
    header: list[str], cols: Sequence[list[Any] | table.Column], blob: _Blob
) -> tuple[list[dict[str, Any]], list[_Dict]]:
    """Column metadata (codes and numbers in `blob`) and the dictionaries they index."""
    cols = [_as_list(c) if isinstance(c, table.Column) and c.kind is None and not _coded(c) else c for c in cols]
    dicts: list[_Dict] = []
    metas: list[dict[str, Any]] = []
    codes_of: list[np.ndarray] = []
    nums_of: list[np.ndarray | None] = []
    dict_of: list[int] = []
    for k, cells in enumerate(cols):
        ref = _partner(header, k)
        d = dict_of[ref] if ref is not None else len(dicts)
        if ref is None:
            dicts.append(_Dict())
        if ref is not None and not _numeric(cells) and not _numeric(cols[ref]):
            codes, nums = _encode_like(cells, cols[ref], codes_of[ref], dicts[d])
        else:
            codes, nums = _encode_cells(cells, dicts[d])
        meta: dict[str, Any] = {"name": header[k], "dict": d}
        stored = codes
        if ref is not None and len(codes) and np.count_nonzero(codes == codes_of[ref]) * 2 > len(codes):
            stored, meta["ref"] = codes - codes_of[ref], ref
        elif len(dicts[d].items) > max(256, len(codes) // 4):
            stored, meta["delta"] = np.diff(codes, prepend=0), True
        meta["codes"] = _codes(stored, blob)
        metas.append(meta)
        codes_of.append(codes)
        nums_of.append(nums)
        dict_of.append(d)
    for k, nums in enumerate(nums_of):
        if nums is not None:
            numeric = codes_of[k] < KIND_STR
            metas[k]["num"] = _derived(header, k, nums, numeric, nums_of, blob) or _numbers(nums, blob)
    return metas, dicts


def _derivations() -> dict[str, tuple[str, str, str]]:
    """Summary-mode columns the page can recompute: "X diff" = NPU - Bench; "XRelativeErr" = |diff / Bench * 100|."""
    out = {}
    for npu, bench, diff, rel in zip(table.NPU_STATS, table.BENCH_STATS, table.STAT_DIFFS, table.STAT_RELATIVE):
        out[diff] = ("sub", npu, bench)
        out[rel] = ("relpct", diff, bench)
    return out


DERIVED = _derivations()


def _derived(header: list[str], k: int, nums: np.ndarray, numeric: np.ndarray, nums_of: list[np.ndarray | None],
             blob: _Blob) -> dict[str, Any] | None:  # fmt: skip
    """The column as a formula over two other columns plus the cells where it does not hold, if that is smaller.

    The page computes in float64 as numpy does here, so every value is checked bit for bit (sign of zero too).
    """
    rule = DERIVED.get(header[k])
    if rule is None or rule[1] not in header or rule[2] not in header:
        return None
    ia, ib = header.index(rule[1]), header.index(rule[2])
    a, b = nums_of[ia], nums_of[ib]
    if a is None or b is None:
        return None
    with np.errstate(all="ignore"):
        calc = a - b if rule[0] == "sub" else np.abs(a / b * 100)
    same = ((calc == nums) & (np.signbit(calc) == np.signbit(nums))) | (np.isnan(calc) & np.isnan(nums))
    where = np.flatnonzero(numeric & ~same)
    if len(where) * 4 > len(nums):
        return None
    return {"d": rule[0], "a": ia, "b": ib, "xi": blob.add(where.astype(np.uint32)), "xv": blob.add(nums[where])}


def _num(x: float | None) -> Any:
    """JSON-safe number: non-finite values as their Python text."""
    if x is None:
        return None
    return x if math.isfinite(x) else repr(float(x))


def _origin_json(o: Origin, position: _Places | dict[str, int], stacks: dict[str, list[str]]) -> dict[str, Any]:
    """An origin for the page; `stack`: its call's stack lines as dumped (the page shows them as frames)."""
    ev = o.evidence
    return {
        "entry": o.entry, "pos": position.get(o.entry, -1), "kind": o.kind.value, "phase": o.phase,
        "after": o.after, "description": story.origin_description(o), "advice": story.origin_advice(o),
        "args": list(o.differing_args), "stack": [str(x) for x in stacks.get(o.entry) or ()],
        "evidence": _evidence_json(ev),
    }  # fmt: skip


def _evidence_json(ev) -> dict[str, Any]:
    return {"metric": ev.metric, "inputs": _num(ev.inputs), "outputs": _num(ev.outputs),
            "threshold": _num(ev.threshold), "first_row": ev.first_row, "floor": _num(ev.floor),
            "floor_source": story.floor_source_text(ev.floor_source), "ratio": _num(ev.ratio),
            "dtypes": list(ev.dtypes), "args": [story.arg_text(a) for a in ev.args], "text": story.evidence_text(ev)}  # fmt: skip


def _suspect_json(s: Suspect, position: _Places | dict[str, int]) -> dict[str, Any]:
    return {"entry": s.entry, "pos": position.get(s.entry, -1), "phase": s.phase,
            "reason": story.suspect_reason_text(s), "description": story.suspect_description(s),
            "advice": story.suspect_advice(s), "evidence": _evidence_json(s.evidence)}  # fmt: skip


def _state_codes(states: list[CallState]) -> np.ndarray:
    """STATE_CODE of each state, looked up by identity (an Enum's own hash is slow for a million)."""
    by_id = {id(k): v for k, v in STATE_CODE.items()}
    try:
        return np.fromiter(map(by_id.__getitem__, map(id, states)), np.uint8, len(states))
    except KeyError:  # an equal state that is not the member itself
        return np.fromiter(map(STATE_CODE.__getitem__, states), np.uint8, len(states))


def _tree_links(entries: list[str], tree: dict[str, str | None],
                by_dict: bool = False) -> tuple[np.ndarray, list[str], Any]:  # fmt: skip
    """The module tree as the page draws it: per entry, then per module of the tree that made no call of its own
    (`extra`, in order of first appearance among the children, then the parents), the index of its parent (-1:
    none); and each name's place (`.get(name, -1)`). Through one table of the entry names (`pair.calls.Names`, in C)
    where the names occur once; else, or with `by_dict`, through a dict (the last place of a repeated name)."""
    keys, values = list(tree), [p or "" for p in tree.values()]  # no parent: falsy either way
    n = len(entries)
    names = None if by_dict else Names(entries)
    if names is None or names.repeated:
        position = dict(zip(entries, range(n)))
        linked = np.fromiter(map(bool, values), dtype=bool, count=len(keys))
        linked &= np.fromiter(map(operator.ne, keys, values), dtype=bool, count=len(keys))
        rows = np.flatnonzero(linked).tolist()
        children, parents = list(map(keys.__getitem__, rows)), list(map(values.__getitem__, rows))
        extra = [name for name in dict.fromkeys(chain(children, parents)) if name not in position]
        position.update(zip(extra, range(n, n + len(extra))))
        parent_idx = np.full(n + len(extra), -1, dtype=np.int64)
        get = position.__getitem__
        child_at = np.fromiter(map(get, children), np.int64, len(rows))
        parent_idx[child_at] = np.fromiter(map(get, parents), np.int64, len(rows))
        return parent_idx, extra, position
    kf, vf = names.find(keys), names.find(values)
    linked = np.fromiter(map(bool, values), dtype=bool, count=len(keys))
    # key != value: by place where both are entries (each name once), else as texts (neither an entry: few)
    linked &= (kf != vf) | (kf < 0)
    for i in np.flatnonzero(linked & (kf < 0) & (vf < 0)).tolist():
        linked[i] = keys[i] != values[i]
    rows = np.flatnonzero(linked)
    kr, vr = kf[rows], vf[rows]
    missing = chain((keys[i] for i in rows[kr < 0].tolist()), (values[i] for i in rows[vr < 0].tolist()))
    extra = list(dict.fromkeys(missing))
    at_extra = dict(zip(extra, range(n, n + len(extra))))
    for i, r in zip(np.flatnonzero(kr < 0).tolist(), rows[kr < 0].tolist()):
        kr[i] = at_extra[keys[r]]
    for i, r in zip(np.flatnonzero(vr < 0).tolist(), rows[vr < 0].tolist()):
        vr[i] = at_extra[values[r]]
    parent_idx = np.full(n + len(extra), -1, dtype=np.int64)
    parent_idx[kr] = vr
    return parent_idx, extra, _Places(names, at_extra)


class _Places:
    """`.get(name, default)` over an entry table and the extra modules' places."""

    def __init__(self, names: Names, extra: dict[str, int]) -> None:
        self.names, self.extra = names, extra

    def get(self, name: str, default: int = -1) -> int:
        at = self.names.get(name)
        return at if at >= 0 else self.extra.get(name, default)


def _rootcause_json(rc: RootCause, blob: _Blob, stacks: dict[str, list[str]] | None = None) -> dict[str, Any]:
    entries = list(rc.entries)
    n = len(entries)
    parent_idx, extra, position = _tree_links(entries, rc.parents)
    nan = np.full(n, np.nan)
    out = rc.out_scores if rc.out_scores is not None else nan
    ins = rc.in_scores if rc.in_scores is not None else nan
    threshold = rc.origins[0].evidence.threshold if rc.origins else None
    floors = rc.floors if rc.floors is not None else nan
    return {
        "metric": rc.metric, "threshold": _num(threshold), "entries": _strings(entries, blob), "extra": extra,
        "states": blob.add(_state_codes(rc.states)),
        "out": blob.add(np.asarray(out, dtype=np.float64)), "in": blob.add(np.asarray(ins, dtype=np.float64)),
        "parent": blob.add(_narrow(parent_idx + 1)),  # 0: no parent
        "origins": [_origin_json(o, position, stacks or {}) for o in rc.origins],
        "suspects": [_suspect_json(x, position) for x in rc.suspects],
        "floor": blob.add(np.asarray(floors, dtype=np.float64)),
        "margin": rc.tolerance.origin, "lowest_precision": rc.lowest_precision, "repaired": rc.repaired,
    }  # fmt: skip


def _module_call(entry: str) -> str | None:
    """A module entry (`Module.<path>.<Class>.<forward|backward>.<n>`, `...parameters_grad`; a MindSpore cell's:
    `Cell.`) as the alignment names its forward call (`path`, `path#n`); None for any other entry."""
    n = parse_entry(entry)
    if n.kind is not Kind.MODULE:
        return None
    if n.direction is Direction.PARAMETERS_GRAD:
        return (n.module_path or None) if not n.counter else None  # 26.x's counted parameters_grad: none
    if not n.module_path or not n.counter:
        return None
    return n.module_path if n.counter == "0" else f"{n.module_path}#{n.counter}"


def _alignment_json(outcome: CompareOutcome) -> dict[str, Any] | None:
    """The alignment (pair.align.describe) plus what the side-by-side trees need: `order` (each side's aligned
    module calls in the order they end) and `marks` (npu module call: "origin" or "suspect", the innermost module
    call holding a root-cause origin or suspect)."""
    al = outcome.alignment
    if al is None:
        return None
    names: dict[str, set[str]] = {"npu": set(), "bench": set()}
    for p in al["pairs"]:
        names["npu"].update(p["npu"].split(";"))
        names["bench"].update(p["bench"].split(";"))
    for side in names:
        names[side].update(al["unpaired"][side])
        for wrapper, call in al["same_as"][side].items():
            names[side].update((wrapper, call))
    order: dict[str, list[str]] = {}
    for side, rows in (("npu", outcome.npu), ("bench", outcome.bench)):
        seen: list[str] = []
        for entry in rows.entries:
            if ".forward." in entry:  # merged rows: each part
                seen.extend(n for n in map(_module_call, entry.split(";")) if n is not None and n in names[side])
        order[side] = list(dict.fromkeys(seen))
    marks: dict[str, str] = {}
    rc = outcome.rootcause
    if rc is not None:
        found = [(o.entry, "origin") for o in rc.origins] + [(x.entry, "suspect") for x in rc.suspects]
        for entry, kind in found:
            at: str | None = entry
            for _ in range(4096):  # the nearest enclosing module call of the entry (merged rows: each part)
                if at is None:
                    break
                calls = [c for c in (_module_call(part) for part in at.split(";")) if c in names["npu"]]
                if calls:
                    for c in calls:
                        marks.setdefault(c, kind)
                    break
                at = rc.parents.get(at)
    return {**al, "order": order, "marks": {"npu": marks}}


def _above(line: str) -> str:
    """An advisor-file line as the page shows it: the page's root cause stands above the advisor, not below."""
    return line.replace("see Root cause below", "see Root cause above")


def _summary(outcome: CompareOutcome) -> dict[str, Any]:
    n = len(outcome)
    matched = int(np.count_nonzero(outcome.match >= 0))
    colour = outcome.marks.colour if outcome.marks is not None else None
    counts = {
        "total": n, "matched": matched, "unmatched": n - matched,
        "red": int(np.count_nonzero(colour == Colour.RED)) if colour is not None else None,
        "yellow": int(np.count_nonzero(colour == Colour.YELLOW)) if colour is not None else None,
        "fuzzy": int(np.count_nonzero(outcome.fuzzy)) if outcome.fuzzy is not None else 0,
    }  # fmt: skip
    levels = outcome.counts
    counts.update(errors=levels.errors, warnings=levels.warnings, excluded=levels.excluded)
    advisor = None
    if outcome.advisor is not None:
        note = story.advisor_note(outcome.mode, outcome.advisor, levels, outcome.rootcause)
        advisor = [*story.advisor_shown_lines(outcome.advisor, levels, outcome.mode, outcome.rootcause), "",
                   *map(_above, note)]  # fmt: skip
    head = story.headline(outcome.rootcause, levels)
    return {"mode": outcome.mode.value, "counts": counts, "advisor": advisor,
            "headline": {"state": head.state, "text": head.text} if head is not None else None,
            "unmatched_warning": story.unmatched_warning(levels, None, outcome.alignment is not None)}  # fmt: skip


def kept_rows(outcome: CompareOutcome, limit: int | None = None, sample: int | None = None) -> np.ndarray | None:
    """The rows a report of a large table holds (ascending), None: all of them. Past `limit` rows: the rows of
    origin and suspect calls, the red, yellow and unmatched rows, in that order while they fit in `limit` (the last
    group that does not fit evenly thinned), and an evenly spaced `sample` of the whole table (defaults: ROW_LIMIT,
    SAMPLE_ROWS)."""
    limit = ROW_LIMIT if limit is None else limit
    sample = min(limit, SAMPLE_ROWS if sample is None else sample)
    n = len(outcome)
    if n <= limit:
        return None
    groups = []
    rc = outcome.rootcause
    if rc is not None:
        codes = _state_codes(rc.states)
        special = (codes == STATE_CODE[CallState.ORIGIN]) | (codes == STATE_CODE[CallState.SUSPECT])
        entry = np.asarray(outcome.npu.entry_index, dtype=np.int64)
        groups.append(special[np.clip(entry, 0, max(0, len(special) - 1))] if len(special) else np.zeros(n, bool))
    if outcome.marks is not None:
        colour = np.asarray(outcome.marks.colour)
        groups += [colour == Colour.RED, colour == Colour.YELLOW]
    groups.append(np.asarray(outcome.match) < 0)
    keep = np.zeros(n, dtype=bool)
    room = max(0, limit - sample)
    for group in groups:
        new = np.flatnonzero(group & ~keep)
        if len(new) > room:
            new = new[np.linspace(0, len(new) - 1, room).astype(np.int64)] if room else new[:0]
        keep[new] = True
        room -= len(new)
    keep[np.linspace(0, n - 1, min(n, sample)).astype(np.int64)] = True
    return np.flatnonzero(keep)


def _take(cells: Any, rows: np.ndarray) -> Any:
    """The cells at `rows` of a column (a list, table.Cells or a table.Column of any shape), in the same shape."""
    at = rows.tolist()
    if isinstance(cells, table.Cells):
        out = table.Cells(map(cells.__getitem__, at))
        out.kind, out.values = cells.kind[rows], cells.values[rows]
        return out
    if isinstance(cells, table.Column):
        if cells.codes is not None:
            return table.Column(codes=cells.codes[rows], table=cells.table)
        if cells.kind is not None:
            assert cells.values is not None  # a column with kinds has values
            return table.Column(np.asarray(cells.objects, dtype=object)[rows], cells.kind[rows], cells.values[rows])
        cells = cells.objects
    return list(map(cells.__getitem__, at))


def _concat(parts: list[Any]) -> Any:
    """One column from its blocks' pieces (as _take makes them); shapes that differ become lists of cells."""
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, table.Column) and p.codes is not None for p in parts):
        offsets = np.cumsum([0] + [len(p.table or []) for p in parts[:-1]])
        return table.Column(codes=np.concatenate([p.codes + off for p, off in zip(parts, offsets.tolist())]),
                            table=[x for p in parts for x in p.table or []])  # fmt: skip
    if all(isinstance(p, table.Column) and p.kind is not None and p.codes is None for p in parts):
        return table.Column(
            np.concatenate([np.asarray(p.objects, dtype=object) for p in parts]),
            np.concatenate([p.kind for p in parts]),
            np.concatenate([p.values for p in parts]),
        )
    cells = [p.cells() if isinstance(p, table.Column) else p for p in parts]
    numeric = [c for c in cells if isinstance(c, table.Cells)]
    if len(numeric) == len(cells):
        out = table.Cells(chain.from_iterable(numeric))
        out.kind = np.concatenate([c.kind for c in numeric])
        out.values = np.concatenate([c.values for c in numeric])
        return out
    return list(chain.from_iterable(cells))


def _kept_columns(outcome: CompareOutcome, columns: list[table.Column] | None, rows: np.ndarray) -> list[Any]:
    """The plain-style columns at `rows`: taken from `columns` when given, else built a block at a time."""
    if columns is not None:
        return [_take(c, rows) for c in columns]
    style, memo = table.Style(text_booleans=False), dict[str, Any]()
    pieces: list[list[Any]] = []
    n = len(outcome)
    for lo in range(0, n, BLOCK_ROWS):
        hi = min(n, lo + BLOCK_ROWS)
        a, b = np.searchsorted(rows, [lo, hi])
        if a == b:
            continue
        block = table.column_data(outcome, style, lo, hi, memo)
        pieces.append([_take(c, rows[a:b] - lo) for c in block])
        del block
    return [_concat([p[k] for p in pieces]) for k in range(len(pieces[0]))] if pieces else []


def payload(outcome: CompareOutcome, title: str, columns: list[table.Column] | None = None,
            compared: dict[str, Any] | None = None, tables: Sequence[str] = ()) -> bytes:  # fmt: skip
    """The binary payload the page decodes (see the module docstring); `columns`: the plain-style
    table.column_data of `outcome`, when the caller has it already; `compared`: what was compared
    (report.compared_facts), shown at the top; `tables`: the result table's files (named where the page holds
    only part of a large table, see kept_rows)."""
    with gc_paused():  # millions of short-lived objects, no cycles: the collector would only rescan the heap
        return _payload(outcome, title, columns, compared, tables)


def _payload(outcome: CompareOutcome, title: str, columns: list[table.Column] | None,
             compared: dict[str, Any] | None = None, tables: Sequence[str] = ()) -> bytes:  # fmt: skip
    blob = _Blob()
    header = table.header(outcome)
    total = len(outcome)
    rows = kept_rows(outcome)
    if rows is not None:
        cols: Sequence[Any] = _kept_columns(outcome, columns, rows)
    else:
        cols = columns if columns is not None else table.column_data(outcome, table.Style(text_booleans=False))
    metas, dicts = _encode_table(header, cols, blob)
    del cols
    at = rows if rows is not None else slice(None)
    colour = outcome.marks.colour[at] if outcome.marks is not None else np.zeros(total, dtype=np.uint8)[at]
    entry = np.asarray(outcome.npu.entry_index, dtype=np.int64)[at]
    n = len(entry)
    rc = outcome.rootcause
    partial = None
    if rows is not None:
        partial = {"total": total, "rows": blob.add(rows.astype(np.uint32)), "limit": ROW_LIMIT,
                   "sample": SAMPLE_ROWS, "tables": list(tables)}  # fmt: skip
    meta = {
        "version": 1, "title": title, "generated": _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        **_summary(outcome), "n": n, "columns": metas, "dicts": [_strings(d.items, blob) for d in dicts],
        "colour": _codes(np.asarray(colour, dtype=np.int64), blob), "partial": partial,
        "entry": _codes(np.diff(entry, prepend=0), blob),
        "rootcause": _rootcause_json(rc, blob, outcome.npu.stacks) if rc is not None else None,
        "alignment": _alignment_json(outcome),  # runs of different code: the pairs, the calls left (pair.align)
        "compared": compared,
    }  # fmt: skip
    head = orjson.dumps(meta)
    body: list[bytes | memoryview] = [len(head).to_bytes(4, "little"), head, bytes(-(4 + len(head)) % 8)]
    return b"".join(body + blob.parts)


def page(data: bytes, title: str, *, compress: bool | None = None) -> str:
    """The HTML text around a payload; `compress` None: only when the payload is large."""
    if compress is None:
        compress = len(data) > COMPRESS_ABOVE
    if compress:
        data = zlib.compress(data, ZLIB_LEVEL)
    encoded = base64.b64encode(data).decode("ascii")  # the base64 alphabet cannot close the script tag
    code = script()  # its codes checked against Python's on first use (report_script.py)
    if "</" in code or "<!--" in code:  # nothing in the script may end its element early
        raise ValueError("the report script must not contain '</' or '<!--'")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<link rel=\"icon\" href=\"data:,\">\n"
        f"<title>{_html.escape(title)}</title>\n<style>{asset('report.css')}</style>\n</head>\n"
        f"<body>\n{asset('report.html')}\n"
        f"<script type=\"application/octet-stream\" id=\"payload\" data-encoding=\"{'zlib' if compress else 'raw'}\">"
        f"{encoded}</script>\n<script>{code}</script>\n</body></html>\n"
    )  # fmt: skip


def write_html(
    path: Path, outcome: CompareOutcome, title: str, *, compress: bool | None = None,
    columns: list[table.Column] | None = None, compared: dict[str, Any] | None = None, tables: Sequence[str] = (),
) -> None:  # fmt: skip
    """Write the report page for `outcome` to `path` (the caller publishes it atomically)."""
    data = payload(outcome, title, columns, compared, tables)
    path.write_text(page(data, title, compress=compress), encoding="utf-8")
