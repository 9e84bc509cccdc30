"""merge_result: several ranks' statistics results -> one sheet per compare index."""

from __future__ import annotations

import shutil

import openpyxl
import pytest

from conftest import DATA
from msprobe_compare.cli import main


@pytest.fixture
def rank_results(run_cli, tmp_path):
    run = run_cli(DATA / "pytorch/dist_same_stat", "pytorch", out_dir=tmp_path / "results")
    assert run.code == 0
    return tmp_path / "results"


def _merge(capfd, in_dir, out_dir, cfg) -> tuple[int, str]:
    code = main(["-f", "pytorch", "merge_result", "-i", str(in_dir), "-o", str(out_dir), "-config", str(cfg)])
    return code, capfd.readouterr().out


def test_merges_two_ranks(rank_results, tmp_path, capfd):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("api:\n  - Functional.linear\ncompare_index:\n  - Max diff\n  - MaxRelativeErr\n")
    code, out = _merge(capfd, rank_results, tmp_path / "merged", cfg)
    assert code == 0, out
    [path] = list((tmp_path / "merged").glob("multi_ranks_compare_merge_*.xlsx"))
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames == ["Max diff", "MaxRelativeErr"]
    rows = list(wb["MaxRelativeErr"].iter_rows(values_only=True))
    assert rows[0] == ("NPU Name", "rank0", "rank1")
    names = [r[0] for r in rows[1:]]
    assert names and all("Functional.linear." in n for n in names)
    assert rows[1][1:] == ("0.0%", "0.0%")


def test_unnumbered_values_show_the_max(rank_results, tmp_path, capfd):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("api:\n  - Functional.relu\ncompare_index:\n  - Max diff\n")  # relu has a bool `inplace` arg
    code, out = _merge(capfd, rank_results, tmp_path / "merged", cfg)
    assert code == 0, out
    [path] = list((tmp_path / "merged").glob("*.xlsx"))
    rows = {r[0]: r[1:] for r in openpyxl.load_workbook(path)["Max diff"].iter_rows(values_only=True)}
    assert rows["Functional.relu.0.forward.input.inplace"] == ("NPU:False  Bench:False",) * 2


def test_needs_two_ranks(rank_results, tmp_path, capfd):
    for p in rank_results.glob("compare_result_rank1_*"):
        p.unlink()
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("api:\n  - Functional.linear\n")
    code, out = _merge(capfd, rank_results, tmp_path / "merged", cfg)
    assert code == 1 and "fewer than 2 rank results" in out


def test_foreign_xlsx_and_bad_index(rank_results, tmp_path, capfd):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("api:\n  - Functional.linear\ncompare_index:\n  - Cosine\n")
    code, out = _merge(capfd, rank_results, tmp_path / "merged", cfg)
    assert code == 1 and "compare_index ['Cosine'] not available for summary results" in out
    shutil.copy(next(rank_results.glob("*.xlsx")), rank_results / "notes.xlsx")
    code, out = _merge(capfd, rank_results, tmp_path / "merged", cfg)
    assert code == 1 and "'notes.xlsx' is not named" in out


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_special_rank_results_and_configs_are_refused(rank_results, tmp_path, capfd, kind):
    """A rank result or the config as a FIFO (which would block) or a symlink: one error line, nothing merged."""
    import os

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("api:\n  - Functional.linear\n")
    [victim] = sorted(rank_results.glob("compare_result_rank1_*.xlsx"))
    victim.unlink()
    if kind == "fifo":
        os.mkfifo(victim)
    else:
        victim.symlink_to(tmp_path / "elsewhere.xlsx")
    code, out = _merge(capfd, rank_results, tmp_path / "merged", cfg)
    errors = [line for line in out.splitlines() if "[ERROR]" in line]
    assert code == 1 and len(errors) == 1 and victim.name in errors[0], out
    assert not (tmp_path / "merged").exists() or not any((tmp_path / "merged").iterdir())
    (tmp_path / "alias.yaml").symlink_to(cfg)
    code, out = _merge(capfd, rank_results, tmp_path / "merged", tmp_path / "alias.yaml")
    assert code == 1 and "symbolic link" in out
