"""Reading a tensor pair for the metrics' one pass (measure/tensor_compare.py): C-order chunks of an array (bfloat16
bits widened into a reused float32 buffer), chunk buffers kept per thread, the OS asked to read a memory-mapped
tensor ahead of the chunk loop, and the two files of a mapped pair opened for the compiled kernel to read with pread
into two reused buffers (no page faults). Input arrays (possibly read-only memmaps) are never written.
"""

from __future__ import annotations

import contextlib
import functools
import math
import mmap
import os
import stat
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from msprobe_compare.load.tensor_data import BF16, FileSpan, TensorData

__all__ = [
    "DEFAULT_CHUNK_ELEMS",
    "FILE_BUFFER_BYTES",
    "WORKSPACE",
    "ChunkReader",
    "ReadAhead",
    "chunk_of",
    "file_pair",
    "flat_range",
    "uncached",
]

DEFAULT_CHUNK_ELEMS = 1 << 17  # 128 Ki elements: float64 buffers stay cache-sized (measured faster than 1 Mi)
# The bytes of each side read from its file per call of the file kernel (multiples of its 2 blocks of 4096
# elements); measured on 2 x 180 MB float32 and 2 x 262 MB bfloat16 pairs: 64 KiB to 512 KiB cost the same CPU
# time, 28% less than through the memory map (page faults, page-table set-up and tear-down, TLB misses).
FILE_BUFFER_BYTES = 256 << 10
_U8 = np.dtype(np.uint8)


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


WORKSPACE = _Workspace()


class ChunkReader:
    """One tensor read chunk by chunk; with `widen`, bfloat16 bits are widened into a reused float32 buffer (named
    `name` in the workspace)."""

    def __init__(self, t: TensorData, arr: np.ndarray, chunk: int, name: str, widen: bool = True) -> None:
        self.arr = arr
        self.flat = arr.reshape(-1) if arr.flags.c_contiguous else None  # a view: no copy
        widened = widen and t.dtype_name == BF16
        self.bits = WORKSPACE.get(name, chunk, np.dtype(np.uint32)) if widened else None
        self.read_ahead = ReadAhead(self.flat)

    def chunk(self, start: int, stop: int) -> np.ndarray:
        self.read_ahead.before(start)
        raw = self.flat[start:stop] if self.flat is not None else flat_range(self.arr, start, stop)
        if self.bits is None:
            return raw
        bits = self.bits[: stop - start]
        np.copyto(bits, raw, casting="unsafe")  # measured faster than one left_shift casting on the fly
        np.left_shift(bits, 16, out=bits)  # bf16 is the upper half of a float32
        return bits.view(np.float32)


def flat_range(a: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Elements start..stop-1 of `a` in C order as a 1-D array; copies at most stop-start elements."""
    if a.flags.c_contiguous:
        return a.reshape(-1)[start:stop]
    if a.ndim == 1:
        return a[start:stop]
    inner = math.prod(a.shape[1:])
    i0, r0 = divmod(start, inner)
    i1, r1 = divmod(stop, inner)
    if i0 == i1:
        return flat_range(a[i0], r0, r1)
    parts = []
    if r0:
        parts.append(flat_range(a[i0], r0, inner))
        i0 += 1
    if i1 > i0:
        parts.append(a[i0:i1].reshape(-1))
    if r1:
        parts.append(flat_range(a[i1], 0, r1))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def chunk_of(t: TensorData, arr: np.ndarray, start: int, stop: int) -> np.ndarray:
    """A chunk in the tensor's compute dtype (bfloat16 bits widened to float32)."""
    raw = flat_range(arr, start, stop)
    return t.to_float(raw) if t.dtype_name == BF16 else raw


@contextlib.contextmanager
def file_pair(n_span: FileSpan, b_span: FileSpan) -> Iterator[tuple[int, int, np.ndarray, np.ndarray] | None]:
    """The two files' descriptors and two reused buffers of FILE_BUFFER_BYTES for the kernel's pread loop; None
    when a file cannot be opened as the same regular file the tensor was read from. Closes what it opened."""
    fds: list[int] = []
    try:
        for span in (n_span, b_span):
            fd = _open_span(span)
            if fd is None:
                yield None
                return
            fds.append(fd)
        n_buf = WORKSPACE.get("file npu", FILE_BUFFER_BYTES, _U8)
        b_buf = WORKSPACE.get("file bench", FILE_BUFFER_BYTES, _U8)
        yield fds[0], fds[1], n_buf, b_buf
    finally:
        for fd in fds:
            os.close(fd)


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


def uncached(arr: np.ndarray) -> bool:
    """Whether some of 16 pages spread over a memory-mapped array (of more than one read-ahead window) are not in
    the page cache (mincore on its untouched mapping: no page is read); False when that cannot be known."""
    probe = ReadAhead(arr.reshape(-1) if arr.flags.c_contiguous else None)
    if probe.mm is None:
        return False
    last = probe.end - 1 - probe.begin
    for k in range(16):
        at = probe.begin + last * k // 15
        if not page_cached(probe.address + at - at % mmap.PAGESIZE, probe.vector):
            return True
    return False


class ReadAhead:
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
        if flat is None or flat.nbytes <= self.WINDOW or mincore() is None:
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
                if not page_cached(self.address + last_page, self.vector):
                    mm.madvise(mmap.MADV_WILLNEED, self.advised, length)
                self.advised += length
        except (OSError, ValueError):  # a hint only: never fail the comparison over it
            self.mm = None


@functools.lru_cache(maxsize=1)
def mincore() -> Any:
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


def page_cached(address: int, vector: bytearray) -> bool:
    """Whether the page at `address` (page-aligned, in one of our mappings) is in the page cache."""
    function, ctypes = mincore()
    buffer = (ctypes.c_char * 1).from_buffer(vector)
    return function(address, mmap.PAGESIZE, buffer) == 0 and vector[0] & 1 == 1
