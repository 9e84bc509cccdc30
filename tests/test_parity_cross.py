"""Parity on the cross-framework cases (MindSpore dump vs PyTorch dump), one run per recorded variant.

Each `expected/<variant>.flags` holds the reference's options after `-o OUT`; runs without `-hl` had no
colours, so they are compared with `--no-highlight`.
"""

from __future__ import annotations

import shlex

import pytest

from conftest import DATA
from parity import mismatches

SUPPORTED = ("plain", "dm_yaml")  # mapping variants (-cm, -am, -lm) arrive with the cross-framework work

VARIANTS = sorted(
    (case.name, flags.name.split(".")[0])
    for case in (DATA / "cross").iterdir()
    for flags in (case / "expected").glob("*.flags")
    if flags.name.split(".")[0] in SUPPORTED
)


@pytest.mark.parametrize("case,variant", VARIANTS)
def test_cross_variant(run_cli, case, variant):
    folder = DATA / "cross" / case
    flags = shlex.split((folder / "expected" / f"{variant}.flags").read_text())
    coloured = "-hl" in flags
    run = run_cli(folder, "mindspore", *flags, *([] if coloured else ["--no-highlight"]))
    assert run.code == 0, run.out
    problems = mismatches(run.one("compare_result_*.xlsx"), folder / "expected" / f"{variant}.csv", colours=coloured)
    assert not problems, "\n".join(problems)
    advisor = folder / "expected" / f"{variant}.advisor.txt"
    if advisor.exists():
        assert run.one("advisor_*.txt").read_text() == advisor.read_text()
