"""--fail-on: exit code 3 when rows at the chosen level exist."""

from __future__ import annotations

import pytest

from conftest import DATA


@pytest.mark.parametrize(
    "case,level,code",
    [
        ("pytorch/mlp_same_stat", "warning", 0),  # nothing suspicious
        ("pytorch/mlp_bug_stat", "error", 0),  # Warning rows only (summary Result)
        ("pytorch/mlp_bug_stat", "warning", 3),
        ("pytorch/mlp_bug_md5", "error", 3),  # md5 Different
        ("pytorch/mlp_bug_tensor", "error", 3),  # red rows / Accuracy No
        ("pytorch/mlp_same_tensor", "error", 0),
    ],
)
def test_fail_on(run_cli, case, level, code):
    run = run_cli(DATA / case, "pytorch", "-s", "--fail-on", level)
    assert run.code == code, run.out
    assert run.one("compare_result_*.xlsx")  # the result is written either way
    if code:
        assert f"--fail-on {level}:" in run.out


def test_no_gate_by_default(run_cli):
    assert run_cli(DATA / "pytorch/mlp_bug_md5", "pytorch").code == 0
