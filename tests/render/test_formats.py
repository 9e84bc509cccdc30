"""--format: csv and jsonl carry the same rows as the xlsx; CSV cells cannot start a formula."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import openpyxl
import pytest

from conftest import DATA
from msprobe_compare.judge.highlight import Colour
from msprobe_compare.render.flat import write_csv
from parity import read_xlsx, same

CASE = DATA / "pytorch/mlp_struct_stat"


def test_all_formats_agree(run_cli):
    run = run_cli(CASE, "pytorch", "-s", "--format", "xlsx,csv,jsonl")
    assert run.code == 0, run.out
    header, rows, fills = read_xlsx(run.one("compare_result_*.xlsx"))
    with open(run.one("compare_result_*.csv"), newline="") as f:
        csv_rows = list(csv.reader(f))
    assert csv_rows[0] == header + ["colour"]
    lines = [json.loads(x) for x in run.one("compare_result_*.jsonl").read_text().splitlines()]
    assert len(csv_rows) - 1 == len(lines) == len(rows) == 109
    for ours, c, j, fill in zip(rows, csv_rows[1:], lines, fills):
        assert c[-1] == j["colour"] == fill
        for name, a, b in zip(header, ours, c):
            assert same(name, a, b.removeprefix("'")), (name, a, b)
            assert same(name, a, j[name]), (name, a, j[name])
    ts = run.one("compare_result_*.xlsx").stem.split("_")[-1]
    assert run.one("advisor_*.txt").name == f"advisor_{ts}.txt"


def test_csv_only(run_cli):
    run = run_cli(CASE, "pytorch", "--format", "csv")
    assert run.code == 0 and not run.files("*.xlsx") and run.files("compare_result_*.csv")


def test_bad_format_is_a_usage_error(run_cli, capfd):
    import pytest

    from msprobe_compare.cli import main

    with pytest.raises(SystemExit) as info:
        main(["-f", "pytorch", "compare", "-i", "x.json", "--format", "pdf"])
    assert info.value.code == 2


def test_csv_formula_neutralised(tmp_path):
    path = tmp_path / "t.csv"
    write_csv(path, ["a"], [["=1+1", "-inf", "@x"]], [Colour.NONE, Colour.RED, Colour.NONE])
    assert path.read_text().splitlines() == ["a,colour", "'=1+1,", "-inf,red", "'@x,"]


HUGE, BIG, TINY = 3.4028234663852886e38, 1.5e17, -2.5e-300


def _stat_dump(path: Path, output_max: float) -> None:
    """A statistics dump.json of one call (one input, one output), by hand as the dumper writes it."""

    def tensor(mx: float, mn: float, mean: float, norm: float) -> dict[str, object]:
        return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4, 4], "Max": mx, "Min": mn,
                "Mean": mean, "Norm": norm, "requires_grad": False}  # fmt: skip

    call = {"input_args": [tensor(HUGE, TINY, BIG, 2.0)], "input_kwargs": {},
            "output": [tensor(output_max, TINY, HUGE, 1e-5)]}  # fmt: skip
    doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
           "data": {"Functional.linear.0.forward": call}}  # fmt: skip
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc, indent=1))


@pytest.mark.parametrize("native", ["1", "0"])
def test_huge_and_tiny_statistics_in_every_format(run_cli, tmp_path, monkeypatch, native):
    """Statistics of 1e16 and more and subnormal-range ones come out as the same floats in xlsx, csv and jsonl
    (orjson 3.11+ writes 1e+38, on which the layout fix once made 3.4028234663852886e++38)."""
    monkeypatch.setenv("MSPROBE_NATIVE", native)
    case = tmp_path / "case"
    _stat_dump(case / "npu/dump.json", BIG)
    _stat_dump(case / "bench/dump.json", BIG / 2)
    (case / "compare.json").write_text(json.dumps({"npu_path": "./npu/dump.json", "bench_path": "./bench/dump.json"}))
    run = run_cli(case, "pytorch", "--format", "xlsx,csv,jsonl", out_dir=tmp_path / "out")
    assert run.code == 0, run.out + run.err
    want = {  # (row, column) -> value
        **{(0, c): v for c, v in [("NPU max", HUGE), ("NPU min", TINY), ("NPU mean", BIG), ("Bench max", HUGE),
                                  ("Bench mean", BIG)]},
        **{(1, c): v for c, v in [("NPU max", BIG), ("NPU min", TINY), ("NPU mean", HUGE), ("NPU l2norm", 1e-5),
                                  ("Bench max", BIG / 2), ("Bench mean", HUGE), ("Max diff", BIG / 2)]},
    }  # fmt: skip
    ws = openpyxl.load_workbook(run.one("compare_result_*.xlsx")).active
    sheet = [[c.value for c in row] for row in ws.iter_rows()]
    with open(run.one("compare_result_*.csv"), newline="") as f:
        table = list(csv.reader(f))
    lines = run.one("compare_result_*.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    literals = [json.loads(x, parse_float=str) for x in lines]  # the numbers' own texts
    assert sheet[0] == table[0][:-1] and len(sheet) == len(table) == 3 and len(records) == 2
    for (row, name), value in want.items():
        k = sheet[0].index(name)
        cell = sheet[row + 1][k]
        assert type(cell) is float and cell == value, (name, cell)
        assert table[row + 1][k] == literals[row][name] == repr(value), (name, table[row + 1][k], literals[row][name])
        assert type(records[row][name]) is float and records[row][name] == value
    xml = zipfile.ZipFile(run.one("compare_result_*.xlsx")).read("xl/worksheets/sheet1.xml").decode()
    assert "<v>3.4028234663852886e+38</v>" in xml and "<v>1.5e+17</v>" in xml and "<v>-2.5e-300</v>" in xml
    assert "e++" not in xml
