"""Default matching (spec §3.2) and data mapping (§3.5).

The result is one index array: for NPU row i, `bench[i]` is the matched bench row or -1.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from msprobe_compare.load.rows import RowTable

# dtypes that match each other although their names differ (spec §3.2); float64 is not included
FLOAT_GROUPS = (
    frozenset({"Float16", "Float32", "BFloat16"}),
    frozenset({"torch.float16", "torch.float32", "torch.bfloat16"}),
)


def dtypes_compatible(npu: str, bench: str) -> bool:
    if npu == bench:
        return True
    return any(npu in group and bench in group for group in FLOAT_GROUPS)


def match_exact(npu: RowTable, bench: RowTable, keys: list[str] | None = None) -> np.ndarray:
    """Join on (compare key, shape), keep NPU order, then apply the dtype gate."""
    keys = npu.names if keys is None else keys
    index: dict[tuple[str, str], int] = {}
    for j, (name, shape) in enumerate(zip(bench.names, bench.shape)):
        index.setdefault((name, shape), j)
    out = np.full(len(npu), -1, dtype=np.int64)
    for i, (key, shape, dtype) in enumerate(zip(keys, npu.shape, npu.dtype)):
        j = index.get((key, shape), -1)
        if j >= 0 and dtypes_compatible(dtype, bench.dtype[j]):
            out[i] = j
    return out


def match_data_mapping(npu: RowTable, bench: RowTable, mapping: Mapping[str, str]) -> np.ndarray:
    """Left join on the mapped name only: no shape condition and no dtype gate (spec §3.5)."""
    index: dict[str, int] = {}
    for j, name in enumerate(bench.names):
        index.setdefault(name, j)
    return np.fromiter(
        (index.get(mapping.get(name, name), -1) for name in npu.names), dtype=np.int64, count=len(npu)
    )
