"""judge/'s one entry point: the measured rows of one compare in, every verdict out, as codes.

`judge` decides, in this order: the per-row verdict (md5, statistics or real data), `Accuracy Reached or Not`,
the colour marks (-hl), the reference's advisor (-da), the root cause, the rows a parallel layout adds (listed,
not flagged), and last the row levels `--fail-on`, the console counts and every report count read.
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Callable

import numpy as np

from msprobe_compare.judge.accuracy import Accuracy, accuracy_column
from msprobe_compare.judge.advisor import AdvisorResult, advise
from msprobe_compare.judge.gate import LevelCounts, RowLevels, level_counts, row_levels
from msprobe_compare.judge.highlight import HighlightInputs, Marks, highlight, stat_max
from msprobe_compare.judge.noise import Tolerance
from msprobe_compare.pair.calls import TreeDiff
from msprobe_compare.judge.rootcause import RootCause, analyse
from msprobe_compare.judge.verdict import BaseVerdict, Msg, Result, md5_verdict, real_data_verdict, summary_verdict
from msprobe_compare.load.mode import Mode
from msprobe_compare.load.rows import NONE_DTYPE
from msprobe_compare.measure.measured import Measured
from msprobe_compare.measure.stats import Cell
from msprobe_compare.measure.tensor_metrics import TensorMetric
from msprobe_compare.records import dataclass
from msprobe_compare.runtime import Later


@dataclass(frozen=True)
class Judgement:
    """Every verdict of one compare (codes and masks, one per NPU row where per row)."""

    verdict: BaseVerdict
    accuracy: np.ndarray | None  # int8 Accuracy per row (real data)
    marks: Marks | None  # colour marks, when highlighting is on
    advisor: AdvisorResult | None  # the reference's advisor, with -da
    rootcause: RootCause | Later[RootCause]  # Later: being computed in a forked child (rootcause.analyse_later)
    levels: RowLevels  # error / warning / unmatched / excluded rows
    counts: LevelCounts  # the same, counted (what --fail-on and the console read)


def judge(
    m: Measured,
    *,
    highlight_on: bool,
    auto_analyze: bool,
    parents: dict[str, str | None] | None = None,
    bench_parents: dict[str, str | None] | None = None,
    tolerance: Tolerance | None = None,
    layout_only: np.ndarray | None = None,
    qualify: Callable[[RootCause], RootCause] | None = None,
    rootcause_on: bool = True,
    trees: TreeDiff | None = None,
    analysis: Later[RootCause] | None = None,
) -> Judgement:
    """Judge one compare. `layout_only`: rows of calls a parallel layout adds (listed, not flagged; md5 rows left
    without counterpart become N/A); `qualify`: a last step on the root cause (origins qualified by rank);
    `rootcause_on` False (`api.build_outcome(..., root_cause=False)`: bench/rootcause_ab.py measures the analysis's
    cost so): no root-cause analysis;
    `trees`: the two module trees' `pair.calls.tree_diff`, made while reading (else made here when needed);
    `analysis`: the root cause, started already (`rootcause.analyse_later`)."""
    npu, bench, match = m.npu, m.bench, m.match
    accuracy = unmatched = marks = advice = None
    if m.mode is Mode.MD5:
        verdict = md5_verdict(npu, bench, match)
        failing = verdict.result == Result.DIFFERENT
    elif m.mode is Mode.SUMMARY:
        diffs = m.diffs
        assert diffs is not None
        verdict = summary_verdict(npu, bench, match, diffs)
        failing = verdict.result == Result.WARNING
        if highlight_on:
            valued = (diffs.diff_kind == Cell.VALUE) | (diffs.diff_kind == Cell.INT)
            marks = highlight(
                npu,
                HighlightInputs(
                    max_diff=np.where(valued[:, 0], diffs.diff[:, 0], np.nan),
                    npu_max=stat_max(npu),
                    bench_max=stat_max(bench, match),
                    consistent=verdict.requires_grad_consistent,
                    max_rel=np.where(diffs.rel_kind[:, 0] == Cell.VALUE, diffs.rel[:, 0] / 100, np.nan),
                ),
            )
    else:
        tensors = m.tensors
        assert tensors is not None
        verdict = real_data_verdict(npu, bench, match)
        accuracy = accuracy_column(tensors.metrics)
        failing = accuracy == Accuracy.NO
        unmatched = accuracy == Accuracy.UNMATCHED
        if highlight_on:
            marks = highlight(
                npu,
                HighlightInputs(
                    max_diff=tensors.column(TensorMetric.MAX_ABS_ERR),
                    npu_max=stat_max(npu),
                    bench_max=stat_max(bench, match),
                    consistent=verdict.requires_grad_consistent,
                    one_k=tensors.column(TensorMetric.ONE_THOUSANDTH),
                    cosine=tensors.column(TensorMetric.COSINE),
                ),
            )
    if auto_analyze:
        advice = advise(npu.names, failing, unmatched)
    rootcause: RootCause | Later[RootCause]
    if analysis is not None:
        rootcause = analysis
    else:
        rootcause = analyse(m, parents, bench_parents, tolerance, trees) if rootcause_on else RootCause([], [])
    if layout_only is not None:
        verdict, marks = _unflag(verdict, marks, layout_only)
        if m.mode is Mode.MD5:
            verdict = _md5_not_compared(m, verdict)
    if qualify is not None:
        rootcause = qualify(rootcause.get() if isinstance(rootcause, Later) else rootcause)
    levels = row_levels(m, verdict, marks, accuracy, layout_only)
    return Judgement(verdict, accuracy, marks, advice, rootcause, levels, level_counts(levels, npu, bench))


def _md5_not_compared(m: Measured, v: BaseVerdict) -> BaseVerdict:
    """md5 under a parallel layout: rows left without a counterpart (split and partial-sum rows, whose md5 cannot be
    combined; rank-local rows) are `N/A`, not the `pass` the reference gives a null leaf without counterpart."""
    rows = (m.match < 0) & ~m.npu.dtype_mask(NONE_DTYPE.__eq__)
    return replace(v, result=np.where(rows, Result.NA, v.result).astype(v.result.dtype))


def _unflag(v: BaseVerdict, marks: Marks | None, rows: np.ndarray) -> tuple[BaseVerdict, Marks | None]:
    """Rows of calls the layout adds are listed, not flagged: no colour, no requires_grad note."""
    if not rows.any():
        return v, marks
    messages = np.where(rows, v.messages & ~np.int8(Msg.REQUIRES_GRAD), v.messages).astype(np.int8)
    v = replace(v, requires_grad_consistent=v.requires_grad_consistent | rows, messages=messages)
    if marks is not None:
        marks = replace(marks, reasons=np.where(rows, 0, marks.reasons).astype(marks.reasons.dtype),
                        colour=np.where(rows, 0, marks.colour).astype(marks.colour.dtype))  # fmt: skip
    return v, marks
