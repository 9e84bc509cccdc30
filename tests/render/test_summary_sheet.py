"""The workbook carries the answer: a Summary sheet after the table (verdict, counts, origins and suspects with
their evidence, the run's other files) and the origin and suspect rows marked in the table, cells unchanged."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import openpyxl
import pytest

from conftest import DATA
from msprobe_compare.render import xlsx
from msprobe_compare.render.summary_sheet import FIELDS, SHEET_NAME
from parity import mismatches, read_xlsx

NOISE = DATA / "noise/noise_stat.tar.xz"
LABELS = [label for label, _, _ in FIELDS]


def _extract(name: str, root: Path) -> Path:
    """One case of the noise set (reference dumper, bf16 against fp32)."""
    with tarfile.open(NOISE) as tar:
        members = [m for m in tar.getmembers() if m.name.lstrip("./").startswith(f"{name}/")]
        tar.extractall(root, members=members)
    return root / name


def _summary(path: Path) -> list[list]:
    ws = openpyxl.load_workbook(path)[SHEET_NAME]
    return [list(row) for row in ws.iter_rows(values_only=True)]


def _value(rows: list[list], label: str):
    """The cell beside a label in column A."""
    return next(row[1] for row in rows if row and row[0] == label)


def _listed(rows: list[list], title: str) -> list[dict]:
    """The items under an "Origins (n)" or "Suspects (n)" title, each as {label: cell} with its "Call"."""
    at = next(k for k, row in enumerate(rows) if row and isinstance(row[0], str) and row[0].startswith(title + " ("))
    items: list[dict] = []
    for row in rows[at + 1 :]:
        if not row or row[0] is None or row[0] == "none":
            break
        if row[0] == f"{title[:-1]} {len(items) + 1}":
            items.append({"Call": row[1]})
        else:
            items[-1][row[0]] = row[1]
    return items


def test_summary_of_a_bf16_run_with_a_gelu_bug(run_cli, tmp_path):
    """The issue's run: a x1.1 bug in a bf16 run whose row has no colour. The Summary names it with the numbers that
    decided, links its row, and the table marks the rows of its call (bold, framed) without touching a cell."""
    case = _extract("tfm_amp_scale1p1_L1_stat", tmp_path / "cases")
    run = run_cli(case, "pytorch", "--format", "xlsx,csv,html")
    assert run.code == 0, run.out
    path = run.one("compare_result_*.xlsx")
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Sheet", SHEET_NAME] and book.active.title == "Sheet"
    rows = _summary(path)
    head = re.search(r"Root cause: (.+)", run.out).group(1)
    assert _value(rows, "Root cause") == head
    truth = json.loads((case / "TRUTH.json").read_text())["origin"]
    [origin] = _listed(rows, "Origins")
    assert list(origin) == ["Call", *LABELS]
    assert origin["Call"] in truth and origin["Kind"] == "computation" and origin["Phase"] == "forward"
    for name in ("Outputs", "Noise floor", "Threshold", "Ratio to floor"):
        assert isinstance(origin[name], float), name
    assert origin["Outputs"] > origin["Threshold"] and origin["Ratio to floor"] == pytest.approx(
        origin["Outputs"] / origin["Noise floor"], rel=1e-9)  # fmt: skip
    assert origin["Description"] in head and origin["Floor source"]
    advisor = run.one("advisor_*.txt").read_text()
    assert f"{origin['Call']}" in advisor and f"noise floor {origin['Noise floor']:.3g}" in advisor
    # the deciding row: linked to its place in the table, which marks the call's rows
    ws = book["Sheet"]
    summary = book[SHEET_NAME]
    [link] = [c.hyperlink.location for r in summary.iter_rows() for c in r if c.hyperlink]
    target = re.fullmatch(r"'Sheet'!A(\d+)", link)
    assert target and ws.cell(row=int(target.group(1)), column=1).value == origin["Deciding row"]
    names = [c.value for c in ws["A"]][1:]
    marked = [k for k, name in enumerate(names) if ws.cell(row=k + 2, column=1).font.b]
    assert marked and all(names[k].startswith(origin["Call"] + ".") for k in marked)
    assert len(marked) == sum(name.startswith(origin["Call"] + ".") for name in names)
    assert all(ws.cell(row=k + 2, column=5).border.top.style == "medium" for k in marked)
    header, table, _ = read_xlsx(path)  # the table sheet alone: the Summary is not read as rows of it
    assert [r[0] for r in table] == names and len(header) == ws.max_column
    # counts and the other files of the run
    counts = re.search(r"Rows: ([\d,]+) NPU rows, ([\d,]+) matched", run.out)
    rows_n, matched = (int(x.replace(",", "")) for x in counts.groups())
    assert _value(rows, "NPU rows") == rows_n and _value(rows, "Matched (with a bench counterpart)") == matched
    assert _value(rows, "Unmatched (no bench counterpart)") == 0
    files = {row[0]: row[1] for row in rows if row and row[0] in ("Table (csv)", "HTML report", "Advisor")}
    assert files == {"Table (csv)": run.one("compare_result_*.csv").name, "HTML report":
                     run.one("compare_report_*.html").name, "Advisor": run.one("advisor_*.txt").name}  # fmt: skip
    assert "Table (xlsx)" not in [row[0] for row in rows if row]  # the workbook itself is not "another file"


def test_suspect_rows_are_italic_and_listed(run_cli, tmp_path):
    case = _extract("tfm_splitk_scale1p01_L0_stat", tmp_path / "cases")
    run = run_cli(case, "pytorch")
    path = run.one("compare_result_*.xlsx")
    rows = _summary(path)
    assert _listed(rows, "Origins") == []
    [suspect] = _listed(rows, "Suspects")
    assert suspect["Call"] == "Functional.linear.3.forward" and suspect["Kind"] == "below margin"
    assert "precision: high" in suspect["To decide"]  # what to dump to decide
    assert suspect["Noise floor"] < suspect["Outputs"] <= suspect["Threshold"]
    ws = openpyxl.load_workbook(path)["Sheet"]
    styled = {ws.cell(row=k, column=1).value for k in range(2, ws.max_row + 1) if ws.cell(row=k, column=1).font.i}
    assert styled and all(name.startswith("Functional.linear.3.forward.") for name in styled)
    assert {ws.cell(row=k, column=1).border.top.style for k in range(2, ws.max_row + 1)
            if ws.cell(row=k, column=1).font.i} == {"dashed"}  # fmt: skip


def test_red_rows_and_nothing_meets(run_cli):
    """cnn_bug_stat: 75 red rows while the reference rule finds no failing row: the Summary counts them and shows the
    reference's advice as the console does, never "meets the accuracy requirements"; the table stays at parity."""
    case = DATA / "pytorch/cnn_bug_stat"
    run = run_cli(case, "pytorch", "-s")
    path = run.one("compare_result_*.xlsx")
    assert not mismatches(path, case / "expected" / "hl.csv")
    rows = _summary(path)
    assert _value(rows, "Red rows") == 75 and _value(rows, "Error rows (--fail-on error)") == 75
    text = "\n".join(str(c) for row in rows for c in row if c is not None)
    assert "meets the accuracy requirements" not in text
    assert "Expert Advice: no row fails the reference rule (Result column), but 75 rows are at error level" in text
    [origin] = _listed(rows, "Origins")
    assert origin["Call"] == "Functional.relu.1.forward" and origin["Kind"] == "boundary"


def test_mostly_unmatched_warns_first(run_cli, tmp_path):
    """The mlp NPU run against the cnn bench run: the warning is the Summary's first statement."""
    mlp, cnn = DATA / "pytorch/mlp_bug_stat", DATA / "pytorch/cnn_bug_stat"
    case = tmp_path / "case"
    case.mkdir()
    (case / "compare.json").write_text(json.dumps({"npu_path": str(mlp / "npu/step0/rank/dump.json"),
                                                   "bench_path": str(cnn / "bench/step0/rank/dump.json")}))  # fmt: skip
    run = run_cli(case, "pytorch")
    rows = [row for row in _summary(run.one("compare_result_*.xlsx")) if row and row[0]]
    assert [row[0] for row in rows[2:4]] == ["Warning", "Root cause"]
    assert "93 of 103 NPU rows (90%) have no bench counterpart" in rows[2][1] and "--fail-on unmatched" in rows[2][1]
    assert _value(rows, "Unmatched (no bench counterpart)") == 93


def test_split_table_links_into_its_part(run_cli, monkeypatch, tmp_path):
    monkeypatch.setattr(xlsx, "MAX_SHEET_ROWS", 40)
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch")
    book = openpyxl.load_workbook(run.one("compare_result_*.xlsx"))
    assert book.sheetnames == ["part_0", "part_1", "part_2", SHEET_NAME]
    [link] = [c.hyperlink.location for r in book[SHEET_NAME].iter_rows() for c in r if c.hyperlink]
    sheet, row = re.fullmatch(r"'(part_\d)'!A(\d+)", link).groups()
    assert book[sheet].cell(row=int(row), column=1).value == "Functional.relu.1.forward.input.0"
    assert book.defined_names is not None
    assert book["part_1"].print_title_cols == "$A:$A" and book["part_1"].freeze_panes == "C2"
