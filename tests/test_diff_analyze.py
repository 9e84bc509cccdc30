"""-da writes diff_analyze_{ts}.json in the reference's layout, from our origins, for files and folders."""

from __future__ import annotations

import json

from conftest import DATA


def _read(run) -> dict:
    return json.loads(run.one("diff_analyze_*.json").read_text())


def test_single_file(run_cli):
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "-s", "-da")
    assert run.code == 0, run.out
    doc = _read(run)
    [item] = doc["rank"]
    assert item["op_name"] == "Functional.relu.1.forward"
    assert set(item["data_info"]) == {"input", "output"}
    row = item["data_info"]["input"]["Functional.relu.1.forward.input.0"]
    assert set(row) == {"NPU max", "NPU min", "NPU mean", "NPU l2norm"}
    assert item["stack_info"] and item["stack_info"][0].startswith("File ")
    assert run.one("compare_result_*.xlsx")  # the normal compare still runs (the reference skips it)


def test_md5_layout(run_cli):
    run = run_cli(DATA / "pytorch/mlp_bug_md5", "pytorch", "-s", "-da")
    item = _read(run)["rank"][0]
    assert all(set(v) == {"NPU MD5"} for side in item["data_info"].values() for v in side.values())


def test_no_origin_no_file(run_cli):
    run = run_cli(DATA / "pytorch/mlp_same_stat", "pytorch", "-da")
    assert run.code == 0 and not run.files("diff_analyze_*.json")
    assert "Cannot find any diff node" in run.out


def test_directories(run_cli, tmp_path):
    import shutil

    case = tmp_path / "case"
    shutil.copytree(DATA / "pytorch/dist_same_stat", case, ignore=shutil.ignore_patterns("expected"))
    path = case / "npu/step0/rank1/dump.json"
    doc = json.loads(path.read_text())
    target = next(n for n in doc["data"] if n.startswith("Functional.relu.0.forward"))
    doc["data"][target]["output"][0]["Max"] *= 2
    path.write_text(json.dumps(doc))
    (case / "compare.json").write_text(json.dumps({"npu_path": str(case / "npu/step0"),
                                                  "bench_path": str(case / "bench/step0")}))  # fmt: skip
    run = run_cli(case, "pytorch", "-da")
    doc = _read(run)
    assert doc["rank_0"] == [] and doc["rank_1"][0]["op_name"] == target


def test_a_failing_analyze_file_withdraws_the_result_set(run_cli, tmp_path, monkeypatch):
    """One pair with -da: when diff_analyze_{ts}.json cannot be written, the files just published go again."""
    from msprobe_compare.errors import OutputError
    from msprobe_compare.render import report

    def no_space(*args, **kwargs):
        raise OutputError("cannot be written (No space left on device)", tmp_path / "out" / "diff_analyze.json")

    monkeypatch.setattr(report, "write_diff_analyze", no_space)
    out = tmp_path / "out"
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "-s", "-da", "--format", "xlsx,csv,html", out_dir=out)
    assert run.code == 1
    assert [line for line in run.out.splitlines() if "[ERROR]" in line][0].endswith(
        "cannot be written (No space left on device)"
    )
    assert "Compare result is" in run.out  # the set was written, then withdrawn
    assert list(out.iterdir()) == []
    assert "msprobe compare ends successfully." not in run.out


def test_origin_positions_are_first_places_either_way():
    """diff_analyze finds an origin's rows at the first entry of its name, by a scan for a few names and through an
    index for many: the same places, a repeated name's first one, as the console line's `entries.index`."""
    from msprobe_compare.render.diff_analyze import _positions

    entries = ["Torch.add.0.forward", "Tensor.mul.0.forward", "Torch.add.0.forward"] + [f"x.{i}" for i in range(30)]
    few, many = ["Torch.add.0.forward", "x.3"], ["Torch.add.0.forward"] + [f"x.{i}" for i in range(12)]
    assert _positions(entries, few) == {"Torch.add.0.forward": 0, "x.3": 6}
    got = _positions(entries, many)
    assert got["Torch.add.0.forward"] == 0 and all(got[n] == entries.index(n) for n in many)
