"""The result of one compare, handed from the pipeline to the renderers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from msprobe_compare.judge.advisor import AdvisorResult
from msprobe_compare.judge.highlight import Marks
from msprobe_compare.judge.verdict import BaseVerdict
from msprobe_compare.load.rows import RowTable
from msprobe_compare.measure.stats import StatDiffs


class Mode(Enum):
    """Dump mode derived from the two dumps (spec §2.7)."""

    SUMMARY = "summary"  # task statistics
    MD5 = "md5"  # task statistics with md5 fields
    ALL = "all"  # task tensor (real data)


@dataclass(frozen=True)
class CompareOutcome:
    mode: Mode
    npu: RowTable
    bench: RowTable
    match: np.ndarray  # bench row per NPU row, -1 when unmatched
    verdict: BaseVerdict
    show_stack: bool
    diffs: StatDiffs | None = None  # summary mode
    tensors: Any = None  # real-data mode: measure.tensor_rows.TensorColumns
    marks: Marks | None = None  # colour marks, when highlighting is on
    advisor: AdvisorResult | None = None
    fuzzy: np.ndarray | None = None  # bool: matched with a different name (fuzzy matching)
    rootcause: Any = None  # judge.rootcause.RootCause
    layout: Any = None  # layouts.LayoutView: runs split differently across cards (ranks and rule per row)
    derived_mapping: dict[str, str] | None = None  # -lm: the row mapping, published with the result files

    def __len__(self) -> int:
        return len(self.npu)
