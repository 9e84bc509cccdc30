"""The result of one compare, handed from the pipeline to the renderers: what was measured and how it was judged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from msprobe_compare.judge.advisor import AdvisorResult
from msprobe_compare.judge.gate import LevelCounts, RowLevels
from msprobe_compare.judge.highlight import Marks
from msprobe_compare.judge.judgement import Judgement
from msprobe_compare.judge.rootcause import RootCause
from msprobe_compare.judge.verdict import BaseVerdict
from msprobe_compare.load.mode import Mode
from msprobe_compare.load.rows import RowTable
from msprobe_compare.measure.measured import Measured
from msprobe_compare.measure.stats import StatDiffs
from msprobe_compare.records import dataclass
from msprobe_compare.runtime import Later

if TYPE_CHECKING:  # annotations only: tensor mode and parallel layouts import them (start-up speed)
    from msprobe_compare.measure.tensor_rows import TensorColumns
    from msprobe_compare.pair.parallel import LayoutView

__all__ = ["CompareOutcome", "Mode"]


@dataclass(frozen=True)
class CompareOutcome:
    """Built once, by `CompareOutcome.of`, from the measured rows and their judgement."""

    mode: Mode
    npu: RowTable
    bench: RowTable
    match: np.ndarray  # bench row per NPU row, < 0 when unmatched
    verdict: BaseVerdict
    show_stack: bool
    analysis: RootCause | Later[RootCause]  # read it as `rootcause`
    levels: RowLevels
    counts: LevelCounts  # the row levels counted: --fail-on, the console, the reports
    diffs: StatDiffs | None = None  # summary mode
    tensors: TensorColumns | None = None  # real-data mode
    accuracy: np.ndarray | None = None  # real-data mode: int8 judge.accuracy.Accuracy per row
    marks: Marks | None = None  # colour marks, when highlighting is on
    advisor: AdvisorResult | None = None
    fuzzy: np.ndarray | None = None  # bool: matched with a different name (fuzzy matching)
    layout: LayoutView | None = None  # runs split differently across cards: ranks and rule per row
    derived_mapping: dict[str, str] | None = None  # -lm: the row mapping, published with the result files
    alignment: dict[str, Any] | None = None  # runs of different code: the module pairs (pair.align.describe)

    @classmethod
    def of(cls, m: Measured, j: Judgement, *, show_stack: bool, layout: LayoutView | None = None,
           derived_mapping: dict[str, str] | None = None, alignment: dict[str, Any] | None = None
           ) -> CompareOutcome:  # fmt: skip
        return cls(m.mode, m.npu, m.bench, m.match, j.verdict, show_stack, j.rootcause, j.levels, j.counts,
                   diffs=m.diffs, tensors=m.tensors, accuracy=j.accuracy, marks=j.marks, advisor=j.advisor,
                   fuzzy=m.fuzzy, layout=layout, derived_mapping=derived_mapping, alignment=alignment)  # fmt: skip

    @property
    def rootcause(self) -> RootCause:
        """The root-cause analysis; waits for it when a forked child is still computing it."""
        a = self.analysis
        return a.get() if isinstance(a, Later) else a

    def __len__(self) -> int:
        return len(self.npu)
