"""`Accuracy Reached or Not` of a real-data row, from its Cosine and MaxAbsErr (spec §4.8)."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np

from msprobe_compare.measure.tensor_metrics import MetricState, TensorMetrics

COSINE_GOOD = 0.99  # below this, a MaxAbsErr above ABS_ERR_SMALL fails
ABS_ERR_SMALL = 0.001
COSINE_FLOOR = 0.9  # below this the row fails whatever its MaxAbsErr
ABS_ERR_CEILING = 1.0  # above this the row fails whatever its Cosine
KERNEL_MAGNITUDE = 0.5  # kernel statistic.csv rows: Max diff / (max(NPU max, Bench max) + 1e-10) above this fails


class Accuracy(enum.IntEnum):
    """`Accuracy Reached or Not`: Yes / No / Unmatched / None."""

    YES = 0
    NO = 1
    UNMATCHED = 2
    NONE = 3


def accuracy_reached(m: TensorMetrics) -> Accuracy:
    """`Accuracy Reached or Not` from Cosine C and MaxAbsErr A (spec §4.8; D6: a `Nan` Cosine gives No)."""
    c, a = m.cosine, m.max_abs_err
    if c.state is MetricState.SHAPE_UNMATCHED:
        return Accuracy.UNMATCHED
    if MetricState.NOT_AVAILABLE in (c.state, a.state):
        return Accuracy.NO
    if c.state in (MetricState.UNSUPPORTED, MetricState.SHAPE_UNMATCHED) or a.state in (
        MetricState.UNSUPPORTED,
        MetricState.SHAPE_UNMATCHED,
    ):
        return Accuracy.NONE
    if MetricState.NAN in (c.state, a.state):  # D6 (the reference lets NaN compare as "not below threshold")
        return Accuracy.NO
    if c.value < COSINE_GOOD and a.value > ABS_ERR_SMALL:
        return Accuracy.NO
    if c.value < COSINE_FLOOR or a.value > ABS_ERR_CEILING:
        return Accuracy.NO
    return Accuracy.YES


def accuracy_column(metrics: Sequence[TensorMetrics]) -> np.ndarray:
    """int8 Accuracy per row."""
    return np.fromiter((accuracy_reached(m) for m in metrics), dtype=np.int8, count=len(metrics))


def statistic_accuracy(magnitude: float | None) -> Accuracy | None:
    """A kernel statistic.csv row (spec §7.5): Yes when its signed Max diff relative to the larger maximum is at most
    KERNEL_MAGNITUDE, as the reference; None when the row was not measured (a pre-check failed)."""
    if magnitude is None:
        return None
    return Accuracy.YES if magnitude <= KERNEL_MAGNITUDE else Accuracy.NO
