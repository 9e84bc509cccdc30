"""compare_tensors: the real-data metrics of one NPU/bench tensor pair (measure/tensor_metrics.py's table), after the
reference's pre-checks, in one pass over the pair that fills a `Totals`.

Each pair is read once, in C-order chunks of `chunk_elems` elements, with float64 accumulators, so peak memory is a
few chunk-sized buffers whatever the tensor size. Input arrays (possibly read-only memmaps) are never written.

Numeric semantics follow the reference, with the deliberate fixes D4, D5 and D6 (docs/deviations.md):
* Cosine, EucDist, MaxAbsErr use float64 copies of the data (bfloat16 widened exactly, ints/bools cast).
* The relative error RE = |(N' - B') / B'| is computed in the pair's own float dtype when that is float32
  (float32/bfloat16 data, also float16 vs float32), otherwise in float64. Where B == 0 both N' and B' get
  + eps (float64 machine epsilon) added in that dtype. float16 pairs use float64 (D5), so a zero in the bench
  never turns into NaN/inf and identical tensors always give MaxRelativeErr 0 and ratios 1.
* NaN/inf positions identical on both sides count as 0 on both sides; otherwise every metric is N/A.

When the compiled kernel `msprobe_compare._tensorkernel` is built with a SIMD loop (SSE2/AVX2/AVX-512 on x86; see
`native_kernel`; MSPROBE_NATIVE=0 turns it off), pairs whose sides are each float32 or bfloat16 go through it
instead of numpy: one fused pass per chunk, straight from the (possibly memory-mapped) buffers, without the GIL;
a memory-mapped pair whose files are known (`TensorData.source`) is read from the files with pread into two reused
buffers instead (`_accumulate_files`, measure/tensor_io.py: no page faults, a quarter less CPU), with the same
results bit for bit. It computes every element as the numpy path does, so MaxAbsErr, MaxRelativeErr, the ratios and the messages are
identical; the sums behind Cosine and EucDist are added in another order than numpy/BLAS (fixed, so still
deterministic whatever the threads, -j or pool), so they may differ from the numpy path in the last bits, as they
already do between BLAS and einsum (measure/blas.py). Other dtypes always take the numpy path.

Beside the reference's metrics, the same pass counts the elements whose relative error exceeds `excess_units` unit
roundoffs of the coarser of the two dtypes (`TensorMetrics.beyond`, a fraction; not a table column): the root
cause's error ratio at a dtype-aware tolerance (docs/rootcause.md), where the one-thousandth ratio uses a fixed
1e-3 whatever the precision.

The one pass has two twins, bound once below: `_py_accumulate` (numpy) and `_c_accumulate` (the compiled kernel
where it reads both sides, else `_py_accumulate`); `accumulate` is the kernel's twin when the kernel is built, has a
SIMD loop, counts what the table needs and MSPROBE_NATIVE is not 0. Both are callable directly (tests).
"""

from __future__ import annotations

import math
from functools import partial
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.tensor_data import BF16, FileSpan, TensorData
from msprobe_compare.measure.blas import single_threaded_blas
from msprobe_compare.measure.tensor_io import (
    DEFAULT_CHUNK_ELEMS,
    WORKSPACE,
    ChunkReader,
    ReadAhead,
    chunk_of,
    file_pair,
    uncached,
)
from msprobe_compare.measure.tensor_metrics import (
    EXCESS_UNITS,
    FLOAT_EPSILON,
    N_SUMS,
    SUMS,
    THRESHOLDS,
    UNIT_ROUNDOFF,
    Metric,
    MetricState,
    TensorMetric,
    TensorMetrics,
    TensorMsg,
    Totals,
    max_metric,
)

__all__ = ["DEFAULT_CHUNK_ELEMS", "EXCESS_UNITS", "accumulate", "beyond_tolerance", "compare_tensors"]

# The compiled kernel takes this many chunks per call (fewer Python round trips; the result is the same as one
# call per chunk). 16 chunks of float32 are 8 MiB, well inside the read-ahead (ReadAhead.READ_AHEAD) of 64 MiB.
NATIVE_SPAN_CHUNKS = 16

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_U16 = np.dtype(np.uint16)
_UNSUPPORTED = Metric(MetricState.UNSUPPORTED)
_READABLE_KINDS = frozenset("biuf")  # bool, signed/unsigned int, float (bfloat16 arrives as uint16 bits)


class Accumulate(Protocol):
    """The one pass over a pair of equal shapes (not 0-d, not empty, readable): its Totals, or None when the
    NaN/inf positions of the two sides differ; `tolerance`: count the relative errors above it too."""

    def __call__(self, npu: TensorData, bench: TensorData, n_arr: np.ndarray, b_arr: np.ndarray, chunk_elems: int,
                 tolerance: float | None = None) -> Totals | None: ...  # fmt: skip


def compare_tensors(npu: TensorData, bench: TensorData, chunk_elems: int = DEFAULT_CHUNK_ELEMS,
                    excess_units: float | None = None) -> TensorMetrics:  # fmt: skip
    """The real-data metrics of one pair, after the reference's pre-checks (empty, 0-d, shape, unreadable,
    NaN/inf positions, dtype), reading each tensor once in chunks of `chunk_elems` elements. With `excess_units`,
    also the fraction of elements beyond that many unit roundoffs of the coarser dtype (`beyond`)."""
    return _measure(npu, bench, chunk_elems, accumulate, excess_units)


def beyond_tolerance(npu: TensorData, bench: TensorData, excess_units: float | None) -> float | None:
    """`excess_units` unit roundoffs of the coarser of two floating dtypes; None for other dtypes or no units."""
    if excess_units is None:
        return None
    units = [UNIT_ROUNDOFF.get(t.dtype_name) for t in (npu, bench)]
    if units[0] is None or units[1] is None:
        return None
    return excess_units * max(units[0], units[1])


def _compare(npu: TensorData, bench: TensorData, chunk_elems: int, kernel: Any,
             excess_units: float | None = None) -> TensorMetrics:  # fmt: skip
    """compare_tensors with the compiled kernel `kernel` (a module, or a stand-in with its `accumulate`), or the
    numpy path only when None (tests and bench/bench_kernel.py compare the two)."""
    one_pass: Accumulate = _py_accumulate if kernel is None else partial(_c_accumulate, kernel=kernel)
    return _measure(npu, bench, chunk_elems, one_pass, excess_units)


def _measure(npu: TensorData, bench: TensorData, chunk_elems: int, one_pass: Accumulate,
             excess_units: float | None = None) -> TensorMetrics:  # fmt: skip
    """compare_tensors with the one pass `one_pass`."""
    if chunk_elems < 1:
        raise ValueError("chunk_elems must be positive")
    n_arr, b_arr = np.asarray(npu.array), np.asarray(bench.array)
    if n_arr.size == 0:
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.EMPTY)
    readable = _readable(npu) and _readable(bench)
    if n_arr.ndim == 0:
        if not readable:
            return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.UNREADABLE)
        if b_arr.size == 0:  # the reference crashes on this broadcast; call it a shape mismatch
            return TensorMetrics.uniform(MetricState.SHAPE_UNMATCHED, TensorMsg.SHAPE_MISMATCH)
        return _compare_zero_dim(npu, bench, chunk_elems)
    if n_arr.shape != b_arr.shape:
        return TensorMetrics.uniform(MetricState.SHAPE_UNMATCHED, TensorMsg.SHAPE_MISMATCH)
    if not readable:
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.UNREADABLE)

    totals = one_pass(npu, bench, n_arr, b_arr, chunk_elems, beyond_tolerance(npu, bench, excess_units))
    if totals is None:
        return TensorMetrics.uniform(MetricState.NOT_AVAILABLE, TensorMsg.NAN_INF_MISMATCH)
    return totals.finish(dtype_mismatch=npu.compute_dtype != bench.compute_dtype)


# ----------------------------------------------------------------------------------------------------------------
# the one pass: two twins, bound once


def native_kernel() -> ModuleType | None:
    """The compiled kernel, when it is built, not turned off and serves (`_serving`)."""
    return _serving(native.load("_tensorkernel"))


def _serving(kernel: ModuleType | None) -> ModuleType | None:
    """`kernel` when it has a SIMD loop (its plain C loop, what builds for other CPUs than x86 get, is slower than
    the numpy path: 5 to 7 against 3.6 ns per element measured on x86) and accumulates what the metrics table needs
    (its SUMS and THRESHOLDS are the table's); else None."""
    if kernel is None or kernel.SIMD == "portable":
        return None
    if tuple(getattr(kernel, "SUMS", ())) != tuple(SUMS) or tuple(getattr(kernel, "THRESHOLDS", ())) != THRESHOLDS:
        return None
    return kernel


def _py_accumulate(npu: TensorData, bench: TensorData, n_arr: np.ndarray, b_arr: np.ndarray, chunk_elems: int,
                   tolerance: float | None = None) -> Totals | None:  # fmt: skip
    """The one pass by numpy (the Python twin), in chunks of `chunk_elems` elements (Accumulate)."""
    chunk = min(chunk_elems, n_arr.size)
    n_side, b_side = ChunkReader(npu, n_arr, chunk, "npu bits"), ChunkReader(bench, b_arr, chunk, "bench bits")
    with single_threaded_blas() as blas, np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        acc = _Accumulator(n_arr.size, chunk, _re_dtype(npu.compute_dtype, bench.compute_dtype), blas, tolerance)
        for start in range(0, n_arr.size, chunk_elems):
            stop = min(start + chunk_elems, n_arr.size)
            if not acc.add(n_side.chunk(start, stop), b_side.chunk(start, stop)):
                return None
    return acc


def _c_accumulate(npu: TensorData, bench: TensorData, n_arr: np.ndarray, b_arr: np.ndarray, chunk_elems: int,
                  tolerance: float | None = None, kernel: Any = None) -> Totals | None:  # fmt: skip
    """The one pass by the compiled kernel (the C twin; `kernel`: the loaded one by default) when it reads both
    sides (float32 or bfloat16 each), from the files when both are memory-mapped with a known FileSpan; other
    pairs by _py_accumulate (Accumulate)."""
    kernel = _KERNEL if kernel is None else kernel
    n_bf16, b_bf16 = _native_side(npu, n_arr), _native_side(bench, b_arr)
    if kernel is None or n_bf16 is None or b_bf16 is None:
        return _py_accumulate(npu, bench, n_arr, b_arr, chunk_elems, tolerance)
    if npu.source is not None and bench.source is not None and hasattr(kernel, "accumulate_file"):
        read_ahead = ReadAhead.READ_AHEAD if uncached(n_arr) or uncached(b_arr) else 0
        totals = _accumulate_files(kernel, npu.source, n_bf16, bench.source, b_bf16, n_arr.size, chunk_elems,
                                   tolerance, read_ahead)  # fmt: skip
        if totals is not _UNREAD:
            return totals
    chunk = min(chunk_elems, n_arr.size)
    return _accumulate_native(kernel, ChunkReader(npu, n_arr, chunk, "", widen=False), n_bf16,
                              ChunkReader(bench, b_arr, chunk, "", widen=False), b_bf16, n_arr.size, chunk_elems,
                              tolerance)  # fmt: skip


_KERNEL = _serving(native.built("_tensorkernel"))  # read at import: tensor mode only (start-up speed)
accumulate: Accumulate = native.twin("_tensorkernel", _c_accumulate, _py_accumulate, _KERNEL is not None)


def _native_side(t: TensorData, arr: np.ndarray) -> bool | None:
    """How the compiled kernel reads a side: True for bfloat16 bits, False for float32, None when it cannot."""
    if t.dtype_name == BF16:
        return True if arr.dtype == _U16 else None  # dtype equality includes the byte order
    return False if arr.dtype == _F32 else None


def _accumulate_native(kernel: Any, n_side: ChunkReader, n_bf16: bool, b_side: ChunkReader, b_bf16: bool,
                       size: int, chunk_elems: int, tolerance: float | None = None) -> Totals | None:  # fmt: skip
    """The kernel over the two sides' buffers. Contiguous sides go by spans of NATIVE_SPAN_CHUNKS chunks per call
    (the kernel adds the chunks' sums in chunk order onto the running ones, as the per-chunk loop does here),
    others one chunk per call; each call releases the GIL."""
    kernel_accumulate = kernel.accumulate
    sums = (0.0,) * N_SUMS
    max_abs = max_rel = 0.0
    below = [0] * len(THRESHOLDS)
    beyond = 0
    step = chunk_elems * NATIVE_SPAN_CHUNKS if n_side.flat is not None and b_side.flat is not None else chunk_elems
    for start in range(0, size, step):
        stop = min(start + step, size)
        part = kernel_accumulate(n_side.chunk(start, stop), n_bf16, b_side.chunk(start, stop), b_bf16, tolerance,
                                 chunk_elems, sums)  # fmt: skip
        if part is None:
            return None
        sums = part[:N_SUMS]  # running sums, carried through the kernel
        max_abs = max(max_abs, part[N_SUMS])  # never NaN: NaN/inf were masked
        max_rel = max(max_rel, part[N_SUMS + 1])
        for k in range(len(below)):
            below[k] += part[N_SUMS + 2 + k]
        beyond += part[-1]
    return Totals.of_kernel((*sums, max_abs, max_rel, *below, beyond), size, tolerance)


_UNREAD: Any = object()  # _accumulate_files could not read the files: the caller goes through the mapping


def _accumulate_files(kernel: Any, n_span: FileSpan, n_bf16: bool, b_span: FileSpan, b_bf16: bool, size: int,
                      chunk_elems: int, tolerance: float | None, read_ahead: int = 0) -> Totals | None:  # fmt: skip
    """_accumulate_native on the two files' bytes read with pread into reused buffers (the same sums, maxima and
    counts bit for bit: kernel.accumulate_file computes the blocks and chunks as accumulate does), keeping
    `read_ahead` bytes ahead requested from the disk; _UNREAD when a file cannot be opened as the same file the
    tensor was read from, or read."""
    try:
        with file_pair(n_span, b_span) as opened:
            if opened is None:
                return _UNREAD
            n_fd, b_fd, n_buf, b_buf = opened
            part = kernel.accumulate_file(n_fd, n_span.offset, n_bf16, b_fd, b_span.offset, b_bf16, size,
                                          tolerance, chunk_elems, None, n_buf, b_buf, read_ahead)  # fmt: skip
    except OSError:
        return _UNREAD
    return None if part is None else Totals.of_kernel(part, size, tolerance)


def _readable(t: TensorData) -> bool:
    return t.dtype_name == BF16 or np.asarray(t.array).dtype.kind in _READABLE_KINDS


def _re_dtype(n_dtype: np.dtype, b_dtype: np.dtype) -> np.dtype:
    """dtype of the relative error: float32 when the pair promotes to float32, else float64 (incl. float16, D5)."""
    if n_dtype.kind == "f" and b_dtype.kind == "f" and np.result_type(n_dtype, b_dtype) == _F32:
        return _F32
    return _F64


_max = np.maximum.reduce  # direct ufunc reductions: less per-call overhead than ndarray.max()
_min = np.minimum.reduce


class _Accumulator(Totals):
    """Float64 running sums and maxima over the chunks of one pair, with reusable chunk-sized buffers.

    Per chunk: both sides are copied to float64 once; a dot product per entry of SUMS (BLAS on one thread when
    `blas`, see measure/blas.py, else einsum) gives the sums; max(max(d), -min(d)) of the float64 difference d gives MaxAbsErr
    without an abs pass; the relative error is computed in its own dtype and compared with the thresholds only
    when its maximum is not already below them. A float32 relative error is computed first, while the float32
    chunks are still in the CPU caches, and the difference d then overwrites the bench's float64 copy, which is
    no longer needed (a smaller working set; measured 5 to 20% faster than the other order)."""

    def __init__(self, size: int, chunk: int, re_dtype: np.dtype, blas: bool = False,
                 tolerance: float | None = None) -> None:  # fmt: skip
        super().__init__(size, tolerance)
        # the tolerance in the relative error's dtype, as the kernel compares it (None: +inf, nothing beyond)
        self.beyond_tx = re_dtype.type(math.inf if tolerance is None else tolerance)
        self.beyond_limit = float(self.beyond_tx)
        self.chunk = chunk
        self.re_dtype = re_dtype
        self.thresholds = tuple(re_dtype.type(t) for t in THRESHOLDS)
        self.limits = tuple(float(t) for t in self.thresholds)  # the same values, compared with Python floats
        self.eps = re_dtype.type(FLOAT_EPSILON)
        self.n64 = WORKSPACE.get("n64", chunk, _F64)
        self.b64 = WORKSPACE.get("b64", chunk, _F64)
        f32 = re_dtype == _F32
        self.diff = self.b64 if f32 else WORKSPACE.get("diff", chunk, _F64)
        self.rel32 = WORKSPACE.get("rel32", chunk, _F32) if f32 else None
        self.flags = WORKSPACE.get("flags", chunk, np.dtype(np.bool_))
        self.dot_fn = _blas_dot if blas else _einsum_dot
        # the sums of n and b alone, taken before d overwrites the bench's copy, then those with d
        self.before_d = [(name, ops) for name, ops in SUMS.items() if "d" not in ops]
        self.with_d = [(name, ops) for name, ops in SUMS.items() if "d" in ops]

    def add(self, n: np.ndarray, b: np.ndarray) -> bool:
        """Fold one chunk pair in; False when the NaN/inf positions of the two sides differ."""
        k = n.shape[0]
        full = k == self.chunk
        rel32 = self.rel32 is not None
        if rel32:  # first, while the (widened) float32 chunks are still in the CPU caches
            rel_stats = self._relative32(n, b, k)
        dot = self.dot_fn
        n64, b64, diff = (self.n64, self.b64, self.diff) if full else (self.n64[:k], self.b64[:k], self.diff[:k])
        np.copyto(n64, n, casting="unsafe")
        np.copyto(b64, b, casting="unsafe")
        nn, bb = dot(n64, n64), dot(b64, b64)
        if not (math.isfinite(nn) and math.isfinite(bb)):  # some NaN/inf (or a float64 overflow)
            n_nan, b_nan = np.isnan(n64), np.isnan(b64)
            n_inf, b_inf = np.isinf(n64), np.isinf(b64)
            if not (np.array_equal(n_nan, b_nan) and np.array_equal(n_inf, b_inf)):
                return False
            bad = n_nan | n_inf
            if bad.any():  # identical positions: 0 on both sides, in our copies only
                n64[bad] = 0.0
                b64[bad] = 0.0
                n = np.where(bad, n.dtype.type(0), n)
                b = np.where(bad, b.dtype.type(0), b)
                nn, bb = dot(n64, n64), dot(b64, b64)
                if rel32:
                    rel_stats = self._relative32(n, b, k)
        sums, operands = self.sums, {"n": n64, "b": b64}
        for name, (x, y) in self.before_d:  # N.N and B.B are known already
            sums[name] += nn if (x, y) == ("n", "n") else bb if (x, y) == ("b", "b") else dot(operands[x], operands[y])
        np.subtract(n64, b64, out=diff)  # NaN-free: NaN/inf were zeroed above, inf - inf cannot occur
        operands["d"] = diff
        for name, (x, y) in self.with_d:
            sums[name] += dot(operands[x], operands[y])
        self.max_abs = _nan_max(self.max_abs, _nan_max(float(_max(diff)), -float(_min(diff))))
        if not rel32:  # float64 relative error |(N-B)/B|, in the diff buffer
            np.divide(diff, b64, out=diff)
            rel_stats = self._relative_stats(n64, b64, diff)
        top, below, beyond = rel_stats
        self.max_rel = _nan_max(self.max_rel, top)
        for j, count in enumerate(below):
            self.below[j] += count
        self.beyond += beyond
        return True

    def _relative32(self, n: np.ndarray, b: np.ndarray, k: int) -> tuple[float, list[int], int]:
        """_relative_stats of the float32 relative error |(N-B)/B|, computed in float32 as the reference does."""
        n_re = n if n.dtype == _F32 else n.astype(_F32)
        b_re = b if b.dtype == _F32 else b.astype(_F32)
        assert self.rel32 is not None  # called only for float32 accumulation, which allocated it
        rel = self.rel32 if k == self.chunk else self.rel32[:k]
        np.subtract(n_re, b_re, out=rel)
        np.divide(rel, b_re, out=rel)
        return self._relative_stats(n_re, b_re, rel)

    def _relative_stats(self, n_re: np.ndarray, b_re: np.ndarray, rel: np.ndarray) -> tuple[float, list[int], int]:
        """(maximum, the counts below each of THRESHOLDS, count above the tolerance) of |rel|, where rel holds
        (N-B)/B (made absolute here, and fixed where the bench is 0); a count is taken only where the maximum is
        not below its threshold already."""
        k = rel.shape[0]
        np.abs(rel, out=rel)
        top = float(_max(rel))
        if not math.isfinite(top):  # x/0 or 0/0 where the bench is 0 (or a genuine overflow)
            top = self._fix_bench_zeros(n_re, b_re, rel, top)
        below = self.flags if k == self.chunk else self.flags[:k]
        beyond = 0 if top <= self.beyond_limit else int(np.count_nonzero(np.greater(rel, self.beyond_tx, out=below)))
        counts = [k if top < limit else int(np.count_nonzero(np.less(rel, t, out=below)))
                  for t, limit in zip(self.thresholds, self.limits, strict=True)]  # fmt: skip
        return top, counts, beyond

    def _fix_bench_zeros(self, n_re: np.ndarray, b_re: np.ndarray, rel: np.ndarray, top: float) -> float:
        """Where B == 0 the reference divides (N + eps) - (0 + eps) by (0 + eps); returns the new maximum
        (`top`, the current one, when the bench has no zero here)."""
        zero = np.equal(b_re, 0, out=self.flags[: rel.shape[0]])
        count = int(np.count_nonzero(zero))
        if count == 0:
            return top
        eps = self.eps
        if count <= rel.shape[0] // 16:  # few zeros: gather/scatter
            where = np.flatnonzero(zero)
            rel[where] = np.abs(((n_re[where] + eps) - eps) / eps)
        else:
            fixed = np.add(n_re, eps)
            fixed -= eps
            fixed /= eps
            np.abs(fixed, out=fixed)
            np.copyto(rel, fixed, where=zero)
        return float(_max(rel))


def _blas_dot(a: np.ndarray, b: np.ndarray) -> float:
    """Float64 dot product by BLAS; deterministic only while BLAS is pinned to one thread (measure/blas.py)."""
    return float(np.dot(a, b))


def _einsum_dot(a: np.ndarray, b: np.ndarray) -> float:
    """Float64 dot product without BLAS: single-threaded and deterministic, 2 to 4 times slower than BLAS."""
    return float(np.einsum("i,i->", a, b))


def _nan_max(a: float, b: float) -> float:
    """max that keeps NaN (like np.max over the whole array)."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a >= b else b


def _compare_zero_dim(npu: TensorData, bench: TensorData, chunk_elems: int) -> TensorMetrics:
    """0-d NPU tensor: only MaxAbsErr and MaxRelativeErr, without the NaN/inf masking; the reference subtracts
    in the promoted float dtype (float64 for ints/bools) and broadcasts the scalar over a non-0-d bench."""
    n_dtype, b_dtype = npu.compute_dtype, bench.compute_dtype
    arith = np.result_type(n_dtype, b_dtype) if n_dtype.kind == "f" and b_dtype.kind == "f" else _F64
    re_dtype = _re_dtype(n_dtype, b_dtype)
    n_val = chunk_of(npu, np.asarray(npu.array).reshape(1), 0, 1)
    b_arr = np.asarray(bench.array)
    b_arr = b_arr.reshape(1) if b_arr.ndim == 0 else b_arr
    eps = re_dtype.type(FLOAT_EPSILON)
    max_abs = max_rel = 0.0
    with np.errstate(all="ignore"):
        for start in range(0, b_arr.size, chunk_elems):
            b = chunk_of(bench, b_arr, start, min(start + chunk_elems, b_arr.size))
            d = np.abs(n_val.astype(arith) - b.astype(arith))
            max_abs = _nan_max(max_abs, float(d.max()))
            n_re, b_re = np.broadcast_to(n_val.astype(re_dtype), b.shape), b.astype(re_dtype)
            zero = b_re == 0
            n_re = np.where(zero, n_re + eps, n_re)
            b_re = np.where(zero, b_re + eps, b_re)
            max_rel = _nan_max(max_rel, float(np.abs((n_re - b_re) / b_re).max()))
    messages = [TensorMsg.ZERO_DIM]
    cells = {TensorMetric.MAX_ABS_ERR: max_metric(max_abs, TensorMsg.MAX_ABS_NAN, messages),
             TensorMetric.MAX_REL_ERR: max_metric(max_rel, TensorMsg.MAX_REL_NAN, messages)}  # fmt: skip
    return TensorMetrics.of([cells.get(m, _UNSUPPORTED) for m in TensorMetric], messages)
