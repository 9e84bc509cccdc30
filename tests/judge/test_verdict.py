"""judge/verdict.py on small tables: Result codes and base message flags per mode, requires_grad after N/A filling."""

from __future__ import annotations

import numpy as np

from msprobe_compare.judge.verdict import (Msg, Result, md5_verdict, real_data_verdict, requires_grad_consistent,
                                           summary_verdict)  # fmt: skip
from msprobe_compare.measure.stats import stat_diffs
from pair.helpers import table


def _side(*leaves: dict):
    base = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
            "Norm": 1.0}  # fmt: skip
    return table({"Torch.add.0.forward": {"input_args": [], "output": [{**base, **leaf} for leaf in leaves]}})


def test_requires_grad_is_compared_after_na_filling():
    npu = _side({"requires_grad": True}, {"requires_grad": False}, {}, {"requires_grad": True})
    bench = _side({"requires_grad": True}, {"requires_grad": True}, {})
    got = requires_grad_consistent(npu, bench, np.array([0, 1, 2, -1]))
    # equal; differ; both missing (N/A == N/A); unmatched NPU True against N/A
    assert got.tolist() == [True, False, True, False]
    assert requires_grad_consistent(_side({}), _side(), np.array([-1])).tolist() == [True]  # empty bench side


def test_summary_verdict():
    npu = _side({"Max": 9.0}, {}, {"requires_grad": True})
    bench = _side({"Max": 1.0}, {})
    match = np.array([0, 1, -1])
    v = summary_verdict(npu, bench, match, stat_diffs(npu, bench, match))
    assert v.matched.tolist() == [True, True, False]
    assert v.result.tolist() == [Result.WARNING, Result.EMPTY, Result.NA]
    assert v.messages.tolist() == [Msg.DOUBLE_CHECK, Msg.NONE, Msg.NO_BENCH | Msg.REQUIRES_GRAD]


def test_md5_verdict():
    npu = _side({"md5": "aa"}, {"md5": "aa"}, {}, {"md5": "cc"})
    bench = _side({"md5": "aa"}, {"md5": "bb"})
    v = md5_verdict(npu, bench, np.array([0, 1, -1, -1]))
    # a leaf without md5 and without a bench row is N/A == N/A: "pass", as the reference writes it
    assert v.result.tolist() == [Result.PASS, Result.DIFFERENT, Result.PASS, Result.NA]
    assert v.messages.tolist() == [0, 0, 0, 0]


def test_real_data_verdict_replaces_no_bench_by_the_requires_grad_note():
    npu = _side({}, {}, {"requires_grad": True})
    bench = _side({})
    v = real_data_verdict(npu, bench, np.array([0, -1, -1]))
    assert v.result.tolist() == [Result.EMPTY, Result.NA, Result.NA]
    assert v.messages.tolist() == [Msg.NONE, Msg.NO_BENCH, Msg.REQUIRES_GRAD]


def test_empty():
    v = summary_verdict(_side(), _side(), np.zeros(0, dtype=np.int64),
                        stat_diffs(_side(), _side(), np.zeros(0, dtype=np.int64)))  # fmt: skip
    assert v.result.shape == (0,) and v.messages.shape == (0,)
