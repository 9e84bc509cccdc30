"""Step folders of runs that differ in their code and in their parallel layout (issue #30 item 5): a training
engine at TP=2 against an inference engine at TP=1 or TP=4.

The layout machinery (layouts.py) pairs one side's shards with the other side's calls by name; runs of different
code share no names. So each side's ranks are combined on their own first (pair/layout_rules.py `alone_decisions`: ranks
that agree hold the whole tensor, a row feeding a reduction is a partial sum, shards that differ are concatenated),
then the two combined tables are aligned (pair/align.py) and compared as one pair: the aligned tables, the root
cause on them, the ranks and rule of each row in the table, the alignment file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from msprobe_compare.api import RankOutcome, summarize, user_alignment
from msprobe_compare.judge.judgement import judge
from msprobe_compare.judge.noise import Tolerance
from msprobe_compare.judge.rootcause import analyse_later
from msprobe_compare.errors import CompareError
from msprobe_compare.layouts import LayoutPlan, _group, _parents, _shards, compared_facts, rule_counts
from msprobe_compare.layouts import describe as describe_layouts
from msprobe_compare.load.mode import Mode, detect_mode
from msprobe_compare.log import Console
from msprobe_compare.measure.measured import Measured, measure
from msprobe_compare.model import CompareOutcome
from msprobe_compare.pair import parallel as P
from msprobe_compare.pair.align import decide, describe
from msprobe_compare.pair.aligned import AlignedTables, plan
from msprobe_compare.render import report
from msprobe_compare.render.layout_rules import rank_label, row_rule_text
from msprobe_compare.render.alignment import align_lines
from msprobe_compare.render.files import prepare_output_dir


def different_code(layout_plan: LayoutPlan, align: str) -> bool:
    """Whether the two sides' module trees are of different code (their first ranks'), or aligning is asked for."""
    if align == "off":
        return False
    return align == "on" or decide(layout_plan.npu_dumps[0].table, layout_plan.bench_dumps[0].table).differ


def combine_alone(dumps: list[Any], layout: Any, dp: int) -> P.Combined:
    """One side's ranks of DP replica `dp` combined without the other side."""
    shards = _shards(_group(dumps, layout, dp))
    return P.combine(shards, np.arange(len(shards), dtype=np.int64), P.alone_decisions(shards), is_npu=True)


def _view(npu_c: P.Combined, tables: AlignedTables, md5: bool) -> P.LayoutView:
    """The ranks and the rule of each row of the aligned npu table (a merged row: its first part's)."""
    built = tables.npu
    n = len(built.table)
    ranks, rules = [""] * n, [""] * n
    codes: list[P.Rule | None] = [None] * n  # None: no combined row behind it
    old_of_new = {int(new): old for old, new in enumerate(built.new_of_old.tolist()) if new >= 0}
    for (e, key), new in built.merged.items():
        old = built.keys(e).get(key)
        if old is not None:
            old_of_new[new] = old
    for new, old in old_of_new.items():
        ranks[new] = rank_label(npu_c, old)
        codes[new] = npu_c.rule[old]
        rules[new] = row_rule_text(npu_c, old, md5)
        if npu_c.rule[old] is P.Rule.SPLIT:
            rules[new] += " (the dim is a guess: the other run's code differs; the statistics do not depend on it)"
    return P.LayoutView(ranks, rules, codes, np.zeros(n, dtype=bool))


def compare_replica(cfg: Any, layout_plan: LayoutPlan, dp: int, console: Console, out_dir: Path, label: str,
                    with_table: bool = False) -> RankOutcome:  # fmt: skip
    """DP replica `dp` of runs of different code and layout: each side combined alone, aligned, compared."""
    opts = cfg.options
    bench_dp = dp if layout_plan.bench.dp == layout_plan.npu.dp else 0
    npu_c = combine_alone(layout_plan.npu_dumps, layout_plan.npu, dp)
    bench_c = combine_alone(layout_plan.bench_dumps, layout_plan.bench, bench_dp)
    for side, c in (("npu", npu_c), ("bench", bench_c)):
        if len(c.shards.ranks) == 1:
            continue
        console.info(f"{side} {'+'.join(c.shards.ranks)} combined on their own (the module trees differ): "
                     f"{len(c.rule)} logical rows: {rule_counts(c.rule)}")  # fmt: skip
    npu_tree = _parents(layout_plan.npu_dumps, layout_plan.npu, dp, npu_c.shards, console)
    bench_tree = _parents(layout_plan.bench_dumps, layout_plan.bench, bench_dp, bench_c.shards, console)
    npu_head, bench_head = layout_plan.npu_dumps[0].header, layout_plan.bench_dumps[0].header
    mode = detect_mode(npu_head, bench_head, npu_c.table.has_md5, bench_c.table.has_md5)
    if mode is Mode.ALL:
        console.warning("real-data dumps of different code in different layouts are compared on their statistics "
                        "(a combined or merged tensor has no one file)")  # fmt: skip
        mode = Mode.SUMMARY
    al, tables = plan(npu_c.table, bench_c.table, npu_tree, bench_tree, user=user_alignment(opts),
                      user_path=opts.alignment,
                      backend=opts.consistent_check)  # fmt: skip
    for line in align_lines(al, tables, "the module trees differ, and so do the parallel layouts"):
        console.info(line)
    npu_t, bench_t, match = tables.npu.table, tables.bench.table, tables.match
    view = _view(npu_c, tables, mode is Mode.MD5)
    tolerance = Tolerance.parse(opts.tolerance)
    analysis = analyse_later(Measured(mode, npu_t, bench_t, match), npu_tree, None, tolerance, None)
    measured = measure(mode, npu_t, bench_t, match)
    verdicts = judge(measured, highlight_on=opts.highlight, auto_analyze=opts.auto_analyze, tolerance=tolerance,
                     rootcause_on=True, analysis=analysis)  # fmt: skip
    outcome = CompareOutcome.of(measured, verdicts, show_stack=bool(npu_t.stacks), layout=view,
                                alignment=describe(al))  # fmt: skip
    bench_path = layout_plan.bench_dumps[0].rank.path
    if opts.write:
        written = report.write_all(outcome, prepare_output_dir(out_dir), console, suffix=f"_dp{dp}",
                                   coloured=opts.highlight, formats=opts.formats, bench_path=bench_path,
                                   compared=compared_facts(cfg, layout_plan))  # fmt: skip
    else:  # the Python API's write=False
        written = report.tell(outcome, console, bench_path=bench_path)
    return RankOutcome(label, written, None, summarize(outcome, with_table))


def compare_layouts_aligned(cfg: Any, console: Console, layout_plan: LayoutPlan, out_dir: Path, prefix: str = "",
                            with_table: bool = False) -> list[RankOutcome]:  # fmt: skip
    """layouts.compare_layouts for runs of different code: every DP replica, one result set each (`_dp{d}`)."""
    for line in describe_layouts(layout_plan):
        console.info(line)
    results = []
    for dp in range(layout_plan.npu.dp):
        label = f"{prefix}dp{dp}"
        rank_console = Console(prefix=f"[{label}] ", quiet=cfg.options.quiet)
        try:
            results.append(compare_replica(cfg, layout_plan, dp, rank_console, out_dir, label, with_table))
            if results[-1].written is not None and results[-1].written.xlsx is not None:
                rank_console.banner()
        except CompareError as exc:
            rank_console.error(exc.message)
            results.append(RankOutcome(label, None, exc.message))
    return results
