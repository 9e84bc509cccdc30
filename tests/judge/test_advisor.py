"""judge/advisor.py: the advice chosen from the first failing row's name, in the reference's order (spec §5)."""

from __future__ import annotations

import numpy as np
import pytest

from msprobe_compare.judge.advisor import Advice, advice_for, advise


@pytest.mark.parametrize(
    "name,advice",
    [
        ("Functional.relu.0.forward.input.0", Advice.FORWARD_INPUT),
        ("Functional.relu.0.forward.output.0", Advice.FORWARD_OUTPUT),
        ("Functional.relu.0.backward.input.0", Advice.BACKWARD_INPUT),
        ("Functional.relu.0.backward.output.0", Advice.BACKWARD_OUTPUT),
        ("Functional.conv2d.0.forward.output.0", Advice.DETERMINISTIC),  # an output of a non-deterministic API
        ("Functional.matmul.1.backward.output.0", Advice.DETERMINISTIC),
        ("Functional.conv2d.0.forward.input.0", Advice.FORWARD_INPUT),  # inputs are not
        ("Functional_batch_norm.0.forward_input.1", Advice.BATCH_NORM),
        ("Module.layer.Linear.parameters_grad.weight", Advice.BACKWARD_OUTPUT),  # neither forward nor input
    ],
)
def test_advice_for(name, advice):
    assert advice_for(name) == advice


def test_advise_takes_the_first_failing_row():
    names = ["A.0.forward.input.0", "A.0.forward.output.0", "B.0.backward.input.0"]
    r = advise(names, np.array([False, True, True]))
    assert (r.line, r.node, r.advice, r.unmatched) == (1, names[1], Advice.FORWARD_OUTPUT, ())


def test_advise_all_pass_and_unmatched_names():
    names = ["A.0.forward.input.0", "A.0.forward.output.0"]
    r = advise(names, np.zeros(2, dtype=bool), unmatched=np.array([False, True]))
    assert (r.line, r.node, r.advice, r.unmatched) == (None, None, Advice.ALL_PASS, (names[1],))
    empty = advise([], np.zeros(0, dtype=bool))
    assert empty.advice is Advice.ALL_PASS and empty.line is None
