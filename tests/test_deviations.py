"""Each deliberate deviation from the reference (docs/deviations.md), shown on real or minimal data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import openpyxl

from conftest import DATA
from msprobe_compare.config import Options, load_config
from parity import NAN_INF_REASON, read_xlsx


def _fills(xlsx: Path) -> list[str]:
    return read_xlsx(xlsx)[2]


def test_d1_colours_by_default(run_cli):
    run = run_cli(DATA / "pytorch/mlp_struct_stat", "pytorch")
    assert run.code == 0
    assert "yellow" in _fills(run.one("compare_result_*.xlsx"))


def test_d1_no_highlight_is_plain(run_cli):
    run = run_cli(DATA / "pytorch/mlp_struct_stat", "pytorch", "--no-highlight")
    assert set(_fills(run.one("compare_result_*.xlsx"))) == {""}


def test_d2_split_sheets_stay_coloured(run_cli, monkeypatch):
    monkeypatch.setattr("msprobe_compare.render.xlsx.MAX_SHEET_ROWS", 40)
    run = run_cli(DATA / "pytorch/mlp_struct_stat", "pytorch")
    wb = openpyxl.load_workbook(run.one("compare_result_*.xlsx"))
    assert wb.sheetnames == ["part_0", "part_1", "part_2", "Summary"]  # the Summary after the table (D22)
    assert sum(ws.max_row - 1 for ws in wb.worksheets[:3]) == 109
    header, rows, fills = read_xlsx(run.one("compare_result_*.xlsx"))
    assert fills.count("yellow") == 6  # the colours of the unsplit table, see expected/hl.csv


def test_d3_nan_is_red(run_cli):
    run = run_cli(DATA / "pytorch/cnn_bug_stat", "pytorch")
    header, rows, fills = read_xlsx(run.one("compare_result_*.xlsx"))
    col = {c: i for i, c in enumerate(header)}
    nan_rows = [i for i, r in enumerate(rows) if "Nan" in (r[col["NPU max"]], r[col["NPU min"]])]
    assert nan_rows, "the cnn bug case has a NaN in conv2's output"
    for i in nan_rows:
        assert fills[i] == "red"
        assert NAN_INF_REASON in rows[i][col["Err_message"]]


def _leaf(mx: float, rg: bool = True) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": mx, "Min": 0.0,
            "Mean": mx / 2, "Norm": mx, "requires_grad": rg}  # fmt: skip


def _write_pair(folder: Path, npu: dict, bench: dict) -> Path:
    for side, data in (("npu", npu), ("bench", bench)):
        d = folder / side
        d.mkdir(parents=True, exist_ok=True)
        (d / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "data": data}))
    cfg = folder / "compare.json"
    cfg.write_text(
        json.dumps({"npu_path": str(folder / "npu/dump.json"), "bench_path": str(folder / "bench/dump.json")})
    )
    return cfg


def test_d4_reason_once(run_cli, tmp_path):
    # two inputs whose max differs by 2 and an output whose max differs by 50: the reference writes the
    # order-of-magnitude reason once per input (twice); we write it once
    npu = {"Torch.mul.0.forward": {"input_args": [_leaf(12.0), _leaf(13.0)], "output": [_leaf(150.0)]}}
    bench = {"Torch.mul.0.forward": {"input_args": [_leaf(10.0), _leaf(11.0)], "output": [_leaf(100.0)]}}
    _write_pair(tmp_path / "c", npu, bench)
    run = run_cli(tmp_path / "c", "pytorch")
    header, rows, fills = read_xlsx(run.one("compare_result_*.xlsx"))
    msg = rows[2][header.index("Err_message")]
    reason = "maximum absolute error of both input/parameters and output exceed 1"
    assert msg.count(reason) == 1, msg
    assert fills[2] == "yellow"


def test_d9_read_only_tree_with_spaces(run_cli, tmp_path):
    src = DATA / "pytorch/mlp_bug_stat"
    dst = tmp_path / "dumps with spaces ü" / "case"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("expected"))
    for p in sorted(dst.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        run = run_cli(dst, "pytorch", "-s", out_dir=tmp_path / "out put")
        assert run.code == 0, run.out
        assert run.one("compare_result_*.xlsx").stat().st_size > 0
    finally:
        for p in dst.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_d9_symlinked_dump_refused(run_cli, tmp_path):
    dst = tmp_path / "case"
    shutil.copytree(DATA / "pytorch/mlp_bug_stat", dst, ignore=shutil.ignore_patterns("expected"))
    real = dst / "npu/step0/rank/dump.json"
    moved = tmp_path / "elsewhere.json"
    real.rename(moved)
    real.symlink_to(moved)
    run = run_cli(dst, "pytorch", "-s")
    assert run.code == 1
    assert "symbolic link" in run.out and "Traceback" not in run.out


def test_d11_print_log_default_on(tmp_path):
    cfg = _write_pair(tmp_path, {}, {})
    assert load_config(cfg, Options(framework="pytorch")).print_compare_log is True


def test_d11_per_row_logs_without_the_key(run_cli, tmp_path):
    src = DATA / "pytorch/mlp_same_tensor"
    doc = json.loads((src / "compare.json").read_text())
    doc.pop("is_print_compare_log")
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({k: str((src / v).resolve()) for k, v in doc.items()}))
    run = run_cli(src, "pytorch", "-s", input_name=str(cfg))
    assert run.code == 0
    assert "[INFO] start compare: Functional.linear.0.forward.input.0" in run.out
    assert "[Functional.linear.0.forward.input.0] Compare result: cosine 1.0, euc_dist 0.0" in run.out


def test_per_row_logs_off(run_cli, tmp_path):
    src = DATA / "pytorch/mlp_same_tensor"
    doc = json.loads((src / "compare.json").read_text())
    doc = {k: str((src / v).resolve()) if isinstance(v, str) else v for k, v in doc.items()}
    doc["is_print_compare_log"] = False
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps(doc))
    run = run_cli(src, "pytorch", "-s", input_name=str(cfg))
    assert run.code == 0 and "start compare" not in run.out


def test_d21_console_never_says_all_data_meets_the_requirements_when_rows_are_red(run_cli):
    """The reference prints its advisor's "All data in comparison result meets the accuracy requirements." whenever
    its rule (the first failing row of one column) finds none; we print it only where nothing contradicts it; its
    advisor file keeps the words."""
    red = run_cli(DATA / "pytorch/cnn_bug_stat", "pytorch")
    meets = "meets the accuracy requirements"
    assert meets not in red.out and "but 75 rows are at error level (red)" in red.out
    assert meets in red.one("advisor_*.txt").read_text().splitlines()[2]
    same = run_cli(DATA / "pytorch/mlp_same_stat", "pytorch", out_dir=red.out_dir.parent / "same")
    assert f"Expert Advice: All data in comparison result {meets}." in same.out


def test_d22_workbook_has_a_summary_and_marked_rows(run_cli):
    """The reference's workbook is its table alone; ours adds the Summary sheet after it and marks the origin rows
    by font and frame (values and fills as the reference's: the parity tests read the table sheets)."""
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "-s")
    path = run.one("compare_result_*.xlsx")
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames == ["Sheet", "Summary"]
    ws = wb["Sheet"]
    bold = [ws.cell(row=k, column=1).value for k in range(2, ws.max_row + 1) if ws.cell(row=k, column=1).font.b]
    assert bold == ["Functional.relu.1.forward.input.0", "Functional.relu.1.forward.input.inplace",
                    "Functional.relu.1.forward.output.0"]  # fmt: skip
    header, rows, fills = read_xlsx(path)
    assert len(rows) == 103 and fills.count("") == 103  # mlp_bug_stat colours nothing (expected/hl.csv)
    plain = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "-s", "--no-highlight", out_dir=run.out_dir.parent / "p")
    ws = openpyxl.load_workbook(plain.one("compare_result_*.xlsx"))["Sheet1"]
    assert not any(ws.cell(row=k, column=1).font.b for k in range(2, ws.max_row + 1))  # a plain table: no marks
