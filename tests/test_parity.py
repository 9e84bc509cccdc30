"""Parity with the reference on every single-rank fixture case: statistics, md5 and tensor (coloured and plain)."""

from __future__ import annotations

import pytest

from conftest import DATA
from parity import advisor_head, mismatches

CASES = sorted(
    str(p.relative_to(DATA))
    for fw in ("pytorch", "mindspore")
    for p in (DATA / fw).iterdir()
    if (p / "expected" / "hl.csv").exists()
)


def test_cases_found():
    assert len(CASES) >= 16


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", ["hl", "plain"])
def test_matches_reference(run_cli, case, variant):
    folder = DATA / case
    flags = ["-s"] + (["--no-highlight"] if variant == "plain" else [])
    run = run_cli(folder, case.split("/")[0], *flags)
    assert run.code == 0, run.out
    xlsx = run.one("compare_result_*.xlsx")
    problems = mismatches(xlsx, folder / "expected" / f"{variant}.csv", colours=variant == "hl")
    assert not problems, "\n".join(problems)
    advisor = run.one("advisor_*.txt")
    assert advisor_head(advisor) == (folder / "expected" / f"{variant}.advisor.txt").read_text()
    assert "msprobe compare ends successfully." in run.out
    assert f"Compare result is {xlsx}" in run.out
    assert f"The advisor summary is saved in: {advisor}" in run.out
