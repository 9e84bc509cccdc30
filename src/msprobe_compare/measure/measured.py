"""What the measure step hands to judge/: the paired rows and every number measured on them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from msprobe_compare.load.mode import Mode
from msprobe_compare.load.rows import RowTable
from msprobe_compare.measure.stats import StatDiffs, stat_diffs
from msprobe_compare.records import dataclass

if TYPE_CHECKING:  # an annotation only: tensor mode imports it (start-up speed)
    from msprobe_compare.measure.tensor_rows import TensorColumns


@dataclass(frozen=True)
class Measured:
    """One compare after pairing and measuring, before any verdict."""

    mode: Mode
    npu: RowTable
    bench: RowTable
    match: np.ndarray  # bench row per NPU row, UNMATCHED (< 0) when none
    diffs: StatDiffs | None = None  # statistics mode: the statistics diffs
    tensors: TensorColumns | None = None  # real-data mode: the six metrics per row
    fuzzy: np.ndarray | None = None  # bool: matched with a different name (fuzzy matching)

    def __len__(self) -> int:
        return len(self.npu)


def measure(mode: Mode, npu: RowTable, bench: RowTable, match: np.ndarray, *, tensors: TensorColumns | None = None,
            fuzzy: np.ndarray | None = None) -> Measured:  # fmt: skip
    """The measure step: statistics diffs in statistics mode; real-data metrics come measured in `tensors`."""
    diffs = stat_diffs(npu, bench, match) if mode is Mode.SUMMARY else None
    if mode is Mode.ALL and tensors is None:
        raise ValueError("real-data mode needs its tensor metrics")
    return Measured(mode, npu, bench, match, diffs=diffs, tensors=tensors, fuzzy=fuzzy)
