"""Step folders: ranks paired by number (each a pair of dump.json files, api.py), or combined when the two runs
were split differently across cards (layouts.py); ranks run in processes or as Ray tasks."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from msprobe_compare import distribute
from msprobe_compare.api import RankOutcome, compare_rank
from msprobe_compare.config import CompareConfig
from msprobe_compare.layouts import LayoutPlan, compare_layouts, plan_layouts
from msprobe_compare.layouts_aligned import compare_layouts_aligned, different_code
from msprobe_compare.load.layout import RankDir, mix_steps, pair_ranks, rank_dump
from msprobe_compare.log import Console, share_lock
from msprobe_compare.records import dataclass


@dataclass(frozen=True)
class RunSummary:
    """What a compare of step folders produced. `ok` is False when any rank failed."""

    ranks: list[RankOutcome]
    unpaired: list[str]

    @property
    def ok(self) -> bool:
        return all(r.error is None for r in self.ranks) and not self.unpaired


def _rank_config(cfg: CompareConfig, npu_rank: RankDir, bench_rank: RankDir, out_dir: Path) -> CompareConfig:
    stack = npu_rank.path / "stack.json"
    return replace(
        cfg,
        npu_path=rank_dump(npu_rank.path),
        bench_path=rank_dump(bench_rank.path),
        stack_path=stack if stack.is_file() else None,
        options=replace(cfg.options, output_dir=out_dir, stack_mode=stack.is_file()),
    )


def compare_directories(cfg: CompareConfig, console: Console, *, with_table: bool = False) -> RunSummary:
    """Compare step folders rank by rank (ranks paired by number), or every step of a mix dump.

    `with_table`: each rank's outcome also carries its table cells (`PairSummary.columns`)."""
    steps = mix_steps(cfg.npu_path, cfg.bench_path)
    roots = [Path()] if steps is None else steps
    jobs_list: list[tuple[CompareConfig, str, str, bool]] = []
    unpaired: list[str] = []
    layout_results: list[RankOutcome] = []
    for rel in roots:
        prefix = "" if steps is None else f"{rel.as_posix()}/"
        out_dir = cfg.options.output_dir / rel
        plan = _layout_plan(cfg, rel)
        if plan is not None:  # the runs were split differently across cards: ranks combined (layouts.py)
            if different_code(plan, cfg.options.align):  # and their code differs: each side alone, then aligned
                layout_results += compare_layouts_aligned(cfg, console, plan, out_dir, prefix, with_table)
            else:
                layout_results += compare_layouts(cfg, console, plan, out_dir, prefix, with_table)
            continue
        pairing = pair_ranks(cfg.npu_path / rel, cfg.bench_path / rel)
        console.info(("process folders paired in sorted order: " if pairing.by_order else "rank pairing: ")
                     + ", ".join(f"npu {prefix}{n.name} <-> bench {prefix}{b.name}"
                                 for n, b in pairing.pairs))  # fmt: skip
        for side, only in (("npu", pairing.npu_only), ("bench", pairing.bench_only)):
            for rank in only:
                console.error(f"{prefix}{rank.name} exists only on the {side} side ({rank.path}); it is not compared")
                unpaired.append(f"{side} {prefix}{rank.name}")
        for npu_rank, bench_rank in pairing.pairs:
            jobs_list.append((_rank_config(cfg, npu_rank, bench_rank, out_dir), prefix + npu_rank.name,
                              npu_rank.suffix, with_table))  # fmt: skip
    workers = min(len(jobs_list), max(1, cfg.options.jobs or os.cpu_count() or 1))
    if workers > 1 or cfg.options.ray:  # ranks already fill the cores: each reads its two files in turn
        jobs_list = [(replace(c, options=replace(c.options, parallel_read=False)), name, suffix, table)
                     for c, name, suffix, table in jobs_list]  # fmt: skip
    started = time.monotonic()

    def done(count: int) -> None:  # on a terminal's stderr only
        console.progress(f"ranks compared: {count} of {len(jobs_list)} ({time.monotonic() - started:.1f} s)")

    if cfg.options.ray and jobs_list:  # ranks as Ray tasks; they write their files into the (shared) output folder
        results = distribute.map_ranks(compare_rank, jobs_list, cfg.options.ray, console, limit=cfg.options.jobs,
                                       on_done=done)  # fmt: skip
    elif workers <= 1:
        results = []
        for job in jobs_list:
            results.append(compare_rank(*job))
            done(len(results))
    else:
        results = _in_processes(jobs_list, workers, done)
    return RunSummary(layout_results + results, unpaired)


def _in_processes(jobs_list: list[tuple[CompareConfig, str, str, bool]], workers: int,
                  done: Callable[[int], None]) -> list[RankOutcome]:  # fmt: skip
    """compare_rank of every job in `workers` processes, results in job order; `done(count)` as each finishes. The
    workers and this process write their console lines under one lock: lines of any length stay whole."""
    import multiprocessing  # only for ranks in processes (start-up speed)
    from concurrent.futures import ProcessPoolExecutor, as_completed

    lock = multiprocessing.Lock()
    share_lock(lock)
    try:
        with ProcessPoolExecutor(max_workers=workers, initializer=share_lock, initargs=(lock,)) as pool:
            futures = [pool.submit(compare_rank, *job) for job in jobs_list]
            for count, _ in enumerate(as_completed(futures), 1):
                done(count)
            return [f.result() for f in futures]
    finally:
        share_lock(None)


def _layout_plan(cfg: CompareConfig, rel: Path) -> LayoutPlan | None:
    """The plan when the two step folders hold runs of different parallel layouts, else None."""
    return plan_layouts(cfg.npu_path / rel, cfg.bench_path / rel, cfg.options.npu_layout, cfg.options.bench_layout)
