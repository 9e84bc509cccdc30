"""The workbook as a person sees it: fitted column widths, a narrow stack column, frozen header, print setup."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import zipfile

import numpy as np
import openpyxl
import pytest

from conftest import DATA
from msprobe_compare.judge.highlight import Colour
from msprobe_compare.render import xlsx
from msprobe_compare.render.table import Column
from parity import mismatches

CASE = DATA / "pytorch" / "mlp_bug_stat"


def expected_rows() -> tuple[list[str], list[list[str]]]:
    with open(CASE / "expected" / "hl.csv", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0][:-1], [r[:-1] for r in rows[1:]]


def widths_of(ws) -> dict[str, float]:
    return {ws.cell(row=1, column=k + 1).value: ws.column_dimensions[xlsx.column_letter(k)].width
            for k in range(ws.max_column)}  # fmt: skip


def test_compare_workbook_layout(run_cli):
    run = run_cli(CASE, "pytorch", "-s")
    assert run.code == 0, run.out
    path = run.one("compare_result_*.xlsx")
    assert not mismatches(path, CASE / "expected" / "hl.csv")  # values and colours as before
    header, rows = expected_rows()
    ws = openpyxl.load_workbook(path).active
    widths = widths_of(ws)
    assert list(widths) == header
    longest = {name: max(len(r[k]) for r in rows) for k, name in enumerate(header)}
    for name in ("NPU Name", "Bench Name", "NPU Dtype", "Err_message"):
        assert longest[name] + 1 <= widths[name] <= xlsx.MAX_WIDTH, (name, longest[name], widths[name])
    assert longest["NPU_Stack_Info"] > 1000 and widths["NPU_Stack_Info"] == 45  # narrow ...
    stack = header.index("NPU_Stack_Info")
    assert [ws.cell(row=i + 2, column=stack + 1).value for i in range(len(rows))] == [r[stack] for r in rows]  # whole
    assert all(w <= xlsx.MAX_WIDTH for w in widths.values())
    assert widths["NPU max"] < 20  # numbers show at most 12 characters, whatever their repr
    assert widths["Requires_grad Consistent"] < len("Requires_grad Consistent")  # the header wraps instead
    assert ws.freeze_panes == "A2"
    assert ws.row_dimensions[1].height == 30  # two header lines
    assert ws.cell(row=1, column=1).alignment.wrap_text and ws.cell(row=1, column=1).font.b
    assert ws.cell(row=2, column=stack + 1).alignment.wrap_text is not True  # data rows stay one line high
    assert ws.page_setup.orientation == "landscape"
    assert (ws.page_setup.fitToWidth, ws.page_setup.fitToHeight) == (1, 0) and ws.sheet_properties.pageSetUpPr.fitToPage
    assert ws.print_title_rows == "$1:$1"
    assert ws.print_area == f"'Sheet'!$A$1:${xlsx.column_letter(len(header) - 1)}${len(rows) + 1}"


def test_widths_capped_and_fitted():
    n = 50
    names = [f"name.{k}" for k in range(n)]
    names[17] = "x" * 500
    coded = Column(codes=np.zeros(n, dtype=np.int32), table=["short", "a much longer text that no row uses"])
    numbers = Column(objects=np.array([None] * n, dtype=object), kind=np.zeros(n, dtype=np.int8),
                     values=np.full(n, -1.2345678901234567e-05))  # fmt: skip
    header = ["NPU Name", "Result", "NPU max", "NPU_Stack_Info"]
    stacks = Column(codes=np.ones(n, dtype=np.int32), table=["N/A", "s" * 3000])
    widths = xlsx.column_widths(header, [names, coded, numbers, stacks], 0, n)
    assert widths == [xlsx.MAX_WIDTH, 9.6, 14, 45]  # "Result": its header; "short" is shorter
    no_stacks = Column(codes=np.zeros(n, dtype=np.int32), table=["N/A"])
    assert xlsx.column_widths(header, [names, coded, numbers, no_stacks], 0, 17)[::3] == [9, 18.4]  # rows 0-16 only


def test_widths_of_a_big_sheet_sample_rows():
    class Counting(list):
        reads = 0

        def __getitem__(self, i):
            Counting.reads += 1
            return super().__getitem__(i)

    n = 1_000_000
    col = Counting(["ab"] * n)
    col[n - 1] = "c" * 30  # the last row is always in the sample
    assert xlsx.column_widths(["h"], [col], 0, n) == [32]
    assert Counting.reads == xlsx.WIDTH_SAMPLE
    coded = Column(codes=np.zeros(n, dtype=np.int32), table=["a", "b" * 40])
    coded.codes[123_457] = 1  # a coded column counts every row, however few use a text
    assert xlsx.column_widths(["h"], [coded], 0, n) == [42]
    assert xlsx.column_widths(["h"], [coded], 200_000, n) == [4.1]


def test_split_sheets_fit_their_own_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(xlsx, "MAX_SHEET_ROWS", 4)
    names = ["a", "b", "c", "d" * 30, "e", "f"]
    path = tmp_path / "t.xlsx"
    xlsx.write_xlsx_columns(path, ["NPU Name"], [names], [Colour.NONE] * 6)
    wb = openpyxl.load_workbook(path)
    assert [ws.title for ws in wb.worksheets] == ["part_0", "part_1"]
    assert [ws.column_dimensions["A"].width for ws in wb.worksheets] == [7.4, 32]
    assert [[c.value for c in ws["A"]] for ws in wb.worksheets] == [["NPU Name", "a", "b", "c"],
                                                                  ["NPU Name", "d" * 30, "e", "f"]]  # fmt: skip
    assert zipfile.ZipFile(path).testzip() is None


SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")


@pytest.mark.skipif(SOFFICE is None, reason="LibreOffice not installed")
def test_prints_on_few_pages(run_cli, tmp_path):
    """Before: the stack text ran to the right across pages, 44 pages for 103 rows. Now one page wide."""
    run = run_cli(CASE, "pytorch", "-s")
    path = run.one("compare_result_*.xlsx")
    profile = tmp_path / "profile"
    subprocess.run([SOFFICE, f"-env:UserInstallation=file://{profile}", "--headless", "--convert-to", "pdf",
                    "--outdir", str(tmp_path), str(path)], check=True, capture_output=True, timeout=120)  # fmt: skip
    pdf = (tmp_path / path.with_suffix(".pdf").name).read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf))
    assert 1 <= pages <= 2
