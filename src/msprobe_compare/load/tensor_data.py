"""TensorData: one tensor read from a dump, as a numpy array plus its logical dtype.

bfloat16 has no numpy dtype: its array holds the raw 16-bit patterns (uint16) and `dtype_name` is
"bfloat16"; `to_float(chunk)` widens such chunks exactly to float32 (bf16 is the top half of fp32).
Arrays may be memory-mapped; consumers must never write into them.
"""

from __future__ import annotations

import numpy as np

from msprobe_compare.records import dataclass

BF16 = "bfloat16"


@dataclass(frozen=True)
class TensorData:
    array: np.ndarray  # shape as dumped; dtype uint16 when dtype_name == "bfloat16"
    dtype_name: str  # numpy dtype name ("float32", "int64", "bool", ...) or "bfloat16"

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
