"""Compare step folders whose runs were split differently across cards (tensor, pipeline, data parallel).

The ranks of each side are combined into logical calls (pair/parallel.py): one combined NPU RowTable and one
combined bench RowTable per data-parallel replica, which then go through the usual pipeline (match -> judge ->
render). The table gains two columns: the NPU ranks combined into each row and the layout rule that combined it. The
root cause runs on the combined view; an origin is qualified by rank (`rank1:Functional.linear.10.forward`) when the
ranks' own statistics show that only one rank of the group diverges.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_compare.api import RankOutcome, check_frameworks, measure_tensors, module_tree, summarize
from msprobe_compare.errors import CompareError, InputError
from msprobe_compare.judge.judgement import judge
from msprobe_compare.judge.rootcause import OriginKind, RankAttribution, RootCause
from msprobe_compare.load.dumpjson import read_stack_json
from msprobe_compare.load.layout import RankDir, find_ranks
from msprobe_compare.load.names import is_sum_reduction
from msprobe_compare.load.mode import Mode, check_tasks, detect_mode
from msprobe_compare.load.parallel_layout import (
    ParallelLayout,
    check_layout,
    detect_layouts,
    has_parallel_classes,
    parse_layout,
    plain_class_name,
)
from msprobe_compare.load.rows import NO_DATA_FILE, RowTable, State, StatKind, flatten, names_a_file
from msprobe_compare.measure.parallel_tensors import stage_tensors
from msprobe_compare.load.stream import DumpHeader, open_dump
from msprobe_compare.log import Console
from msprobe_compare.measure.measured import Measured, measure
from msprobe_compare.model import CompareOutcome
from msprobe_compare.pair import parallel as P
from msprobe_compare.pair.align import decide
from msprobe_compare.pair.exact import apply_dtype_gate
from msprobe_compare.pair.layout_rules import Rule
from msprobe_compare.pair.parallel import LayoutView
from msprobe_compare.pair.stages import merge_stages
from msprobe_compare.render import report
from msprobe_compare.render.layout_rules import rank_label, row_rule_text
from msprobe_compare.render.layout_rules import rule_counts as _rule_counts
from msprobe_compare.render.files import prepare_output_dir
from msprobe_compare.records import dataclass


@dataclass
class RankDump:
    rank: RankDir
    header: DumpHeader
    table: RowTable


def _order(rank: RankDir) -> int:
    return -1 if rank.number is None else rank.number


def read_rank(rank: RankDir) -> RankDump:
    path = rank.path / "dump.json"
    if not path.is_file():
        raise InputError("the rank folder has no dump.json", rank.path)
    header, entries = open_dump(path)
    stack = rank.path / "stack.json"
    stacks = read_stack_json(stack) if stack.is_file() and not stack.is_symlink() else {}
    return RankDump(rank, header, flatten(path, entries, stacks))


def _stages(dumps: list[RankDump]) -> int:
    """Pipeline stages seen: the number of distinct lists of module calls (TP and DP ranks of a stage run the same
    modules; stages run different ones)."""
    return len({tuple(n.text for n in d.table.entry_names if n.module_named) for d in dumps}) or 1


def _replicas(dumps: list[RankDump], stages: int) -> int:
    """Data-parallel replicas seen when the code differs (no shape ratio to go by): ranks whose module parameters
    are the same, name for name and statistic for statistic, hold the same weights, so they are replicas of one
    another (tensor-parallel ranks hold different shards; stages, different modules). 1 when that does not divide
    the ranks evenly, or when no rank has parameters."""
    prints = []
    for d in dumps:
        t = d.table
        rows = np.flatnonzero(t.state == State.PARAMETERS)
        if not len(rows):
            return 1
        prints.append((tuple(t.names[r] for r in rows.tolist()), t.stats[rows].tobytes()))
    kinds = len(set(prints))
    dp = len(dumps) // kinds
    return dp if dp > 1 and kinds * dp == len(dumps) and kinds % stages == 0 else 1


def _shapes(table: RowTable) -> dict[str, str]:
    return {plain_class_name(n): s for n, s in zip(table.names, table.shape)}


@dataclass(frozen=True)
class LayoutPlan:
    npu: ParallelLayout
    bench: ParallelLayout
    npu_dumps: list[RankDump]
    bench_dumps: list[RankDump]


def plan_layouts(npu_step: Path, bench_step: Path, npu_given: Any, bench_given: Any) -> LayoutPlan | None:
    """The two layouts (given or detected) and the ranks' dumps, or None when the ranks are to be paired by number
    (no layout given and the dumps show no difference, or both layouts equal)."""
    npu_ranks = sorted(find_ranks(npu_step).values(), key=_order)
    bench_ranks = sorted(find_ranks(bench_step).values(), key=_order)
    if npu_given is None and bench_given is None and len(npu_ranks) == len(bench_ranks):
        return None
    npu_layout = parse_layout(npu_given, "npu layout") if npu_given is not None else None
    bench_layout = parse_layout(bench_given, "bench layout") if bench_given is not None else None
    if npu_layout is not None and bench_layout is not None and _same(npu_layout, bench_layout):
        return None
    try:
        npu_dumps = [read_rank(r) for r in npu_ranks]
        bench_dumps = [read_rank(r) for r in bench_ranks]
    except CompareError:
        if npu_given is None and bench_given is None:
            return None  # not readable: the usual rank-by-rank compare reports it per rank
        raise
    if npu_layout is None or bench_layout is None:
        # runs of different code share names only by chance (Functional.linear.3 of other calls): no shape ratio
        same_code = not decide(npu_dumps[0].table, bench_dumps[0].table).differ
        found = detect_layouts(len(npu_dumps), len(bench_dumps), _shapes(npu_dumps[0].table) if same_code else {},
                               _shapes(bench_dumps[0].table) if same_code else {}, _stages(npu_dumps),
                               _stages(bench_dumps), has_parallel_classes(npu_dumps[0].table.entries),
                               has_parallel_classes(bench_dumps[0].table.entries))  # fmt: skip
        if found is not None and not same_code:
            found = (_with_replicas(found[0], npu_dumps), _with_replicas(found[1], bench_dumps))
        if found is None:
            if npu_layout is None and bench_layout is None:
                return None
            given = npu_layout or bench_layout
            assert given is not None
            other_n = len(bench_dumps) if npu_layout is not None else len(npu_dumps)
            other = ParallelLayout(dp=other_n, source="assumed (data parallel only): nothing in the dumps says more")
            found = (given, other) if npu_layout is not None else (other, given)
        npu_layout = npu_layout or found[0]
        bench_layout = bench_layout or found[1]
    check_layout(npu_layout, len(npu_dumps), "npu")
    check_layout(bench_layout, len(bench_dumps), "bench")
    if _same(npu_layout, bench_layout) and npu_given is None and bench_given is None:
        return None
    if bench_layout.dp not in (1, npu_layout.dp):
        raise InputError(f"the bench layout has dp={bench_layout.dp} but the npu layout dp={npu_layout.dp}; a DP "
                         "replica is compared with the bench replica of the same index or with a single bench replica",
                         bench_step)  # fmt: skip
    return LayoutPlan(npu_layout, bench_layout, npu_dumps, bench_dumps)


def _with_replicas(layout: ParallelLayout, dumps: list[RankDump]) -> ParallelLayout:
    """A detected layout of runs of different code with its DP replicas told from its TP ranks (`_replicas`): the
    rank counts alone read 2 TP ranks x 2 replicas as 4 TP ranks."""
    dp = _replicas(dumps, layout.pp) if layout.dp == 1 and layout.tp > 1 else 1
    if dp == 1 or layout.tp % dp:
        return layout
    why = f"; {dp} data-parallel replicas: ranks whose parameters are the same"
    return replace(layout, tp=layout.tp // dp, dp=dp, source=layout.source + why)


def _same(a: ParallelLayout, b: ParallelLayout) -> bool:
    return (a.tp, a.pp, a.dp, a.order) == (b.tp, b.pp, b.dp, b.order)


# -- one data-parallel replica ------------------------------------------------------------------------------------


def _group(dumps: list[RankDump], layout: ParallelLayout, dp: int) -> list[list[RankDump]]:
    """The dumps of one DP replica: per pipeline stage, in TP order."""
    return [[dumps[pos] for pos in stage] for stage in layout.groups()[dp]]


def _shards(stages: list[list[RankDump]]) -> P.Shards:
    if len(stages) > 1:
        out = merge_stages([P.align([d.table for d in st], [d.rank.name for d in st]) for st in stages])
    else:
        out = P.align([d.table for d in stages[0]], [d.rank.name for d in stages[0]])
    out.dirs = [d.rank.path for st in stages for d in st]
    return out


def combine_replica(plan: LayoutPlan, dp: int, mode_of: Any) -> tuple[P.Combined, P.Combined, np.ndarray, Mode]:
    """(npu, bench) combined sides of DP replica `dp`, the match array and the dump mode."""
    npu_sh = _shards(_group(plan.npu_dumps, plan.npu, dp))
    bench_dp = dp if plan.bench.dp == plan.npu.dp else 0
    bench_sh = _shards(_group(plan.bench_dumps, plan.bench, bench_dp))
    quiet = Console(quiet=True)
    npu_keys = P.module_local_keys(npu_sh.entries, _parents(plan.npu_dumps, plan.npu, dp, npu_sh, quiet))
    bench_keys = P.module_local_keys(
        bench_sh.entries, _parents(plan.bench_dumps, plan.bench, bench_dp, bench_sh, quiet)
    )
    match, decisions = P.pair_logical(npu_sh, bench_sh, npu_keys, bench_keys)
    bench_dec: list[P.Decision | None] = [None] * len(bench_sh)
    for i, j in enumerate(match.tolist()):
        if j >= 0 and bench_dec[j] is None:
            bench_dec[j] = decisions[i]
    bench_c = P.combine(bench_sh, match, bench_dec, is_npu=False)
    bt = bench_c.table

    def bench_stats(i: int) -> np.ndarray | None:
        j = int(match[i])
        if j < 0 or not np.all(bt.stat_kind[j] == StatKind.NUMBER):
            return None
        return bt.stats[j]

    def bench_differs(i: int) -> bool:  # the bench's ranks differ too: a rank-dependent row
        j = int(match[i])
        return j >= 0 and (bench_c.disagree[j] is not None or bench_c.rule[j] is Rule.LOCAL)

    npu_c = P.combine(npu_sh, match, decisions, is_npu=True, other_rows=bench_stats, other_differs=bench_differs)
    P.scale_size_args(npu_c, bench_c, match, plan.npu.tp, plan.bench.tp)
    P.unmatch_other_signatures(npu_c, bench_c, match)
    mode = mode_of(npu_c.table, bt)
    m = match.copy()
    for i, dec in enumerate(decisions):
        if dec is None or dec.shape is None or npu_c.rule[i] in (Rule.LOCAL, Rule.ARGS):
            m[i] = -1
        elif mode is Mode.MD5 and (npu_c.rule[i] in (Rule.SPLIT, Rule.PARTIAL) or bench_c.rule[int(m[i])] in
                                   (Rule.SPLIT, Rule.PARTIAL)):  # fmt: skip
            m[i] = -1
    cross = plan.npu_dumps[0].header.framework == "mindspore" and plan.bench_dumps[0].header.framework == "pytorch"
    m = apply_dtype_gate(npu_c.table, bt, m, cross)
    return npu_c, bench_c, m, mode


def layout_view(npu_c: P.Combined, bench_c: P.Combined, match: np.ndarray, mode: Mode) -> LayoutView:
    md5 = mode is Mode.MD5
    rules = []
    for i in range(len(npu_c.rule)):
        text = row_rule_text(npu_c, i, md5)
        j = int(match[i])
        if j >= 0 and bench_c.rule[j] not in (Rule.REPLICATED, Rule.UNPAIRED, Rule.SINGLE):
            text += f"; bench: {row_rule_text(bench_c, j, md5)}"
        rules.append(text)
    npu_only = np.array([c.npu_only for c in npu_c.rule], dtype=bool)
    ranks = [rank_label(npu_c, i) for i in range(len(npu_c.rule))]
    return LayoutView(ranks, rules, list(npu_c.rule), npu_only, npu_c)


# -- rank attribution of origins ----------------------------------------------------------------------------------


def _suspects(c: P.Combined, bench: RowTable, match: np.ndarray, rows: list[int]) -> tuple[set[int], set[int]]:
    """(ranks whose own rows cannot be right, ranks whose rows meet the bench's) over the given logical rows."""
    sh = c.shards
    bad: set[int] = set()
    met: set[int] = set()
    for i in rows:
        j = int(match[i])
        if j < 0 or not np.all(bench.stat_kind[j] == StatKind.NUMBER):
            continue
        b = bench.stats[j]
        scale = max(abs(b[0]), abs(b[1]), 1e-30)
        tol = P.STAT_TOLERANCE * scale
        code = c.rule[i]
        for r in range(len(sh.tables)):
            k = int(sh.rows[i, r])
            if k < 0:
                continue
            t = sh.tables[r]
            if not np.all(t.stat_kind[k] == StatKind.NUMBER):
                continue
            s = t.stats[k]
            if code is Rule.SPLIT:
                if s[0] > b[0] + tol or s[1] < b[1] - tol or s[3] > b[3] * (1 + P.STAT_TOLERANCE) + tol:
                    bad.add(r)
                elif abs(s[0] - b[0]) <= tol or abs(s[1] - b[1]) <= tol:
                    met.add(r)
            elif code is Rule.REPLICATED and c.disagree[i] is not None:
                with np.errstate(all="ignore"):
                    rel = np.abs(s - b) / np.maximum(np.abs(b), np.abs(b[3]) * 1e-3 + 1e-30)
                (bad if np.nanmax(rel) > P.STAT_TOLERANCE else met).add(r)
    return bad, met


def attribute_origins(rc: RootCause, m: Measured, view: LayoutView) -> RootCause:
    """The root cause with origins qualified by rank where only one rank of the group diverges."""
    c = view.combined
    if not rc.origins or c is None or len(c.shards.tables) < 2:
        return rc
    npu = m.npu
    position = {name: e for e, name in enumerate(npu.entries)}
    ei = npu.entry_index
    origins = []
    for o in rc.origins:
        e = position.get(o.entry)
        if e is None:
            origins.append(o)
            continue
        inputs = o.kind is OriginKind.BOUNDARY
        want = (State.INPUT, State.PARAMETERS) if inputs else (State.OUTPUT, State.PARAMETERS_GRAD)
        rows = [int(i) for i in np.flatnonzero(ei == e) if int(npu.state[i]) in want]
        all_ranks = {r for i in rows for r in range(len(c.shards.tables)) if c.shards.rows[i, r] >= 0}
        if len(all_ranks) == 1:  # one rank holds the call (a pipeline stage without tensor parallelism)
            r = next(iter(all_ranks))
            local = {v: k for k, v in c.shards.renames.get(r, {}).items()}.get(o.entry, o.entry)
            at = RankAttribution(c.shards.ranks[r], True, local_name=local if local != o.entry else None)
            origins.append(replace(o, on_rank=at))
            continue
        bad, met = _suspects(c, m.bench, m.match, rows)
        rank = None
        if len(bad) == 1:
            rank = next(iter(bad))
        elif not bad and met and len(all_ranks - met) == 1:
            rank = next(iter(all_ranks - met))
        if rank is None:
            origins.append(o)
            continue
        label = c.shards.ranks[rank]
        later = next((name for name in npu.entries[e + 1 :] if is_sum_reduction(name)), None)
        others = tuple(c.shards.ranks[r] for r in sorted(all_ranks - {rank}))
        seen_at = later if later and o.kind is OriginKind.COMPUTATION else None
        origins.append(replace(o, on_rank=RankAttribution(label, False, others=others,
                                                                            seen_at=seen_at)))  # fmt: skip
    return replace(rc, origins=origins)


def _parents(dumps: list[RankDump], layout: ParallelLayout, dp: int, shards: P.Shards,
             console: Console) -> dict[str, str | None] | None:  # fmt: skip
    """The module tree (construct.json) of the first rank of each pipeline stage, in global names."""
    out: dict[str, str | None] = {}
    found = False
    stages = _group(dumps, layout, dp)
    for k, stage in enumerate(stages):
        tree = module_tree(stage[0].rank.path / "construct.json", console)
        if tree is None:
            continue
        found = True
        rename = shards.renames.get(k * len(stage), {})
        for child, parent in tree.items():
            out[rename.get(child, child)] = rename.get(parent, parent) if parent is not None else None
    return out if found else None


def _measure(cfg: Any, npu_c: P.Combined, bench_c: P.Combined, match: np.ndarray, out_dir: Path,
             console: Console) -> Any:  # fmt: skip
    """Real-data metrics of the combined rows: the combined tensors are written into a hidden folder of the output
    folder (removed afterwards), then measured as usual."""
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".combined_tensors_", dir=out_dir))
    try:
        bench_root = stage_tensors(bench_c, work / "bench")
        bench_dir = bench_root / "dump_tensor_data"

        def reference(i: int) -> Path | None:
            j = int(match[i])
            name = bench_c.table.data_name[j] if j >= 0 else NO_DATA_FILE
            return bench_dir / name if names_a_file(name) and (bench_dir / name).is_file() else None

        npu_root = stage_tensors(npu_c, work / "npu", reference)
        local = replace(cfg, npu_path=npu_root / "dump.json", bench_path=bench_root / "dump.json")
        return measure_tensors(local, npu_c.table, bench_c.table, match, console)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the whole compare --------------------------------------------------------------------------------------------


def describe(plan: LayoutPlan) -> list[str]:
    lines = []
    for side, layout in (("npu", plan.npu), ("bench", plan.bench)):
        lines.append(f"{side} layout: {layout.text()} ({layout.source})")
    return lines


def rule_counts(codes: list[Rule]) -> str:
    """How many logical rows each layout rule combined ("40 replicated, 16 split"): render/layout_rules.py's."""
    return _rule_counts(codes)


def compared_facts(cfg: Any, plan: LayoutPlan) -> dict[str, Any] | None:
    """What the HTML report's head says was compared: the first rank's dump.json of each side (None without html)."""
    if "html" not in cfg.options.formats:
        return None
    return report.compared_facts(plan.npu_dumps[0].rank.path / "dump.json", plan.bench_dumps[0].rank.path / "dump.json",
                                 cfg.options.framework)  # fmt: skip


def compare_layouts(cfg: Any, console: Console, plan: LayoutPlan, out_dir: Path, prefix: str = "",
                    with_table: bool = False) -> list[Any]:  # fmt: skip
    """Compare every DP replica of the npu side with its bench replica; one result set per replica (suffix `_dp{d}`).
    Returns a RankOutcome per replica."""
    for line in describe(plan):
        console.info(line)
    opts = cfg.options
    ignored = [flag for flag, on in (("-f", opts.fuzzy_match), ("-dm", opts.data_mapping), ("-cm", opts.cell_mapping),
                                     ("-am", opts.api_mapping), ("-lm", opts.layer_mapping)) if on]  # fmt: skip
    if ignored:
        console.warning(f"{', '.join(ignored)} not applied: runs of different layouts are matched by name only")
    npu_head, bench_head = plan.npu_dumps[0].header, plan.bench_dumps[0].header
    check_tasks(npu_head, bench_head)
    check_frameworks(cfg.options.framework, npu_head, bench_head, console)

    def mode_of(npu: RowTable, bench: RowTable) -> Mode:
        return detect_mode(npu_head, bench_head, npu.has_md5, bench.has_md5)

    results = []
    for dp in range(plan.npu.dp):
        label = f"{prefix}dp{dp}"
        rank_console = Console(prefix=f"[{label}] ", quiet=cfg.options.quiet)
        try:
            console.stage(f"{label}: combining ranks")
            npu_c, bench_c, match, mode = combine_replica(plan, dp, mode_of)
            view = layout_view(npu_c, bench_c, match, mode)
            bench_ranks = "+".join(bench_c.shards.ranks)
            rank_console.info(f"npu {'+'.join(npu_c.shards.ranks)} <-> bench {bench_ranks}: "
                              f"{len(npu_c.rule)} logical rows: {rule_counts(npu_c.rule)}")  # fmt: skip
            only = list(dict.fromkeys(npu_c.table.entries[npu_c.table.entry_index[i]]
                                      for i in np.flatnonzero(view.npu_only).tolist()))  # fmt: skip
            if only:
                shown = ", ".join(only[:8]) + (f", ... ({len(only)} in all)" if len(only) > 8 else "")
                rank_console.info(f"npu-only calls added by the layout (listed, not compared): {shown}")
            bad = [npu_c.table.names[i] for i, d in enumerate(npu_c.disagree) if d is not None]
            if bad:
                rank_console.warning(f"{len(bad)} replicated row(s) differ between the ranks of a group (a replicated "
                                     f"tensor must be equal on every rank): {', '.join(bad[:5])}"
                                     + (" ..." if len(bad) > 5 else ""))  # fmt: skip
            parents = _parents(plan.npu_dumps, plan.npu, dp, npu_c.shards, rank_console)
            opts = cfg.options
            tensors = None
            if mode is Mode.ALL:
                console.stage(f"{label}: comparing tensors")
                scratch = out_dir if opts.write else Path(tempfile.gettempdir())  # write=False: no output folder
                tensors = _measure(cfg, npu_c, bench_c, match, scratch, rank_console)
                for i, code in enumerate(npu_c.rule):
                    if code is Rule.PARTIAL and match[i] >= 0:
                        view.rules[i] += "; real data: the ranks' tensors added, then measured"
                for i in npu_c.interleaved:
                    view.rules[i] += ("; real data: the shards interleave in blocks (a fused dim such as batch x "
                                      "heads), the block size closest to the bench tensor was taken")  # fmt: skip
            console.stage(f"{label}: measuring and judging")
            measured = measure(mode, npu_c.table, bench_c.table, match, tensors=tensors)
            verdicts = judge(measured, highlight_on=opts.highlight, auto_analyze=opts.auto_analyze,
                             parents=parents, layout_only=view.npu_only,
                             qualify=functools.partial(attribute_origins, m=measured, view=view))  # fmt: skip
            outcome = CompareOutcome.of(measured, verdicts, show_stack=bool(npu_c.table.stacks), layout=view)
            if opts.write:
                target = prepare_output_dir(out_dir)
                console.stage(f"{label}: writing")
                written = report.write_all(outcome, target, rank_console, suffix=f"_dp{dp}", coloured=opts.highlight,
                                           formats=opts.formats, bench_path=plan.bench_dumps[0].rank.path,
                                           compared=compared_facts(cfg, plan))  # fmt: skip
            else:  # the Python API's write=False
                written = report.tell(outcome, rank_console, bench_path=plan.bench_dumps[0].rank.path)
            results.append(RankOutcome(label, written, None, summarize(outcome, with_table)))
            if written.xlsx is not None:
                rank_console.banner()
        except CompareError as exc:
            rank_console.error(exc.message)
            results.append(RankOutcome(label, None, exc.message))
        console.progress(f"replicas compared: {dp + 1} of {plan.npu.dp}")
    return results
