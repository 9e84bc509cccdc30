"""Cells that look like formulas are stored as text; outputs are atomic."""

from __future__ import annotations

import openpyxl

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.render.files import atomic_output
from msprobe_compare.render.xlsx import write_xlsx_columns


def test_formula_like_strings_are_text(tmp_path):
    path = tmp_path / "t.xlsx"
    evil = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "=cmd|' /C calc'!A0"]
    write_xlsx_columns(path, ["a"], [evil], [Colour.NONE] * len(evil))
    ws = openpyxl.load_workbook(path).active
    cells = [ws.cell(row=r + 2, column=1) for r in range(len(evil))]
    assert [c.value for c in cells] == evil
    assert all(c.data_type == "s" for c in cells)


def test_failed_write_leaves_nothing(tmp_path):
    final = tmp_path / "result.xlsx"
    try:
        with atomic_output(final) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []
