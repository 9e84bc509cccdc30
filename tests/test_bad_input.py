"""Bad input: one [ERROR] line naming the file and the problem, exit code 1, no traceback, no output file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import DATA

CASE = DATA / "pytorch" / "mlp_bug_stat"


@pytest.fixture
def case(tmp_path) -> Path:
    """A writable copy of a statistics case with absolute paths in compare.json."""
    dst = tmp_path / "case"
    shutil.copytree(CASE, dst, ignore=shutil.ignore_patterns("expected"))
    write_config(dst, npu_path=str(dst / "npu/step0/rank/dump.json"),
                 bench_path=str(dst / "bench/step0/rank/dump.json"),
                 stack_path=str(dst / "npu/step0/rank/stack.json"), is_print_compare_log=True)  # fmt: skip
    return dst


def write_config(folder: Path, **doc) -> Path:
    path = folder / "compare.json"
    path.write_text(json.dumps(doc))
    return path


def assert_error(run, *fragments: str) -> None:
    assert run.code == 1, run.out
    errors = [line for line in run.out.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1, run.out
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert "Traceback" not in run.out + run.err
    assert not run.out_dir.exists() or not any(run.out_dir.iterdir()), list(run.out_dir.iterdir())


def edit_dump(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_missing_compare_json(run_cli, case):
    run = run_cli(case, "pytorch", input_name="nope.json")
    assert_error(run, "nope.json", "does not exist")


def test_missing_dump_file(run_cli, case):
    (case / "bench/step0/rank/dump.json").unlink()
    assert_error(run_cli(case, "pytorch"), "bench/step0/rank/dump.json", "does not exist")


def test_file_directory_mix(run_cli, case):
    write_config(case, npu_path=str(case / "npu/step0/rank/dump.json"), bench_path=str(case / "bench/step0"))
    assert_error(run_cli(case, "pytorch"), "compare.json", "same type")


def test_invalid_json(run_cli, case):
    (case / "compare.json").write_text("{not json")
    assert_error(run_cli(case, "pytorch"), "compare.json", "not valid JSON")


def test_invalid_dump_json(run_cli, case):
    (case / "npu/step0/rank/dump.json").write_text('{"task": "statistics", "data": {')
    assert_error(run_cli(case, "pytorch"), "npu/step0/rank/dump.json", "not valid JSON")


def test_compare_json_not_object(run_cli, case):
    (case / "compare.json").write_text("[1, 2]")
    assert_error(run_cli(case, "pytorch"), "compare.json", "JSON object")


@pytest.mark.parametrize("key", ["npu_path", "bench_path"])
def test_missing_path_key(run_cli, case, key):
    doc = json.loads((case / "compare.json").read_text())
    del doc[key]
    write_config(case, **doc)
    assert_error(run_cli(case, "pytorch"), "compare.json", f"'{key}' is missing")


def test_task_mismatch(run_cli, case):
    edit_dump(case / "bench/step0/rank/dump.json", lambda d: d.update(task="tensor"))
    assert_error(run_cli(case, "pytorch"), "npu/step0/rank/dump.json", "tasks differ", "'tensor'")


def test_task_empty(run_cli, case):
    edit_dump(case / "npu/step0/rank/dump.json", lambda d: d.update(task=""))
    assert_error(run_cli(case, "pytorch"), "npu/step0/rank/dump.json", "'task' is missing or empty")


def test_missing_data(run_cli, case):
    edit_dump(case / "npu/step0/rank/dump.json", lambda d: d.pop("data"))
    assert_error(run_cli(case, "pytorch"), "npu/step0/rank/dump.json", "'data' is missing")


def test_data_not_dict(run_cli, case):
    edit_dump(case / "bench/step0/rank/dump.json", lambda d: d.update(data=[1]))
    assert_error(run_cli(case, "pytorch"), "bench/step0/rank/dump.json", "'data' must be an object")


def test_leaf_with_wrong_shape_type(run_cli, case):
    def change(d):
        d["data"]["Functional.linear.0.forward"]["input_args"][0]["shape"] = "16x32"

    edit_dump(case / "npu/step0/rank/dump.json", change)
    assert_error(run_cli(case, "pytorch"), "npu/step0/rank/dump.json", "Functional.linear.0.forward", "shape")


def test_leaf_with_wrong_requires_grad_type(run_cli, case):
    def change(d):
        d["data"]["Functional.linear.0.forward"]["input_args"][0]["requires_grad"] = "yes"

    edit_dump(case / "bench/step0/rank/dump.json", change)
    assert_error(run_cli(case, "pytorch"), "bench/step0/rank/dump.json", "requires_grad")


def test_unreadable_stack_json(run_cli, case):
    (case / "npu/step0/rank/stack.json").write_text("[]")
    assert_error(run_cli(case, "pytorch", "-s"), "stack.json", "not a JSON object")


def test_stack_json_with_wrong_lines(run_cli, case):
    (case / "npu/step0/rank/stack.json").write_text('{"0": [["Functional.linear.0.forward"], "oops"]}')
    assert_error(run_cli(case, "pytorch", "-s"), "stack.json", "list of strings")


def test_output_is_a_file(run_cli, case, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("mine")
    run = run_cli(case, "pytorch", out_dir=blocker / "sub")
    assert run.code == 1
    assert blocker.read_text() == "mine"
    assert "[ERROR]" in run.out and str(blocker) in run.out and "Traceback" not in run.out


def test_usage_error_exits_2(capsys):
    from msprobe_compare.cli import main

    with pytest.raises(SystemExit) as info:
        main(["-f", "tensorflow", "compare", "-i", "x.json"])
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_existing_result_is_never_overwritten(run_cli, case, tmp_path):
    out = tmp_path / "out"
    first = run_cli(case, "pytorch", out_dir=out)
    assert first.code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    second = run_cli(case, "pytorch", out_dir=out)
    assert second.code == 0
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len(after) == 2 * len(before)
    assert all(after[name] == data for name, data in before.items())
