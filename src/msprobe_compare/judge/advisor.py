"""Expert advice on the first failing row (spec §5), as codes; texts live in render/texts.py."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from msprobe_compare.records import dataclass

DETERMINISTIC_APIS = ("conv2d", "conv3d", "matmul", "nll_loss", "layer_norm", "lstm")


class Advice(IntEnum):
    ALL_PASS = 0
    FORWARD_INPUT = 1
    FORWARD_OUTPUT = 2
    BACKWARD_INPUT = 3
    BACKWARD_OUTPUT = 4
    DETERMINISTIC = 5
    BATCH_NORM = 6


@dataclass(frozen=True)
class AdvisorResult:
    line: int | None  # 0-based row index of the first failing row; None when all rows pass
    node: str | None  # its NPU Name
    advice: Advice
    unmatched: tuple[str, ...]  # names reported as "shape or dtype does not match" (real-data mode)


def advice_for(name: str) -> Advice:
    """Advice chosen by substring tests on the NPU Name, in the reference's order."""
    if "forward" in name:
        advice = Advice.FORWARD_INPUT if "input" in name else Advice.FORWARD_OUTPUT
    else:
        advice = Advice.BACKWARD_INPUT if "input" in name else Advice.BACKWARD_OUTPUT
    if advice in (Advice.FORWARD_OUTPUT, Advice.BACKWARD_OUTPUT) and any(a in name for a in DETERMINISTIC_APIS):
        advice = Advice.DETERMINISTIC
    if "Functional_batch_norm" in name and "forward_input.1" in name:
        advice = Advice.BATCH_NORM
    return advice


def advise(names: list[str], failing: np.ndarray, unmatched: np.ndarray | None = None) -> AdvisorResult:
    """`failing`: bool per row (Warning / Different / Accuracy No, by mode)."""
    missing = tuple(names[i] for i in np.flatnonzero(unmatched)) if unmatched is not None else ()
    hits = np.flatnonzero(failing)
    if len(hits) == 0:
        return AdvisorResult(None, None, Advice.ALL_PASS, missing)
    line = int(hits[0])
    return AdvisorResult(line, names[line], advice_for(names[line]), missing)
