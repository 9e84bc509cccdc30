"""One story per run: row counts, unmatched rows, the labelled reference advisor, the root-cause headline and
`--fail-on` all count the same rows (issue: unmatched is not agreement)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import DATA
from render.test_html import decode, read_page

MLP = DATA / "pytorch/mlp_bug_stat"


def _pair(tmp_path: Path, npu: Path, bench: Path) -> Path:
    case = tmp_path / "case"
    case.mkdir()
    (case / "compare.json").write_text(json.dumps({"npu_path": str(npu), "bench_path": str(bench)}))
    return case


@pytest.fixture
def wrong_bench(tmp_path: Path) -> Path:
    """The mlp NPU run against a MindSpore bench run: no row can be paired."""
    bench = next((DATA / "mindspore/L0_statistics/dump_data_2.7.0").glob("step0/rank*/dump.json"))
    return _pair(tmp_path, MLP / "npu/step0/rank/dump.json", bench)


@pytest.fixture
def other_model(tmp_path: Path) -> Path:
    """The mlp NPU run against the cnn bench run: 10 of 103 rows pair (loss, optimiser), 93 do not."""
    return _pair(tmp_path, MLP / "npu/step0/rank/dump.json", DATA / "pytorch/cnn_bug_stat/bench/step0/rank/dump.json")


def _meta(report: Path) -> dict:
    return decode(read_page(report.read_text()))[0]


def _line(out: str, text: str) -> int:
    """Index of the first console line containing `text`."""
    lines = out.splitlines()
    return next(k for k, line in enumerate(lines) if text in line)


def test_nothing_compared_is_not_agreement(run_cli, wrong_bench):
    run = run_cli(wrong_bench, "pytorch", "--fail-on", "error")
    assert run.code == 3, run.out
    assert "Rows: 103 NPU rows, 0 matched, 103 without a bench counterpart; 0 error, 0 warning." in run.out
    warning = re.search(r"\[WARNING\] 103 of 103 NPU rows \(100%\) have no bench counterpart: check that "
                        r"bench_path \((.+?)\) is a dump", run.out)  # fmt: skip
    assert warning and warning.group(1).endswith("dump.json")
    assert "[WARNING] Root cause: nothing compared: none of the 103 NPU rows has a bench counterpart" in run.out
    assert "agrees within tolerance" not in run.out
    assert "--fail-on error: failed: nothing could be compared" in run.out
    meta = _meta(run.one("compare_report_*.html"))
    assert meta["headline"]["state"] == "nothing"
    assert meta["counts"]["matched"] == 0 and meta["counts"]["unmatched"] == 103
    assert "no bench counterpart" in meta["unmatched_warning"]
    text = run.one("advisor_*.txt").read_text()
    assert "Nothing compared: none of the 103 NPU rows has a bench counterpart" in text
    assert "No origin" not in text


def test_mostly_unmatched_is_said_and_can_be_gated(run_cli, other_model):
    run = run_cli(other_model, "pytorch", "--fail-on", "error")
    assert run.code == 0, run.out  # the 10 compared rows hold no error
    assert "Rows: 103 NPU rows, 10 matched, 93 without a bench counterpart;" in run.out
    assert "[WARNING] 93 of 103 NPU rows (90%) have no bench counterpart: check that bench_path (" in run.out
    assert "--fail-on error: passed (" in run.out and "unmatched rows are not gated (add ',unmatched')" in run.out
    for levels in ("unmatched", "error,unmatched"):
        gated = run_cli(other_model, "pytorch", "--fail-on", levels, out_dir=run.out_dir.parent / levels)
        assert gated.code == 3, gated.out
        assert "93 unmatched of 103" in gated.out and "failed" in gated.out


def test_all_matched_says_no_warning(run_cli):
    run = run_cli(DATA / "pytorch/mlp_same_stat", "pytorch", "--fail-on", "warning,unmatched")
    assert run.code == 0, run.out
    assert "Rows: 103 NPU rows, 103 matched; 0 error, 0 warning." in run.out
    assert "have no bench counterpart" not in run.out
    assert "[INFO] Root cause: no origin; every compared call agrees within tolerance." in run.out
    assert _meta(run.one("compare_report_*.html"))["headline"]["state"] == "none"


def test_unknown_gate_level_is_a_usage_error(run_cli):
    try:
        code = run_cli(MLP, "pytorch", "--fail-on", "errors").code
    except SystemExit as exc:  # argparse's own exit
        code = exc.code
    assert code == 2


def test_reference_advisor_is_labelled_and_root_cause_is_the_headline(run_cli):
    run = run_cli(MLP, "pytorch", "-s")
    assert run.code == 0
    label = _line(run.out, "The reference tool's advisor rule follows: the first failing row in table order")
    find = _line(run.out, "Find Module.head.Linear.parameters_grad.weight accuracy not reached")
    saved = _line(run.out, "The advisor summary is saved in:")
    headline = _line(run.out, "[WARNING] Root cause: after Module.fc2.Linear.forward.0's output")
    banner = _line(run.out, "msprobe compare ends successfully.")
    assert label < find < saved < headline < banner
    text = run.one("advisor_*.txt").read_text()
    head, note, rest = text.partition("\n\nNote: the three entries above follow the reference tool's rule")
    assert head.startswith("Line: 41\nSuspect Nodes: Module.head.Linear.parameters_grad.weight\n") and note
    assert "Rows: 103 NPU rows, 103 matched; 0 error, 8 warning." in rest
    assert rest.index("Rows:") < rest.index("Root cause (where the two runs first part")


MEETS = "meets the accuracy requirements"  # the reference's Expert Advice when its rule finds no failing row


def test_red_rows_are_not_all_pass(run_cli):
    """cnn_bug_stat: NaN in conv2's output makes 75 rows red, while the reference rule (Result column) finds none:
    the console and the report do not say all data meets the requirements; the advisor file keeps the reference's
    words (parity, D21)."""
    run = run_cli(DATA / "pytorch/cnn_bug_stat", "pytorch", "-s", "--fail-on", "error")
    assert run.code == 3
    assert MEETS not in run.out and "All data from api input/output accuracy reached" not in run.out
    assert "[INFO] No row fails the reference rule (Result column)" in run.out
    assert ("Expert Advice: no row fails the reference rule (Result column), but 75 rows are at error level (red); "
            "the root cause finds 1 origin: see Root cause.") in run.out  # fmt: skip
    assert (
        "[WARNING] The reference rule reads only the Result column: 75 rows are at error level (red) all the same."
        in run.out
    )
    assert "--fail-on error: failed (75 error row(s)" in run.out
    advisor = run.one("advisor_*.txt").read_text()
    assert advisor.startswith(f"Line: NA\nSuspect Nodes: NA\nExpert Advice: All data in comparison result {MEETS}.\n")
    assert "The reference rule reads only the Result column: 75 rows" in advisor
    shown = _meta(run.one("compare_report_*.html"))["advisor"]
    assert shown[2].startswith("Expert Advice: no row fails the reference rule") and MEETS not in shown[2]


def test_nothing_compared_never_meets_the_requirements(run_cli, wrong_bench):
    run = run_cli(wrong_bench, "pytorch")
    assert run.code == 0, run.out
    assert MEETS not in run.out
    assert ("Expert Advice: no row fails the reference rule (Result column), but nothing could be compared (none of "
            "the 103 NPU rows has a bench counterpart): see Root cause.") in run.out  # fmt: skip
    assert MEETS in run.one("advisor_*.txt").read_text().splitlines()[2]  # the reference's file, as it writes it
    note = ("The reference rule reads only the Result column of the rows with a bench counterpart: nothing could be "
            "compared (none of the 103 NPU rows has a bench counterpart).")  # fmt: skip
    assert f"[WARNING] {note}" in run.out and note in run.one("advisor_*.txt").read_text()


def test_agreement_keeps_the_reference_words(run_cli):
    run = run_cli(DATA / "pytorch/mlp_same_stat", "pytorch")
    assert f"[INFO] Expert Advice: All data in comparison result {MEETS}." in run.out
    assert "[INFO] All data from api input/output accuracy reached" in run.out


def test_mostly_unmatched_is_said_first(run_cli, other_model):
    """The unmatched warning comes before the result files are named, and names the gate that fails on it; the
    origin it finds says its inputs could not be compared instead of "inputs agree"."""
    run = run_cli(other_model, "pytorch")
    assert run.code == 0, run.out
    warning = _line(run.out, "93 of 103 NPU rows (90%) have no bench counterpart")
    assert warning < _line(run.out, "Saving result excel file") < _line(run.out, "Compare result is")
    assert "unmatched rows are not agreement; --fail-on unmatched makes such a compare fail (exit code 3)" in run.out
    assert MEETS not in run.out
    assert "but 93 of 103 NPU rows have no bench counterpart; the root cause finds 1 origin" in run.out
    note = ("The reference rule reads only the Result column of the rows with a bench counterpart: 93 of 103 NPU rows "
            "have no bench counterpart; the root cause finds 1 origin.")  # fmt: skip
    assert f"[WARNING] {note}" in run.out and note in run.one("advisor_*.txt").read_text()
    head = run.out.splitlines()[_line(run.out, "Root cause: ")]
    assert ("Functional.cross_entropy.0.forward: its 2 inputs have no bench counterpart (not compared), outputs "
            "differ") in head  # fmt: skip
    assert "inputs agree" not in run.out + run.one("advisor_*.txt").read_text()


def test_unmatched_nan_input_is_unknown_not_finite(run_cli, tmp_path):
    """cnn_bug_stat with the bench side's input of relu.1 (where the NaN arrives) missing: the NaN in relu.1's
    outputs is an origin, but its NPU input holds NaN already and has no counterpart: never "inputs are finite"."""
    case = tmp_path / "cnn"
    shutil.copytree(DATA / "pytorch/cnn_bug_stat", case, ignore=shutil.ignore_patterns("expected"))
    dump = case / "bench/step0/rank/dump.json"
    doc = json.loads(dump.read_text())
    doc["data"]["Functional.relu.1.forward"]["input_args"] = []
    dump.write_text(json.dumps(doc))
    run = run_cli(case, "pytorch")
    text = run.out + run.one("advisor_*.txt").read_text()
    assert ("Functional.relu.1.forward: NaN/Inf appears in its outputs, but its NPU inputs hold NaN/Inf already "
            "(1 input without a bench counterpart): it may arrive from upstream") in text  # fmt: skip
    assert "inputs are finite" not in text


def test_fail_on_and_root_cause_count_the_same_rows(run_cli):
    """mlp_same_md5: the in-place inputs recorded after the write differ in md5 (the reference advisor names one),
    but they say nothing about the data: the root cause and --fail-on both leave them out, and say so."""
    run = run_cli(DATA / "pytorch/mlp_same_md5", "pytorch", "-s", "--fail-on", "error")
    assert run.code == 0, run.out
    assert "Find Tensor.add_.2.forward.input.0 accuracy not reached" in run.out  # the reference's rule, kept
    assert ("2 rows not counted (inputs of in-place APIs that the dumper recorded after the write: "
            "Tensor.add_.2.forward.input.0, Tensor.add_.5.forward.input.0)") in run.out  # fmt: skip
    assert "Root cause: no origin; every compared call agrees within tolerance." in run.out
    assert "--fail-on error: passed (0 error row(s), 0 warning row(s), 0 unmatched of 103; 2 excluded" in run.out
    bug = run_cli(DATA / "pytorch/mlp_bug_md5", "pytorch", "-s", "--fail-on", "error", out_dir=run.out_dir.parent / "b")
    assert bug.code == 3 and "[WARNING] Root cause:" in bug.out


def test_step_folders_sum_the_counts(run_cli):
    run = run_cli(DATA / "pytorch/dist_same_stat", "pytorch", "--fail-on", "error")
    assert run.code == 0, run.out
    assert re.search(r"All ranks: Rows: [\d,]+ NPU rows, [\d,]+ matched; 0 error, 0 warning\.", run.out)
    assert "Root cause: no origin; every compared call agrees within tolerance." in run.out


def test_calls_a_parallel_layout_adds_are_not_unmatched(run_cli):
    """TP=2 against one process: the all-reduce rows have no counterpart by design; --fail-on unmatched passes."""
    run = run_cli(DATA / "parallel/shared/tp_mlp_same_stat", "pytorch", "--fail-on", "unmatched")
    assert run.code == 0, run.out
    assert re.search(r"All ranks: Rows: 150 NPU rows, 140 matched, 10 of calls the parallel layout adds", run.out)
    assert "calls the parallel layout adds have no counterpart, as expected" in run.out
    assert "could not be compared" not in run.out
    assert "--fail-on unmatched: passed" in run.out and "0 unmatched of 150" in run.out


def test_origin_descriptions_never_claim_what_was_not_compared():
    """Each kind of origin sentence with its inputs all compared, partly compared and not compared at all."""
    from msprobe_compare.judge.rootcause import Evidence, Origin, OriginKind
    from msprobe_compare.render.story import origin_description

    def origin(inputs: float | None, unpaired: int = 0, nonfinite: bool = False, nan_in: bool = False) -> str:
        ev = Evidence("Norm rel. diff", inputs, 0.5, 1e-4, "f.0.forward.output.0")
        return origin_description(
            Origin(
                "f.0.forward",
                OriginKind.COMPUTATION,
                "forward",
                None,
                ev,
                nonfinite=nonfinite,
                unpaired_inputs=unpaired,
                unpaired_nonfinite=nan_in,
            )
        )

    assert origin(None) == "f.0.forward: inputs agree, outputs differ"
    assert origin(None, 2) == "f.0.forward: its 2 inputs have no bench counterpart (not compared), outputs differ"
    assert (
        origin(0.0, 1) == "f.0.forward: its compared inputs agree (1 input without a bench counterpart), outputs differ"
    )
    assert origin(0.3, 1) == ("f.0.forward: outputs differ beyond the noise its inputs carry (1 input without a bench "
                              "counterpart, not compared)")  # fmt: skip
    assert origin(0.0, nonfinite=True) == "f.0.forward: NaN/Inf appears in its outputs, its inputs are finite"
    assert origin(0.0, 1, nonfinite=True) == ("f.0.forward: NaN/Inf appears in its outputs, its NPU inputs are finite "
                                              "(1 input without a bench counterpart)")  # fmt: skip
    assert origin(None, 1, nonfinite=True, nan_in=True).startswith(
        "f.0.forward: NaN/Inf appears in its outputs, but its NPU inputs hold NaN/Inf already (1 input without a "
        "bench counterpart): it may arrive from upstream")  # fmt: skip
