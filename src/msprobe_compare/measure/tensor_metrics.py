"""Real-data metrics of one NPU/bench tensor pair (spec §4.8): Cosine, EucDist, MaxAbsErr, MaxRelativeErr and the
one/five-thousandths error ratios, plus the Err_message codes (the `Accuracy Reached or Not` verdict is judge/accuracy.py's).

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
`_native_kernel`; MSPROBE_NATIVE=0 turns it off), pairs whose sides are each float32 or bfloat16 go through it
instead of numpy: one fused pass per chunk, straight from the (possibly memory-mapped) buffers, without the GIL;
a memory-mapped pair whose files are known (`TensorData.source`) is read from the files with pread into two reused
buffers instead (`_accumulate_files`: no page faults, a quarter less CPU), with the same results bit for bit.
It computes every element as the numpy path does, so MaxAbsErr, MaxRelativeErr, the ratios and the messages are
identical; the sums behind Cosine and EucDist are added in another order than numpy/BLAS (fixed, so still
deterministic whatever the threads, -j or pool), so they may differ from the numpy path in the last bits, as they
already do between BLAS and einsum (measure/blas.py). Other dtypes always take the numpy path.

Beside the reference's metrics, the same pass counts the elements whose relative error exceeds `excess_units` unit
roundoffs of the coarser of the two dtypes (`TensorMetrics.beyond`, a fraction; not a table column): the root
cause's error ratio at a dtype-aware tolerance (docs/rootcause.md), where the one-thousandth ratio uses a fixed
1e-3 whatever the precision.
"""

from __future__ import annotations

import enum
import functools
import math
import mmap
import os
import stat
import sys
import threading
from dataclasses import field
from types import ModuleType
from typing import Any

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.tensor_data import BF16, FileSpan, TensorData
from msprobe_compare.measure.blas import single_threaded_blas
from msprobe_compare.records import dataclass

__all__ = [
    "Metric",
    "MetricState",
    "TensorMetric",
    "TensorMetrics",
    "TensorMsg",
    "compare_tensors",
]

# float64's eps, 2**-52 (np.finfo's first call costs 0.1 ms): added where the bench is 0; the Cosine zero-norm bound
FLOAT_EPSILON = sys.float_info.epsilon
COSINE_SHORT_ROUNDING = 0.9999  # a Cosine above this is rounded to 6 decimals instead of 12
# The elements beyond rounding: relative error above this many unit roundoffs of the coarser dtype. Two: one
# rounding on each side moves an element by at most one unit roundoff each (docs/rootcause.md has the measurement).
EXCESS_UNITS = 2.0
UNIT_ROUNDOFF = {BF16: 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}
DEFAULT_CHUNK_ELEMS = 1 << 17  # 128 Ki elements: float64 buffers stay cache-sized (measured faster than 1 Mi)
# The compiled kernel takes this many chunks per call (fewer Python round trips; the result is the same as one
# call per chunk). 16 chunks of float32 are 8 MiB, well inside the read-ahead (_ReadAhead.READ_AHEAD) of 64 MiB.
NATIVE_SPAN_CHUNKS = 16

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_U16 = np.dtype(np.uint16)
_U8 = np.dtype(np.uint8)
_READABLE_KINDS = frozenset("biuf")  # bool, signed/unsigned int, float (bfloat16 arrives as uint16 bits)


class TensorMetric(enum.Enum):
    """The real-data metrics, in column order: the `TensorMetrics` field of each and, for an error ratio, the
    relative-error threshold it counts against (the data render/ and judge/ read; never a display name)."""

    COSINE = ("cosine", None)
    EUC_DIST = ("euc_dist", None)
    MAX_ABS_ERR = ("max_abs_err", None)
    MAX_REL_ERR = ("max_rel_err", None)
    ONE_THOUSANDTH = ("one_thousandth", 0.001)
    FIVE_THOUSANDTHS = ("five_thousandths", 0.005)

    def __init__(self, field: str, threshold: float | None) -> None:
        self.field = field
        self.threshold = threshold

    @property
    def column(self) -> int:
        """Its column in `TensorColumns.values` / `.states`."""
        return _METRIC_ORDER[self]


_METRIC_ORDER = {m: k for k, m in enumerate(TensorMetric)}
METRIC_FIELDS = tuple(m.field for m in TensorMetric)


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


@dataclass(frozen=True)
class TensorMetrics:
    """The six real-data metrics of one row and its real-data messages (reference order, each at most once)."""

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
    def uniform(cls, state: MetricState, *messages: TensorMsg) -> TensorMetrics:
        """All six metrics in `state` (rows that are not compared: no data file, unmatched, unreadable...)."""
        m = Metric(state)
        return cls(m, m, m, m, m, m, tuple(sorted(set(messages))))


def compare_tensors(npu: TensorData, bench: TensorData, chunk_elems: int = DEFAULT_CHUNK_ELEMS,
                    excess_units: float | None = None) -> TensorMetrics:  # fmt: skip
    """The real-data metrics of one pair, after the reference's pre-checks (empty, 0-d, shape, unreadable,
    NaN/inf positions, dtype), reading each tensor once in chunks of `chunk_elems` elements. With `excess_units`,
    also the fraction of elements beyond that many unit roundoffs of the coarser dtype (`beyond`)."""
    return _compare(npu, bench, chunk_elems, _native_kernel(), excess_units)


def beyond_tolerance(npu: TensorData, bench: TensorData, excess_units: float | None) -> float | None:
    """`excess_units` unit roundoffs of the coarser of two floating dtypes; None for other dtypes or no units."""
    if excess_units is None:
        return None
    units = [UNIT_ROUNDOFF.get(t.dtype_name) for t in (npu, bench)]
    if units[0] is None or units[1] is None:
        return None
    return excess_units * max(units[0], units[1])


def _compare(npu: TensorData, bench: TensorData, chunk_elems: int, kernel: ModuleType | None,
             excess_units: float | None = None) -> TensorMetrics:  # fmt: skip
    """compare_tensors with the compiled kernel `kernel`, or the numpy path only when None."""
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

    totals = _accumulate(npu, bench, n_arr, b_arr, chunk_elems, kernel, beyond_tolerance(npu, bench, excess_units))
    if totals is None:
        return TensorMetrics.uniform(MetricState.NOT_AVAILABLE, TensorMsg.NAN_INF_MISMATCH)
    return totals.finish(dtype_mismatch=npu.compute_dtype != bench.compute_dtype)


# ----------------------------------------------------------------------------------------------------------------
# internals


def _native_kernel() -> ModuleType | None:
    """The compiled kernel, when it is built, not turned off, and has a SIMD loop: its plain C loop (what builds
    for other CPUs than x86 get) is slower than the numpy path, 5 to 7 against 3.6 ns per element measured on x86."""
    kernel = native.load("_tensorkernel")
    return kernel if kernel is not None and kernel.SIMD != "portable" else None


def _accumulate(npu: TensorData, bench: TensorData, n_arr: np.ndarray, b_arr: np.ndarray, chunk_elems: int,
                kernel: ModuleType | None, tolerance: float | None = None) -> _Totals | None:  # fmt: skip
    """The sums, maxima and counts of a pair of equal shapes (not 0-d, not empty, readable), by `kernel` when it
    reads both sides, else by numpy; None when the NaN/inf positions of the two sides differ. `tolerance`: count
    the relative errors above it too."""
    chunk = min(chunk_elems, n_arr.size)
    n_bf16, b_bf16 = _native_side(npu, n_arr), _native_side(bench, b_arr)
    if kernel is not None and n_bf16 is not None and b_bf16 is not None:
        if npu.source is not None and bench.source is not None and hasattr(kernel, "accumulate_file"):
            read_ahead = _ReadAhead.READ_AHEAD if _uncached(n_arr) or _uncached(b_arr) else 0
            totals = _accumulate_files(kernel, npu.source, n_bf16, bench.source, b_bf16, n_arr.size, chunk_elems,
                                       tolerance, read_ahead)  # fmt: skip
            if totals is not _UNREAD:
                return totals
        return _accumulate_native(kernel, _Side(npu, n_arr, chunk, "", widen=False), n_bf16,
                                  _Side(bench, b_arr, chunk, "", widen=False), b_bf16, n_arr.size, chunk_elems,
                                  tolerance)  # fmt: skip
    n_side, b_side = _Side(npu, n_arr, chunk, "npu bits"), _Side(bench, b_arr, chunk, "bench bits")
    with single_threaded_blas() as blas, np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        acc = _Accumulator(n_arr.size, chunk, _re_dtype(npu.compute_dtype, bench.compute_dtype), blas, tolerance)
        for start in range(0, n_arr.size, chunk_elems):
            stop = min(start + chunk_elems, n_arr.size)
            if not acc.add(n_side.chunk(start, stop), b_side.chunk(start, stop)):
                return None
    return acc


def _native_side(t: TensorData, arr: np.ndarray) -> bool | None:
    """How the compiled kernel reads a side: True for bfloat16 bits, False for float32, None when it cannot."""
    if t.dtype_name == BF16:
        return True if arr.dtype == _U16 else None  # dtype equality includes the byte order
    return False if arr.dtype == _F32 else None


def _accumulate_native(kernel: ModuleType, n_side: _Side, n_bf16: bool, b_side: _Side, b_bf16: bool, size: int,
                       chunk_elems: int, tolerance: float | None = None) -> _Totals | None:  # fmt: skip
    """_accumulate by the compiled kernel. Contiguous sides go by spans of NATIVE_SPAN_CHUNKS chunks per call (the
    kernel adds the chunks' sums in chunk order onto the running ones, as the per-chunk loop does here), others
    one chunk per call; each call releases the GIL."""
    accumulate = kernel.accumulate
    dot = nn = bb = ss = max_abs = max_rel = 0.0
    count1 = count5 = beyond = 0
    step = chunk_elems * NATIVE_SPAN_CHUNKS if n_side.flat is not None and b_side.flat is not None else chunk_elems
    for start in range(0, size, step):
        stop = min(start + step, size)
        part = accumulate(n_side.chunk(start, stop), n_bf16, b_side.chunk(start, stop), b_bf16, tolerance,
                          chunk_elems, (dot, nn, bb, ss))  # fmt: skip
        if part is None:
            return None
        dot, nn, bb, ss = part[0], part[1], part[2], part[3]  # running sums, carried through the kernel
        max_abs = max(max_abs, part[4])  # never NaN: NaN/inf were masked
        max_rel = max(max_rel, part[5])
        count1 += part[6]
        count5 += part[7]
        beyond += part[8]
    totals = _Totals(size, tolerance)
    totals.dot, totals.nn, totals.bb, totals.ss = dot, nn, bb, ss
    totals.max_abs, totals.max_rel, totals.count1, totals.count5 = max_abs, max_rel, count1, count5
    totals.beyond = beyond
    return totals


# The bytes of each side read from its file per call of the file kernel (multiples of its 2 blocks of 4096
# elements); measured on 2 x 180 MB float32 and 2 x 262 MB bfloat16 pairs: 64 KiB to 512 KiB cost the same CPU
# time, 28% less than through the memory map (page faults, page-table set-up and tear-down, TLB misses).
FILE_BUFFER_BYTES = 256 << 10
_UNREAD: Any = object()  # _accumulate_files could not read the files: the caller goes through the mapping


def _accumulate_files(kernel: ModuleType, n_span: FileSpan, n_bf16: bool, b_span: FileSpan, b_bf16: bool, size: int,
                      chunk_elems: int, tolerance: float | None, read_ahead: int = 0) -> _Totals | None:  # fmt: skip
    """_accumulate_native on the two files' bytes read with pread into reused buffers (the same sums, maxima and
    counts bit for bit: kernel.accumulate_file computes the blocks and chunks as accumulate does), keeping
    `read_ahead` bytes ahead requested from the disk; _UNREAD when a file cannot be opened as the same file the
    tensor was read from, or read."""
    fds: list[int] = []
    try:
        for span in (n_span, b_span):
            fd = _open_span(span)
            if fd is None:
                return _UNREAD
            fds.append(fd)
        n_buf = _WORKSPACE.get("file npu", FILE_BUFFER_BYTES, _U8)
        b_buf = _WORKSPACE.get("file bench", FILE_BUFFER_BYTES, _U8)
        part = kernel.accumulate_file(fds[0], n_span.offset, n_bf16, fds[1], b_span.offset, b_bf16, size, tolerance,
                                      chunk_elems, None, n_buf, b_buf, read_ahead)  # fmt: skip
    except OSError:
        return _UNREAD
    finally:
        for fd in fds:
            os.close(fd)
    return None if part is None else _totals_of(part, size, tolerance)


def _uncached(arr: np.ndarray) -> bool:
    """Whether some of 16 pages spread over a memory-mapped array (of more than one read-ahead window) are not in
    the page cache (mincore on its untouched mapping: no page is read); False when that cannot be known."""
    probe = _ReadAhead(arr.reshape(-1) if arr.flags.c_contiguous else None)
    if probe.mm is None:
        return False
    last = probe.end - 1 - probe.begin
    for k in range(16):
        at = probe.begin + last * k // 15
        if not _page_cached(probe.address + at - at % mmap.PAGESIZE, probe.vector):
            return True
    return False


def _open_span(span: FileSpan) -> int | None:
    """A descriptor of the file `span` names, when it is still the regular file the tensor was read from."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(span.path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (span.device, span.inode):
            os.close(fd)
            return None
        if hasattr(os, "posix_fadvise"):  # a longer read-ahead on a cold page cache
            os.posix_fadvise(fd, span.offset, 0, os.POSIX_FADV_SEQUENTIAL)
    except OSError:
        os.close(fd)
        return None
    return fd


def _totals_of(part: tuple[Any, ...], size: int, tolerance: float | None) -> _Totals:
    """The kernel's (dot, nn, bb, ss, max_abs, max_rel, count1, count5, beyond) of a whole pair as _Totals."""
    totals = _Totals(size, tolerance)
    totals.dot, totals.nn, totals.bb, totals.ss = part[0], part[1], part[2], part[3]
    totals.max_abs, totals.max_rel, totals.count1, totals.count5 = part[4], part[5], part[6], part[7]
    totals.beyond = part[8]
    return totals


def _readable(t: TensorData) -> bool:
    return t.dtype_name == BF16 or np.asarray(t.array).dtype.kind in _READABLE_KINDS


def _re_dtype(n_dtype: np.dtype, b_dtype: np.dtype) -> np.dtype:
    """dtype of the relative error: float32 when the pair promotes to float32, else float64 (incl. float16, D5)."""
    if n_dtype.kind == "f" and b_dtype.kind == "f" and np.result_type(n_dtype, b_dtype) == _F32:
        return _F32
    return _F64


def _format12(x: float) -> float:
    """The reference's `format_value`: the value rounded to 12 decimals (inf/nan unchanged)."""
    return float(f"{x:.12f}")


def _flat_range(a: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Elements start..stop-1 of `a` in C order as a 1-D array; copies at most stop-start elements."""
    if a.flags.c_contiguous:
        return a.reshape(-1)[start:stop]
    if a.ndim == 1:
        return a[start:stop]
    inner = math.prod(a.shape[1:])
    i0, r0 = divmod(start, inner)
    i1, r1 = divmod(stop, inner)
    if i0 == i1:
        return _flat_range(a[i0], r0, r1)
    parts = []
    if r0:
        parts.append(_flat_range(a[i0], r0, inner))
        i0 += 1
    if i1 > i0:
        parts.append(a[i0:i1].reshape(-1))
    if r1:
        parts.append(_flat_range(a[i1], 0, r1))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _chunk(t: TensorData, arr: np.ndarray, start: int, stop: int) -> np.ndarray:
    """A chunk in the tensor's compute dtype (bfloat16 bits widened to float32)."""
    raw = _flat_range(arr, start, stop)
    return t.to_float(raw) if t.dtype_name == BF16 else raw


class _ReadAhead:
    """Asks the OS to read a memory-mapped tensor ahead of the chunk loop (madvise WILLNEED on the next
    READ_AHEAD bytes, WINDOW bytes at a time), so that on a cold page cache the disk reads overlap the
    computation instead of stalling it fault by fault. WILLNEED walks every page even when all are cached
    (about 0.5 ms per 8 MiB), so a window whose last page is already in the page cache (mincore) is skipped:
    warm runs pay one mincore call per window. Linux only; does nothing for arrays that are not a C-contiguous
    view of an mmap."""

    WINDOW = 8 << 20
    READ_AHEAD = 64 << 20
    address: int  # these are set only for a view of an mmap (when `mm` is not None)
    begin: int
    end: int
    itemsize: int
    advised: int
    vector: bytearray

    def __init__(self, flat: np.ndarray | None) -> None:
        self.mm: mmap.mmap | None = None
        if flat is None or flat.nbytes <= self.WINDOW or _mincore() is None:
            return
        base = flat.base
        while isinstance(base, np.ndarray):
            base = base.base
        if not isinstance(base, mmap.mmap) or base.closed:
            return
        try:
            self.address = np.frombuffer(base, np.uint8, count=1).ctypes.data  # of the mapping
        except (ValueError, TypeError, BufferError):
            return
        self.mm = base
        self.begin = flat.ctypes.data - self.address  # byte offset of element 0 in the mapping
        self.end = min(len(base), self.begin + flat.nbytes)
        self.itemsize = flat.itemsize
        self.advised = self.begin - self.begin % mmap.PAGESIZE  # requested (or found cached) up to here
        self.vector = bytearray(1)

    def before(self, start: int) -> None:
        """Called before reading element `start` on: keep READ_AHEAD bytes beyond it requested."""
        mm = self.mm
        if mm is None:
            return
        want = min(self.end, self.begin + start * self.itemsize + self.READ_AHEAD)
        try:
            while self.advised < want:
                length = min(self.WINDOW, self.end - self.advised)
                last_page = (self.advised + length - 1) // mmap.PAGESIZE * mmap.PAGESIZE
                if not _page_cached(self.address + last_page, self.vector):
                    mm.madvise(mmap.MADV_WILLNEED, self.advised, length)
                self.advised += length
        except (OSError, ValueError):  # a hint only: never fail the comparison over it
            self.mm = None


@functools.lru_cache(maxsize=1)
def _mincore() -> Any:
    """libc's mincore, on Linux with mmap.madvise; None elsewhere."""
    if not sys.platform.startswith("linux") or not hasattr(mmap.mmap, "madvise"):
        return None
    try:
        import ctypes

        function = ctypes.CDLL(None, use_errno=True).mincore
        function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        function.restype = ctypes.c_int
    except (OSError, AttributeError, ImportError):
        return None
    return function, ctypes


def _page_cached(address: int, vector: bytearray) -> bool:
    """Whether the page at `address` (page-aligned, in one of our mappings) is in the page cache."""
    function, ctypes = _mincore()
    buffer = (ctypes.c_char * 1).from_buffer(vector)
    return function(address, mmap.PAGESIZE, buffer) == 0 and vector[0] & 1 == 1


class _Side:
    """One tensor read chunk by chunk; with `widen`, bfloat16 bits are widened into a reused float32 buffer (named
    `name` in the workspace)."""

    def __init__(self, t: TensorData, arr: np.ndarray, chunk: int, name: str, widen: bool = True) -> None:
        self.arr = arr
        self.flat = arr.reshape(-1) if arr.flags.c_contiguous else None  # a view: no copy
        widened = widen and t.dtype_name == BF16
        self.bits = _WORKSPACE.get(name, chunk, np.dtype(np.uint32)) if widened else None
        self.read_ahead = _ReadAhead(self.flat)

    def chunk(self, start: int, stop: int) -> np.ndarray:
        self.read_ahead.before(start)
        raw = self.flat[start:stop] if self.flat is not None else _flat_range(self.arr, start, stop)
        if self.bits is None:
            return raw
        bits = self.bits[: stop - start]
        np.copyto(bits, raw, casting="unsafe")  # measured faster than one left_shift casting on the fly
        np.left_shift(bits, 16, out=bits)  # bf16 is the upper half of a float32
        return bits.view(np.float32)


class _Workspace(threading.local):
    """Chunk buffers kept between compare_tensors calls, one set per thread (a few MiB at the default chunk).
    Fresh buffers cost page faults on first touch, which dominated the time of small tensors."""

    KEEP_ELEMS = 4 * DEFAULT_CHUNK_ELEMS  # bigger buffers (an unusual chunk_elems) are not kept

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, size: int, dtype: np.dtype) -> np.ndarray:
        """A buffer of `size` elements of `dtype`, contents undefined; valid until the next get(name)."""
        array = self.arrays.get(name)
        if array is None or array.size < size or array.dtype != dtype:
            if size > self.KEEP_ELEMS:
                return np.empty(size, dtype)
            array = self.arrays[name] = np.empty(max(size, DEFAULT_CHUNK_ELEMS), dtype)  # grows once
        return array[:size]


_WORKSPACE = _Workspace()
_max = np.maximum.reduce  # direct ufunc reductions: less per-call overhead than ndarray.max()
_min = np.minimum.reduce


class _Totals:
    """Float64 sums (N.B, N.N, B.B, (N-B).(N-B)), MaxAbsErr, MaxRelativeErr and the counts of relative errors below
    the thresholds and of those above `tolerance` (when given), over the `size` elements of one pair; `finish`
    turns them into the metrics."""

    def __init__(self, size: int, tolerance: float | None = None) -> None:
        self.size = size
        self.tolerance = tolerance
        self.dot = self.nn = self.bb = self.ss = 0.0
        self.max_abs = self.max_rel = 0.0
        self.count1 = self.count5 = self.beyond = 0

    def finish(self, dtype_mismatch: bool) -> TensorMetrics:
        messages: list[TensorMsg] = [TensorMsg.DTYPE_MISMATCH] if dtype_mismatch else []
        cosine = _cosine(self.size, self.dot, self.nn, self.bb, messages)
        euc = Metric.of(math.sqrt(self.ss))
        max_abs = _max_metric(self.max_abs, TensorMsg.MAX_ABS_NAN, messages)
        max_rel = _max_metric(self.max_rel, TensorMsg.MAX_REL_NAN, messages)
        one = Metric.of(_format12(self.count1 / self.size))
        five = Metric.of(_format12(self.count5 / self.size))
        tol = self.tolerance
        beyond, beyond_tol = (math.nan, math.nan) if tol is None else (self.beyond / self.size, float(tol))
        return TensorMetrics(cosine, euc, max_abs, max_rel, one, five, tuple(messages), beyond, beyond_tol)


class _Accumulator(_Totals):
    """Float64 running sums and maxima over the chunks of one pair, with reusable chunk-sized buffers.

    Per chunk: both sides are copied to float64 once; four dot products (BLAS on one thread when `blas`, see
    measure/blas.py, else einsum) give the sums; max(max(d), -min(d)) of the float64 difference d gives MaxAbsErr
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
        self.thresholds = tuple(re_dtype.type(m.threshold) for m in TensorMetric if m.threshold is not None)
        self.limits = tuple(float(t) for t in self.thresholds)  # the same values, compared with Python floats
        self.eps = re_dtype.type(FLOAT_EPSILON)
        self.n64 = _WORKSPACE.get("n64", chunk, _F64)
        self.b64 = _WORKSPACE.get("b64", chunk, _F64)
        f32 = re_dtype == _F32
        self.diff = self.b64 if f32 else _WORKSPACE.get("diff", chunk, _F64)
        self.rel32 = _WORKSPACE.get("rel32", chunk, _F32) if f32 else None
        self.flags = _WORKSPACE.get("flags", chunk, np.dtype(np.bool_))
        self.dot_fn = _blas_dot if blas else _einsum_dot

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
        self.nn += nn
        self.bb += bb
        self.dot += dot(n64, b64)
        np.subtract(n64, b64, out=diff)  # NaN-free: NaN/inf were zeroed above, inf - inf cannot occur
        self.ss += dot(diff, diff)
        self.max_abs = _nan_max(self.max_abs, _nan_max(float(_max(diff)), -float(_min(diff))))
        if not rel32:  # float64 relative error |(N-B)/B|, in the diff buffer
            np.divide(diff, b64, out=diff)
            rel_stats = self._relative_stats(n64, b64, diff)
        top, below1, below5, beyond = rel_stats
        self.max_rel = _nan_max(self.max_rel, top)
        self.count1 += below1
        self.count5 += below5
        self.beyond += beyond
        return True

    def _relative32(self, n: np.ndarray, b: np.ndarray, k: int) -> tuple[float, int, int, int]:
        """_relative_stats of the float32 relative error |(N-B)/B|, computed in float32 as the reference does."""
        n_re = n if n.dtype == _F32 else n.astype(_F32)
        b_re = b if b.dtype == _F32 else b.astype(_F32)
        assert self.rel32 is not None  # called only for float32 accumulation, which allocated it
        rel = self.rel32 if k == self.chunk else self.rel32[:k]
        np.subtract(n_re, b_re, out=rel)
        np.divide(rel, b_re, out=rel)
        return self._relative_stats(n_re, b_re, rel)

    def _relative_stats(self, n_re: np.ndarray, b_re: np.ndarray, rel: np.ndarray) -> tuple[float, int, int, int]:
        """(maximum, count below 0.001, count below 0.005, count above the tolerance) of |rel|, where rel holds
        (N-B)/B (made absolute here, and fixed where the bench is 0)."""
        k = rel.shape[0]
        np.abs(rel, out=rel)
        top = float(_max(rel))
        if not math.isfinite(top):  # x/0 or 0/0 where the bench is 0 (or a genuine overflow)
            top = self._fix_bench_zeros(n_re, b_re, rel, top)
        below = self.flags if k == self.chunk else self.flags[:k]
        beyond = 0 if top <= self.beyond_limit else int(np.count_nonzero(np.greater(rel, self.beyond_tx, out=below)))
        if top < self.limits[0]:
            return top, k, k, beyond
        t1, t5 = self.thresholds
        below1 = int(np.count_nonzero(np.less(rel, t1, out=below)))
        below5 = k if top < self.limits[1] else int(np.count_nonzero(np.less(rel, t5, out=below)))
        return top, below1, below5, beyond

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


def _max_metric(value: float, nan_msg: TensorMsg, messages: list[TensorMsg]) -> Metric:
    if math.isnan(value):
        messages.append(nan_msg)
        return _NAN
    return Metric.of(_format12(value))


def _cosine(size: int, dot: float, nn: float, bb: float, messages: list[TensorMsg]) -> Metric:
    if size == 1:
        messages.append(TensorMsg.ONE_ELEMENT)
        return _UNSUPPORTED
    n_norm, b_norm = math.sqrt(nn), math.sqrt(bb)
    if n_norm <= FLOAT_EPSILON and b_norm <= FLOAT_EPSILON:
        return Metric.of(1.0)
    if n_norm <= FLOAT_EPSILON:
        messages.append(TensorMsg.COSINE_NPU_ZERO)
        return _NAN
    if b_norm <= FLOAT_EPSILON:
        messages.append(TensorMsg.COSINE_BENCH_ZERO)
        return _NAN
    with np.errstate(all="ignore"):
        cos = float(np.float64(dot) / (np.float64(n_norm) * np.float64(b_norm)))
    if math.isnan(cos):
        messages.append(TensorMsg.COSINE_NAN)
        return _NAN
    value = _format12(cos)
    return Metric.of(round(value, 6) if value > COSINE_SHORT_ROUNDING else value)


def _compare_zero_dim(npu: TensorData, bench: TensorData, chunk_elems: int) -> TensorMetrics:
    """0-d NPU tensor: only MaxAbsErr and MaxRelativeErr, without the NaN/inf masking; the reference subtracts
    in the promoted float dtype (float64 for ints/bools) and broadcasts the scalar over a non-0-d bench."""
    n_dtype, b_dtype = npu.compute_dtype, bench.compute_dtype
    arith = np.result_type(n_dtype, b_dtype) if n_dtype.kind == "f" and b_dtype.kind == "f" else _F64
    re_dtype = _re_dtype(n_dtype, b_dtype)
    n_val = _chunk(npu, np.asarray(npu.array).reshape(1), 0, 1)
    b_arr = np.asarray(bench.array)
    b_arr = b_arr.reshape(1) if b_arr.ndim == 0 else b_arr
    eps = re_dtype.type(FLOAT_EPSILON)
    max_abs = max_rel = 0.0
    with np.errstate(all="ignore"):
        for start in range(0, b_arr.size, chunk_elems):
            b = _chunk(bench, b_arr, start, min(start + chunk_elems, b_arr.size))
            d = np.abs(n_val.astype(arith) - b.astype(arith))
            max_abs = _nan_max(max_abs, float(d.max()))
            n_re, b_re = np.broadcast_to(n_val.astype(re_dtype), b.shape), b.astype(re_dtype)
            zero = b_re == 0
            n_re = np.where(zero, n_re + eps, n_re)
            b_re = np.where(zero, b_re + eps, b_re)
            max_rel = _nan_max(max_rel, float(np.abs((n_re - b_re) / b_re).max()))
    messages = [TensorMsg.ZERO_DIM]
    abs_metric = _max_metric(max_abs, TensorMsg.MAX_ABS_NAN, messages)
    rel_metric = _max_metric(max_rel, TensorMsg.MAX_REL_NAN, messages)
    return TensorMetrics(_UNSUPPORTED, _UNSUPPORTED, abs_metric, rel_metric, _UNSUPPORTED, _UNSUPPORTED,
                         tuple(messages))
