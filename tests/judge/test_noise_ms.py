"""Root cause through precision noise on MindSpore dumps (issue #13: the same in every framework).

tests/data/noise/noise_ms.tar.xz holds 13 cases made with tests/data/noise/make_ms.py (reference dumper 8.3.3,
MindSpore 2.7.1 CPU, PyNative, one SGD step): the npu side's backbone runs under Cell.to_float(float16), the bench
in float32, so every operator differs a little; at most one is really wrong (x1.1 on a cell's output, a NaN, a
GELU `approximate` or softmax `axis` argument). Levels mix and L1, statistics and tensor mode. Each TRUTH.json
lists the acceptable first origins (empty: noise only), from the twin compare of the bug in float32.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA
from msprobe_compare.api import build_outcome
from msprobe_compare.config import Options, load_config
from msprobe_compare.judge import noise
from msprobe_compare.judge.rootcause import CallState, OriginKind
from msprobe_compare.load.rows import phase_of
from msprobe_compare.log import Console
from msprobe_compare.render import story

ARCHIVE = DATA / "noise" / "noise_ms.tar.xz"
CASES = [
    "ms_mlp_fp16_gelutanh_L4_mix_stat", "ms_mlp_fp16_nan_L2_mix_stat", "ms_mlp_fp16_none_L1_stat",
    "ms_mlp_fp16_none_mix_stat", "ms_mlp_fp16_none_mix_tensor", "ms_mlp_fp16_scale1p1_L1_L1_stat",
    "ms_mlp_fp16_scale1p1_L3_mix_stat", "ms_mlp_fp16_scale1p1_L3_mix_tensor", "ms_tfm_fp16_nan_L1_L1_stat",
    "ms_tfm_fp16_none_L1_stat", "ms_tfm_fp16_none_mix_stat", "ms_tfm_fp16_scale1p1_L1_mix_stat",
    "ms_tfm_fp16_softmaxdim_L0_mix_stat",
]  # fmt: skip


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("noise_ms")
    with tarfile.open(ARCHIVE) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(root, filter="data")
        else:  # Python without extraction filters: our own archive
            tar.extractall(root)
    return root


def _rootcause(case: Path, monkeypatch):
    monkeypatch.chdir(case)
    cfg = load_config(Path("compare.json"), Options(framework="mindspore"))
    return build_outcome(cfg, Console(stream=open("/dev/null", "w"))).rootcause


def test_archive_holds_every_case(cases):
    assert sorted(p.name for p in cases.iterdir()) == sorted(CASES)
    assert ARCHIVE.stat().st_size < 1_000_000


@pytest.mark.parametrize("name", CASES)
def test_first_origin_is_the_bug(name, cases, monkeypatch):
    rc = _rootcause(cases / name, monkeypatch)
    truth = json.loads((cases / name / "TRUTH.json").read_text())["origin"]
    assert rc.lowest_precision == "float16"
    origins = [o.entry for o in rc.origins]
    if not truth:  # noise only: no origin, no suspect, every call within the floor
        assert origins == [], [story.origin_description(o) for o in rc.origins]
        assert rc.suspects == [], [story.suspect_description(s) for s in rc.suspects]
        assert CallState.NOISE in rc.states and CallState.PROPAGATED not in rc.states
        forward = [i for i, e in enumerate(rc.entries) if phase_of(e) == "forward" and ".backward." not in e]
        assert np.nanmax(rc.ratios[forward]) <= noise.Tolerance().suspect  # measured: at most 1.0
        return
    assert origins and origins[0] in truth, [story.origin_description(o) for o in rc.origins]
    assert all(o in truth for o in origins), origins  # never another op as origin


def test_kinds_and_evidence(cases, monkeypatch):
    """How each bug shows: the cell around the scaled Dense (computation), its consumer at level L1 (boundary),
    a differing argument (configuration), a NaN."""
    first = {n: _rootcause(cases / n, monkeypatch).first for n in (
        "ms_mlp_fp16_scale1p1_L3_mix_stat", "ms_mlp_fp16_scale1p1_L1_L1_stat", "ms_tfm_fp16_softmaxdim_L0_mix_stat",
        "ms_mlp_fp16_gelutanh_L4_mix_stat", "ms_tfm_fp16_nan_L1_L1_stat", "ms_mlp_fp16_scale1p1_L3_mix_tensor")}
    scale = first["ms_mlp_fp16_scale1p1_L3_mix_stat"]
    assert scale.kind is OriginKind.COMPUTATION and scale.evidence.ratio > 50
    assert scale.evidence.dtypes == ("Float16", "Float32") and "float16" in story.floor_source_text(scale.evidence.floor_source)
    assert first["ms_mlp_fp16_scale1p1_L1_L1_stat"].kind is OriginKind.BOUNDARY
    assert first["ms_tfm_fp16_softmaxdim_L0_mix_stat"].kind is OriginKind.CONFIGURATION
    assert tuple(map(story.arg_text, first["ms_tfm_fp16_softmaxdim_L0_mix_stat"].evidence.args)) == ("input.axis: -2 vs -1",)
    assert first["ms_mlp_fp16_gelutanh_L4_mix_stat"].kind is OriginKind.CONFIGURATION
    assert first["ms_tfm_fp16_nan_L1_L1_stat"].nonfinite
    tensor = first["ms_mlp_fp16_scale1p1_L3_mix_tensor"]
    assert tensor.kind is OriginKind.COMPUTATION and tensor.evidence.metric == "norm ratio |r-1|"


def test_cast_target_dtype_is_precision_not_configuration(cases, monkeypatch):
    """MindSpore's LayerNorm casts its parameters with Tensor.to(Float16) on the fp16 side, Tensor.to(Float32) on
    the other: the precision the runs differ in, not a differing argument."""
    rc = _rootcause(cases / "ms_mlp_fp16_none_mix_stat", monkeypatch)
    assert rc.states[rc.entries.index("Tensor.to.0.forward")] in (CallState.NOISE, CallState.OK)
    assert noise.is_float_dtype_name("Float16") and noise.is_float_dtype_name("torch.bfloat16")
    assert noise.is_float_dtype_name("BFloat16") and not noise.is_float_dtype_name("Int32")
    assert not noise.is_float_dtype_name("tanh") and not noise.is_float_dtype_name("float_mode")


def test_float32_statistics_recorded_in_float16(cases, monkeypatch):
    """Under to_float(float16) the dumper computes a Float32 tensor's statistics in float16 (sqrt(32) recorded as
    5.65625): such rows get float16 resolution; rows of round values (ones, zeros) and the float32 bench keep theirs."""
    monkeypatch.chdir(cases / "ms_tfm_fp16_none_mix_stat")
    o = build_outcome(load_config(Path("compare.json"), Options(framework="mindspore")),
                      Console(stream=open("/dev/null", "w")))  # fmt: skip
    i = o.npu.names.index("Tensor.to.0.forward.input.0")
    assert o.npu.dtype[i] == "Float32" and o.npu.stats[i, 3] == 5.65625
    assert noise.stat_bits(o.npu)[i] == 10
    assert (noise.stat_bits(o.bench) == noise._per_row(o.bench, 1)).all()
    ones = o.npu.names.index("Primitive.layer_norm.LayerNorm.0.forward.input.2")  # beta: zeros
    assert noise.stat_bits(o.npu)[ones] == noise._per_row(o.npu, 1)[ones]
