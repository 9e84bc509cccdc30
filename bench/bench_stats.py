#!/usr/bin/env python3
"""Benchmark `msprobe -f pytorch compare` on a synthetic statistics dump pair: ours against the reference.

Generates a pair with bench/gen_stats.py (or reuses one with --data), then runs, each as its own child process,

    OURS -f pytorch compare -i compare.json -o OUT -s [-hl]
    REF  -f pytorch compare -i compare.json -o OUT -s [-hl]     (when the reference is installed)

and prints wall time, CPU time (user+sys), result rows per second and memory of each child, plus ref/ours ratios.
"peak RSS" is ru_maxrss from os.wait4 on that child (so one run never hides another's peak): the largest peak of
the child or of any worker it reaped, not a sum over workers.  "tree PSS" is the largest summed Pss of the child's
whole process tree, sampled every 0.25 s from /proc (covers multi-process runs; may miss very short peaks).

OURS: --ours CMD, else the `msprobe` on PATH (unless it is the reference's), else `python3 -m msprobe_compare`.
REF:  --ref PATH, else DEFAULT_REF (below) if it exists; --skip-ref to skip it.
A run that fails (non-zero exit, no xlsx, timeout) is reported with the tail of its output; the others go on.

Usage: python3 bench/bench_stats.py [--entries 200000] [--md5] [--hl] [--keep] [--ref PATH | --skip-ref]
                                    [--data DIR] [--ours CMD] [--seed 1] [--timeout SEC] [--repeat N]
"""

import argparse
import glob
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from benchlib import find_ours, tail

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REF = os.environ.get("MSPROBE_REF", "")  # the reference msprobe executable (its own virtualenv)


def count_rows(data_dir):
    """Result rows of the compare = leaves of the NPU dump (from meta.json, else by reading dump.json)."""
    meta = os.path.join(data_dir, "meta.json")
    if os.path.exists(meta):
        with open(meta) as f:
            m = json.load(f)
        if "rows_npu" in m:
            return m["rows_npu"], m.get("entries_npu")
    sys.path.insert(0, HERE)
    from gen_stats import leaf_count  # noqa: E402

    with open(os.path.join(data_dir, "npu", "step0", "rank", "dump.json")) as f:
        data = json.load(f)["data"]
    return sum(leaf_count(v) for v in data.values()), len(data)


def _proc_tree(root):
    """root and all its descendants (scans /proc; /proc/PID/task/*/children is not always available)."""
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [root], [root]
    while todo:
        for c in kids.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def tree_pss_kb(root):
    """Summed proportional set size (Pss) of a process tree, in KiB; 0 where /proc lacks smaps_rollup."""
    total = 0
    for pid in _proc_tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError):
            pass
    return total


def run_child(cmd, cwd, log_path, timeout, sample=0.25, env=None):
    """Run cmd; return dict(rc, wall, cpu, maxrss_kb, tree_pss_kb). Output goes to log_path.

    maxrss_kb comes from os.wait4: the largest peak RSS of the child or any descendant it reaped (it is not a sum
    over worker processes running at the same time). tree_pss_kb is the largest summed Pss of the child's whole
    process tree, sampled every `sample` seconds (so it can miss short peaks); `sample` None: not sampled (0)."""
    can_sample = sample is not None and os.path.exists("/proc/self/smaps_rollup")
    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        except OSError as e:
            log.write(f"cannot start {cmd!r}: {e}\n".encode())
            return {"rc": None, "wall": 0.0, "cpu": 0.0, "maxrss_kb": 0, "tree_pss_kb": 0, "error": str(e)}
        deadline = t0 + timeout if timeout else None
        tree_peak = 0
        next_sample = t0
        rc = None
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            now = time.perf_counter()
            if pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if deadline and now > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                rc = "timeout"
                break
            if can_sample and now >= next_sample:
                tree_peak = max(tree_peak, tree_pss_kb(p.pid))
                next_sample = now + sample
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        p.returncode = rc if isinstance(rc, int) else -9  # keep Popen from waiting again
    return {
        "rc": rc,
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "maxrss_kb": ru.ru_maxrss,
        "tree_pss_kb": tree_peak,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description="benchmark our msprobe compare against the reference")
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--md5", action="store_true", help="md5-mode pair (statistics with md5 fields)")
    ap.add_argument("--hl", action="store_true", help="also run each tool with -hl")
    ap.add_argument("--only-hl", action="store_true", help="run only with -hl")
    ap.add_argument("--data", help="reuse this generated pair folder (holding compare.json) instead of generating")
    ap.add_argument("--keep", action="store_true", help="keep the generated pair and the outputs")
    ap.add_argument("--workdir", help="folder for the pair and outputs, kept (default: a new temporary folder)")
    ap.add_argument("--ours", help="command for our tool (default: msprobe on PATH, else python3 -m msprobe_compare)")
    ap.add_argument("--ref", help="reference msprobe executable (default: $MSPROBE_REF, if set and present)")
    ap.add_argument("--skip-ref", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs per tool and mode (best wall time is reported)")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per run (0 = none)")
    a = ap.parse_args(argv)

    ref = None
    if not a.skip_ref:
        ref = a.ref or (DEFAULT_REF if os.path.exists(DEFAULT_REF) else None)
        if a.ref and not os.path.exists(a.ref):
            print(f"reference not found: {a.ref}; skipping it")
            ref = None
    ours = shlex.split(a.ours) if a.ours else find_ours(ref)

    work = os.path.abspath(a.workdir) if a.workdir else tempfile.mkdtemp(prefix="msprobe_bench_")
    os.makedirs(work, exist_ok=True)
    if a.data:
        data_dir = os.path.abspath(a.data)
    else:
        data_dir = os.path.join(work, "pair")
        cmd = [
            sys.executable,
            os.path.join(HERE, "gen_stats.py"),
            "--entries",
            str(a.entries),
            "--out",
            data_dir,
            "--seed",
            str(a.seed),
        ] + (["--md5"] if a.md5 else [])
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        print(f"pair generated in {time.perf_counter() - t0:.1f}s")
    rows, entries = count_rows(data_dir)
    size = sum(os.path.getsize(os.path.join(data_dir, s, "step0", "rank", "dump.json")) for s in ("npu", "bench"))

    modes = [("hl", ["-s", "-hl"])] if a.only_hl else [("plain", ["-s"])] + ([("hl", ["-s", "-hl"])] if a.hl else [])
    tools = [("ours", ours)] + ([("ref", [ref])] if ref else [])
    results = {}
    for mode, flags in modes:
        for tool, exe in tools:
            best = None
            for i in range(a.repeat):
                out = os.path.join(work, f"out_{tool}_{mode}_{i}")
                shutil.rmtree(out, ignore_errors=True)
                cmd = (
                    exe + ["-f", "pytorch", "compare", "-i", os.path.join(data_dir, "compare.json"), "-o", out] + flags
                )
                log = os.path.join(work, f"log_{tool}_{mode}_{i}.txt")
                print(f"running {tool} {mode}: {' '.join(cmd)}", flush=True)
                r = run_child(cmd, data_dir, log, a.timeout)
                xlsx = glob.glob(os.path.join(out, "*.xlsx"))
                r["ok"] = r["rc"] == 0 and bool(xlsx)
                r["log"] = log
                if not r["ok"]:
                    why = "no xlsx written" if r["rc"] == 0 else f"exit {r['rc']}"
                    print(f"  FAILED ({why}); last lines of {log}:\n{tail(log)}", flush=True)
                else:
                    print(
                        f"  {r['wall']:.2f}s wall, {r['cpu']:.2f}s cpu, {r['maxrss_kb'] / 1024:.0f} MiB peak RSS, "
                        f"{r['tree_pss_kb'] / 1024:.0f} MiB peak tree PSS",
                        flush=True,
                    )
                if best is None or (r["ok"] and (not best["ok"] or r["wall"] < best["wall"])):
                    best = r
            results[(tool, mode)] = best

    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    print()
    print(f"pair: {data_dir}  entries={entries}  rows={rows}  dump.json total {size / 1e6:.0f} MB  md5={a.md5}")
    print(f"machine: {os.cpu_count()} cpus, python {platform.python_version()}, load avg now {load[0]:.2f}")
    hdr = (
        f"{'tool':<5} {'mode':<6} {'status':<8} {'wall s':>9} {'cpu s':>9} {'rows/s':>11} {'MB/s':>8} "
        f"{'peak RSS MiB':>13} {'tree PSS MiB':>13}"
    )
    print(hdr)
    print("-" * len(hdr))
    for mode, _ in modes:
        for tool, _ in tools:
            r = results[(tool, mode)]
            st = "ok" if r["ok"] else f"FAIL({r['rc']})"
            rps = rows / r["wall"] if r["ok"] and r["wall"] else 0
            mbs = size / 1e6 / r["wall"] if r["ok"] and r["wall"] else 0
            print(
                f"{tool:<5} {mode:<6} {st:<8} {r['wall']:>9.2f} {r['cpu']:>9.2f} {rps:>11,.0f} {mbs:>8.1f} "
                f"{r['maxrss_kb'] / 1024:>13.0f} {r['tree_pss_kb'] / 1024:>13.0f}"
            )
    if ref:
        for mode, _ in modes:
            o, f = results[("ours", mode)], results[("ref", mode)]
            if o["ok"] and f["ok"]:
                print(
                    f"ratio ref/ours ({mode}): time x{f['wall'] / o['wall']:.1f}, "
                    f"cpu x{f['cpu'] / max(o['cpu'], 1e-9):.1f}, "
                    f"peak RSS x{f['maxrss_kb'] / max(o['maxrss_kb'], 1):.1f}, "
                    f"tree PSS x{f['tree_pss_kb'] / max(o['tree_pss_kb'], 1):.1f}"
                )
            else:
                print(f"ratio ref/ours ({mode}): n/a (a run failed)")
    if a.keep or a.workdir:
        print(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
