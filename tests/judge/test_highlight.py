"""judge/highlight.py on small tables: each colour rule alone, red wins over yellow, NaN/Inf and empty inputs."""

from __future__ import annotations

import math

import numpy as np

from msprobe_compare.judge.highlight import Colour, HighlightInputs, Reason, entry_groups, highlight, stat_max
from pair.helpers import call, table, tensor

NAN = math.nan


def _two_calls(npu_max: float = 1.0):
    """linear: 2 inputs, 1 output; add: 1 input (Max = npu_max), 1 output: rows 0-2 and 3-4."""
    special = tensor()
    special["Max"] = npu_max
    return table({"Functional.linear.0.forward": call(2, 1), "Torch.add.0.forward": {"input_args": [special],
                                                                                   "output": [tensor()]}})  # fmt: skip


def _inputs(max_diff: list[float], **extra: object) -> HighlightInputs:
    n = len(max_diff)
    consistent = extra.pop("consistent", np.ones(n, dtype=bool))
    return HighlightInputs(np.array(max_diff), np.ones(n), np.ones(n), consistent, **extra)  # type: ignore[arg-type]


def test_quiet_rows_stay_uncoloured():
    marks = highlight(_two_calls(), _inputs([0.1, 0.1, 0.1, 0.1, 0.1]))
    assert marks.colour.tolist() == [Colour.NONE] * 5 and marks.reasons.tolist() == [0] * 5


def test_empty_table():
    marks = highlight(table({}), _inputs([]))
    assert marks.colour.shape == (0,) and marks.reasons.shape == (0,)
    assert entry_groups(table({})).shape == (0,)


def test_nan_and_inf_statistics_are_red():
    for value in (NAN, math.inf, -math.inf):
        marks = highlight(_two_calls(npu_max=value), _inputs([0.0] * 5))
        assert marks.colour.tolist() == [0, 0, 0, Colour.RED, 0], value
        assert marks.reasons[3] == Reason.RED_NAN_INF


def test_huge_difference_is_red_but_not_on_an_inf_row():
    marks = highlight(_two_calls(), _inputs([0.0, 0.0, 2e10, 0.0, 0.0]))
    assert marks.colour[2] == Colour.RED and marks.reasons[2] == Reason.RED_MAX_ABS
    marks = highlight(_two_calls(npu_max=math.inf), _inputs([0.0, 0.0, 0.0, 2e10, 0.0]))
    assert marks.reasons[3] == Reason.RED_NAN_INF  # the special value, not also the difference


def test_requires_grad_mismatch_is_yellow():
    consistent = np.array([True, True, False, True, True])
    marks = highlight(_two_calls(), _inputs([0.0] * 5, consistent=consistent))
    assert marks.colour.tolist() == [0, 0, Colour.YELLOW, 0, 0]
    assert marks.reasons[2] == Reason.YELLOW_REQUIRES_GRAD


def test_output_an_order_of_magnitude_above_its_inputs_is_yellow():
    marks = highlight(_two_calls(), _inputs([2.0, 5.0, 20.0, 2.0, 19.9]))
    assert marks.reasons[2] == Reason.YELLOW_MAGNITUDE  # log10(20) - log10(2) = 1: the smallest input counts
    assert marks.reasons[4] == 0  # 19.9 / 2 < 10
    # not numeric (NaN) differences take no part
    marks = highlight(_two_calls(), _inputs([NAN, NAN, 200.0, 2.0, NAN]))
    assert marks.reasons.tolist() == [0] * 5


def test_relative_error_rules_and_red_drops_yellow():
    rel = np.array([0.001, 0.3, 0.6, 0.001, 0.2])
    consistent = np.array([True, True, False, True, True])
    marks = highlight(_two_calls(), _inputs([0.0] * 5, max_rel=rel, consistent=consistent))
    # row 2: above 0.5 after inputs -> red; its yellow reason (requires_grad) is not reported
    assert marks.colour[2] == Colour.RED and marks.reasons[2] == Reason.RED_MAX_REL
    # row 4: 0.2 > 0.1 while an input of the call stayed below 0.01 -> yellow
    assert marks.colour[4] == Colour.YELLOW and marks.reasons[4] == Reason.YELLOW_MAX_REL
    assert marks.colour[:2].tolist() == [0, 0]  # inputs are not judged by these rules


def test_real_data_one_thousandth_and_cosine_drops():
    one_k = np.array([0.95, 1.0, 0.5, 1.0, 0.85])
    cosine = np.array([1.0, 1.0, 0.95, 1.0, 0.85])
    marks = highlight(_two_calls(), _inputs([0.0] * 5, one_k=one_k, cosine=cosine))
    assert marks.reasons[2] == Reason.RED_ONE_K  # inputs above 0.9, output below 0.6
    assert marks.reasons[4] == Reason.YELLOW_ONE_K | Reason.YELLOW_COSINE  # both dropped by more than 0.1
    assert marks.colour.tolist() == [0, 0, Colour.RED, 0, Colour.YELLOW]


def test_stat_max_reads_numbers_only():
    t = _two_calls(npu_max=NAN)
    assert np.isnan(stat_max(t)[3]) and stat_max(t)[0] == 1.0
    picked = stat_max(t, np.array([2, -1, 3]))
    assert picked[0] == 1.0 and np.isnan(picked[1]) and np.isnan(picked[2])  # -1: unmatched
