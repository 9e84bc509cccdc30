"""Row levels for CI gating (`--fail-on`): error and warning counts of one compare."""

from __future__ import annotations

import numpy as np

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.judge.verdict import Result
from msprobe_compare.model import CompareOutcome, Mode


def level_counts(o: CompareOutcome) -> tuple[int, int]:
    """(error rows, warning rows). Errors: red rows, md5 `Different`, real-data `Accuracy No`.
    Warnings: yellow rows and summary `Warning` rows that are not errors."""
    n = len(o)
    error = np.zeros(n, dtype=bool)
    warning = np.zeros(n, dtype=bool)
    if o.marks is not None:
        error |= o.marks.colour == Colour.RED
        warning |= o.marks.colour == Colour.YELLOW
    if o.mode is Mode.MD5:
        error |= o.verdict.result == Result.DIFFERENT
    elif o.mode is Mode.SUMMARY:
        warning |= o.verdict.result == Result.WARNING
    elif o.tensors is not None:
        from msprobe_compare.measure.tensor_metrics import Accuracy

        error |= o.tensors.accuracy == Accuracy.NO
    return int(error.sum()), int((warning & ~error).sum())
