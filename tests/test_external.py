"""Dumps written by others (msprobe's examples, documentation and unit-test data), read in place from the shared
fixtures folder beside the repository (`shared/fixtures/external` in the folder that holds the checkout; skipped
when it is absent; never copied here).

Every case the reference (8.3.3) compares must give its table (parity as in tests/test_parity.py), except for the
deviations listed in docs/deviations.md, which are applied here by name:

- D14: entries named `...parameters_grad.<n>` (26.x dumpers) give rows; 8.3.3 drops them silently. Our extra rows
  are left out before the comparison, and checked to be there.
- D7: fuzzy matching of statistics dumps pairs rows (8.3.3 unmatches them all): our `-f` table is compared with the
  reference's table without `-f` (the names of these dumps differ by nothing a counter would change).

Cases the reference fails on for a reason issue #14 names (proc<PID> step folders) must succeed with the table of
the matching file compare; malformed files give one error line, exit code 1.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from parity import mismatches, read_xlsx


def _external() -> Path | None:
    """`shared/fixtures/external` beside the repository (or beside one of its parent folders, as for git
    worktrees); MSPROBE_EXTERNAL_FIXTURES names another place."""
    given = os.environ.get("MSPROBE_EXTERNAL_FIXTURES")
    if given:
        return Path(given) if Path(given).is_dir() else None
    for parent in Path(__file__).resolve().parents[1:]:
        candidate = parent / ".." / "shared" / "fixtures" / "external"
        if candidate.is_dir():
            return candidate.resolve()
    return None


EXTERNAL = _external()
pytestmark = pytest.mark.skipif(EXTERNAL is None, reason="../shared/fixtures/external is not there")

PARAM_GRAD_N = re.compile(r"\.parameters_grad\.\d+\.")  # rows of 26.x parameter-gradient entries (D14)
KERNEL = {"ut_ms_graph_kernel_npy", "ut_ms_graph_kernel_statistic"}  # MindSpore kernel-dump compare (spec §7.5)


def _d14(name: str) -> bool:
    return bool(PARAM_GRAD_N.search(name))


def _variants() -> list[tuple[str, str, str, bool]]:
    """(case, expected kind, compare file, coloured) for every recorded reference run."""
    if EXTERNAL is None:
        return []
    found = []
    for case in sorted(p for p in EXTERNAL.iterdir() if (p / "case.json").is_file()):
        for v in json.loads((case / "case.json").read_text())["variants"]:
            for coloured in (False, True):
                kind = v["name"] if not coloured else ("hl" if v["name"] == "plain" else v["name"] + "_hl")
                if (case / "expected" / f"{kind}.flags").is_file():
                    found.append((case.name, kind, v["compare"], coloured))
    return found


VARIANTS = _variants()


def _flags(case: Path, kind: str) -> list[str]:
    return shlex.split((case / "expected" / f"{kind}.flags").read_text().split("#")[0])


def _ref_exit(case: Path, kind: str) -> int:
    last = (case / "expected" / f"{kind}.console.log").read_text().strip().splitlines()[-1]
    return int(last.rsplit(" ", 1)[-1])


def _framework(case: Path) -> str:
    return json.loads((case / "case.json").read_text())["framework"]


def test_cases_found():
    assert len(VARIANTS) >= 60


@pytest.mark.parametrize("case_name,kind,compare,coloured", VARIANTS)
def test_external_case(run_cli, case_name, kind, compare, coloured):
    case = EXTERNAL / case_name
    flags = _flags(case, kind)
    run = run_cli(case, _framework(case), *flags, *([] if coloured else ["--no-highlight"]), input_name=compare)
    if case_name in KERNEL:  # the reference's table; its names are absolute paths, stored relative to the case
        assert run.code == 0, run.out
        assert "Compare rank: 0 step: 0 finish." in run.out
        expected = case / "expected" / f"{kind}.0_0.csv"
        problems = mismatches(
            run.one("compare_result_0_0_*.xlsx"),
            expected,
            colours=coloured,
            rewrite=lambda v: v.replace(str(case), ".") if isinstance(v, str) else v,
        )
        assert not problems, "\n".join(problems)
        return
    ref_exit = _ref_exit(case, kind)
    tables = sorted(run.out_dir.rglob("*compare_result*.xlsx"))
    if case_name.startswith("bad_"):  # malformed files: one error line, no traceback, no files
        assert ref_exit == 1 and run.code == 1, run.out
        assert "Traceback" not in run.out + run.err and not tables
        assert sum("[ERROR]" in line for line in run.out.splitlines()) == 1, run.out
        return
    assert run.code == 0, run.out
    expected = case / "expected" / f"{kind}.csv"
    if ref_exit != 0:  # the reference refuses proc<PID> step folders: ours gives the file compare's table
        assert "proc" in (case / "expected" / f"{kind}.console.log").read_text()
        expected = case / "expected" / ("hl.csv" if coloured else "plain.csv")
    elif "-f" in flags and "statistics" in (case / "npu").rglob("dump.json").__next__().read_text()[:200]:
        expected = case / "expected" / ("hl.csv" if coloured else "plain.csv")  # D7
    elif not expected.exists():
        rank_tables = sorted((case / "expected").glob(f"{kind}.*.csv"))
        if not rank_tables:  # the reference wrote nothing
            assert not tables, tables
            return
        assert len(rank_tables) == 1
        expected = rank_tables[0]
    assert len(tables) == 1, tables
    problems = mismatches(tables[0], expected, colours=coloured, drop=_d14)
    assert not problems, "\n".join(problems)
    names = [str(r[0]) for r in read_xlsx(tables[0])[1]]
    dumped = sum(1 for p in (case / "npu").rglob("dump.json") for e in json.loads(p.read_text())["data"]
                 if re.search(r"\.parameters_grad\.\d+$", e))  # fmt: skip
    if dumped and not any(p.name == "debug.json" for p in (case / "npu").rglob("*.json")):
        assert sum(map(_d14, names)) >= dumped  # D14: every parameters_grad.<n> entry has its rows


def test_resnet_parameter_gradients_all_have_rows(run_cli):
    """The quick-start ResNet-50 dump (msprobe 26.x): 107 parameters_grad.0 entries, 161 gradient rows, in dump
    order (at backward time), each with its bench row."""
    case = EXTERNAL / "qs_resnet50_step0_same"
    run = run_cli(case, "pytorch", "-s", "--no-highlight")
    header, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    names = [r[0] for r in rows]
    grads = [k for k, n in enumerate(names) if _d14(n)]
    assert len(grads) == 161
    assert all(rows[k][1] == names[k] for k in grads)  # paired with itself
    dump = json.loads((case / "npu/step0/proc2016/dump.json").read_text())["data"]
    order = [e for e in dump if e.endswith(".parameters_grad.0")]
    seen = list(dict.fromkeys(names[k].rsplit(".", 1)[0] for k in grads))
    assert seen == order
    assert "yields no row" not in run.out


def test_step_folders_of_proc_folders(run_cli):
    """26.x single-process dumps sit in step0/proc<PID>/ (the reference refuses them): one pair, named after the
    NPU folder."""
    case = EXTERNAL / "qs_resnet50_step1_vs_step0"
    run = run_cli(case, "pytorch", "--no-highlight", input_name="compare_dirs.json")
    assert run.code == 0, run.out
    assert "process folders paired in sorted order: npu proc2016 <-> bench proc2016" in run.out
    table = run.one("compare_result_proc2016_*.xlsx")
    assert not mismatches(table, case / "expected" / "plain.csv", colours=False, drop=_d14)
    assert run.one("advisor_proc2016_*.txt")


def test_entry_without_rows_is_named(run_cli):
    """visut_multirank_minimal: the only entry, `api`, holds `{"input": [{}]}`: no row, and a warning says so."""
    case = EXTERNAL / "visut_multirank_minimal"
    run = run_cli(case, "pytorch")
    assert run.code == 0, run.out
    assert "npu entry 'api' yields no row" in run.out
    assert "1 npu entry of 1 yield no row" in run.out
    assert not run.files("**/*.xlsx")


def test_source_expected_row_linear_stats(run_cli):
    """msprobe's own unit test asserts this statistics row (test_compare_statistics)."""
    case = EXTERNAL / "ut_acc_compare_linear_stats"
    run = run_cli(case, "pytorch", "-s", "--no-highlight")
    problems = mismatches(run.one("compare_result_*.xlsx"), case / "expected/source/test_compare_statistics.csv",
                          colours=False)  # fmt: skip
    assert not problems, problems


@pytest.mark.parametrize("case_name", ["msut_cross_ms_vs_pt_megatron", "res_cross_embedding_layer_mapping"])
def test_source_layer_mappings(run_cli, case_name):
    """The mappings msprobe's layer-mapping unit tests assert hold for our -lm (rows and entries)."""
    case = EXTERNAL / case_name
    run = run_cli(case, "mindspore", "-lm", "layer_mapping.yaml", "--no-highlight")
    assert run.code == 0, run.out
    mapping = yaml.safe_load(run.one("data_mapping_*.yaml").read_text()) or {}
    source = case / "expected" / "source"
    rows_expected = source / "expected_data_mapping.json"
    if rows_expected.exists():
        for npu, bench in json.loads(rows_expected.read_text()).items():
            assert mapping.get(npu, "N/A") == bench, npu
    for npu, bench in json.loads((source / "expected_api_mapping.json").read_text()).items():
        targets = {v for k, v in mapping.items() if k.startswith(npu + ".")} - {"N/A"}  # arguments may be N/A
        if bench == "N/A":
            assert not targets, npu
        else:
            assert targets and all(v.startswith(bench + ".") for v in targets), (npu, targets)


def test_source_documented_user_api_mapping(run_cli):
    """The MindSpore compare document's stated pairing for its user_mapping.yaml example."""
    case = EXTERNAL / "doc_cross_interpolate_user_api_mapping"
    run = run_cli(case, "mindspore", "-am", "user_mapping.yaml", "--no-highlight")
    _, rows, _ = read_xlsx(run.one("compare_result_*.xlsx"))
    pairs = {r[0]: r[1] for r in rows}
    stated = re.findall(r"^\s+(\S+) -> (\S+)", (case / "expected/source/doc_statement.md").read_text(), re.M)
    assert len(stated) == 5
    for npu, bench in stated:
        assert pairs[npu] == bench, npu


def test_debug_json_against_a_dump_json_is_refused(run_cli, tmp_path):
    """As the reference: both paths debug.json, or neither (spec §7.7)."""
    case = EXTERNAL / "ut_debug_save_debugjson"
    dump = EXTERNAL / "ut_acc_compare_linear_stats/npu/dump.json"
    (tmp_path / "mixed.json").write_text(json.dumps({"npu_path": str(case / "npu/step0/rank/debug.json"),
                                                     "bench_path": str(dump)}))  # fmt: skip
    run = run_cli(tmp_path, "pytorch", input_name="mixed.json")
    assert run.code == 1 and "must both be dump.json files or both debug.json files" in run.out
