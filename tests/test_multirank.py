"""Step folders: ranks paired by number, per-rank results, failures reported, mix (graph/pynative) dumps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import DATA
from parity import advisor_head, mismatches

CASE = DATA / "pytorch" / "dist_same_stat"


@pytest.mark.parametrize("variant", ["hl", "plain"])
def test_two_ranks_match_reference(run_cli, variant):
    run = run_cli(CASE, "pytorch", "-s", *(["--no-highlight"] if variant == "plain" else []))
    assert run.code == 0, run.out
    for rank in (0, 1):
        xlsx = run.one(f"compare_result_rank{rank}_*.xlsx")
        assert not mismatches(xlsx, CASE / "expected" / f"{variant}.rank{rank}.csv", colours=variant == "hl")
        advisor = run.one(f"advisor_rank{rank}_*.txt")
        assert advisor_head(advisor) == (CASE / "expected" / f"{variant}.rank{rank}.advisor.txt").read_text()
    assert "rank pairing: npu rank0 <-> bench rank0, npu rank1 <-> bench rank1" in run.out
    assert run.out.count("msprobe compare ends successfully.") == 2


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "case"
    shutil.copytree(CASE, dst, ignore=shutil.ignore_patterns("expected"))
    (dst / "compare.json").write_text(json.dumps({"npu_path": str(dst / "npu/step0"),
                                                  "bench_path": str(dst / "bench/step0")}))  # fmt: skip
    return dst


def test_uneven_ranks_and_a_corrupt_rank(run_cli, tmp_path):
    case = _copy(tmp_path)
    # bench numbering differs: bench has rank0, rank1 and rank3; npu has rank0, rank1, rank2
    shutil.copytree(case / "npu/step0/rank1", case / "npu/step0/rank2")
    shutil.copytree(case / "bench/step0/rank1", case / "bench/step0/rank3")
    (case / "npu/step0/rank1/dump.json").write_text('{"task": "statistics", "data": ')  # corrupt
    run = run_cli(case, "pytorch")
    assert run.code == 1
    assert len(run.files("compare_result_rank0_*.xlsx")) == 1
    assert not run.files("compare_result_rank1_*.xlsx")
    assert not run.files("compare_result_rank2_*.xlsx") and not run.files("compare_result_rank3_*.xlsx")
    assert "[rank1] " in run.out and "not valid JSON" in run.out
    assert "rank2 exists only on the npu side" in run.out
    assert "rank3 exists only on the bench side" in run.out
    assert "1 of 2 ranks failed" in run.out and "Traceback" not in run.out


def test_foreign_entry_in_step_folder(run_cli, tmp_path):
    case = _copy(tmp_path)
    (case / "npu/step0/notes.txt").write_text("x")
    run = run_cli(case, "pytorch")
    assert run.code == 1 and "contains 'notes.txt'" in run.out


def test_mix_dump_graph_and_pynative(run_cli, tmp_path):
    case = tmp_path / "mix"
    for side in ("npu", "bench"):
        for kind in ("graph", "pynative"):
            shutil.copytree(CASE / side / "step0", case / side / kind / "step0")
    (case / "compare.json").write_text(json.dumps({"npu_path": str(case / "npu"), "bench_path": str(case / "bench")}))
    run = run_cli(case, "pytorch")
    assert run.code == 0, run.out
    for kind in ("graph", "pynative"):
        for rank in (0, 1):
            found = list((run.out_dir / kind / "step0").glob(f"compare_result_rank{rank}_*.xlsx"))
            assert len(found) == 1
            assert not mismatches(found[0], CASE / "expected" / f"hl.rank{rank}.csv")


def test_root_cause_per_rank(run_cli, tmp_path):
    case = _copy(tmp_path)
    # make rank1's npu side differ from the 3rd forward call on
    path = case / "npu/step0/rank1/dump.json"
    doc = json.loads(path.read_text())
    names = list(doc["data"])
    target = next(n for n in names if n.startswith("Functional.relu.0.forward"))
    for leaf in doc["data"][target]["output"]:
        leaf["Max"] *= 1.5
    path.write_text(json.dumps(doc))
    run = run_cli(case, "pytorch")
    assert run.code == 0, run.out
    assert f"Root cause of rank1: {target}: inputs agree, outputs differ" in run.out
    assert f"Earliest root cause across ranks: rank1: {target}" in run.out
