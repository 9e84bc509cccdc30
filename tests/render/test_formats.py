"""--format: csv and jsonl carry the same rows as the xlsx; CSV cells cannot start a formula."""

from __future__ import annotations

import csv
import json

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
