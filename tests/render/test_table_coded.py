"""table._coded: equal values share one code, whether or not they are one object (native and Python paths)."""

from __future__ import annotations

import pytest

from msprobe_compare.render.table import _coded


@pytest.mark.parametrize("use_native", ["1", "0"])
def test_equal_values_share_a_code(monkeypatch: pytest.MonkeyPatch, use_native: str) -> None:
    monkeypatch.setenv("MSPROBE_NATIVE", use_native)
    parts = ["torch.", "float32"]
    values = ["[1, 2]", "".join(parts), "".join(parts), "[1, 2]", None, "".join(["[1, ", "2]"]), None, 3]
    assert values[1] is not values[2]  # equal texts, distinct objects
    col = _coded(values)
    assert col.table == ["[1, 2]", "torch.float32", None, 3]
    assert col.codes.tolist() == [0, 1, 1, 0, 2, 0, 2, 3]
    assert _coded([]).table == [] and len(_coded([]).codes) == 0


import math

import numpy as np

from msprobe_compare.load.rows import StatKind
from msprobe_compare.measure.stats import Cell
from msprobe_compare.render import table
from msprobe_compare.render.celltext import csv_field, json_value
from msprobe_compare.render.columntext import CsvFormat, JsonFormat

_V = [1.5, math.inf, -math.inf, math.nan, 7.0, 2.0**60, 0.0, 3.0, -2.5, math.nan]
_STAT = [StatKind.NUMBER, StatKind.NUMBER, StatKind.NUMBER, StatKind.NUMBER, StatKind.INT, StatKind.INT,
         StatKind.NAN, StatKind.NONE, StatKind.RAW, StatKind.RAW]  # fmt: skip
_RAW = {(8, 0): True, (9, 0): "=cmd, with a comma"}


class _Rows:
    """The parts of a RowTable a statistic column reads."""

    def __init__(self) -> None:
        self.stats = np.array([[v, 0.0, 0.0, 0.0] for v in _V])
        self.stat_kind = np.array([[k, 0, 0, 0] for k in _STAT], dtype=np.int8)
        self.raw = _RAW

    def __len__(self) -> int:
        return len(_V)


def _stat_oracle(style: table.Style, rows: list[int]) -> list[object]:
    """The object of each cell as the per-cell rules give it (None for a number the writers format)."""
    out: list[object] = []
    for r in rows:
        v, k = _V[max(r, 0)], _STAT[max(r, 0)]
        if r < 0:
            out.append(table.NA)
        elif k == StatKind.NUMBER:
            out.append(None if math.isfinite(v) else style.number(v))
        elif k == StatKind.INT:
            out.append(None if abs(v) <= 2.0**53 else int(v))
        else:
            out.append({StatKind.NAN: "Nan", StatKind.NONE: "None"}.get(k, style.raw(_RAW.get((r, 0)))))
    return out


@pytest.mark.parametrize("style", [table.Style(text_booleans=False), table.Style(text_booleans=True), table.VALUES])
def test_numeric_columns_code_their_other_cells_as_the_cells_are(style: table.Style) -> None:
    """A statistic or difference column keeps its non-number cells as codes (table._Others); the objects, the cells
    and the writers' texts are those of the per-cell rules."""
    rows = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 3]
    for col, expected in ((table._stat_column(_Rows(), 0, style, sl=slice(None)), _stat_oracle(style, rows[:10])),
                          (table._stat_column(_Rows(), 0, style, np.array(rows)), _stat_oracle(style, rows))):  # fmt: skip
        assert col.others is not None
        assert [(type(x), repr(x)) for x in col.objects.tolist()] == [(type(x), repr(x)) for x in expected]
        cells = col.cells()
        assert CsvFormat().column(col, 0, len(col)) == [csv_field(x) for x in cells]
        assert JsonFormat("k").column(col, 0, len(col)) == ['"k":' + json_value(x) for x in cells]
    diff = np.array([1.5, math.inf, math.nan, 2.0**60, 4.0, 0.25])
    kinds = np.array([Cell.VALUE, Cell.VALUE, Cell.VALUE, Cell.INT, Cell.NAN, Cell.NA], dtype=np.int8)
    col = table._diff_column(diff, kinds, style, False)
    expected = [None, style.number(math.inf), style.number(math.nan), 2**60, "Nan", table.NA]
    assert [(type(x), repr(x)) for x in col.objects.tolist()] == [(type(x), repr(x)) for x in expected]
    assert CsvFormat().column(col, 0, len(col)) == [csv_field(x) for x in col.cells()]
