"""The msprobe 26.x command line as a second spelling of ours: `msprobe compare -tp TARGET -gp GOLDEN ...`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import DATA
from parity import read_xlsx
from test_cli import run_main

D26 = DATA / "pytorch26"


def _in(path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(path)


def test_step_folders_framework_from_the_dumps(capfd, tmp_path, monkeypatch):
    _in(D26 / "mlp_bug_stat", monkeypatch)
    code, out, _ = run_main(capfd, "compare", "-tp", "npu/step0", "-gp", "bench/step0", "-o", str(tmp_path))
    assert code == 0, out
    npu = next((D26 / "mlp_bug_stat/npu/step0").iterdir()).name
    assert len(list(tmp_path.glob(f"compare_result_{npu}_*.xlsx"))) == 1
    assert len(list(tmp_path.glob(f"advisor_{npu}_*.txt"))) == 1  # our advisor stays
    assert "msprobe compare ends successfully." in out


def test_fm_is_fuzzy_match_and_tables_equal_the_compare_json_run(capfd, tmp_path, monkeypatch):
    case = DATA / "pytorch/mlp_struct_stat"
    _in(case, monkeypatch)
    code, out, _ = run_main(capfd, "-f", "pytorch", "compare", "-i", "compare.json", "-f", "-s",
                            "-o", str(tmp_path / "i"))  # fmt: skip
    assert code == 0, out
    code, out, _ = run_main(capfd, "compare", "-tp", "npu/step0/rank/dump.json", "-gp", "bench/step0/rank/dump.json",
                            "-fm", "-s", "-o", str(tmp_path / "tp"), "--xlsx")  # fmt: skip
    assert code == 0, out
    (ours_i,) = (tmp_path / "i").glob("compare_result_*.xlsx")
    (ours_tp,) = (tmp_path / "tp").glob("compare_result_*.xlsx")
    assert read_xlsx(ours_i) == read_xlsx(ours_tp)


def test_step_and_rank_choose_the_folders(capfd, tmp_path, monkeypatch):
    _in(D26 / "dist_bug_stat", monkeypatch)
    code, out, _ = run_main(capfd, "compare", "-tp", "npu", "-gp", "bench", "--step", "0", "--rank", "1",
                            "-o", str(tmp_path), "--format", "csv")  # fmt: skip
    assert code == 0, out
    assert len(list(tmp_path.glob("compare_result_*.csv"))) == 1  # one pair: rank1 of step0
    assert not list(tmp_path.glob("compare_result_rank*"))
    code, out, _ = run_main(capfd, "compare", "-tp", "npu", "-gp", "bench", "--step", "3", "-o", str(tmp_path))
    assert code == 1 and "--step 3: -tp holds no step3 folder" in out


def test_mindspore_framework_told_by_the_dump(capfd, tmp_path, monkeypatch):
    _in(DATA / "cross/L0_statistics", monkeypatch)
    code, out, _ = run_main(capfd, "compare", "-tp", "dump_data_ms/step0/rank", "-gp", "dump_data_pt/step0/rank",
                            "-cm", "-o", str(tmp_path))  # fmt: skip
    assert code == 0, out  # -cm needs MindSpore: the dump says so
    assert "framework is" not in out


@pytest.mark.parametrize("argv,problem", [
    (("compare", "-tp", "a"), "the following arguments are required: -gp/--golden_path"),
    (("compare", "-tp", "a", "-gp", "b", "-m", "offline_model"), "--mode offline_model is not supported"),
    (("compare", "-tp", "a", "-gp", "b", "-fr", "x.json"), "unrecognized arguments: -fr x.json"),
])  # fmt: skip
def test_usage_errors_exit_2(capfd, argv, problem):
    code, out, err = run_main(capfd, *argv)
    assert code == 2 and problem in err and not out


def test_help_names_the_second_spelling_and_the_defaults_we_keep(capfd):
    code, out, _ = run_main(capfd, "compare", "-h")
    assert code == 0 and "msprobe compare -tp TARGET -gp GOLDEN" in out and "26.x writes CSV only" in out
    code, out, _ = run_main(capfd, "compare", "-tp", "x", "-gp", "y", "-h")
    assert code == 0 and "--target_path" in out and "--golden_path" in out and "--rank" in out


def test_framework_that_cannot_be_told(capfd, tmp_path, monkeypatch):
    dump = tmp_path / "d"
    dump.mkdir()
    (dump / "dump.json").write_text('{"task": "statistics", "level": "L1", "data": {}}')
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capfd, "compare", "-tp", "d", "-gp", "d")
    assert code == 2 and "cannot be told from the dump; give it: msprobe -f {pytorch,mindspore} compare" in err
    assert os.path.isdir(dump)


def test_missing_path_is_named(capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_main(capfd, "compare", "-tp", "nowhere", "-gp", "nowhere2")
    assert code == 1 and "nowhere: -tp does not exist" in out
