"""Shape texts are str() of the shape list exactly, also where a cache key could confuse two shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_compare.load.rows import _Builder


@pytest.mark.parametrize(
    "shapes",
    [([1, 2], [1.0, 2], [True, 2]), ([float("nan")], [None]), ([2**70], [[1], 2], None, [])],
    ids=["int-float-bool", "nan-none", "odd"],
)
def test_shape_text_is_str_of_the_list(shapes: tuple) -> None:
    builder = _Builder(Path("dump.json"))
    for _ in range(2):  # the second round is served from the cache where there is one
        assert [builder.shape_text(s) for s in shapes] == [str(s) for s in shapes]


def test_raw_cells_column_equals_item_access() -> None:
    from msprobe_compare.load.rows import _ABSENT, RawCells

    raw = RawCells()
    raw.put(0, ["x", "x", "x", "x"])
    raw.put(2, [True, _ABSENT, False, _ABSENT])
    raw.put(5, [None, None, None, None])
    assert raw.column([5, 0], 1) == [None, "x"]
    assert raw.column([0, 2, 5], 0) == ["x", True, None] == [raw[(r, 0)] for r in (0, 2, 5)]
    assert raw.column([2], 2) == [False]
    with pytest.raises(KeyError):
        raw.column([2], 1)
