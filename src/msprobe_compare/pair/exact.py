"""Default matching (spec §3.2) and data mapping (§3.5).

The result is one index array: for NPU row i, `bench[i]` is the matched bench row or UNMATCHED (-1); every later
stage tells an unmatched row by `match < 0`, never by a name.
"""

from __future__ import annotations

from itertools import repeat
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.rows import RowTable, coded

_C: Any = native.built("_sharednames")

UNMATCHED = -1  # the match of an NPU row without bench counterpart
NO_MATCH_NAME = "N/A"  # a mapping file's value for "no counterpart" (what -lm writes, as the reference does)

# dtypes that match each other although their names differ (spec §3.2); float64 is not included
FLOAT_GROUPS = (
    frozenset({"Float16", "Float32", "BFloat16"}),
    frozenset({"torch.float16", "torch.float32", "torch.bfloat16"}),
)


_CATEGORY_PREFIXES = (("uint", "int"), ("int", "int"), ("float", "float"), ("bfloat", "float"),
                      ("bool", "bool"), ("complex", "complex"))  # fmt: skip


def dtype_category(dtype: str) -> str:
    """MindSpore or PyTorch tensor dtype -> int/float/bool/complex (other texts unchanged), spec §3.2."""
    base = dtype.removeprefix("torch.").lower()
    for prefix, category in _CATEGORY_PREFIXES:
        if base.startswith(prefix) and base[len(prefix) :].isdigit() or base == prefix == "bool":
            return category
    return dtype


def dtypes_compatible(npu: str, bench: str, cross_framework: bool = False) -> bool:
    if npu == bench:
        return True
    if cross_framework:
        return dtype_category(npu) == dtype_category(bench)
    return any(npu in group and bench in group for group in FLOAT_GROUPS)


def match_exact(
    npu: RowTable, bench: RowTable, keys: list[str | None] | None = None, cross_framework: bool = False
) -> np.ndarray:
    """Join on (compare key, shape), keep NPU order, then apply the dtype gate. A key None (-cm/-am: a row that
    cannot be mapped) matches nothing, whatever the bench names."""
    if keys is not None and any(k is None for k in keys):
        blocked = np.fromiter((k is None for k in keys), dtype=bool, count=len(keys))
        out = match_exact(npu, bench, [k if k is not None else "" for k in keys], cross_framework)
        out[blocked] = UNMATCHED
        return out
    names = npu.names if keys is None else cast("list[str]", keys)  # no None left here
    # The first bench row of each name (built from the end) is the first of its (name, shape) too when the shapes
    # agree; names are nearly always unique, so only rows whose bench name repeats need the (name, shape) join.
    out, repeats = first_index(bench.names, names)
    hit = np.flatnonzero(out >= 0)
    if len(hit):
        npu_shapes, bench_shapes, _ = _joint_codes(npu.shape, bench.shape)
        differ = hit[npu_shapes[hit] != bench_shapes[out[hit]]]
        out[differ] = -1
        if repeats and len(differ):  # a repeated bench name: a later row of it may have the shape
            repeated = _repeated(bench.names)
            rows = [i for i in differ.tolist() if names[i] in repeated]
            if rows:
                index: dict[tuple[str, str], int] = {}
                for j, key in enumerate(zip(bench.names, bench.shape)):
                    if key[0] in repeated:
                        index.setdefault(key, j)
                out[rows] = [index.get((names[i], npu.shape[i]), -1) for i in rows]
    return apply_dtype_gate(npu, bench, out, cross_framework)


def _py_first_index(names: list[str], keys: list[str]) -> tuple[np.ndarray, bool]:
    """(per key the position of the first name equal to it, -1: none (int64); whether some name repeats)."""
    n = len(names)
    first = dict(zip(reversed(names), range(n - 1, -1, -1)))
    return np.fromiter(map(first.get, keys, repeat(-1)), dtype=np.int64, count=len(keys)), len(first) < n


def _c_first_index(names: list[str], keys: list[str]) -> tuple[np.ndarray, bool]:
    """_py_first_index in C (`_sharednames.first_index`: a hash table of the names; lists only, texts with a UTF-8
    form)."""
    out = np.empty(len(keys), dtype=np.int64)
    repeated = _C.first_index(names, keys, out) if type(names) is list and type(keys) is list else None
    return _py_first_index(names, keys) if repeated is None else (out, repeated > 0)


first_index = native.twin("_sharednames", _c_first_index, _py_first_index)


def _joint_codes(npu: list[str], bench: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Codes of two text columns in one numbering (equal texts, equal codes) and the texts coded: each column is
    coded by itself (its rows share a few text objects), then the bench side's few distinct texts renumbered."""
    npu_codes, npu_distinct = coded(npu)
    bench_codes, bench_distinct = coded(bench)
    index = {text: k for k, text in enumerate(npu_distinct)}
    renumber = np.fromiter((index.setdefault(text, len(index)) for text in bench_distinct), dtype=np.int32,
                           count=len(bench_distinct))  # fmt: skip
    return npu_codes, renumber[bench_codes], list(index)


def _repeated(names: list[str]) -> set[str]:
    seen: set[str] = set()
    return {name for name in names if name in seen or seen.add(name)}  # type: ignore[func-returns-value]


def apply_dtype_gate(npu: RowTable, bench: RowTable, match: np.ndarray, cross_framework: bool) -> np.ndarray:
    """Unmatch pairs whose dtypes are incompatible (spec §3.2); decided once per distinct dtype pair."""
    out = match.copy()
    hit = np.flatnonzero(match >= 0)
    if not len(hit):
        return out
    npu_codes, bench_codes, names = _joint_codes(npu.dtype, bench.dtype)  # the distinct dtypes: a few
    width = len(names)
    pairs = npu_codes[hit].astype(np.int64) * width + bench_codes[match[hit]]
    if width * width <= 4 * len(hit) + 4096:  # the pairs present, from a count over every pair of codes: no sort
        distinct = np.flatnonzero(np.bincount(pairs, minlength=width * width))
    else:
        distinct = np.unique(pairs)
    ok = np.array([dtypes_compatible(names[p // width], names[p % width], cross_framework)
                   for p in distinct.tolist()], dtype=bool)  # fmt: skip
    out[hit[~ok[np.searchsorted(distinct, pairs)]]] = -1
    return out


def match_data_mapping(npu: RowTable, bench: RowTable, mapping: Mapping[str, str | None]) -> np.ndarray:
    """Left join on the mapped name only: no shape condition and no dtype gate (spec §3.5). A row mapped to None or
    to NO_MATCH_NAME has no counterpart (a bench row really named `N/A` is not its match)."""
    index: dict[str | None, int] = {}
    for j, name in enumerate(bench.names):
        index.setdefault(name, j)
    index[None] = UNMATCHED
    index[NO_MATCH_NAME] = UNMATCHED
    return np.fromiter(
        (index.get(mapping.get(name, name), UNMATCHED) for name in npu.names), dtype=np.int64, count=len(npu)
    )
