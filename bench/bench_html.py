#!/usr/bin/env python3
"""Benchmark the HTML report with about a million rows: write time, file size, load time in Chromium.

    python3 bench/bench_html.py [--data DIR] [--entries 280000] [--runs 3] [--compress auto|yes|no|both]

DIR holds a statistics dump pair from bench/gen_stats.py (generated into bench/data/html_1m when missing;
280,000 entries give about 1,000,000 rows). The compare runs in-process (with stack info, as `-s`), then
the page is written and opened in headless Chromium (`chromium` of the system, no network). Reported:
rows, time to build the payload and the page, the HTML size, and in the browser the time from navigation
start until the first table rows are drawn (`window.__reportReady`, the "interactive" point; target < 5 s),
until plot and tree are built too (`__reportComplete`), the phases in between, and the time of a name
filter and of a sort over all rows. Exit code 2 when the compressed page (what the writer makes for such
sizes) is not interactive within the target; the uncompressed one is measured for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from chromium import Browser, find_chromium  # noqa: E402

from msprobe_compare.api import build_outcome  # noqa: E402
from msprobe_compare.config import Options, load_config  # noqa: E402
from msprobe_compare.log import Console  # noqa: E402
from msprobe_compare.render import html  # noqa: E402

TARGET_S = 5.0
FILTER_JS = """new Promise((done) => {
    const f = document.getElementById('filter'), grid = document.getElementById('grid'), t0 = performance.now();
    f.value = %s; f.dispatchEvent(new Event('input'));
    const poll = () => grid.dataset.filterText === f.value  // 120 ms: the input's debounce
        ? done([performance.now() - t0 - 120, +grid.dataset.matching]) : requestAnimationFrame(poll);
    poll(); })"""
SORT_JS = """new Promise((done) => {
    const grid = document.getElementById('grid'), t0 = performance.now();
    document.querySelector('#tbl th[data-col="%d"]').click();
    const poll = () => grid.dataset.sort === '%d:1' ? done(performance.now() - t0) : requestAnimationFrame(poll);
    poll(); })"""
SCROLL_JS = """new Promise((done) => {
    const grid = document.getElementById('grid');
    grid.scrollTop = (grid.scrollHeight - grid.clientHeight) / 2;
    requestAnimationFrame(() => requestAnimationFrame(() => done(+grid.dataset.first))); })"""


def ensure_data(data: Path, entries: int) -> Path:
    if not (data / "compare.json").is_file():
        print(f"generating {entries} entries into {data} ...", flush=True)
        gen = [sys.executable, str(ROOT / "bench/gen_stats.py"), "--entries", str(entries), "--out", str(data)]
        subprocess.run(gen, check=True)
    return data / "compare.json"


def measure_page(path: Path, runs: int) -> dict[str, Any]:
    """Median over `runs` fresh browsers: load phases (s since navigation start), filter and sort (ms)."""
    samples: list[dict[str, float]] = []
    for _ in range(runs):
        with Browser(timeout=300) as b:
            b.open(path)
            b.wait_for("window.__reportComplete || window.__reportError", timeout=300)
            error = b.eval("window.__reportError || null")
            if error:
                raise RuntimeError(error)
            sample = {f"{k}_s": v / 1000 for k, v in b.eval("window.__reportTimings").items()}
            sample["complete_s"] = b.eval("window.__reportComplete") / 1000
            sample["filter_ms"], sample["filter_matching"] = b.eval(FILTER_JS % json.dumps("linear backward"))
            b.eval(FILTER_JS % json.dumps(""))
            col = b.eval("window.__report.columns.indexOf('MaxRelativeErr')")
            if col >= 0:
                sample["sort_ms"] = b.eval(SORT_JS % (col, col))
            rows = b.eval("window.__report.rows")
            first = b.eval(SCROLL_JS)
            sample["scroll_to_middle_ok"] = float(abs(first - rows / 2) < rows * 0.01)
            b.drain(0.2)
            if b.problems():
                raise RuntimeError(f"console problems: {b.problems()}")
            samples.append(sample)
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / "bench/data/html_1m")
    ap.add_argument("--entries", type=int, default=280000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compress", choices=["auto", "yes", "no", "both"], default="both")
    ap.add_argument("--out", type=Path, default=None, help="where to keep the pages (default: a temporary folder)")
    ap.add_argument("--no-stack", action="store_true", help="without the NPU_Stack_Info column")
    args = ap.parse_args(argv)
    if find_chromium() is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 1
    compare_json = ensure_data(args.data, args.entries)
    t = time.perf_counter()
    options = Options(framework="pytorch", output_dir=Path(tempfile.gettempdir()), stack_mode=not args.no_stack)
    outcome = build_outcome(load_config(compare_json, options), Console())
    print(f"compare: {len(outcome):,} rows in {time.perf_counter() - t:.1f} s", flush=True)
    wall, cpu = time.perf_counter(), time.process_time()
    data = html.payload(outcome, "bench")
    t_payload = (time.perf_counter() - wall, time.process_time() - cpu)
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="bench-html-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    choices = {"both": [True, False], "yes": [True], "no": [False], "auto": [None]}[args.compress]
    results = []
    for compress in choices:
        wall, cpu = time.perf_counter(), time.process_time()
        text = html.page(data, "bench", compress=compress)
        path = out_dir / f"report_{'auto' if compress is None else 'zlib' if compress else 'raw'}.html"
        path.write_text(text, encoding="utf-8")
        t_page = (time.perf_counter() - wall, time.process_time() - cpu)
        result = {
            "rows": len(outcome), "compress": compress, "payload_mb": len(data) / 1e6,
            "html_mb": path.stat().st_size / 1e6, "payload_wall_s": t_payload[0], "payload_cpu_s": t_payload[1],
            "page_wall_s": t_page[0], "page_cpu_s": t_page[1], **measure_page(path, args.runs),
        }  # fmt: skip
        results.append(result)
        verdict = "OK" if result["ready_s"] < TARGET_S else "SLOW"
        print(f"[{path.name}] {result['html_mb']:.1f} MB (payload {result['payload_mb']:.1f} MB before compression); "
              f"written in {t_payload[0] + t_page[0]:.1f} s ({t_payload[1] + t_page[1]:.1f} s CPU); "
              f"interactive after {result['ready_s']:.2f} s ({verdict}, target {TARGET_S:g} s), "
              f"plot and tree after {result['complete_s']:.2f} s; name filter {result['filter_ms']:.0f} ms, "
              f"sort {result.get('sort_ms', float('nan')):.0f} ms", flush=True)  # fmt: skip
    print(json.dumps(results, indent=1))
    if not args.out:
        for p in out_dir.iterdir():
            p.unlink()
        os.rmdir(out_dir)
    judged = [r for r in results if r["compress"] is not False] or results  # the page the writer makes
    return 0 if all(r["ready_s"] < TARGET_S for r in judged) else 2


if __name__ == "__main__":
    raise SystemExit(main())
