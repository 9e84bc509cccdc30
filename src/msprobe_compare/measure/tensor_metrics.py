"""The real-data metrics of one NPU/bench tensor pair (spec §4.8), as one table: Cosine, EucDist, MaxAbsErr,
MaxRelativeErr and the one/five-thousandths error ratios, plus the Err_message codes (the `Accuracy Reached or Not`
verdict is judge/accuracy.py's).

`TensorMetric` is the table every other stage reads: per metric its `TensorMetrics` field, its column's header and
log name, the accumulators of the one pass it needs, and how its value is made from them (`finish`). The one pass
(measure/tensor_compare.py: numpy, or the compiled kernel `_tensorkernel.c`) fills `Totals`: the float64 sums of
`SUMS`, the two maxima, the counts of relative errors below each error ratio's threshold (`THRESHOLDS`) and above
the root cause's tolerance; `Totals.finish` turns them into the row's `TensorMetrics`. Adding a metric:
CONTRIBUTING.md, "Adding a tensor metric".
"""

from __future__ import annotations

import enum
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import field, fields
from typing import Any

import numpy as np

from msprobe_compare.load.tensor_data import BF16
from msprobe_compare.records import dataclass

__all__ = [
    "Metric",
    "MetricState",
    "TensorMetric",
    "TensorMetrics",
    "TensorMsg",
    "Totals",
]

# float64's eps, 2**-52 (np.finfo's first call costs 0.1 ms): added where the bench is 0; the Cosine zero-norm bound
FLOAT_EPSILON = sys.float_info.epsilon
COSINE_SHORT_ROUNDING = 0.9999  # a Cosine above this is rounded to 6 decimals instead of 12
# The elements beyond rounding: relative error above this many unit roundoffs of the coarser dtype. Two: one
# rounding on each side moves an element by at most one unit roundoff each (docs/rootcause.md has the measurement).
EXCESS_UNITS = 2.0
UNIT_ROUNDOFF = {BF16: 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}

# The float64 sums of the one pass, in the kernel's order (`_tensorkernel.SUMS`): each the sum over the elements of
# the product of two operands, n (NPU), b (bench) or d (n - b), in float64 (NaN/inf at the same places count as 0).
SUMS: dict[str, tuple[str, str]] = {"dot": ("n", "b"), "nn": ("n", "n"), "bb": ("b", "b"), "ss": ("d", "d")}


class MetricState(enum.IntEnum):
    """What a metric cell holds: a number, or one of the reference's placeholder states."""

    VALUE = 0
    NAN = 1  # "Nan"
    UNSUPPORTED = 2  # "unsupported"
    SHAPE_UNMATCHED = 3  # "shape unmatched"
    NOT_AVAILABLE = 4  # "N/A"


class TensorMsg(enum.IntEnum):
    """Real-data Err_message sentences; the member order is the order the reference concatenates them in."""

    NPU_NO_DATA_FILE = 1
    BENCH_NO_DATA_FILE = 2
    BENCH_UNMATCHED = 3
    READ_FAILED = 4  # template: format with the file name or the [npu, bench] pair
    EMPTY = 5
    ZERO_DIM = 6
    SHAPE_MISMATCH = 7
    NAN_INF_MISMATCH = 8
    UNREADABLE = 9
    DTYPE_MISMATCH = 10
    ONE_ELEMENT = 11
    COSINE_NPU_ZERO = 12
    COSINE_BENCH_ZERO = 13
    COSINE_NAN = 14
    MAX_ABS_NAN = 15
    MAX_REL_NAN = 16


@dataclass(frozen=True, eq=False)
class Metric:
    """One metric cell: `value` is meaningful only when `state` is VALUE."""

    state: MetricState
    value: float = math.nan

    @classmethod
    def of(cls, value: float) -> Metric:
        return cls(MetricState.VALUE, float(value))

    def _key(self) -> tuple[MetricState, float | None]:
        return (self.state, self.value if self.state is MetricState.VALUE and self.value == self.value else None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Metric) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


_UNSUPPORTED = Metric(MetricState.UNSUPPORTED)
_NAN = Metric(MetricState.NAN)


class Totals:
    """What the one pass over the `size` elements of a pair accumulates (measure/tensor_compare.py, either twin):
    the float64 `sums` of SUMS, the maxima of |N-B| and of the relative error, the counts of relative errors below
    each of THRESHOLDS (`below`, in that order) and above `tolerance` (when given); `finish` turns them into the
    metrics."""

    def __init__(self, size: int, tolerance: float | None = None) -> None:
        self.size = size
        self.tolerance = tolerance
        self.sums = dict.fromkeys(SUMS, 0.0)
        self.max_abs = self.max_rel = 0.0
        self.below = [0] * len(THRESHOLDS)
        self.beyond = 0

    @classmethod
    def of_kernel(cls, part: Sequence[float], size: int, tolerance: float | None) -> Totals:
        """The kernel's result tuple (the sums, max_abs, max_rel, the counts below, beyond) of a whole pair."""
        totals = cls(size, tolerance)
        totals.sums = dict(zip(SUMS, part[:N_SUMS], strict=True))
        totals.max_abs, totals.max_rel = part[N_SUMS], part[N_SUMS + 1]
        totals.below = [int(c) for c in part[N_SUMS + 2 : N_SUMS + 2 + len(THRESHOLDS)]]
        totals.beyond = int(part[-1])
        return totals

    def below_count(self, threshold: float) -> int:
        """The count of relative errors below `threshold` (one of THRESHOLDS)."""
        return self.below[THRESHOLDS.index(threshold)]

    def finish(self, dtype_mismatch: bool) -> TensorMetrics:
        """The metrics, each by its table entry, in column order; messages in the reference's order."""
        messages: list[TensorMsg] = [TensorMsg.DTYPE_MISMATCH] if dtype_mismatch else []
        cells = [m.finish(m, self, messages) for m in TensorMetric]
        tol = self.tolerance
        beyond, beyond_tol = (math.nan, math.nan) if tol is None else (self.beyond / self.size, float(tol))
        return TensorMetrics.of(cells, messages, beyond, beyond_tol)


# ---- how each metric is made from the totals (the `finish` of its table entry) --------------------------------

Finish = Callable[["TensorMetric", Totals, list[TensorMsg]], Metric]


def _cosine(_: TensorMetric, t: Totals, messages: list[TensorMsg]) -> Metric:
    if t.size == 1:
        messages.append(TensorMsg.ONE_ELEMENT)
        return _UNSUPPORTED
    n_norm, b_norm = math.sqrt(t.sums["nn"]), math.sqrt(t.sums["bb"])
    if n_norm <= FLOAT_EPSILON and b_norm <= FLOAT_EPSILON:
        return Metric.of(1.0)
    if n_norm <= FLOAT_EPSILON:
        messages.append(TensorMsg.COSINE_NPU_ZERO)
        return _NAN
    if b_norm <= FLOAT_EPSILON:
        messages.append(TensorMsg.COSINE_BENCH_ZERO)
        return _NAN
    with np.errstate(all="ignore"):
        cos = float(np.float64(t.sums["dot"]) / (np.float64(n_norm) * np.float64(b_norm)))
    if math.isnan(cos):
        messages.append(TensorMsg.COSINE_NAN)
        return _NAN
    value = format12(cos)
    return Metric.of(round(value, 6) if value > COSINE_SHORT_ROUNDING else value)


def _euclidean(_: TensorMetric, t: Totals, messages: list[TensorMsg]) -> Metric:
    return Metric.of(math.sqrt(t.sums["ss"]))


def _max_abs(_: TensorMetric, t: Totals, messages: list[TensorMsg]) -> Metric:
    return max_metric(t.max_abs, TensorMsg.MAX_ABS_NAN, messages)


def _max_rel(_: TensorMetric, t: Totals, messages: list[TensorMsg]) -> Metric:
    return max_metric(t.max_rel, TensorMsg.MAX_REL_NAN, messages)


def _ratio_below(metric: TensorMetric, t: Totals, messages: list[TensorMsg]) -> Metric:
    """The share of the elements whose relative error is below the metric's threshold."""
    assert metric.threshold is not None
    return Metric.of(format12(t.below_count(metric.threshold) / t.size))


@dataclass(frozen=True)
class MetricSpec:
    """One row of the metrics table: the `TensorMetrics` field, the column's header and the name in the per-row log
    line (render/ shows them), the accumulators the metric needs (names of SUMS, "max_abs", "max_rel", "below":
    the count below `threshold`), how its cell is made from the totals, and the relative-error threshold of an
    error ratio."""

    field: str
    header: str
    log_name: str
    needs: tuple[str, ...]
    finish: Finish
    threshold: float | None = None


class TensorMetric(enum.Enum):
    """The real-data metrics, in column order: the table every stage reads (see MetricSpec). An error ratio's
    threshold is counted by the one pass (THRESHOLDS); judging a metric is judge/'s choice."""

    COSINE = MetricSpec("cosine", "Cosine", "cosine", ("dot", "nn", "bb"), _cosine)
    EUC_DIST = MetricSpec("euc_dist", "EucDist", "euc_dist", ("ss",), _euclidean)
    MAX_ABS_ERR = MetricSpec("max_abs_err", "MaxAbsErr", "max_abs_err", ("max_abs",), _max_abs)
    MAX_REL_ERR = MetricSpec("max_rel_err", "MaxRelativeErr", "max_relative_err", ("max_rel",), _max_rel)
    ONE_THOUSANDTH = MetricSpec("one_thousandth", "One Thousandth Err Ratio", "one_thousand_err_ratio", ("below",),
                                _ratio_below, 0.001)  # fmt: skip
    FIVE_THOUSANDTHS = MetricSpec("five_thousandths", "Five Thousandths Err Ratio", "five_thousand_err_ratio",
                                  ("below",), _ratio_below, 0.005)  # fmt: skip

    def __init__(self, spec: MetricSpec) -> None:
        self.field = spec.field
        self.header = spec.header
        self.log_name = spec.log_name
        self.needs = spec.needs
        self.finish = spec.finish
        self.threshold = spec.threshold

    @property
    def column(self) -> int:
        """Its column in `TensorColumns.values` / `.states`."""
        return _METRIC_ORDER[self]


_METRIC_ORDER = {m: k for k, m in enumerate(TensorMetric)}
METRIC_FIELDS = tuple(m.field for m in TensorMetric)
# the relative-error thresholds the one pass counts below, in column order (`_tensorkernel.THRESHOLDS` too)
THRESHOLDS = tuple(m.threshold for m in TensorMetric if m.threshold is not None)
N_SUMS = len(SUMS)
# every accumulator, in the order of the kernel's result tuple
ACCUMULATORS = (*SUMS, "max_abs", "max_rel", *(f"below {t}" for t in THRESHOLDS), "beyond")


@dataclass(frozen=True)
class TensorMetrics:
    """The real-data metrics of one row (one field per TensorMetric, in its order) and its real-data messages
    (reference order, each at most once)."""

    cosine: Metric
    euc_dist: Metric
    max_abs_err: Metric
    max_rel_err: Metric
    one_thousandth: Metric
    five_thousandths: Metric
    messages: tuple[TensorMsg, ...] = ()
    # fraction of the elements whose relative error exceeds `beyond_tol` (NaN: not measured); for the root cause,
    # not a table column, so left out of equality (the reference's six metrics decide that)
    beyond: float = field(default=math.nan, compare=False)
    beyond_tol: float = field(default=math.nan, compare=False)

    @classmethod
    def of(cls, cells: Sequence[Metric], messages: Sequence[TensorMsg] = (), beyond: float = math.nan,
           beyond_tol: float = math.nan) -> TensorMetrics:  # fmt: skip
        """From the cells in TensorMetric order."""
        args: list[Any] = [*cells, tuple(messages), beyond, beyond_tol]  # one field per metric, then the rest
        return cls(*args)

    @classmethod
    def uniform(cls, state: MetricState, *messages: TensorMsg) -> TensorMetrics:
        """All metrics in `state` (rows that are not compared: no data file, unmatched, unreadable...)."""
        return cls.of([Metric(state)] * len(TensorMetric), tuple(sorted(set(messages))))

    @property
    def cells(self) -> tuple[Metric, ...]:
        """The metric cells in TensorMetric order."""
        return tuple(getattr(self, name) for name in METRIC_FIELDS)


assert tuple(f.name for f in fields(TensorMetrics))[: len(TensorMetric)] == METRIC_FIELDS, "a field per metric"
assert all(set(m.needs) <= {*SUMS, "max_abs", "max_rel", "below"} for m in TensorMetric), "unknown accumulator"


def max_metric(value: float, nan_msg: TensorMsg, messages: list[TensorMsg]) -> Metric:
    """A maximum's cell: NaN (with its message) or the value rounded as the reference does."""
    if math.isnan(value):
        messages.append(nan_msg)
        return _NAN
    return Metric.of(format12(value))


def format12(x: float) -> float:
    """The reference's `format_value`: the value rounded to 12 decimals (inf/nan unchanged)."""
    return float(f"{x:.12f}")
