#!/usr/bin/env python3
"""Benchmark the HTML report with about a million rows: write time, file size, load time in Chromium.

    python3 bench/bench_html.py [--data DIR] [--entries 280000] [--runs 3] [--compress auto|yes|no|both]

DIR holds a statistics dump pair from bench/gen_stats.py (generated into bench/data/html_1m when missing;
280,000 entries give about 1,000,000 rows). The compare runs in-process (with stack info, as `-s`), then
the page is written and opened in headless Chromium (`chromium` of the system, no network). Reported:
rows, time to build the payload and the page, the HTML size, and in the browser the time from navigation
start until the first table rows are drawn (`window.__reportReady`, the "interactive" point; target < 5 s),
until plot and tree are built too (`__reportComplete`), and the time of a name filter and of a sort.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from chromium import Browser, find_chromium  # noqa: E402

from msprobe_compare.api import build_outcome  # noqa: E402
from msprobe_compare.config import Options, load_config  # noqa: E402
from msprobe_compare.log import Console  # noqa: E402
from msprobe_compare.render import html  # noqa: E402

TARGET_S = 5.0


def ensure_data(data: Path, entries: int) -> Path:
    if not (data / "compare.json").is_file():
        print(f"generating {entries} entries into {data} ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench/gen_stats.py"), "--entries", str(entries), "--out", str(data)],
                       check=True)  # fmt: skip
    return data / "compare.json"


def measure_page(path: Path, runs: int) -> dict[str, float]:
    ready, complete, filt, sort = [], [], [], []
    detail: dict[str, float] = {}
    for _ in range(runs):
        with Browser(timeout=120) as b:
            b.open(path)
            b.wait_for("window.__reportComplete || window.__reportError", timeout=120)
            error = b.eval("window.__reportError || null")
            if error:
                raise RuntimeError(error)
            ready.append(b.eval("window.__reportReady") / 1000)
            complete.append(b.eval("window.__reportComplete") / 1000)
            detail = b.eval("window.__reportTimings")
            filt.append(b.eval("""(() => { const t = performance.now(); const f = document.getElementById('filter');
                f.value = 'linear backward'; f.dispatchEvent(new Event('input'));
                return new Promise((ok) => setTimeout(() => ok(0), 130)); })().then(() => 0)"""))
            t0 = time.perf_counter()
            b.wait_for("document.getElementById('row-count').textContent.startsWith('showing')")
            filt[-1] = b.eval("document.getElementById('grid').dataset.matching")
            t1 = b.eval("""(() => { const t = performance.now();
                document.querySelector('#tbl th[data-col="8"]').click();
                return new Promise((ok) => setTimeout(() => ok(performance.now() - t), 0)); })()""")
            b.wait_for("document.querySelector('#tbl th.sorted') !== null")
            sort.append(b.eval("""new Promise((ok) => { const t = performance.now();
                requestAnimationFrame(() => ok(performance.now() - t)); })""") + (t1 or 0))
            del t0
            b.drain(0.2)
            problems = b.problems()
            if problems:
                raise RuntimeError(f"console problems: {problems}")
    return {
        "ready_s": statistics.median(ready), "complete_s": statistics.median(complete),
        "sort_ms": statistics.median(sort), "filter_matching": float(filt[-1]),
        **{f"t_{k}_s": v / 1000 for k, v in detail.items()},
    }  # fmt: skip


def timed_filter(path: Path) -> float:
    """Time from typing into the name filter until the count shows the filtered rows (ms, in the page)."""
    with Browser(timeout=120) as b:
        b.open(path)
        b.wait_for("window.__reportComplete", timeout=120)
        return float(b.eval("""new Promise((ok) => { const f = document.getElementById('filter');
            const c = document.getElementById('row-count'); const t = performance.now();
            new MutationObserver(() => ok(performance.now() - t - 120)).observe(c, {childList: true, characterData: true, subtree: true});
            f.value = 'linear backward'; f.dispatchEvent(new Event('input')); })"""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / "bench/data/html_1m")
    ap.add_argument("--entries", type=int, default=280000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compress", choices=["auto", "yes", "no", "both"], default="both")
    ap.add_argument("--out", type=Path, default=None, help="where to keep the pages (default: a temporary folder)")
    args = ap.parse_args(argv)
    if find_chromium() is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 1
    compare_json = ensure_data(args.data, args.entries)
    console = Console()
    t = time.perf_counter()
    cfg = load_config(compare_json, Options(framework="pytorch", output_dir=Path(tempfile.gettempdir())))
    outcome = build_outcome(cfg, console)
    print(f"compare: {len(outcome):,} rows in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    data = html.payload(outcome, "bench")
    t_payload = time.perf_counter() - t
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="bench-html-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    choices = {"both": [True, False], "yes": [True], "no": [False], "auto": [None]}[args.compress]
    results = []
    for compress in choices:
        t = time.perf_counter()
        text = html.page(data, "bench", compress=compress)
        path = out_dir / f"report_{'auto' if compress is None else 'zlib' if compress else 'raw'}.html"
        path.write_text(text, encoding="utf-8")
        t_page = time.perf_counter() - t
        result = {
            "rows": len(outcome), "compress": compress, "payload_mb": len(data) / 1e6,
            "html_mb": path.stat().st_size / 1e6, "payload_s": t_payload, "page_s": t_page,
            **measure_page(path, args.runs), "filter_ms": timed_filter(path),
        }  # fmt: skip
        results.append(result)
        verdict = "OK" if result["ready_s"] < TARGET_S else "SLOW"
        print(f"[{path.name}] {result['html_mb']:.1f} MB (payload {result['payload_mb']:.1f} MB raw); "
              f"written in {t_payload:.1f}+{t_page:.1f} s; interactive after {result['ready_s']:.2f} s "
              f"({verdict}, target {TARGET_S:g} s), complete {result['complete_s']:.2f} s; "
              f"filter {result['filter_ms']:.0f} ms, sort {result['sort_ms']:.0f} ms", flush=True)  # fmt: skip
    print(json.dumps(results, indent=1))
    if not args.out:
        for p in out_dir.iterdir():
            p.unlink()
        os.rmdir(out_dir)
    return 0 if all(r["ready_s"] < TARGET_S for r in results) else 2


if __name__ == "__main__":
    raise SystemExit(main())
