"""Root cause on the fixtures, whose faults are known by construction (tests/data/README.md):

- pytorch `*_bug_*`: mlp scales fc2's output by 1.01, cnn sets one element of conv2's output to NaN,
  both in place after the dumper recorded the module's output; so the first difference is seen at the
  next consumer's input: a boundary after fc2's / conv2's output. In md5 dumps of mlp the module's
  md5 is taken after the write, so the difference first shows in Module.fc2's own output.
- mindspore `*_diff`: the Block cell's output is scaled inside its construct: Block computes wrongly
  from agreeing inputs.
- `same` cases: no origin.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA
from msprobe_compare.api import build_outcome
from msprobe_compare.config import Options, load_config
from msprobe_compare.judge.rootcause import CallState, OriginKind
from msprobe_compare.log import Console

FC2 = ("Module.fc2.Linear.forward.0", "Functional.relu.1.forward")
CONV2 = ("Module.conv2.Conv2d.forward.0", "Functional.relu.1.forward")
BOUNDARIES = {
    "pytorch/mlp_bug_stat": FC2,
    "pytorch/mlp_bug_tensor": FC2,
    "pytorch/mlp_bug_stat_L1": ("Functional.linear.1.forward", "Functional.relu.1.forward"),
    "pytorch/cnn_bug_stat": CONV2,
    "pytorch/cnn_bug_md5": CONV2,
    "pytorch/cnn_bug_tensor": CONV2,
    "pytorch/cnn_bug_stat_L0": ("Module.conv2.Conv2d.forward.0", "Module.gap.AdaptiveAvgPool2d.forward.0"),
}
# md5 dumps are judged by the statistics they record beside the md5 (issue #29: an fp32 matmul may run at TF32, so an
# md5 that differs says nothing by itself). In mlp_bug_md5 the dumper hashed fc2's output after the in-place write
# but took its statistics before, so the statistics see the write at relu.1's input: the boundary the statistics
# dump (mlp_bug_stat) names too; md5 alone named Module.fc2's output a computation origin.
BOUNDARIES["pytorch/mlp_bug_md5"] = FC2
COMPUTATIONS = {
    "mindspore/L0_statistics_diff": "Cell.backbone.block.Block.forward.0",
    "mindspore/L0_md5_diff": "Cell.backbone.block.Block.forward.0",
    "mindspore/L0_tensor_diff": "Cell.backbone.block.Block.forward.0",
}
SAME = sorted(str(p.relative_to(DATA)) for p in DATA.glob("*/*") if ("_same_" in p.name and "dist" not in p.name) or
              p.name in ("L0_statistics", "L0_md5", "L0_tensor", "L1_statistics", "mix_statistics"))  # fmt: skip


def outcome_of(case: str, cwd_monkeypatch, compare_json: str = "compare.json"):
    cwd_monkeypatch.chdir(DATA / case)
    cfg = load_config(Path(compare_json), Options(framework="pytorch"))
    return build_outcome(cfg, Console(stream=open("/dev/null", "w")))


@pytest.mark.parametrize("case", sorted(BOUNDARIES))
def test_boundary_origins(case, monkeypatch):
    rc = outcome_of(case, monkeypatch).rootcause
    first = rc.first
    assert first is not None and first.kind is OriginKind.BOUNDARY, rc.origins
    assert (first.after, first.entry) == BOUNDARIES[case]
    assert first.phase == "forward"
    assert rc.states[rc.entries.index(first.after)] is CallState.OK


@pytest.mark.parametrize("case", sorted(COMPUTATIONS))
def test_computation_origins(case, monkeypatch):
    rc = outcome_of(case, monkeypatch).rootcause
    assert rc.first is not None and rc.first.kind is OriginKind.COMPUTATION, rc.origins
    assert rc.first.entry == COMPUTATIONS[case]
    assert len(rc.origins) == 1  # everything after it is inherited


@pytest.mark.parametrize("case", SAME)
def test_same_cases_have_no_origin(case, monkeypatch):
    rc = outcome_of(case, monkeypatch).rootcause
    assert rc.origins == []
    assert CallState.PROPAGATED not in rc.states


def _leaf(v: float) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": v, "Min": -v, "Mean": 0.1,
            "Norm": 2 * v, "requires_grad": False}  # fmt: skip


def _pair(tmp_path: Path, npu: dict, bench: dict, construct: dict | None = None) -> None:
    for side, data in (("npu", npu), ("bench", bench)):
        d = tmp_path / side
        d.mkdir()
        (d / "dump.json").write_text(json.dumps({"task": "statistics", "level": "mix", "data": data}))
        if construct is not None:
            (d / "construct.json").write_text(json.dumps(construct))
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": str(tmp_path / "npu/dump.json"),
                                                       "bench_path": str(tmp_path / "bench/dump.json")}))  # fmt: skip


def test_configuration_mismatch_is_an_origin(tmp_path, monkeypatch):
    def data(dim: int) -> dict:
        return {
            "Functional.linear.0.forward": {"input_args": [_leaf(1.0)], "output": [_leaf(2.0)]},
            "Functional.softmax.0.forward": {"input_args": [_leaf(2.0)], "input_kwargs": {
                "dim": {"type": "int", "value": dim}}, "output": [_leaf(0.5 if dim == 1 else 0.7)]},
            "Functional.relu.0.forward": {"input_args": [_leaf(0.5 if dim == 1 else 0.7)], "output": [_leaf(0.5)]},
        }  # fmt: skip

    _pair(tmp_path, data(-1), data(1))
    monkeypatch.chdir(tmp_path)
    rc = build_outcome(load_config(Path("compare.json"), Options(framework="pytorch")), Console()).rootcause
    assert rc.first.kind is OriginKind.CONFIGURATION and rc.first.entry == "Functional.softmax.0.forward"
    assert rc.first.differing_args == ("dim",)
    assert rc.states[2] is CallState.PROPAGATED


def test_innermost_call_is_named(tmp_path, monkeypatch):
    def data(scale: float) -> dict:
        return {
            "Functional.gelu.0.forward": {"input_args": [_leaf(1.0)], "output": [_leaf(3.0 * scale)]},
            "Module.mlp.MLP.forward.0": {"input_args": [_leaf(1.0)], "output": [_leaf(3.0 * scale)]},
        }

    construct = {"Functional.gelu.0.forward": "Module.mlp.MLP.forward.0", "Module.mlp.MLP.forward.0": None}
    _pair(tmp_path, data(1.5), data(1.0), construct)
    monkeypatch.chdir(tmp_path)
    rc = build_outcome(load_config(Path("compare.json"), Options(framework="pytorch")), Console()).rootcause
    assert [o.entry for o in rc.origins] == ["Functional.gelu.0.forward"]


def test_advisor_file_has_root_cause_section(run_cli):
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "-s")
    text = run.one("advisor_*.txt").read_text()
    assert text.startswith((DATA / "pytorch/mlp_bug_stat/expected/hl.advisor.txt").read_text())
    assert "Root cause (where the two runs first part, in execution order):" in text
    assert ("1. [boundary, forward] after Module.fc2.Linear.forward.0's output, "
            "before Functional.relu.1.forward's input") in text  # fmt: skip
    assert "first differing row: Functional.relu.1.forward.input.0" in text
    assert "Root cause: after Module.fc2.Linear.forward.0's output" in run.out


@pytest.mark.parametrize("case", sorted(BOUNDARIES) + sorted(COMPUTATIONS))
def test_segment_reductions_equal_the_unordered_path(case, monkeypatch):
    """Per-entry reductions over contiguous row segments (rows in entry order) give what ufunc.at gives."""
    from msprobe_compare.judge import calls, rootcause

    outcome = outcome_of(case, monkeypatch)
    fast = rootcause.analyse(outcome, outcome.rootcause.parents)
    monkeypatch.setattr(calls, "_in_entry_order", lambda ei: False)
    slow = rootcause.analyse(outcome, outcome.rootcause.parents)
    assert fast.states == slow.states and fast.origins == slow.origins
    assert np.array_equal(fast.in_scores, slow.in_scores, equal_nan=True)
    assert np.array_equal(fast.out_scores, slow.out_scores, equal_nan=True)
