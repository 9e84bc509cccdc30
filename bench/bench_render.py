#!/usr/bin/env python3
"""Benchmark the render stage: table columns, csv, jsonl, coloured xlsx and the HTML report.

    python3 bench/bench_render.py [--data DIR | --entries N] [--cache FILE] [--formats csv,jsonl,html,xlsx]
                                  [--repeat 1] [--keep DIR]

DIR holds a statistics dump pair from bench/gen_stats.py (with --entries N and no --data, a pair of N entries
is generated into a temporary folder; 280,000 entries give about 1,000,000 rows). The compare runs in-process
(with stack info, as `-s`, highlighting on) and is not timed; --cache FILE keeps the built outcome as a pickle
so that later runs skip it. Then the steps run as `report.write_all` runs them: the plain-style columns
(`columns`, shared by csv, jsonl and html), the writers given those columns, the coloured-style columns
(`columns-xlsx`) and the xlsx writer. Each step prints its wall time, CPU time (all threads), rows/s and peak
memory growth (resident set, when the kernel can reset the peak). A step needs its columns step, which then
runs too. The machine may be shared: compare runs made close together, or look at the CPU times.
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from msprobe_compare.model import CompareOutcome
from msprobe_compare.render import table
from msprobe_compare.render.flat import write_csv, write_jsonl
from msprobe_compare.render.html import write_html
from msprobe_compare.render.xlsx import write_xlsx_columns

ROOT = Path(__file__).resolve().parents[1]

STEPS = ("columns", "csv", "jsonl", "html", "columns-xlsx", "xlsx")


def build(compare_json: Path) -> CompareOutcome:
    from msprobe_compare.api import build_outcome
    from msprobe_compare.config import Options, load_config
    from msprobe_compare.log import Console

    options = Options(framework="pytorch", output_dir=Path(tempfile.gettempdir()), stack_mode=True, highlight=True)
    return build_outcome(load_config(compare_json, options), Console())


def outcome_for(args: argparse.Namespace) -> CompareOutcome:
    if args.cache and args.cache.exists():
        with open(args.cache, "rb") as f:
            return pickle.load(f)
    data = args.data
    tmp = None
    if data is None:
        tmp = Path(tempfile.mkdtemp(prefix="bench-render-"))
        data = tmp / "pair"
        gen = [sys.executable, str(ROOT / "bench/gen_stats.py"), "--entries", str(args.entries), "--out", str(data)]
        subprocess.run(gen, check=True)
    t = time.perf_counter()
    outcome = build(data / "compare.json")
    print(f"compare: {len(outcome):,} rows in {time.perf_counter() - t:.1f} s (not part of the render times)")
    if tmp is not None:
        shutil.rmtree(tmp)
    if args.cache:
        with open(args.cache, "wb") as f:
            pickle.dump(outcome, f, protocol=pickle.HIGHEST_PROTOCOL)
    return outcome


def _rss_kb(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def _reset_peak() -> bool:
    """Reset the kernel's peak resident set size of this process (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def timed(name: str, n: int, fn: Callable[[], Any]) -> dict[str, float]:
    gc.collect()
    peak_ok = _reset_peak()
    base = _rss_kb("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = _rss_kb("VmHWM") - base if peak_ok and base >= 0 else float("nan")
    print(f"{name:12s} {wall:7.2f} s wall {cpu:7.2f} s CPU {n / wall if wall else 0:12,.0f} rows/s"
          f"  peak +{peak / 1024:,.0f} MB", flush=True)  # fmt: skip
    return {"wall": wall, "cpu": cpu, "peak_mb": peak / 1024}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None, help="a pair from bench/gen_stats.py (compare.json inside)")
    ap.add_argument("--entries", type=int, default=20000, help="entries to generate when --data is not given")
    ap.add_argument("--cache", type=Path, default=None, help="pickle of the outcome: read if present, else written")
    ap.add_argument("--formats", default=",".join(STEPS), help=f"steps to time, of {','.join(STEPS)}")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None, help="keep the written files in this folder")
    args = ap.parse_args(argv)
    steps = [s for s in args.formats.split(",") if s]
    unknown = set(steps) - set(STEPS)
    if unknown:
        ap.error(f"unknown steps: {', '.join(sorted(unknown))}")
    outcome = outcome_for(args)
    n = len(outcome)
    print(f"{n:,} rows, {len(table.header(outcome))} columns; rss {_rss_kb('VmRSS') / 1024:,.0f} MB", flush=True)
    out_dir = args.keep or Path(tempfile.mkdtemp(prefix="bench-render-out-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    header = table.header(outcome)
    plain, coloured = table.Style(text_booleans=False), table.Style(text_booleans=True)
    colours = table.colour_codes(outcome)
    # as report.write_all: the plain columns serve csv, jsonl and the HTML report; the coloured xlsx has its own
    cols: dict[str, list[table.Column]] = {}
    jobs: dict[str, Callable[[], Any]] = {
        "columns": lambda: cols.__setitem__("plain", table.column_data(outcome, plain)),
        "columns-xlsx": lambda: cols.__setitem__("coloured", table.column_data(outcome, coloured)),
        "csv": lambda: write_csv(out_dir / "result.csv", header, cols["plain"], colours),
        "jsonl": lambda: write_jsonl(out_dir / "result.jsonl", header, cols["plain"], colours),
        "xlsx": lambda: write_xlsx_columns(out_dir / "result.xlsx", header, cols["coloured"], colours),
        "html": lambda: write_html(out_dir / "report.html", outcome, "bench", columns=cols["plain"]),
    }
    needs = {"csv": "columns", "jsonl": "columns", "html": "columns", "xlsx": "columns-xlsx"}
    steps = [s for s in STEPS if s in steps or any(needs.get(t) == s for t in steps)]
    try:
        for _ in range(args.repeat):
            for step in steps:
                timed(step, n, jobs[step])
    finally:
        if args.keep is None:
            shutil.rmtree(out_dir)
    return 0


if __name__ == "__main__":
    if hasattr(os, "sched_getaffinity"):
        print(f"cpus available: {len(os.sched_getaffinity(0))}", file=sys.stderr)
    raise SystemExit(main())
