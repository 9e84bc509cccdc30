"""The root cause's rules of issue #29, each on a small hand-made pair of dumps.

- statistics computed in the tensor's own low precision: an Inf/NaN Norm or Mean (or a Norm below the largest
  element) of a finite tensor is no NaN/Inf in the data; that measure is unknown, the others still judge.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from msprobe_compare.api import build_outcome
from msprobe_compare.config import Options, load_config
from msprobe_compare.judge import noise
from msprobe_compare.judge.rootcause import CallState, OriginKind
from msprobe_compare.load.rows import StatKind
from msprobe_compare.log import Console


def leaf(mx: float, mn: float, mean: float, norm: float, dtype: str = "torch.float32", shape=(4, 4)) -> dict:
    return {"type": "torch.Tensor", "dtype": dtype, "shape": list(shape), "Max": mx, "Min": mn, "Mean": mean,
            "Norm": norm, "requires_grad": False}  # fmt: skip


def write_pair(tmp_path: Path, npu: dict, bench: dict, construct: dict | None = None, task: str = "statistics",
               framework: str = "pytorch") -> None:  # fmt: skip
    for side, data in (("npu", npu), ("bench", bench)):
        d = tmp_path / side
        d.mkdir(parents=True)
        (d / "dump.json").write_text(json.dumps({"task": task, "level": "mix", "framework": framework,
                                                 "data": data}, allow_nan=True))  # fmt: skip
        if construct is not None:
            (d / "construct.json").write_text(json.dumps(construct))
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": str(tmp_path / "npu/dump.json"),
                                                       "bench_path": str(tmp_path / "bench/dump.json")}))  # fmt: skip


def rootcause_of(tmp_path: Path, monkeypatch, tolerance: str | None = None):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(Path("compare.json"), Options(framework="pytorch", tolerance=tolerance))
    return build_outcome(cfg, Console(stream=open("/dev/null", "w"))).rootcause


# -- statistics computed in low precision ----------------------------------------------------------------------


def _masked(scores_npu: dict, scores_bench: dict, later_npu: dict, later_bench: dict) -> tuple[dict, dict]:
    """linear -> masked_fill(-1e4) -> softmax -> mul: the masked scores' statistics given per side."""

    def side(scores: dict, later: dict, dtype: str) -> dict:
        x = leaf(2.0, -2.0, 0.01, 8.0, dtype)
        return {
            "Functional.linear.0.forward": {"input_args": [x], "output": [leaf(3.0, -3.0, 0.02, 12.0, dtype)]},
            "Tensor.masked_fill.0.forward": {"input_args": [leaf(3.0, -3.0, 0.02, 12.0, dtype)],
                                             "output": [scores]},
            "Functional.softmax.0.forward": {"input_args": [scores], "output": [leaf(1.0, 0.0, 0.25, 2.0, dtype)]},
            "Tensor.__mul__.0.forward": {"input_args": [leaf(1.0, 0.0, 0.25, 2.0, dtype)], "output": [later]},
        }  # fmt: skip

    return side(scores_npu, later_npu, "torch.float16"), side(scores_bench, later_bench, "torch.float32")


def test_fp16_norm_overflow_of_masked_scores_is_no_inf_in_the_data(tmp_path, monkeypatch):
    """msprobe computes an fp16 tensor's Norm in fp16: masked scores (-1e4) have Norm inf, Max/Min finite."""
    fine = leaf(1.0, 0.0, 0.25, 2.0)
    npu, bench = _masked(leaf(3.0, -10000.0, -5000.0, math.inf, "torch.float16"), leaf(3.0, -10000.0, -5000.0, 113137.0),
                         fine, fine)  # fmt: skip
    write_pair(tmp_path, npu, bench)
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.origins == [] and rc.suspects == []
    assert rc.states[rc.entries.index("Tensor.masked_fill.0.forward")] in (CallState.OK, CallState.NOISE)


def test_a_real_overflow_after_the_masked_scores_is_still_found(tmp_path, monkeypatch):
    fine = leaf(1.0, 0.0, 0.25, 2.0)
    overflow = leaf(math.inf, 0.0, math.inf, math.inf, "torch.float16")
    npu, bench = _masked(leaf(3.0, -10000.0, -5000.0, math.inf, "torch.float16"), leaf(3.0, -10000.0, -5000.0, 113137.0),
                         overflow, fine)  # fmt: skip
    write_pair(tmp_path, npu, bench)
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.first is not None and rc.first.entry == "Tensor.__mul__.0.forward" and rc.first.nonfinite
    assert rc.first.kind is OriginKind.COMPUTATION


def test_the_other_measures_still_judge_a_row_whose_norm_overflowed(tmp_path, monkeypatch):
    """The Norm is unknown, the Max/Min change (x1.5 of the largest element) still names the call."""
    npu, bench = _masked(leaf(4.5, -10000.0, -5000.0, math.inf, "torch.float16"), leaf(3.0, -10000.0, -5000.0, 113137.0),
                         leaf(1.0, 0.0, 0.25, 2.0), leaf(1.0, 0.0, 0.25, 2.0))  # fmt: skip
    npu["Tensor.masked_fill.0.forward"]["output"][0]["Min"] = -15000.0
    write_pair(tmp_path, npu, bench)
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.first is not None and rc.first.entry == "Tensor.masked_fill.0.forward" and not rc.first.nonfinite
    assert rc.first.evidence.metric == noise.STAT_NAMES[2]


def test_finite_data_and_valid_statistics_row_by_row():
    inf, nan = math.inf, math.nan
    values = np.array([
        [3.0, -1e4, -5e3, inf],  # fp16 Norm overflow: data finite, Norm invalid
        [inf, 0.0, inf, inf],  # an Inf element
        [nan, nan, nan, nan],  # NaN elements
        [3.0, -3.0, nan, 12.0],  # Mean NaN with finite extremes: data finite, Mean invalid
        [3.0, -3.0, 0.5, 0.0],  # Norm underflowed to 0 below the largest element
        [3.0, -3.0, 0.5, 4.0],  # all valid
    ])  # fmt: skip
    kinds = np.full(values.shape, StatKind.NUMBER, dtype=np.int8)
    kinds[2] = StatKind.NAN
    kinds[3, 2] = StatKind.NAN
    assert noise.finite_data(values, kinds).tolist() == [True, False, False, True, True, True]
    assert noise.stat_valid(values, kinds, 3).tolist()[:1] + noise.stat_valid(values, kinds, 3).tolist()[3:] == [
        False, True, False, True]  # fmt: skip
    assert noise.stat_valid(values, kinds, 2).tolist()[3:] == [False, True, True]
    # without numeric Max/Min every statistic counts, as before
    none_kinds = kinds.copy()
    none_kinds[0, :2] = StatKind.NONE
    assert not noise.finite_data(values, none_kinds)[0]


# -- the backward pass -----------------------------------------------------------------------------------------


def _layers(n: int, bwd_out: list[float], dtype: str, forward_rel: float = 1e-3, grad_rel: float = 2e-3) -> dict:
    """n layers of linear -> gelu; forward outputs `forward_rel` apart per layer from the bench (scale 1), the
    incoming gradients of each backward call `grad_rel` apart, the output gradients of gelu k `bwd_out[k]` apart
    (the bench side: all zeros). Values given as relative differences of the Norm."""

    def t(norm: float, rel: float) -> dict:
        v = norm * (1 + rel)
        return leaf(v / 2, -v / 2, 0.01 * v, v, dtype, (8, 16))

    data: dict = {}
    for k in range(n):
        data[f"Functional.linear.{k}.forward"] = {
            "input_args": [t(4.0, forward_rel * k)],
            "output": [t(5.0, forward_rel * (k + 1))],
        }
        data[f"Functional.gelu.{k}.forward"] = {"input_args": [t(5.0, forward_rel * (k + 1))],
                                                "output": [t(3.0, forward_rel * (k + 1))]}  # fmt: skip
    for k in reversed(range(n)):
        data[f"Functional.gelu.{k}.backward"] = {"input": [t(0.5, grad_rel)], "output": [t(0.4, bwd_out[k])]}
        data[f"Functional.linear.{k}.backward"] = {"input": [t(0.4, bwd_out[k])],
                                                   "output": [t(0.3, bwd_out[k]), t(0.2, bwd_out[k])]}  # fmt: skip
    return data


def _tree(n: int) -> dict:
    tree: dict = {}
    for k in range(n):
        for phase in ("forward", "backward"):
            module = f"Module.layers.{k}.Block.{phase}.0"
            tree[module] = None
            tree[f"Functional.linear.{k}.{phase}"] = module
            tree[f"Functional.gelu.{k}.{phase}"] = module
    return tree


def _backward_case(tmp_path: Path, monkeypatch, bwd_out: list[float], construct: bool = True):
    n = len(bwd_out)
    npu = _layers(n, bwd_out, "torch.bfloat16")
    bench = _layers(n, [0.0] * n, "torch.float32", forward_rel=0.0, grad_rel=0.0)
    write_pair(tmp_path, npu, bench, _tree(n) if construct else None)
    return rootcause_of(tmp_path, monkeypatch)


def test_a_backward_only_bug_is_an_origin(tmp_path, monkeypatch):
    """gelu 2's backward x1.1 while its forward is exact: 0.1 against its incoming gradients' 0.002."""
    rc = _backward_case(tmp_path, monkeypatch, [2.2e-3, 2.1e-3, 0.1, 2.3e-3])
    assert [o.entry for o in rc.origins][:1] == ["Functional.gelu.2.backward"], rc.origins
    first = rc.first
    assert first.kind is OriginKind.COMPUTATION and first.phase == "backward"
    ev = first.evidence
    assert ev.floor_source.kind.value == "backward peers" and ev.floor_source.peers == 3
    assert ev.ratio is not None and ev.ratio > rc.tolerance.backward_origin
    assert ev.threshold == rc.tolerance.backward_origin * ev.floor
    # the backward calls after it inherit
    assert rc.states[rc.entries.index("Functional.linear.2.backward")] is CallState.PROPAGATED


def test_backward_noise_and_cancellation_name_nothing(tmp_path, monkeypatch):
    """Noise-only gradients, and gradients that are rounding residue in every layer (a bias gradient before a
    norm is zero mathematically: 100% apart everywhere), stand out against no peer."""
    assert _backward_case(tmp_path / "a", monkeypatch, [2.2e-3, 2.1e-3, 3e-3, 2.3e-3]).origins == []
    rc = _backward_case(tmp_path / "b", monkeypatch, [0.9, 0.6, 1.0, 0.8])
    assert rc.origins == [] and rc.suspects == []


def test_a_backward_call_with_too_few_peers_keeps_the_walk_rule(tmp_path, monkeypatch):
    """Two layers: each backward call has one peer, too few to tell a bug from noise: not judged."""
    rc = _backward_case(tmp_path, monkeypatch, [2.2e-3, 0.1])
    assert rc.origins == []
    assert rc.states[rc.entries.index("Functional.gelu.1.backward")] is CallState.NOISE


def test_backward_peers_without_construct_json(tmp_path, monkeypatch):
    """Without a module tree the calls of one API are each other's peers."""
    rc = _backward_case(tmp_path, monkeypatch, [2.2e-3, 2.1e-3, 0.1, 2.3e-3], construct=False)
    assert rc.first is not None and rc.first.entry == "Functional.gelu.2.backward"


def test_a_forward_origin_leaves_the_backward_pass_propagated(tmp_path, monkeypatch):
    n = 4
    npu = _layers(n, [2.2e-3, 2.1e-3, 0.1, 2.3e-3], "torch.bfloat16")
    npu["Functional.gelu.1.forward"]["output"][0] = leaf(1.8, -1.8, 0.036, 3.6, "torch.bfloat16", (8, 16))
    bench = _layers(n, [0.0] * n, "torch.float32", forward_rel=0.0, grad_rel=0.0)
    write_pair(tmp_path, npu, bench, _tree(n))
    rc = rootcause_of(tmp_path, monkeypatch)
    assert [o.entry for o in rc.origins] == ["Functional.gelu.1.forward"]
    assert rc.states[rc.entries.index("Functional.gelu.2.backward")] is CallState.PROPAGATED


def test_peer_keys_name_the_same_code_in_other_layers():
    from msprobe_compare.judge import backward

    assert backward._forward_names(["Module.fc.Linear.parameters_grad"]) == ["Module.fc.Linear.forward.0"]
    assert backward._backward_names(["Module.fc.Linear.parameters_grad", "Functional.linear.3.backward"]) == [
        "Module.fc.Linear.backward.0", ""]  # fmt: skip
    assert backward.kind_of("Module.blocks.11.attn.Attention.backward.0") == "Module.blocks.#.attn.Attention.backward."
    assert backward.kind_of("Functional.linear.3.backward") == "Functional.linear..backward"
    entries = ["Functional.linear.0.backward", "Functional.linear.1.backward", "Functional.linear.2.backward",
               "Functional.gelu.0.backward", "Functional.linear.3.backward"]  # fmt: skip
    parents = {entries[0]: "Module.blocks.0.attn.A.backward.0", entries[1]: "Module.blocks.0.attn.A.backward.0",
               entries[2]: "Module.blocks.1.attn.A.backward.0", entries[3]: "Module.blocks.1.attn.A.backward.0",
               entries[4]: "Module.head.H.backward.0"}  # fmt: skip
    keys = backward.peer_keys(entries, np.arange(5), parents)
    # linears under attention modules of every layer are peers; a gelu there, or a linear elsewhere, is not
    assert keys[0] == keys[1] == keys[2] and len({keys[0], keys[3], keys[4]}) == 3
    assert backward.layers(entries, np.array([0, 4]), parents, np.arange(5)).tolist() == [2, 1]
    assert backward.layers(entries, np.array([0]), {}, np.arange(5)).tolist() == [4]  # no tree: the API's calls
    assert backward._forward_names(["Functional.linear.3.backward", "Module.fc.Linear.backward.0"]) == [
        "Functional.linear.3.forward", "Module.fc.Linear.forward.0"]  # fmt: skip
    top = backward.peer_keys(["Functional.relu.0.backward", "Functional.relu.1.backward"], np.arange(2), {})
    assert top[0] == top[1]  # without a module tree every call of the API is a peer


# -- collectives -----------------------------------------------------------------------------------------------


def _rank(bug: float, carried: float) -> dict:
    """fp32, one rank: linear -> relu -> (backward) -> two gradient all_reduces. `bug`: this rank's linear
    output x(1 + bug); `carried`: how far the all_reduces' outputs are apart (another rank's difference)."""

    def t(norm: float, rel: float = 0.0) -> dict:
        v = norm * (1 + rel)
        return leaf(v / 2, -v / 2, 0.01 * v, v, "torch.float32", (16, 16))

    return {
        "Functional.linear.0.forward": {"input_args": [t(4.0)], "output": [t(5.0, bug)]},
        "Functional.relu.0.forward": {"input_args": [t(5.0, bug)], "output": [t(3.0, bug)]},
        "Functional.relu.0.backward": {"input": [t(0.5)], "output": [t(0.4, bug)]},
        "Functional.linear.0.backward": {"input": [t(0.4, bug)], "output": [t(0.3, bug), t(0.2, bug)]},
        "Distributed.all_reduce.0.forward": {"input_args": [t(0.2, bug)], "output": [t(0.4, carried or bug)]},
        "Distributed.all_reduce.1.forward": {"input_args": [t(0.3, bug)], "output": [t(0.6, 10 * carried or bug)]},
    }  # fmt: skip


def _ranks(tmp_path: Path, carried: float) -> Path:
    """Two ranks, the bug (x1.01) on rank 1; rank 0's all_reduces bring it `carried` apart."""
    for side in ("npu", "bench"):
        for r in (0, 1):
            d = tmp_path / side / "step0" / f"rank{r}"
            d.mkdir(parents=True)
            data = _rank(0.0, 0.0) if side == "bench" else _rank(0.01 if r == 1 else 0.0, carried if r == 0 else 0.0)
            (d / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                     "data": data}))  # fmt: skip
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": "./npu/step0", "bench_path": "./bench/step0"}))
    return tmp_path


def test_a_collective_that_carries_another_ranks_difference(tmp_path, monkeypatch):
    """Rank 0's first all_reduce brings rank 1's error 4e-5 apart: under the 5e-5 minimum floor of fp32 compute,
    far above what a sum adds (a collective's floor is the precision's)."""
    _ranks(tmp_path, 4e-5)
    (tmp_path / "r0").mkdir()
    (tmp_path / "r0" / "compare.json").write_text(json.dumps({
        "npu_path": str(tmp_path / "npu/step0/rank0/dump.json"),
        "bench_path": str(tmp_path / "bench/step0/rank0/dump.json")}))  # fmt: skip
    rc = rootcause_of(tmp_path / "r0", monkeypatch)
    assert rc.first is not None and rc.first.entry == "Distributed.all_reduce.0.forward" and rc.first.collective
    from msprobe_compare.render import story

    assert "the collective brings another rank's difference" in story.origin_description(rc.first)


def test_the_rank_whose_origin_a_collective_carries_is_named(tmp_path, run_cli):
    _ranks(tmp_path, 4e-5)
    run = run_cli(tmp_path, "pytorch", out_dir=tmp_path / "out")
    assert run.code == 0, run.err
    text = run.out + run.err
    line = next(x for x in text.splitlines() if "Root cause across ranks" in x)
    assert "rank1: Functional.linear.0.forward" in line
    assert "rank0 first receives it at Distributed.all_reduce.0.forward" in line


def test_python_api_names_the_source_rank(tmp_path, monkeypatch):
    from msprobe_compare.python_api import compare

    _ranks(tmp_path, 4e-5)
    result = compare(tmp_path / "npu/step0", tmp_path / "bench/step0", tmp_path / "out", framework="pytorch")
    assert result.first_origin.startswith("rank1: Functional.linear.0.forward")


# -- one-sided calls -------------------------------------------------------------------------------------------


def _patch_embedding_pair(tmp_path: Path) -> None:
    """A patch embedding written as permute + reshape + linear on the NPU side and conv2d + flatten + transpose on
    the bench side, then attention with a permute on both: by name the NPU's patch permute pairs with the bench's
    attention permute (other dims: a configuration origin)."""

    def t(n: float, shape=(2, 16, 32)) -> dict:
        return leaf(n / 2, -n / 2, 0.01 * n, n, "torch.float32", shape)

    def arg(v: int) -> dict:
        return {"type": "int", "value": v}

    patch, attn = "Module.patch.PatchEmbed.forward.0", "Module.blocks.0.attn.Attention.forward.0"
    npu = {
        "Tensor.permute.0.forward": {"input_args": [t(5.0, (2, 4, 4, 3)), arg(0), arg(2), arg(3), arg(1)],
                                     "output": [t(5.0, (2, 4, 3, 4))]},
        "Tensor.reshape.0.forward": {"input_args": [t(5.0, (2, 4, 3, 4)), arg(2), arg(16), arg(3)],
                                     "output": [t(5.0, (2, 16, 3))]},
        "Functional.linear.0.forward": {"input_args": [t(5.0, (2, 16, 3))], "output": [t(7.0)]},
        patch: {"input_args": [t(5.0, (2, 3, 4, 4))], "output": [t(7.0)]},
        "Functional.linear.1.forward": {"input_args": [t(7.0)], "output": [t(8.0)]},
        "Tensor.permute.1.forward": {"input_args": [t(8.0, (2, 16, 4, 8)), arg(0), arg(2), arg(1), arg(3)],
                                     "output": [t(8.0, (2, 4, 16, 8))]},
        attn: {"input_args": [t(7.0)], "output": [t(8.0, (2, 4, 16, 8))]},
    }  # fmt: skip
    bench = {
        "Functional.conv2d.0.forward": {"input_args": [t(5.0, (2, 3, 4, 4))], "output": [t(7.0, (2, 32, 4, 4))]},
        "Tensor.flatten.0.forward": {"input_args": [t(7.0, (2, 32, 4, 4)), arg(2)], "output": [t(7.0, (2, 32, 16))]},
        "Tensor.transpose.0.forward": {"input_args": [t(7.0, (2, 32, 16)), arg(1), arg(2)], "output": [t(7.0)]},
        patch: {"input_args": [t(5.0, (2, 3, 4, 4))], "output": [t(7.0)]},
        "Functional.linear.0.forward": {"input_args": [t(7.0)], "output": [t(8.0)]},
        "Tensor.permute.0.forward": {"input_args": [t(8.0, (2, 16, 4, 8)), arg(0), arg(2), arg(1), arg(3)],
                                     "output": [t(8.0, (2, 4, 16, 8))]},
        attn: {"input_args": [t(7.0)], "output": [t(8.0, (2, 4, 16, 8))]},
    }  # fmt: skip
    in_attn = {"Functional.linear.1.forward", "Tensor.permute.1.forward"}

    def tree(data: dict, attention: set[str]) -> dict:
        return {k: None if k.startswith("Module.") else (attn if k in attention else patch) for k in data}

    write_pair(tmp_path, npu, bench)
    (tmp_path / "npu" / "construct.json").write_text(json.dumps(tree(npu, in_attn)))
    (tmp_path / "bench" / "construct.json").write_text(
        json.dumps(tree(bench, {"Functional.linear.0.forward", "Tensor.permute.0.forward"}))
    )


def test_a_call_on_one_side_only_inside_a_shared_module_is_one_sided(tmp_path, monkeypatch):
    _patch_embedding_pair(tmp_path)
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.origins == [] and rc.suspects == []
    state = dict(zip(rc.entries, rc.states))
    for name in ("Tensor.permute.0.forward", "Tensor.reshape.0.forward", "Functional.linear.0.forward"):
        assert state[name] is CallState.ONE_SIDED, name
    # the module both sides run is still compared at its boundary, the attention's calls with their own
    assert state["Module.patch.PatchEmbed.forward.0"] is CallState.OK
    assert state["Tensor.permute.1.forward"] is CallState.OK and state["Functional.linear.1.forward"] is CallState.OK
    assert rc.one_sided == 3 and rc.compared_calls == len(rc.entries) - 3
    from msprobe_compare.render import story

    assert "one-sided" in story.headline(rc, build_counts(tmp_path, monkeypatch)).text


def build_counts(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return build_outcome(load_config(Path("compare.json"), Options(framework="pytorch")),
                         Console(stream=open("/dev/null", "w"))).counts  # fmt: skip


# -- fp32 matmuls at reduced precision (TF32/HF32) -------------------------------------------------------------


def _convnet(tmp_path: Path, bug: float = 0.0, at: int = 1) -> None:
    """fp32 on both sides, 3 x conv2d -> relu; the NPU's convolutions ran at TF32 (each adds 3.5e-4 of noise, in
    quadrature with what it receives: here as the Max/Min and Norm changes) and conv `at` scales its output by
    (1 + bug)."""

    def t(n: float, rel: float = 0.0, ext: float = 0.0) -> dict:
        v = n * (1 + rel)
        return leaf(n / 2 * (1 + ext), -n / 2 * (1 + ext), 0.01 * v, v, "torch.float32", (2, 8, 8, 8))

    def side(noise: float, bug: float) -> dict:
        data, carried = {}, 0.0
        for k in range(3):
            out = math.hypot(carried, noise) + (bug if k == at else 0.0)
            data[f"Functional.conv2d.{k}.forward"] = {"input_args": [t(4.0, carried / 2, carried)],
                                                     "output": [t(6.0, out / 2, out)]}  # fmt: skip
            data[f"Functional.relu.{k}.forward"] = {
                "input_args": [t(6.0, out / 2, out)],
                "output": [t(4.0, out / 2, out)],
            }
            carried = out
        return data

    write_pair(tmp_path, side(3.5e-4, bug), side(0.0, 0.0))


def test_healthy_fp32_run_with_tf32_convolutions_names_nothing(tmp_path, monkeypatch):
    _convnet(tmp_path)
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.origins == [] and rc.suspects == []
    # the former floor (the 5e-5 minimum of fp32) named the first convolution: kept as an override
    rc = rootcause_of(tmp_path, monkeypatch, tolerance="reduced_matmul=1e-9")
    assert rc.first is not None and rc.first.entry == "Functional.conv2d.0.forward"


def test_a_bug_still_stands_out_above_tf32_noise(tmp_path, monkeypatch):
    _convnet(tmp_path, bug=0.05, at=1)
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.first is not None and rc.first.entry == "Functional.conv2d.1.forward"
    assert rc.first.evidence.floor_source.kind.value in ("reduced matmul", "combined")
    from msprobe_compare.render import story

    assert "TF32/HF32" in story.floor_source_text(rc.first.evidence.floor_source)


def test_matmul_class_names():
    names = ["Functional.linear.3.forward", "Module.fc.Linear.forward.0", "Primitive.matmul.MatMul.2.forward",
             "Tensor.__matmul__.0.forward", "Functional.conv2d.1.backward", "Cell.backbone.fc.Dense.forward.0",
             "Functional.scaled_dot_product_attention.0.forward", "Torch.bmm.0.forward", "Module.fc.Linear.parameters_grad",
             "Functional.layer_norm.0.forward", "Module.blocks.0.Block.forward.0", "Tensor.__mul__.0.forward"]  # fmt: skip
    assert noise.matmul_calls(names).tolist() == [True] * 9 + [False] * 3


def test_tf32_noise_passes_on_downstream(tmp_path, monkeypatch):
    """A TF32 convolution whose noise (3.6e-5 of its largest element, inputs exact) is under the fp32 minimum
    floor, then a LayerNorm that makes it 2e-4 of its own largest element (a per-row normalisation scales small
    rows up): the convolution's precision passes on as a bf16 op's does, so the LayerNorm is not a suspect."""

    def t(ext: float, dtype: str = "torch.float32") -> dict:
        return leaf(3.0 * (1 + ext), -3.0 * (1 + ext), 0.01, 20.0, dtype, (2, 16, 24))

    def side(noise: bool) -> dict:
        return {
            "Functional.conv2d.0.forward": {"input_args": [t(0.0)], "output": [t(3.6e-5 if noise else 0.0)]},
            "Functional.layer_norm.0.forward": {"input_args": [t(3.6e-5 if noise else 0.0)],
                                                "output": [t(2e-4 if noise else 0.0)]},
        }  # fmt: skip

    write_pair(tmp_path, side(True), side(False))
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.origins == [] and rc.suspects == []
    rc = rootcause_of(tmp_path, monkeypatch, tolerance="reduced_matmul=1e-9")
    assert [s.entry for s in rc.suspects] == ["Functional.layer_norm.0.forward"]


def _weight_grads(bug_layer: int | None, dtype: str) -> dict:
    """4 Linear modules: forward, backward (incoming gradients 2e-3 apart), and their parameter gradients (the
    weight's 2.2e-3 apart, the bias's 0.5: a sum over the batch near zero); the weight gradient of `bug_layer` is
    x1.1 (its input gradient exact)."""

    def t(norm: float, rel: float, shape=(16, 16)) -> dict:
        v = norm * (1 + rel)
        return leaf(v / 4, -v / 4, 0.01 * v, v, dtype, shape)

    noisy = dtype != "torch.float32"
    data: dict = {}
    for k in range(4):
        data[f"Module.layers.{k}.fc.Linear.forward.0"] = {"input_args": [t(4.0, 1e-3 * noisy)],
                                                          "output": [t(5.0, 1e-3 * noisy)]}  # fmt: skip
    for k in reversed(range(4)):
        data[f"Module.layers.{k}.fc.Linear.backward.0"] = {"input": [t(0.5, 2e-3 * noisy)],
                                                           "output": [t(0.4, 2.1e-3 * noisy)]}  # fmt: skip
    for k in range(4):
        w = 0.1 if k == bug_layer else 2.2e-3 * noisy
        data[f"Module.layers.{k}.fc.Linear.parameters_grad"] = {
            "weight": t(0.3, w),
            "bias": t(0.01, 0.5 * noisy, (16,)),
        }
    return data


def test_a_weight_gradient_bug_is_an_origin(tmp_path, monkeypatch):
    write_pair(tmp_path, _weight_grads(2, "torch.bfloat16"), _weight_grads(None, "torch.float32"))
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.first is not None and rc.first.entry == "Module.layers.2.fc.Linear.parameters_grad"
    assert rc.first.phase == "parameters_grad" and rc.first.evidence.floor_source.kind.value == "backward peers"
    write_pair(tmp_path / "noise", _weight_grads(None, "torch.bfloat16"), _weight_grads(None, "torch.float32"))
    assert rootcause_of(tmp_path / "noise", monkeypatch).origins == []  # bias gradients 50% apart: no origin


def test_two_noisy_operands_add_their_noise(tmp_path, monkeypatch):
    """q @ k^T in bf16 with both operands 0.4% apart (noise) comes out 0.6% apart: each operand's noise and one more
    rounding add in quadrature, which is the output's floor (not the largest operand's difference alone)."""

    def t(rel: float, dtype: str) -> dict:
        return leaf(1.0, -1.0, 0.0, 10.0 * (1 + rel), dtype, (2, 4, 16, 16))

    def side(noise: float, dtype: str) -> dict:
        return {"Torch.matmul.0.forward": {"input_args": [t(0.004 * noise, dtype), t(0.0045 * noise, dtype)],
                                           "output": [t(0.0068 * noise, dtype)]}}  # fmt: skip

    write_pair(tmp_path, side(1.0, "torch.bfloat16"), side(0.0, "torch.float32"))
    rc = rootcause_of(tmp_path, monkeypatch)
    assert rc.origins == [] and rc.suspects == []
    write_pair(tmp_path / "bug", side(10.0, "torch.bfloat16") | {"Torch.matmul.0.forward": {
        "input_args": [t(0.004, "torch.bfloat16"), t(0.0045, "torch.bfloat16")],
        "output": [t(0.1, "torch.bfloat16")]}}, side(0.0, "torch.float32"))  # fmt: skip
    rc = rootcause_of(tmp_path / "bug", monkeypatch)
    assert rc.first is not None and rc.first.entry == "Torch.matmul.0.forward"
    from msprobe_compare.render import story

    assert "its 2 differing inputs and one" in story.floor_source_text(rc.first.evidence.floor_source)


def _unseen_pair(jump: float, npu_between: int, bench_between: int) -> tuple[dict, dict]:
    """bf16 npu against fp32 bench: a noisy matmul (paired), then calls on one side only (`npu_between` on the NPU
    side, `bench_between` on the bench side: code that differs), then a linear whose input is `jump` apart."""

    def t(rel: float, dtype: str) -> dict:
        return leaf(1.0, -1.0, 0.0, 10.0 * (1 + rel), dtype, (2, 4, 16, 16))

    def side(noise: float, dtype: str, between: list[str]) -> dict:
        data = {"Torch.matmul.0.forward": {"input_args": [t(0.004 * noise, dtype), t(0.0045 * noise, dtype)],
                                           "output": [t(0.0068 * noise, dtype)]}}  # fmt: skip
        for name in between:  # nothing of these is compared: no counterpart on the other side
            data[name] = {"input_args": [t(0.0068 * noise, dtype)], "output": [t(0.01 * noise, dtype)]}
        data["Functional.linear.0.forward"] = {"input_args": [t(jump * noise, dtype)],
                                               "output": [t(jump * noise, dtype)]}  # fmt: skip
        return data

    npu_only = [f"Functional.silu.{k}.forward" for k in range(npu_between)]
    bench_only = [f"Functional.swiglu.{k}.forward" for k in range(bench_between)]
    return side(1.0, "torch.bfloat16", npu_only), side(0.0, "torch.float32", bench_only)


def test_an_input_out_of_code_nothing_compared_carries_that_codes_noise(tmp_path, monkeypatch):
    """bf16 SiLU(gate) x up computed by other code on each side (its calls have no counterpart) moves the next
    paired input by more than the upstream floor, noise only (tuning3's hf vs vllm: 3.1x). Such an input's floor is
    the upstream difference on up to 3 operands and one rounding (floors._unseen), on whichever side ran that code;
    a real jump still stands above it, and the evidence says where its floor came from."""
    from msprobe_compare.judge import floors
    from msprobe_compare.render import story

    for k, (npu_between, bench_between) in enumerate(((2, 0), (0, 2), (1, 3))):
        write_pair(tmp_path / f"noise{k}", *_unseen_pair(0.015, npu_between, bench_between))
        rc = rootcause_of(tmp_path / f"noise{k}", monkeypatch)
        assert rc.origins == [] and rc.suspects == [], (npu_between, bench_between)
    write_pair(tmp_path / "same", *_unseen_pair(0.015, 0, 0))  # the same jump straight after the matmul: an origin
    assert [o.entry for o in rootcause_of(tmp_path / "same", monkeypatch).origins] == ["Functional.linear.0.forward"]
    monkeypatch.setattr(floors, "_unseen", lambda prior, ufl, calls: np.zeros(prior.shape))  # without the rule
    assert rootcause_of(tmp_path / "noise0", monkeypatch).origins != []
    monkeypatch.undo()
    for k, between in enumerate(((2, 0), (0, 2))):
        write_pair(tmp_path / f"bug{k}", *_unseen_pair(0.08, *between))
        rc = rootcause_of(tmp_path / f"bug{k}", monkeypatch)
        assert rc.first is not None and rc.first.entry == "Functional.linear.0.forward"
        text = story.floor_source_text(rc.first.evidence.floor_source)
        assert rc.first.evidence.floor_source.kind.value == "unseen code"
        assert text.startswith("2 calls nothing compared ran before it") and "up to 3 operands" in text
        assert ("from Functional.silu.0.forward" if k == 0 else "in the bench run") in text
