#!/usr/bin/env python3
"""The root-cause analysis's cost: the same compare with the analysis on and off (MSPROBE_BENCH_NO_ROOTCAUSE=1),
alternating, N runs each; user+sys CPU of the process tree (os.wait4) and wall, medians and the on/off ratios.

    python3 bench/rootcause_ab.py [--pair DIR] [--runs 5] [--format csv]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", type=Path, default=Path("/var/tmp/msprobe_bench_stats_1m"),
                    help="a gen_stats.py folder holding compare.json (default: the stats_1m case's folder)")  # fmt: skip
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--format", default="csv")
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="rootcause_ab_"))
    cmd = [sys.executable, "-m", "msprobe_compare", "-f", "pytorch", "compare", "-i", str(args.pair / "compare.json"),
           "-o", str(out), "-s", "--format", args.format]  # fmt: skip
    runs: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    try:
        for k in range(args.runs):
            for variant in ("off", "on") if k % 2 == 0 else ("on", "off"):
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                env = dict(os.environ, PYTHONPATH=str(SRC))
                if variant == "off":
                    env["MSPROBE_BENCH_NO_ROOTCAUSE"] = "1"
                start = time.perf_counter()
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - start
                if status != 0:
                    sys.exit(f"{variant} run failed (wait status {status})")
                cpu = usage.ru_utime + usage.ru_stime
                runs[variant].append((cpu, wall))
                print(f"{variant:3} cpu {cpu:6.2f} s  wall {wall:6.2f} s  load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    med = {v: (statistics.median(c for c, _ in r), statistics.median(w for _, w in r)) for v, r in runs.items()}
    for v in ("off", "on"):
        print(f"{v:3} median cpu {med[v][0]:.2f} s, wall {med[v][1]:.2f} s; best wall {min(w for _, w in runs[v]):.2f} s")
    print(f"on/off: cpu {med['on'][0] / med['off'][0]:.3f}, wall {med['on'][1] / med['off'][1]:.3f} (medians)")


if __name__ == "__main__":
    main()
