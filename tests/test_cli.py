"""The command line: --version, usage errors (exit 2, usage on stderr), `compare -h`, a misplaced -f, -j, and the
warning when a dump's framework contradicts -f."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import msprobe_compare
from conftest import DATA
from msprobe_compare.cli import main

SRC = Path(msprobe_compare.__file__).parent.parent


def run_main(capfd, *argv: str) -> tuple[int, str, str]:
    """main() in-process: (exit code, stdout, stderr); argparse's exits (usage, -h, --version) count as codes."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capfd.readouterr()
    return code, out, err


def test_version(capfd):
    code, out, err = run_main(capfd, "--version")
    assert code == 0 and out.strip() == f"msprobe-compare {msprobe_compare.__version__}" and not err


def test_installed_entry_points_exit_codes():
    """The real process: `python -m msprobe_compare` without arguments is a usage error, --version is not."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    bare = subprocess.run([sys.executable, "-m", "msprobe_compare"], capture_output=True, text=True, env=env)
    assert bare.returncode == 2 and "usage: msprobe" in bare.stderr and not bare.stdout
    version = subprocess.run([sys.executable, "-m", "msprobe_compare", "--version"], capture_output=True, text=True,
                             env=env)  # fmt: skip
    assert version.returncode == 0 and msprobe_compare.__version__ in version.stdout


@pytest.mark.parametrize(
    "argv,usage,problem",
    [
        ((), "usage: msprobe [-h]", "compare"),  # the whole help, on stderr
        (("-f", "pytorch"), "usage: msprobe [-h]", "the following arguments are required: {compare,merge_result}"),
        (("compare",), "usage: msprobe compare [-h] -i INPUT_PATH", "required: -i/--input_path"),
        (("-f", "pytorch", "compare"), "usage: msprobe compare", "required: -i/--input_path"),
        (
            ("compare", "-i", "x.json"),
            "usage: msprobe",
            "-f/--framework is required before the subcommand: msprobe -f {pytorch,mindspore} compare -i x.json",
        ),
        (
            ("merge_result", "-i", "d", "-config", "c.yaml"),
            "usage: msprobe",
            "-f/--framework is required before the subcommand",
        ),
        (("-f", "tensorflow", "compare", "-i", "x.json"), "usage: msprobe", "invalid choice: 'tensorflow'"),
    ],
)
def test_incomplete_usage_exits_2(capfd, argv, usage, problem):
    code, out, err = run_main(capfd, *argv)
    assert code == 2
    assert not out
    assert usage in err and problem in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [("compare", "-h"), ("-f", "pytorch", "compare", "-h"), ("compare", "--help")])
def test_compare_help_lists_compare_options(capfd, argv):
    code, out, _ = run_main(capfd, *argv)
    assert code == 0
    assert out.startswith("usage: msprobe compare")
    for option in ("--input_path", "--output_path", "--stack_mode", "--fuzzy_match", "--format", "--fail-on",
                   "--jobs", "--no-highlight"):  # fmt: skip
        assert option in out, option


def test_top_level_help_names_the_framework_and_subcommands(capfd):
    code, out, _ = run_main(capfd, "-h")
    assert code == 0
    assert "-f {pytorch,mindspore}" in out and "compare" in out and "merge_result" in out and "--version" in out


@pytest.mark.parametrize(
    "argv,fixed",
    [
        (("compare", "-f", "pytorch", "-i", "x.json"), "msprobe -f pytorch compare -i x.json"),
        (
            ("compare", "-i", "x.json", "-o", "out dir", "--framework", "mindspore", "-s"),
            "msprobe -f mindspore compare -i x.json -o 'out dir' -s",
        ),
        (("compare", "--framework=pytorch", "-i", "x.json"), "msprobe -f pytorch compare -i x.json"),
        (("compare", "-f", "tensorflow", "-i", "x.json"), "msprobe -f {pytorch,mindspore} compare -i x.json"),
        (("-f", "pytorch", "compare", "-i", "x.json", "-f", "pytorch"), "msprobe -f pytorch compare -i x.json"),
    ],
)
def test_framework_after_the_subcommand_gets_a_hint(capfd, argv, fixed):
    code, out, err = run_main(capfd, *argv)
    assert code == 2 and not out
    assert f"-f/--framework goes before the subcommand (after it, -f is --fuzzy_match): {fixed}" in err


def test_fuzzy_match_flag_after_compare_still_works(run_cli):
    run = run_cli(DATA / "pytorch/mlp_struct_stat", "pytorch", "-f")
    assert run.code == 0, run.out
    assert run.one("compare_result_*.xlsx")


@pytest.mark.parametrize("value,problem", [("0", "must be at least 1, got 0"), ("-3", "must be at least 1, got -3"),
                                           ("two", "must be a whole number of workers, got 'two'")])  # fmt: skip
def test_jobs_must_be_positive(capfd, value, problem):
    code, out, err = run_main(capfd, "-f", "pytorch", "compare", "-i", "x.json", "-j", value)
    assert code == 2 and not out
    assert f"argument -j/--jobs: {problem}" in err


def test_documented_workflow(tmp_path, capfd, monkeypatch):
    case = tmp_path / "case"
    shutil.copytree(DATA / "pytorch/mlp_bug_stat", case, ignore=shutil.ignore_patterns("expected"))
    monkeypatch.chdir(case)
    documented = "-f pytorch compare -i ./compare.json -o ./compare_result/accuracy_compare -s"
    code, out, _ = run_main(capfd, *documented.split())
    assert code == 0, out
    results = case / "compare_result" / "accuracy_compare"
    assert len(list(results.glob("compare_result_*.xlsx"))) == 1 and len(list(results.glob("advisor_*.txt"))) == 1
    assert "msprobe compare ends successfully." in out
    assert "framework is" not in out  # -f pytorch on pytorch dumps: no framework warning


def _warnings(out: str) -> list[str]:
    return [line for line in out.splitlines() if "[WARNING]" in line and "framework is" in line]


def test_framework_contradicting_the_dump_warns(run_cli):
    case = DATA / "pytorch/mlp_same_stat"
    run = run_cli(case, "mindspore", "-s")
    assert run.code == 0, run.out
    (warning,) = _warnings(run.out)  # the npu side only: a mindspore npu dump may have a pytorch bench
    npu = case / "npu/step0/rank/dump.json"
    assert f"{npu}: the dump's framework is 'pytorch' but -f is 'mindspore'" in warning
    assert "(here: -f pytorch)" in warning
    assert run.one("compare_result_*.xlsx")  # a warning, not an error


def test_cross_framework_compare_does_not_warn(run_cli):
    run = run_cli(DATA / "cross/L0_statistics", "mindspore", "-s")
    assert run.code == 0, run.out
    assert not _warnings(run.out)


def test_pytorch_flag_on_a_mindspore_npu_dump_warns_once(run_cli):
    case = DATA / "cross/L0_statistics"
    run = run_cli(case, "pytorch", "-s")
    assert run.code == 0, run.out
    (warning,) = _warnings(run.out)  # the bench side is pytorch, as -f pytorch wants
    assert "the dump's framework is 'mindspore' but -f is 'pytorch'" in warning
    assert str(case / "dump_data_ms/step0/rank/dump.json") in warning


def test_bench_side_of_another_framework_warns(run_cli, tmp_path):
    case = DATA / "cross/L0_statistics"
    (tmp_path / "compare.json").write_text(
        '{"npu_path": "%s", "bench_path": "%s"}'
        % (case / "dump_data_pt/step0/rank/dump.json", case / "dump_data_ms/step0/rank/dump.json")
    )
    run = run_cli(tmp_path, "pytorch")
    warnings = _warnings(run.out)
    assert len(warnings) == 1, run.out
    assert (
        "the bench dump's framework is 'mindspore' but -f is 'pytorch', whose bench dump should be pytorch"
        in (warnings[0])
    )
