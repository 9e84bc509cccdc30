"""Numbers of the kernel-dump compare (spec §7.5): per .npy pair the statistics of each side and, after the
reference's pre-checks, the tensor metrics of measure/tensor_metrics.py (tensor_compare.py); per statistic.csv pair the float32
differences and relative errors. Only numbers and codes here; render/kernel_table.py makes the words.
"""

from __future__ import annotations

import enum
import math
from pathlib import Path

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.kernel_dump import StatRow
from msprobe_compare.load.tensor_data import TensorData
from msprobe_compare.load.tensors import load_tensor
from msprobe_compare.measure.blas import single_threaded_blas
from msprobe_compare.measure.stats import MAGNITUDE_EPS
from msprobe_compare.measure.tensor_compare import compare_tensors
from msprobe_compare.measure.tensor_metrics import TensorMetrics, TensorMsg
from msprobe_compare.records import dataclass


class KernelCheck(enum.IntEnum):
    """The kernel compare's pre-check messages (reference order); a row with any is not measured."""

    NOT_NDARRAY = 1  # one side has no file
    READ_FAILED = 2  # ours: a file that cannot be read safely
    EMPTY = 3
    SCALAR = 4
    SHAPE = 5
    DTYPE = 6
    NAN_INF = 7
    STAT_SHAPE = 8  # statistic mode: the shape texts differ
    STAT_DTYPE = 9


Stat = np.generic  # a statistic as numpy gives it, in its own dtype (render/ turns it into a cell)


@dataclass(frozen=True)
class Side:
    """One side of a .npy row: dtype name, shape and max/min/mean/l2norm (None: no file or no statistics)."""

    dtype: str
    shape: tuple[int, ...]
    stats: tuple[Stat, Stat, Stat, Stat] | None


@dataclass(frozen=True)
class NpyRow:
    npu: Side | None
    bench: Side | None
    checks: tuple[KernelCheck, ...]
    metrics: TensorMetrics | None  # None when a pre-check failed
    read_failed: str = ""  # the file names that could not be read


def side_stats(array: np.ndarray) -> tuple[Stat, Stat, Stat, Stat] | None:
    """max, min, mean, l2norm computed in the array's own dtype, as numpy does (a float16 norm may overflow to
    inf, as in the reference); None for an empty array."""
    if array.size == 0:
        return None
    with np.errstate(all="ignore"), single_threaded_blas():
        return np.max(array), np.min(array), np.mean(array), np.linalg.norm(array)


def load_side(path: Path | None) -> tuple[TensorData | None, str]:
    """The tensor at `path` read safely (no pickle, no symbolic link), or None and the path when it cannot be."""
    if path is None:
        return None, ""
    try:
        return load_tensor(path.parent, path.name), ""
    except TensorFileError:
        return None, str(path)


def _load_pair(npu_path: Path | None, bench_path: Path | None
               ) -> tuple[TensorData | None, TensorData | None, list[Side | None], str]:  # fmt: skip
    """Both files read (memory-mapped when large), each side's statistics, and the files that could not be read."""
    npu, n_fail = load_side(npu_path)
    bench, b_fail = load_side(bench_path)
    sides = [None if t is None else Side(t.dtype_name, t.shape, side_stats(np.asarray(t.array)))
             for t in (npu, bench)]  # fmt: skip
    return npu, bench, sides, " ".join(f for f in (n_fail, b_fail) if f)


def measure_npy(npu_path: Path | None, bench_path: Path | None) -> NpyRow:
    """One row of the NPY mode: both files read once (memory-mapped when large), then released."""
    npu, bench, sides, failed = _load_pair(npu_path, bench_path)
    if failed:
        return NpyRow(sides[0], sides[1], (KernelCheck.READ_FAILED,), None, failed)
    if npu is None or bench is None:
        return NpyRow(sides[0], sides[1], (KernelCheck.NOT_NDARRAY,), None)
    if npu.size == 0 or bench.size == 0:
        return NpyRow(sides[0], sides[1], (KernelCheck.EMPTY,), None)
    checks = []
    if not npu.shape or not bench.shape:
        checks.append(KernelCheck.SCALAR)
    if npu.shape != bench.shape:
        checks.append(KernelCheck.SHAPE)
    if npu.dtype_name != bench.dtype_name:
        checks.append(KernelCheck.DTYPE)
    if checks:
        return NpyRow(sides[0], sides[1], tuple(checks), None)
    metrics = compare_tensors(npu, bench)
    if TensorMsg.NAN_INF_MISMATCH in metrics.messages:
        return NpyRow(sides[0], sides[1], (KernelCheck.NAN_INF,), None)
    return NpyRow(sides[0], sides[1], (), metrics)


def measure_common(npu_path: Path, bench_path: Path) -> NpyRow:
    """One row of the single-point compare (spec §7.6): no pre-checks of its own (the tensor compare's apply)."""
    npu, bench, sides, failed = _load_pair(npu_path, bench_path)
    if npu is None or bench is None:
        return NpyRow(sides[0], sides[1], (KernelCheck.READ_FAILED,), None, failed)
    return NpyRow(sides[0], sides[1], (), compare_tensors(npu, bench))


class RelState(enum.IntEnum):
    VALUE = 0
    NOT_AVAILABLE = 1  # the bench statistic is 0
    NAN = 2


@dataclass(frozen=True)
class StatPair:
    """One row of the statistic mode; `diffs`/`rel` None when a pre-check failed."""

    npu: StatRow | None
    bench: StatRow | None
    checks: tuple[KernelCheck, ...]
    npu_stats: tuple[float, float, float, float]  # float32 values as float (NaN: none)
    bench_stats: tuple[float, float, float, float]
    diffs: tuple[float, float, float, float] | None
    rel: tuple[tuple[RelState, float], ...] | None  # percent
    magnitude: float | None  # Max diff / (max(NPU max, Bench max) + 1e-10); 0 when both maxima are NaN


_NAN4 = (math.nan,) * 4


def _f32(values: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    return tuple(float(np.float32(v)) for v in values)  # type: ignore[return-value]


def measure_statistic(npu: StatRow | None, bench: StatRow | None) -> StatPair:
    """Differences in float32 (the reference's arithmetic), relative errors as float32 ratios times 100."""
    n = _f32(npu.stats) if npu is not None else _NAN4
    b = _f32(bench.stats) if bench is not None else _NAN4
    checks = []
    n_shape, b_shape = (npu.shape if npu else None), (bench.shape if bench else None)
    if n_shape == "" or b_shape == "":
        checks.append(KernelCheck.SCALAR)
    elif npu is None or bench is None or n_shape != b_shape:  # a missing side never has the same shape
        checks.append(KernelCheck.STAT_SHAPE)
    if npu is None or bench is None or npu.dtype != bench.dtype:
        checks.append(KernelCheck.STAT_DTYPE)
    if checks:
        return StatPair(npu, bench, tuple(checks), n, b, None, None, None)
    with np.errstate(all="ignore"):
        n32, b32 = np.array(n, np.float32), np.array(b, np.float32)
        d32 = n32 - b32
        rel: list[tuple[RelState, float]] = []
        for d, den in zip(d32, b32):
            if den == 0:
                rel.append((RelState.NOT_AVAILABLE, math.nan))
                continue
            ratio = float(d / den)  # float32 division, then float64 (the reference's scalar promotion)
            rel.append((RelState.NAN, math.nan) if math.isnan(ratio) else (RelState.VALUE, abs(ratio * 100)))
        top = b[0] if b[0] > n[0] else n[0]  # Python's max(NPU max, Bench max), NaN as it does
        magnitude = 0.0 if math.isnan(n[0]) and math.isnan(b[0]) else float(d32[0]) / (top + MAGNITUDE_EPS)
    return StatPair(npu, bench, (), n, b, tuple(float(x) for x in d32), tuple(rel), magnitude)  # type: ignore[arg-type]
