"""Row levels of one compare: which rows are errors, warnings, unmatched or excluded.

One definition serves `--fail-on`, the console's count line, the advisor file, the HTML summary and the
Python API, so that every place counts the same rows as the root cause does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from msprobe_compare.judge.accuracy import Accuracy
from msprobe_compare.judge.highlight import Colour, Marks
from msprobe_compare.judge.calls import inplace_artifacts
from msprobe_compare.judge.verdict import BaseVerdict, Result
from msprobe_compare.load.mode import Mode
from msprobe_compare.load.rows import RowTable, empty_entries
from msprobe_compare.measure.measured import Measured
from msprobe_compare.records import dataclass

GATE_LEVELS = ("error", "warning", "unmatched")
MOSTLY_UNMATCHED = 0.5  # above this share of unmatched NPU rows the console warns about bench_path
NAMES_SHOWN = 5  # excluded rows named in messages


@dataclass(frozen=True)
class LevelCounts:
    """Counts of one compare (or the sum over ranks)."""

    rows: int = 0  # NPU rows in the table
    matched: int = 0  # rows with a bench counterpart
    errors: int = 0  # red rows, md5 `Different`, real-data `Accuracy No` (excluded rows not counted)
    warnings: int = 0  # matched yellow rows and summary `Warning` rows that are not errors
    excluded: int = 0  # error/warning rows not counted: in-place inputs recorded after the write
    excluded_names: tuple[str, ...] = ()  # the first few of them
    layout_only: int = 0  # rows of calls a parallel layout adds (all-reduce, ...): no counterpart expected
    no_row_entries: int = 0  # dump entries (npu and bench) that yielded no row (each named in a warning)

    @property
    def unmatched(self) -> int:
        return self.rows - self.matched - self.layout_only

    @property
    def nothing_compared(self) -> bool:
        return self.matched == 0

    @property
    def mostly_unmatched(self) -> bool:
        return self.rows > 0 and self.unmatched > MOSTLY_UNMATCHED * self.rows

    def __add__(self, other: LevelCounts) -> LevelCounts:
        return LevelCounts(self.rows + other.rows, self.matched + other.matched, self.errors + other.errors,
                           self.warnings + other.warnings, self.excluded + other.excluded,
                           (self.excluded_names + other.excluded_names)[:NAMES_SHOWN],
                           self.layout_only + other.layout_only,
                           self.no_row_entries + other.no_row_entries)  # fmt: skip


@dataclass(frozen=True)
class RowLevels:
    """Per-row masks (bool, one per NPU row)."""

    error: np.ndarray
    warning: np.ndarray  # not error
    unmatched: np.ndarray
    excluded: np.ndarray  # would be error or warning, but is an in-place recording artifact
    layout_only: np.ndarray  # rows of calls a parallel layout adds: no counterpart expected, not unmatched

    def counts(self, names: list[str]) -> LevelCounts:
        n = len(self.error)
        shown = tuple(names[i] for i in np.flatnonzero(self.excluded)[:NAMES_SHOWN].tolist())
        layout_only = int(self.layout_only.sum())
        return LevelCounts(n, n - int(self.unmatched.sum()) - layout_only, int(self.error.sum()),
                           int(self.warning.sum()), int(self.excluded.sum()), shown, layout_only)  # fmt: skip


def row_levels(m: Measured, verdict: BaseVerdict, marks: Marks | None, accuracy: np.ndarray | None,
               layout_only: np.ndarray | None = None) -> RowLevels:  # fmt: skip
    """Errors: red rows, md5 `Different`, real-data `Accuracy No`. Warnings: yellow rows and summary `Warning`
    rows that are not errors. Input rows of in-place APIs that the dumper recorded after the write (see
    `judge.calls.inplace_artifacts`) are excluded from both, as the root cause excludes them. `layout_only`:
    rows of calls a parallel layout adds (no counterpart expected)."""
    n = len(m)
    error = np.zeros(n, dtype=bool)
    warning = np.zeros(n, dtype=bool)
    if marks is not None:
        error |= marks.colour == Colour.RED
        warning |= marks.colour == Colour.YELLOW
    if m.mode is Mode.MD5:
        error |= verdict.result == Result.DIFFERENT
    elif m.mode is Mode.SUMMARY:
        warning |= verdict.result == Result.WARNING
    elif accuracy is not None:
        error |= accuracy == Accuracy.NO
    flagged = error | warning
    excluded = inplace_artifacts(m, flagged) if flagged.any() else np.zeros(n, dtype=bool)
    layout_only = np.asarray(layout_only, dtype=bool) if layout_only is not None else np.zeros(n, dtype=bool)
    unmatched = (m.match < 0) & ~layout_only
    error &= ~excluded
    warning &= ~error & ~excluded & (m.match >= 0)  # e.g. the requires_grad mark of a row without counterpart
    return RowLevels(error, warning, unmatched, excluded, layout_only)


def level_counts(levels: RowLevels, npu: RowTable, bench: RowTable) -> LevelCounts:
    """The row levels counted, with the dump entries (both sides) that yielded no row."""
    counts = levels.counts(npu.names)
    no_row = len(empty_entries(npu)) + len(empty_entries(bench))
    return replace(counts, no_row_entries=no_row) if no_row else counts


def gate_hits(levels: frozenset[str], counts: LevelCounts) -> int:
    """Rows that make `--fail-on LEVELS` fail; a compare in which nothing could be compared fails any gate
    (no evidence is not a pass)."""
    hits = counts.errors if levels & {"error", "warning"} else 0
    if "warning" in levels:
        hits += counts.warnings
    if "unmatched" in levels:
        hits += counts.unmatched
    if levels and counts.rows and counts.nothing_compared:
        hits = max(hits, counts.rows)
    return hits
