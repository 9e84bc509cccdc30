"""What the tensor file readers share: a regular file opened safely, read-only arrays, where a mapped array's bytes
are in its file (FileSpan), the bounds on numbers from a file and short texts of untrusted values.

READ_WHOLE_MAX is read by the readers (npy.py, pt.py) at each call, so a test can move it for both.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.tensor_data import FileSpan


INT64_MAX = (1 << 63) - 1  # every size, offset, stride and count from a file is bounded by this before use
MAX_DIMS = 64  # torch's own limit on dimensions


# Files up to this size are read whole (one read(), arrays viewing the bytes); bigger ones are memory-mapped.
# A small tensor then costs one system call instead of an mmap set-up and many small buffered reads.
READ_WHOLE_MAX = 1 << 20


def open_regular(path: Path | str, name: str) -> BinaryIO:
    """Open `path` for reading without following a final symlink; it must be a regular file."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise TensorFileError("missing", name, f"{path} does not exist") from None
    except OSError as exc:
        if os.path.islink(path):
            raise TensorFileError("unsafe", name, f"{path} is a symbolic link") from None
        raise TensorFileError("missing", name, f"cannot open {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TensorFileError("unsafe", name, f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def readonly(array: np.ndarray) -> np.ndarray:
    array = array.view(np.ndarray)
    array.flags.writeable = False
    return array


def empty_array(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return readonly(np.empty(shape, dtype=dtype))


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def bounded(value: Any) -> bool:
    """A non-negative int that fits int64 (anything else from a file is refused before arithmetic or text)."""
    return is_int(value) and 0 <= value <= INT64_MAX


def brief(value: Any, limit: int = 80) -> str:
    """A short text of an untrusted value: ints beyond int64 by their size only (their digits could be too many to
    print), containers and strings cut at `limit` characters."""
    if is_int(value) and not -INT64_MAX <= value <= INT64_MAX:
        return f"<int of {value.bit_length()} bits>"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(brief(v, limit) for v in value[:8]) + (", ..." if len(value) > 8 else "")
        text = f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    elif isinstance(value, (str, bytes, int, float, type(None))):
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def file_span(array: np.ndarray, path: Path | str, fd: int) -> FileSpan | None:
    """Where the bytes of `array` are in the file open as `fd`, when it is a C-contiguous view of a memory map
    a reader made (np.memmap, wrapped at once by readonly: the first memmap on its base chain is the one
    np.memmap made, whose data starts at file offset `.offset`); None otherwise."""
    if array.size == 0 or not array.flags.c_contiguous:
        return None
    base: Any = array
    while isinstance(base, np.ndarray) and type(base) is not np.memmap:
        base = base.base
    if not isinstance(base, np.memmap) or not isinstance(base.offset, int):
        return None
    start = base.offset + (array.ctypes.data - base.ctypes.data)
    if start < base.offset or array.ctypes.data + array.nbytes > base.ctypes.data + base.nbytes:
        return None
    info = os.fstat(fd)
    return FileSpan(str(path), start, info.st_dev, info.st_ino)
