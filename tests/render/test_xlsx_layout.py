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
from parity import mismatches, read_xlsx

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
    # the names stay in view: frozen with the header, up to the first metric column where those columns fit a
    # screen; here they are 202 characters wide, so the two name columns
    assert sum(widths[h] for h in header[:8]) > xlsx.FREEZE_MAX_WIDTH >= widths["NPU Name"] + widths["Bench Name"]
    assert ws.freeze_panes == "C2"
    assert ws.row_dimensions[1].height == 30  # two header lines
    assert ws.cell(row=1, column=1).alignment.wrap_text and ws.cell(row=1, column=1).font.b
    assert ws.cell(row=2, column=stack + 1).alignment.wrap_text is not True  # data rows stay one line high
    # printed readable: at 80% (not fitted to a page width), landscape, header row and name column on every page
    assert ws.page_setup.orientation == "landscape" and ws.page_setup.scale == xlsx.PRINT_SCALE == 80
    assert ws.page_setup.pageOrder == "overThenDown" and ws.print_options.gridLines
    assert not (ws.sheet_properties.pageSetUpPr and ws.sheet_properties.pageSetUpPr.fitToPage)
    assert ws.print_title_rows == "$1:$1" and ws.print_title_cols == "$A:$A"
    assert "&P of &N" in ws.oddFooter.right.text
    # the name column prints as the title of every page, so the area starts at the second (not twice on page 1)
    assert ws.print_area == f"'Sheet'!$B$1:${xlsx.column_letter(len(header) - 1)}${len(rows) + 1}"


def test_frozen_columns_fit_a_screen():
    names = [40.0, 40.0, 12.0, 12.0, 10.0, 10.0, 9.0, 9.0, 14.0]
    assert xlsx.frozen_columns(names, 8) == 8  # up to the first metric column: 142 characters
    assert xlsx.frozen_columns([60.0, 60.0, *names[2:]], 8) == 2  # 182: the two name columns
    assert xlsx.frozen_columns([100.0, 60.0, *names[2:]], 8) == 1
    assert xlsx.frozen_columns(names, 0) == 0  # the header alone (kernel tables, merge_result)


@pytest.mark.parametrize("native", ["1", "0"])
def test_marks_change_fonts_and_frames_only(tmp_path, monkeypatch, native):
    """Marked rows (origin, suspect) keep their values and fills: parity reads the same table (C and Python rows)."""
    monkeypatch.setenv("MSPROBE_NATIVE", native)
    n = 6
    names = [f"call.{k}.forward.output.0" for k in range(n)]
    numbers = [1.5, -2.0, 3.25, 0.0, 7.0, 1e-9]
    colours = np.array([Colour.NONE, Colour.RED, Colour.YELLOW, Colour.RED, Colour.NONE, Colour.NONE], dtype=np.int8)
    marks = np.array([0, 1, 2, 0, 1, 2], dtype=np.int8)
    plain, marked = tmp_path / "plain.xlsx", tmp_path / "marked.xlsx"
    xlsx.write_xlsx_columns(plain, ["NPU Name", "Max diff"], [names, numbers], colours)
    xlsx.write_xlsx_columns(marked, ["NPU Name", "Max diff"], [names, numbers], colours, marks=marks)
    assert read_xlsx(marked) == read_xlsx(plain)  # values and fills
    ws = openpyxl.load_workbook(marked).active
    for k in range(n):
        for cell in ws[k + 2]:
            assert (cell.font.b, cell.font.i) == (marks[k] == 1, marks[k] == 2), (k, cell.coordinate)
            assert cell.border.top.style == {0: None, 1: "medium", 2: "dashed"}[int(marks[k])]
            assert cell.border.bottom.style == cell.border.top.style


def test_marks_in_blocks_and_in_the_forked_half(tmp_path, monkeypatch):
    """Marked rows at block edges and in the half a forked child writes keep their place, values and fills."""
    monkeypatch.setattr(xlsx, "PARALLEL_MIN_ROWS", 16)
    monkeypatch.setattr(xlsx, "BLOCK_ROWS", 8)
    n = 64
    names = [f"r{k}" for k in range(n)]
    colours = np.array([Colour.RED if k % 5 == 0 else Colour.NONE for k in range(n)], dtype=np.int8)
    marks = np.zeros(n, dtype=np.int8)
    marks[[0, 7, 8, 40, 63]] = [1, 2, 1, 1, 2]
    plain, marked = tmp_path / "plain.xlsx", tmp_path / "marked.xlsx"
    xlsx.write_xlsx_columns(plain, ["NPU Name", "v"], [names, list(range(n))], colours)
    xlsx.write_xlsx_columns(marked, ["NPU Name", "v"], [names, list(range(n))], colours, marks=marks)
    assert read_xlsx(marked) == read_xlsx(plain)
    ws = openpyxl.load_workbook(marked).active
    assert [(ws.cell(row=k + 2, column=2).font.b, ws.cell(row=k + 2, column=2).font.i) for k in range(n)] == [
        (bool(m == 1), bool(m == 2)) for m in marks.tolist()]  # fmt: skip


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
    """At 80%: the pages a table of 103 rows and 27 columns needs when read on paper, the stack column's text ending
    at the print area (it once ran to the right across 44 pages)."""
    run = run_cli(CASE, "pytorch", "-s")
    path = run.one("compare_result_*.xlsx")
    profile = tmp_path / "profile"
    subprocess.run([SOFFICE, f"-env:UserInstallation=file://{profile}", "--headless", "--convert-to", "pdf",
                    "--outdir", str(tmp_path), str(path)], check=True, capture_output=True, timeout=120)  # fmt: skip
    pdf = (tmp_path / path.with_suffix(".pdf").name).read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf))
    assert 2 <= pages <= 40  # the table's columns over several pages, each readable
