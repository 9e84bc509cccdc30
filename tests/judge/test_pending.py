"""The root cause analysed in a forked child (judge/pending.py): the same answer as the analysis run in-process,
a child that fails is replaced by the analysis run here, and its data is never unpickled into arbitrary objects."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import shutil
import signal
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA
from msprobe_compare.api import build_outcome
from msprobe_compare.config import Options, load_config
from msprobe_compare.judge import pending
from msprobe_compare.judge.rootcause import RootCause
from msprobe_compare.log import Console
from msprobe_compare.render import report

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")

NOISE_CASES = ["tfm_fused_noresidual_L1_stat", "tfm_splitk_scale1p01_L0_stat", "tfm_amp_nan_L0_stat",
               "tfm_amp_eps_L1_stat", "tfm_fused_nobug_stat"]  # fmt: skip
FIXTURE_CASES = ["pytorch/mlp_bug_md5", "pytorch/mlp_lowprec_md5", "pytorch/cnn_bug_stat", "pytorch/mlp_struct_stat"]


@pytest.fixture(scope="module")
def noise_cases(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("noise")
    with tarfile.open(DATA / "noise" / "noise_stat.tar.xz") as tar:
        tar.extractall(root, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(root)
    return root


def _case(name: str, noise_cases: Path) -> Path:
    return noise_cases / name if "/" not in name else DATA / name


def _outcome(case: Path, monkeypatch, *, fork: bool):
    monkeypatch.chdir(case)
    monkeypatch.setattr(pending, "FORK_MIN_ROWS", 0 if fork else 1 << 62)
    monkeypatch.setattr(pending, "can_fork", lambda: fork)
    cfg = load_config(Path("compare.json"), Options(framework="pytorch"))
    return build_outcome(cfg, Console(stream=io.StringIO()))


def assert_same(a: RootCause, b: RootCause) -> None:
    for f in dataclasses.fields(RootCause):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert np.array_equal(x, y, equal_nan=True), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("name", NOISE_CASES + FIXTURE_CASES)
def test_forked_and_inline_give_the_same_root_cause(name, noise_cases, monkeypatch):
    forked = _outcome(_case(name, noise_cases), monkeypatch, fork=True)
    assert forked.pending_rootcause.forked
    real = pending.analyse
    monkeypatch.setattr(pending, "analyse", _no_fallback)  # the child's answer is read, not the inline one
    from_child = forked.rootcause
    monkeypatch.setattr(pending, "analyse", real)
    inline = _outcome(_case(name, noise_cases), monkeypatch, fork=False)
    assert not inline.pending_rootcause.forked
    assert_same(from_child, inline.rootcause)
    assert from_child.entries == forked.npu.entries and from_child.entries is not forked.npu.entries


def _no_fallback(*args, **kwargs):
    raise AssertionError("the analysis ran inline")


def test_forked_case_names_its_origin(noise_cases, monkeypatch):
    rc = _outcome(noise_cases / "tfm_amp_eps_L1_stat", monkeypatch, fork=True).rootcause
    assert rc.first is not None and rc.first.differing_args and rc.parents  # the module tree re-attached
    rc = _outcome(noise_cases / "tfm_splitk_scale1p01_L0_stat", monkeypatch, fork=True).rootcause
    assert rc.first is None and rc.suspects


def test_the_reports_wait_for_the_child(noise_cases, monkeypatch, tmp_path):
    """The advisor's Root cause section (read after the tables) is the same from a forked analysis."""
    texts = []
    for fork in (True, False):
        outcome = _outcome(noise_cases / "tfm_amp_eps_L1_stat", monkeypatch, fork=fork)
        out = tmp_path / str(fork)
        out.mkdir()
        written = report.write_all(outcome, out, Console(stream=io.StringIO()), suffix="", coloured=False,
                                   formats=("csv",))  # fmt: skip
        texts.append((report.rootcause_lines(outcome.rootcause), written.first_origin, written.origins))
    assert texts[0] == texts[1] and texts[0][1] is not None


def _in_child(parent: int, action):
    """An analyse that does `action` in a forked child and the real analysis in this process."""
    real = pending.analyse

    def analyse(*args, **kwargs):
        if os.getpid() != parent:
            action()
        return real(*args, **kwargs)

    return analyse


def _exit_3() -> None:
    os._exit(3)


def _killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _raises() -> None:
    raise RuntimeError("in the child")


@pytest.mark.parametrize("action", [_exit_3, _killed, _raises], ids=["exit", "killed", "raises"])
def test_a_failing_child_falls_back_inline(action, noise_cases, monkeypatch):
    expected = _outcome(noise_cases / "tfm_fused_noresidual_L1_stat", monkeypatch, fork=False).rootcause
    monkeypatch.setattr(pending, "analyse", _in_child(os.getpid(), action))
    outcome = _outcome(noise_cases / "tfm_fused_noresidual_L1_stat", monkeypatch, fork=True)
    assert outcome.pending_rootcause.forked
    assert_same(outcome.rootcause, expected)


def test_bad_data_from_the_child_falls_back_inline(noise_cases, monkeypatch):
    expected = _outcome(noise_cases / "tfm_fused_noresidual_L1_stat", monkeypatch, fork=False).rootcause
    parent, real = os.getpid(), pending.encode
    evil = pickle.dumps(os.system)  # a global outside the allowed classes

    def encode(rc):
        return evil if os.getpid() != parent else real(rc)

    monkeypatch.setattr(pending, "encode", encode)
    outcome = _outcome(noise_cases / "tfm_fused_noresidual_L1_stat", monkeypatch, fork=True)
    assert_same(outcome.rootcause, expected)


def test_an_error_in_the_analysis_shows_with_its_own_message(noise_cases, monkeypatch):
    def analyse(*args, **kwargs):
        raise ValueError("the analysis's own message")

    monkeypatch.setattr(pending, "analyse", analyse)
    outcome = _outcome(noise_cases / "tfm_fused_noresidual_L1_stat", monkeypatch, fork=True)
    with pytest.raises(ValueError, match="the analysis's own message"):
        outcome.rootcause


def test_restricted_unpickling():
    rc = RootCause(["a.0.forward"], [], metric="m", in_scores=np.array([1.5]))
    data = pending.encode(RootCause(["a.0.forward"], [pending.CallState.ORIGIN], metric="m",
                                    in_scores=np.array([1.5])))  # fmt: skip
    back = pending.decode(data, rc.entries, {"a.0.forward": None})
    assert back.states == [pending.CallState.ORIGIN] and back.in_scores.tolist() == [1.5]
    assert back.parents == {"a.0.forward": None}
    for evil in (pickle.dumps(os.system), pickle.dumps(shutil.rmtree), pickle.dumps(pending.start_analysis)):
        with pytest.raises(pickle.UnpicklingError):
            pending.decode(evil, [], None)
    with pytest.raises(ValueError):  # another compare's root cause
        pending.decode(data, ["a.0.forward", "b.0.forward"], None)


def test_small_compares_and_tensor_mode_stay_inline(monkeypatch):
    monkeypatch.chdir(DATA / "pytorch" / "mlp_bug_stat")
    cfg = load_config(Path("compare.json"), Options(framework="pytorch"))
    assert not build_outcome(cfg, Console(stream=io.StringIO())).pending_rootcause.forked  # below FORK_MIN_ROWS
    monkeypatch.setattr(pending, "FORK_MIN_ROWS", 0)
    monkeypatch.chdir(DATA / "pytorch" / "mlp_bug_tensor")
    cfg = load_config(Path("compare.json"), Options(framework="pytorch"))
    assert not build_outcome(cfg, Console(stream=io.StringIO())).pending_rootcause.forked
    monkeypatch.chdir(DATA / "pytorch" / "mlp_bug_stat")
    cfg = load_config(Path("compare.json"), Options(framework="pytorch", parallel_read=False))
    assert not build_outcome(cfg, Console(stream=io.StringIO())).pending_rootcause.forked  # inside parallel ranks


def test_an_unread_child_is_reaped(noise_cases, monkeypatch):
    outcome = _outcome(noise_cases / "tfm_fused_nobug_stat", monkeypatch, fork=True)
    pid = outcome.pending_rootcause._pid
    del outcome
    import gc

    gc.collect()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
