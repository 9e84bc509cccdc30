#!/usr/bin/env python3
"""The root-cause analysis's cost: the same compare with the analysis on and off (bench/without_rootcause.py:
`api.build_outcome(..., root_cause=False)`), alternating, N runs each; user+sys CPU of the process tree (os.wait4),
wall and peak memory, medians and the on/off ratios. `--base SRC` adds a variant: the analysis on with another
checkout's src/ (the package before a change). (A forked analysis was measured with `--fork` until issue #29; see
docs/rootcause.md, Speed.)

Peak memory is the largest peak RSS of any one process of the tree (os.wait4); `--sample 0.2` samples the summed Pss
of the whole tree every 0.2 s instead. Sampling costs the measured runs: reading smaps_rollup walks a process's page
tables, and on this 2-core machine the sampler takes CPU from the compare and its forked writer, more from the
larger of the two variants (the analysis on), so the speed ratio is measured without it by default.

    python3 bench/rootcause_ab.py [--pair DIR] [--runs 5] [--format csv|xlsx|default|...] [--base OTHER/src]
                                  [--sample SECONDS]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stats import run_child  # noqa: E402

SRC = Path(__file__).resolve().parent.parent / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", type=Path, default=Path("/var/tmp/msprobe_bench_stats_1m"),
                    help="a gen_stats.py folder holding compare.json (default: the stats_1m case's folder)")  # fmt: skip
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--format",
        default="csv",
        help="the compare's --format (default: csv); 'default': none given, "
        "the formats a user's run writes (xlsx and html)",
    )
    ap.add_argument("--base", type=Path, help="another src/ folder: a third variant, the analysis on there")
    ap.add_argument(
        "--sample",
        type=float,
        default=0.0,
        help="sample the tree's summed Pss every SECONDS (default 0: peak RSS from os.wait4, no sampling)",
    )
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="rootcause_ab_"))
    argv = ["-f", "pytorch", "compare", "-i", str(args.pair / "compare.json"), "-o", str(out), "-s"] + (
        [] if args.format == "default" else ["--format", args.format])  # fmt: skip
    cmd = [sys.executable, "-m", "msprobe_compare"] + argv
    off_cmd = [sys.executable, str(Path(__file__).resolve().parent / "without_rootcause.py")] + argv
    variants = ["off", "on"] + (["base"] if args.base else [])
    memory = "tree Pss" if args.sample else "peak RSS"
    runs: dict[str, list[tuple[float, float, float]]] = {v: [] for v in variants}
    try:
        for k in range(args.runs):
            for variant in variants if k % 2 == 0 else variants[::-1]:
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                env = dict(os.environ, PYTHONPATH=str(args.base if variant == "base" else SRC))
                r = run_child(off_cmd if variant == "off" else cmd, None, os.devnull, None, sample=args.sample or None,
                              env=env)  # fmt: skip
                if r["rc"] != 0:
                    sys.exit(f"{variant} run failed (exit {r['rc']})")
                peak = (r["tree_pss_kb"] if args.sample else r["maxrss_kb"]) / 1024
                runs[variant].append((r["cpu"], r["wall"], peak))
                print(f"{variant:4} cpu {r['cpu']:6.2f} s  wall {r['wall']:6.2f} s  {memory} {peak:6.0f} MiB  "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(out, ignore_errors=True)
    med = {v: [statistics.median(x[i] for x in r) for i in range(3)] for v, r in runs.items()}
    for v in variants:
        print(f"{v:4} median cpu {med[v][0]:.2f} s, wall {med[v][1]:.2f} s, {memory} {med[v][2]:.0f} MiB (max "
              f"{max(x[2] for x in runs[v]):.0f}); best wall {min(x[1] for x in runs[v]):.2f} s")  # fmt: skip
    for v in variants[1:]:
        print(f"{v}/off: cpu {med[v][0] / med['off'][0]:.3f}, wall {med[v][1] / med['off'][1]:.3f} (medians)")


if __name__ == "__main__":
    main()
