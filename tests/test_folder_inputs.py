"""Folders as npu_path/bench_path: a rank folder is its dump.json; a dump root of steps is refused with the step."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from conftest import DATA
from msprobe_compare.api import build_outcome
from msprobe_compare.config import Options, load_config
from msprobe_compare.log import Console
from parity import advisor_head, mismatches

STAT = DATA / "pytorch" / "mlp_bug_stat"


def _config(folder: Path, **doc: str) -> None:
    (folder / "compare.json").write_text(json.dumps(doc))


def _copy(case: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "case"
    shutil.copytree(case, dst, ignore=shutil.ignore_patterns("expected"))
    return dst


def _error_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "[ERROR]" in line]


@pytest.mark.parametrize(
    "npu,bench",
    [
        ("npu/step0/rank", "bench/step0/rank"),  # both rank folders
        ("npu/step0/rank/dump.json", "bench/step0/rank"),  # a file and a rank folder
        ("npu/step0/rank", "bench/step0/rank/dump.json"),
        ("npu/step0/rank/", "./bench/step0/rank/."),  # spellings of the same folders
    ],
)
def test_rank_folder_is_its_dump_json(run_cli, tmp_path, npu, bench):
    case = _copy(STAT, tmp_path)
    _config(case, npu_path=npu, bench_path=bench)  # no stack_path: stack.json beside the NPU dump.json is used
    run = run_cli(case, "pytorch", "-s")
    assert run.code == 0, run.out
    assert not mismatches(run.one("compare_result_*.xlsx"), STAT / "expected" / "hl.csv")
    assert advisor_head(run.one("advisor_*.txt")) == (STAT / "expected" / "hl.advisor.txt").read_text()
    assert "stack.json is not found" not in run.out
    assert not _error_lines(run.out)


def test_rank_folder_finds_construct_json(tmp_path, monkeypatch):
    """construct.json (the module tree of the root cause) is read beside the dump.json a rank folder stands for."""
    case = _copy(STAT, tmp_path)
    monkeypatch.chdir(case)

    def parents(npu: str) -> dict:
        _config(case, npu_path=npu, bench_path="bench/step0/rank")
        cfg = load_config(Path("compare.json"), Options(framework="pytorch", output_dir=tmp_path / "out"))
        return build_outcome(cfg, Console(io.StringIO())).rootcause.parents

    by_file = parents("npu/step0/rank/dump.json")
    assert by_file and parents("npu/step0/rank") == by_file


def _run_rank_folders(run_cli, tmp_path, case: Path, rank: str):
    """Compare `case`'s npu and bench `step0/<rank>` folders, given as folders."""
    dst = tmp_path / "cfg"
    dst.mkdir()
    _config(dst, npu_path=str(case / "npu/step0" / rank), bench_path=str(case / "bench/step0" / rank))
    run = run_cli(dst, "pytorch", "-s")
    assert run.code == 0, run.out
    return run


def test_numbered_rank_folder_is_one_pair(run_cli, tmp_path):
    case = DATA / "pytorch" / "dist_same_stat"
    run = _run_rank_folders(run_cli, tmp_path, case, "rank1")
    xlsx = run.one("compare_result_*.xlsx")
    assert "rank" not in xlsx.name  # a single pair: no rank suffix, no rank pairing
    assert "rank pairing" not in run.out
    assert not mismatches(xlsx, case / "expected" / "hl.rank1.csv")


def test_rank_folders_with_tensors(run_cli, tmp_path):
    case = DATA / "pytorch" / "mlp_bug_tensor"
    run = _run_rank_folders(run_cli, tmp_path, case, "rank")
    assert not mismatches(run.one("compare_result_*.xlsx"), case / "expected" / "hl.csv")


@pytest.mark.parametrize("side", ["npu", "bench"])
def test_dump_root_of_steps_names_the_first_step(run_cli, tmp_path, side):
    case = _copy(STAT, tmp_path)
    root = case / side
    for step in ("step10", "step2"):  # no step0 here: the first step is step2, by number
        shutil.copytree(root / "step0", root / step)
    shutil.rmtree(root / "step0")
    paths = {"npu_path": "npu/step0/rank", "bench_path": "bench/step0/rank", f"{side}_path": side}
    _config(case, **paths)
    run = run_cli(case, "pytorch")
    assert run.code == 1, run.out
    errors = _error_lines(run.out)
    assert len(errors) == 1, run.out
    assert f"{root}: holds step folders (step2, step10), not rank folders" in errors[0]
    assert f"choose a step folder, e.g. {root / 'step2'}" in errors[0]
    assert "Traceback" not in run.out + run.err
    assert not run.out_dir.exists() or not any(run.out_dir.iterdir())


def test_rank_folder_without_dump_json(run_cli, tmp_path):
    case = _copy(STAT, tmp_path)
    (case / "npu/step0/rank/dump.json").unlink()
    _config(case, npu_path="npu/step0/rank", bench_path="bench/step0/rank")
    run = run_cli(case, "pytorch")
    assert run.code == 1
    assert _error_lines(run.out) and f"{case / 'npu/step0/rank'}: is a rank folder without dump.json" in run.out


def test_rank_folder_and_step_folder_do_not_mix(run_cli, tmp_path):
    case = _copy(STAT, tmp_path)
    _config(case, npu_path="npu/step0/rank", bench_path="bench/step0")
    run = run_cli(case, "pytorch")
    assert run.code == 1
    (error,) = _error_lines(run.out)
    assert "compare.json" in error and "same type" in error


def test_linked_rank_folder_is_refused(run_cli, tmp_path):
    case = _copy(STAT, tmp_path)
    (case / "link").symlink_to(case / "npu/step0/rank", target_is_directory=True)
    _config(case, npu_path="link", bench_path="bench/step0/rank")
    run = run_cli(case, "pytorch")
    assert run.code == 1 and "symbolic link" in run.out
