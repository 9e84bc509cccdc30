"""match_exact: the first bench row with the NPU row's (compare key, shape), including repeated bench names."""

from __future__ import annotations

import os
from itertools import repeat

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_compare.pair import exact


class _Table:
    def __init__(self, names: list[str], shapes: list[str]) -> None:
        self.names, self.shape, self.dtype = names, shapes, ["torch.float32"] * len(names)

    def __len__(self) -> int:
        return len(self.names)


def _join(keys: list[str], shapes: list[str], bench: _Table) -> list[int]:
    """The plain (name, shape) join, first bench row wins."""
    index: dict[tuple[str, str], int] = {}
    for j, key in enumerate(zip(bench.names, bench.shape)):
        index.setdefault(key, j)
    return list(map(index.get, zip(keys, shapes), repeat(-1)))


_names = st.sampled_from(["a", "b", "c", "d.0", "e", "ü.x", "\ud800lone", "a" * 30, "a" * 31])
_shapes = st.sampled_from(["[1]", "[2]", "[1, 2]", "None"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_names, _shapes), max_size=12), st.lists(st.tuples(_names, _shapes), max_size=12),
       st.booleans(), st.sampled_from(["1", "0"]))  # fmt: skip
def test_same_as_the_name_and_shape_join(npu_rows: list, bench_rows: list, with_keys: bool, use_native: str) -> None:
    os.environ["MSPROBE_NATIVE"] = use_native  # the native join (_sharednames.c) and the dict join
    try:
        _check(npu_rows, bench_rows, with_keys)
    finally:
        os.environ.pop("MSPROBE_NATIVE")


def _check(npu_rows: list, bench_rows: list, with_keys: bool) -> None:
    npu = _Table([n for n, _ in npu_rows], [s for _, s in npu_rows])
    bench = _Table([n for n, _ in bench_rows], [s for _, s in bench_rows])
    keys = [n.upper().lower() for n in npu.names] if with_keys else None  # equal texts, other objects
    got = exact.match_exact(npu, bench, keys=keys)  # type: ignore[arg-type]
    assert got.dtype == np.int64
    assert got.tolist() == _join(keys or npu.names, npu.shape, bench)


def test_shape_texts_compare_by_value_not_identity() -> None:
    npu = _Table(["a", "b"], ["[1, 2]", "".join(["[1", ", 2]"])])
    bench = _Table(["b", "a"], ["".join(["[1,", " 2]"]), "[1, 2]"])
    assert exact.match_exact(npu, bench).tolist() == [1, 0]  # type: ignore[arg-type]


def test_native_join_on_many_names() -> None:
    from tests.native_helpers import native_module

    fast = native_module("_sharednames")
    names = [f"Functional.op{k % 977}.{k // 3}.forward.input.{k % 3}" for k in range(60_000)]
    keys = names[::-1][:40_000] + ["missing", ""] + names[:5]
    out = np.empty(len(keys), dtype=np.int64)
    first: dict[str, int] = {}
    for j, name in enumerate(names):
        first.setdefault(name, j)
    assert fast.first_index(names, keys, out) == len(names) - len(first)
    assert out.tolist() == [first.get(k, -1) for k in keys]
