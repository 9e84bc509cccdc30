"""TensorData: one tensor read from a dump, as a numpy array plus its logical dtype.

bfloat16 has no numpy dtype: its array holds the raw 16-bit patterns (uint16) and `dtype_name` is
"bfloat16"; `to_float(chunk)` widens such chunks exactly to float32 (bf16 is the top half of fp32).
Arrays may be memory-mapped; consumers must never write into them. A memory-mapped C-contiguous array also
carries its `FileSpan` (`source`): where its bytes are in the file, so that they can be read with pread into
reused buffers instead of through the mapping (measure/tensor_compare.py, tensor_io.py: no page faults).
"""

from __future__ import annotations

import numpy as np

from msprobe_compare.records import dataclass

BF16 = "bfloat16"


@dataclass(frozen=True)
class FileSpan:
    """Where a C-contiguous array's bytes are: `offset` in the regular file `path`, whose st_dev and st_ino were
    `device` and `inode` when it was read (a reader reopening the path checks them: the same file or none)."""

    path: str
    offset: int
    device: int
    inode: int


@dataclass(frozen=True)
class TensorData:
    array: np.ndarray  # shape as dumped; dtype uint16 when dtype_name == "bfloat16"
    dtype_name: str  # numpy dtype name ("float32", "int64", "bool", ...) or "bfloat16"
    source: FileSpan | None = None  # the file bytes of a memory-mapped C-contiguous `array` (None: not known)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def size(self) -> int:
        return int(self.array.size)

    @property
    def compute_dtype(self) -> np.dtype:
        """dtype the reference computes in: bf16 becomes float32, everything else keeps its own dtype."""
        return np.dtype(np.float32) if self.dtype_name == BF16 else self.array.dtype

    def to_float(self, chunk: np.ndarray) -> np.ndarray:
        """A chunk of `array` in `compute_dtype` (a new array for bf16, the chunk itself otherwise)."""
        if self.dtype_name == BF16:
            return (chunk.astype(np.uint32) << 16).view(np.float32)
        return chunk
