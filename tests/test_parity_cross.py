"""Parity on the cross-framework cases (MindSpore dump vs PyTorch dump), one run per recorded variant.

Each `expected/<variant>.flags` holds the reference's options after `-o OUT`; runs without `-hl` had no
colours, so they are compared with `--no-highlight`.
"""

from __future__ import annotations

import shlex

import pytest
import yaml

from conftest import DATA
from parity import advisor_head, mismatches, read_xlsx

SUPPORTED = ("plain", "dm_yaml", "cm_bare", "c_only_cm_bare", "cm_yaml", "cm_yaml_hl", "am_bare", "am_bare_hl",
             "am_yaml", "lm_bare", "lm_yaml")  # fmt: skip

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
        assert advisor_head(run.one("advisor_*.txt")) == advisor.read_text()
    else:
        assert not run.files("advisor_*.txt")
    if "-lm" in flags:
        _check_saved_data_mapping(run)


def _check_saved_data_mapping(run) -> None:  # type: ignore[no-untyped-def]
    """-lm saves the row mapping it used: each NPU row's bench row is the one the mapping names."""
    mapping = yaml.safe_load(run.one("data_mapping_*.yaml").read_text())
    header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    col = {c: i for i, c in enumerate(header)}
    if not mapping:  # nothing derived (no construct.json content): ordinary matching
        return
    bench_names = {r[col["Bench Name"]] for r in rows}
    assert set(mapping) == {r[col["NPU Name"]] for r in rows}
    for r in rows:
        target = mapping[r[col["NPU Name"]]]
        assert r[col["Bench Name"]] == (target if target in bench_names else "N/A")
    assert any(v != "N/A" for v in mapping.values())


def test_d13_cell_mapping_tail_keys(run_cli):
    """D13: docs-style -cm keys (`fc2.Dense`) match cells whose path ends with them: same rows as full keys."""
    folder = DATA / "cross" / "L0_statistics"
    flags = shlex.split((folder / "expected" / "cm_yaml_docstyle.flags.reference-defect").read_text())
    assert flags == ["-s", "-cm", "cell_mapping_docstyle.yaml"]
    run = run_cli(folder, "mindspore", *flags, "--no-highlight")
    assert run.code == 0, run.out
    problems = mismatches(run.one("compare_result_*.xlsx"), folder / "expected" / "cm_yaml.csv", colours=False)
    assert not problems, "\n".join(problems)
    assert advisor_head(run.one("advisor_*.txt")) == (folder / "expected" / "cm_yaml.advisor.txt").read_text()


@pytest.mark.parametrize("spelling", ["outputs", "output"])
def test_d12_api_mapping_output_spellings(run_cli, tmp_path, spelling):
    """D12: `ms_outputs`/`pt_outputs` (documented) and `ms_output`/`pt_output` (8.3.3) give the same result."""
    folder = DATA / "cross" / "L1_statistics_functional"
    entries = yaml.safe_load((folder / "api_mapping.yaml").read_text())
    for entry in entries:
        for side in ("ms", "pt"):
            outputs = entry.pop(f"{side}_outputs")
            del entry[f"{side}_output"]
            entry[f"{side}_{spelling}"] = outputs
    yaml_path = tmp_path / f"am_{spelling}.yaml"
    yaml_path.write_text(yaml.safe_dump(entries))
    run = run_cli(folder, "mindspore", "-s", "-am", str(yaml_path), "--no-highlight", out_dir=tmp_path / "out")
    assert run.code == 0, run.out
    problems = mismatches(run.one("compare_result_*.xlsx"), folder / "expected" / "am_yaml.csv", colours=False)
    assert not problems, "\n".join(problems)


def test_cm_with_am_is_am(run_cli, tmp_path):
    """Both -cm and -am: -am decides, as in the reference (observed: the same rows as `-am` alone)."""
    folder = DATA / "cross" / "L0_statistics"
    run = run_cli(folder, "mindspore", "-s", "-cm", "cell_mapping.yaml", "-am", "--no-highlight")
    assert run.code == 0, run.out
    assert "-cm is ignored when -am is given" in run.out + run.err
    problems = mismatches(run.one("compare_result_*.xlsx"), folder / "expected" / "am_bare.csv", colours=False)
    assert not problems, "\n".join(problems)
    # with a data mapping too, -cm/-am give the names and the match ignores shape and dtype (reference: same)
    run = run_cli(folder, "mindspore", "-s", "-cm", "cell_mapping.yaml", "-dm", "data_mapping.yaml",
                  "--no-highlight", out_dir=tmp_path / "dm")  # fmt: skip
    assert run.code == 0, run.out
    assert "the -dm/-lm mapping only makes the match ignore shape and dtype" in run.out + run.err
    header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    pairs = {r[0]: r[1] for r in rows}
    assert pairs["Cell.backbone.fc2.Dense.forward.0.input.0"] == "Module.backbone.fc2.Linear.forward.0.input.0"
    assert pairs["Cell.backbone.block.norm.LayerNorm.forward.0.parameters.gamma"] == "N/A"


def test_lm_without_structure_saves_an_empty_mapping(run_cli):
    """L1 dumps have an empty construct.json: -lm derives nothing, saves `{}` and matches as usual."""
    folder = DATA / "cross" / "L1_statistics_functional"
    run = run_cli(folder, "mindspore", "-s", "-lm", "--no-highlight")
    assert run.code == 0, run.out
    assert yaml.safe_load(run.one("data_mapping_*.yaml").read_text()) == {}
    problems = mismatches(run.one("compare_result_*.xlsx"), folder / "expected" / "plain.csv", colours=False)
    assert not problems, "\n".join(problems)
