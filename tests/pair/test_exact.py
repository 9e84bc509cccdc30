"""match_exact: the first bench row with the NPU row's (compare key, shape), including repeated bench names."""

from __future__ import annotations

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


_names = st.sampled_from(["a", "b", "c", "d.0", "e"])
_shapes = st.sampled_from(["[1]", "[2]", "[1, 2]", "None"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_names, _shapes), max_size=12), st.lists(st.tuples(_names, _shapes), max_size=12),
       st.booleans())  # fmt: skip
def test_same_as_the_name_and_shape_join(npu_rows: list, bench_rows: list, with_keys: bool) -> None:
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
