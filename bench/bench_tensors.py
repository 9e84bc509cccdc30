#!/usr/bin/env python3
"""Benchmark real-data (task "tensor") `msprobe compare`: ours against the reference, in GB/s of tensor files.

Uses a pair made by bench/gen_tensors.py (generated into --out unless it already holds a pair made with the same
--gb/--seed, or --data names one), then runs, each as its own child process,

    OURS -f pytorch compare -i compare.json -o OUT -s -j J      for every J in --jobs and pool in --pool
    REF  -f pytorch compare -i compare.json -o OUT -s           (when the reference is installed)

(-f mindspore when the pair was written without torch).  For each run: wall time, CPU time (user+sys of the child
and its reaped workers), peak RSS, and throughput = total bytes of both sides' tensor files / wall time, in GB/s
(1e9 bytes).  Peak RSS is shown twice: "RSS" is ru_maxrss from os.wait4 (the largest single process of the tree),
"tree" the peak of the summed VmRSS of the child and its worker processes, sampled every 20 ms (matters for
process pools).  Memory-mapped tensor pages count in both.  --repeat N runs each configuration N times,
round-robin over the configurations (so a load change hits all alike); the median and the best are shown.
--wait-idle P waits before each run until the CPUs are P% idle (useful on a shared machine).
--baseline REV also runs our package as of git revision REV (its src/ exported with git archive, run with
PYTHONPATH), round-robin with the working tree in every configuration, and prints the speed-ups: a same-session
before/after comparison that a busy machine affects alike.

The reference is slow (minutes per GB): --ref-gb X runs it on a separate, smaller pair generated with the same
shapes and seed (tensor sizes do not depend on --gb, see gen_tensors.py) and compares throughputs in GB/s; ours is
then also run on that smaller pair so both ratios are printed (with --data, the smaller pair still has the default
gen_tensors.py shapes).  --skip-ref skips the reference.  The ours/ref ratio uses runs in the same cache mode.

Page cache (--cache, comma-separated, default "cold,warm"; every configuration is run in each mode):
  cold  the pair's tensor files are evicted from the page cache before every run (sync, then
        posix_fadvise(DONTNEED) on each file; needs no root), so tensor data come from the disk while the programs'
        own files (Python, numpy, torch) stay cached: this isolates the data path from interpreter start-up;
  drop  `sync; echo 3 > /proc/sys/vm/drop_caches` before every run (root only): everything cold, start-up included;
        falls back to "cold" when not permitted;
  warm  the tensor files are read once before the runs, and every run finds them in the page cache.

Our tool's row workers are chosen with the MSPROBE_COMPARE_POOL environment variable (thread, process, auto):
--pool thread,process compares them.  Pairs, outputs and logs default to /var/tmp (not /tmp, which other jobs on
a shared machine may clean).

Usage: python3 bench/bench_tensors.py [--gb 2] [--out DIR | --data DIR] [--seed 1] [--jobs 1,2] [--pool auto]
           [--repeat 3] [--cache cold,warm] [--ref PATH | --skip-ref] [--ref-gb 0.5] [--ref-cache cold]
           [--ref-repeat 1] [--timeout SEC]
           [--json FILE] [--ours CMD] [--wait-idle PCT [--wait-max SEC]] [--baseline REV]
"""

import argparse
import glob
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

from benchlib import find_ours, tail

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REF = os.environ.get("MSPROBE_REF", "")  # the reference msprobe executable (its own virtualenv)
DEFAULT_OUT = "/var/tmp/msprobe_bench_tensors"


def tensor_files(pair):
    out = []
    for side in ("npu", "bench"):
        folder = os.path.join(pair, side, "step0", "rank", "dump_tensor_data")
        out += [os.path.join(folder, f) for f in sorted(os.listdir(folder))]
    return out


def ensure_pair(out, gb, seed, extra=()):
    """A gen_tensors.py pair in `out` made with these options, generated unless already there."""
    meta_path = os.path.join(out, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        o = meta.get("options", {})
        if o.get("gb") == gb and o.get("seed") == seed:
            print(f"reusing pair {out} ({meta['tensor_bytes_total'] / 1e9:.2f} GB of tensor files)", flush=True)
            return meta
    cmd = [
        sys.executable,
        os.path.join(HERE, "gen_tensors.py"),
        "--gb",
        str(gb),
        "--seed",
        str(seed),
        "--out",
        out,
        *extra,
    ]
    print("generating:", " ".join(shlex.quote(c) for c in cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    print(f"  generated in {time.perf_counter() - t0:.1f} s", flush=True)
    with open(meta_path) as f:
        return json.load(f)


def pair_info(pair):
    meta_path = os.path.join(pair, "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
    with open(os.path.join(pair, "npu", "step0", "rank", "dump.json")) as f:
        framework = json.load(f).get("framework", "pytorch")
    files = tensor_files(pair)
    return {
        "dir": pair,
        "framework": framework,
        "files": len(files),
        "bytes": sum(os.path.getsize(p) for p in files),
        "rows": meta.get("rows_npu"),
    }


def drop_caches():
    """True when the page cache was dropped."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def evict(pair_dir):
    """Drop the pair's tensor files from the page cache (clean, unmapped pages; hence the sync)."""
    os.sync()
    for path in tensor_files(pair_dir):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def prepare_cache(mode, pair_dir):
    """Bring the page cache into `mode` for the next run; returns the mode really used."""
    if mode == "drop":
        if drop_caches():
            return "drop"
        mode = "cold"
    if mode == "cold":
        evict(pair_dir)
        return "cold"
    warm_read(pair_dir)  # cheap when already cached
    return "warm"


def warm_read(pair):
    buf = bytearray(1 << 24)
    view = memoryview(buf)
    total = 0
    for path in tensor_files(pair):
        with open(path, "rb", buffering=0) as f:
            while True:
                k = f.readinto(view)
                if not k:
                    break
                total += k
    return total


def _children(pid):
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def tree_rss_kb(pid):
    """Summed VmRSS of pid and its descendants (0 when /proc is not readable)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
        todo += _children(p)
    return total


def run_child(cmd, cwd, log_path, timeout, env=None):
    """Run cmd; return dict(rc, wall, cpu, maxrss_kb, tree_rss_kb). Output goes to log_path.

    maxrss_kb: ru_maxrss from os.wait4 (the largest single process of the tree); tree_rss_kb: the peak of the
    summed RSS of the child and its worker processes, sampled every 20 ms (matters for process pools)."""
    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        except OSError as e:
            log.write(f"cannot start {cmd!r}: {e}\n".encode())
            return {"rc": None, "wall": 0.0, "cpu": 0.0, "maxrss_kb": 0, "tree_rss_kb": 0}
        deadline = t0 + timeout if timeout else None
        tree_peak = 0
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            tree_peak = max(tree_peak, tree_rss_kb(p.pid))
            if deadline and time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                p.returncode = -9
                return {
                    "rc": "timeout",
                    "wall": time.perf_counter() - t0,
                    "cpu": ru.ru_utime + ru.ru_stime,
                    "maxrss_kb": ru.ru_maxrss,
                    "tree_rss_kb": tree_peak,
                }
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        p.returncode = rc
    return {
        "rc": rc,
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "maxrss_kb": ru.ru_maxrss,
        "tree_rss_kb": max(tree_peak, ru.ru_maxrss),
    }


def cpu_idle(seconds=2.0):
    """Fraction of all CPUs' time idle over the next `seconds` (from /proc/stat; nan without it)."""

    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)  # idle + iowait, total

    try:
        i0, t0 = snap()
        time.sleep(seconds)
        i1, t1 = snap()
    except OSError:
        return float("nan")
    return (i1 - i0) / max(1, t1 - t0)


def wait_idle(a):
    """With --wait-idle P: wait (at most --wait-max s) until the CPUs are at least P% idle over 2 s."""
    if not a.wait_idle:
        return None
    deadline = time.monotonic() + a.wait_max
    while True:
        idle = cpu_idle()
        if idle * 100 >= a.wait_idle or time.monotonic() > deadline:
            return idle
        print(f"  waiting: CPUs {idle * 100:.0f}% idle (< {a.wait_idle}%)", flush=True)
        time.sleep(5)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return float("nan")


def baseline_command(rev, work):
    """Command running our package as of git revision `rev`: its src/ exported (git archive) into the workdir."""
    root = os.path.dirname(HERE)
    commit = subprocess.run(
        ["git", "-C", root, "rev-parse", "--short", rev], check=True, capture_output=True, text=True
    ).stdout.strip()
    dest = os.path.join(os.path.abspath(work), f"baseline_{commit}")
    if not os.path.isdir(os.path.join(dest, "src")):
        os.makedirs(dest, exist_ok=True)
        archive = subprocess.run(["git", "-C", root, "archive", commit, "src"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)
    print(f"baseline {rev} ({commit}): {dest}/src")
    return ["env", f"PYTHONPATH={dest}/src", sys.executable, "-m", "msprobe_compare"]


def run_once(cfg, i, a, work):
    """One run of a configuration (label, exe, pair, jobs, pool, cache, repeats)."""
    label, exe, pair, jobs, pool, cache, repeats = cfg
    out = os.path.join(work, f"out_{label}_{i}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = exe + ["-f", pair["framework"], "compare", "-i", os.path.join(pair["dir"], "compare.json"), "-o", out, "-s"]
    env = dict(os.environ)
    if jobs is not None:
        cmd += ["-j", str(jobs)]
    if pool:
        env["MSPROBE_COMPARE_POOL"] = pool
    used = prepare_cache(cache, pair["dir"])
    log = os.path.join(work, f"log_{label}_{i}.txt")
    idle = wait_idle(a)
    load0 = loadavg()
    print(
        f"running {label} [{i + 1}/{repeats}]: {' '.join(cmd)}" + (f"  (MSPROBE_COMPARE_POOL={pool})" if pool else ""),
        flush=True,
    )
    r = run_child(cmd, pair["dir"], log, a.timeout, env)
    r["load_before"] = load0
    r["idle_before"] = idle
    r["cache"] = used
    r["ok"] = r["rc"] == 0 and bool(glob.glob(os.path.join(out, "*.xlsx")))
    if r["ok"]:
        print(
            f"  {r['wall']:.2f} s wall, {r['cpu']:.2f} s cpu, {pair['bytes'] / 1e9 / r['wall']:.3f} GB/s, "
            f"peak RSS {r['maxrss_kb'] / 1024:.0f} MiB (tree {r['tree_rss_kb'] / 1024:.0f} MiB), "
            f"load avg before {load0:.2f}" + (f", {idle * 100:.0f}% idle before" if idle is not None else ""),
            flush=True,
        )
    else:
        why = "no xlsx written" if r["rc"] == 0 else f"exit {r['rc']}"
        print(f"  FAILED ({why}); last lines of {log}:\n{tail(log)}", flush=True)
    if not a.keep:
        shutil.rmtree(out, ignore_errors=True)
    return r


def measure_all(configs, a, work):
    """Run every configuration its number of times, round-robin (so a load change hits all alike)."""
    runs = {cfg[0]: [] for cfg in configs}
    for i in range(max(cfg[6] for cfg in configs)):
        for cfg in configs:
            if i < cfg[6]:
                runs[cfg[0]].append(run_once(cfg, i, a, work))
    return [summarize(cfg, runs[cfg[0]]) for cfg in configs]


def summarize(cfg, runs):
    label, _, pair, jobs, pool, _, _ = cfg
    ok = [r for r in runs if r["ok"]]
    res = {
        "label": label,
        "pair": pair["dir"],
        "bytes": pair["bytes"],
        "jobs": jobs,
        "pool": pool,
        "cache": runs[-1]["cache"],
        "ok": len(ok) == len(runs),
        "runs": runs,
    }
    if ok:
        walls = [r["wall"] for r in ok]
        res.update(
            wall_median=statistics.median(walls),
            wall_best=min(walls),
            cpu_median=statistics.median(r["cpu"] for r in ok),
            rss_mib=max(r["maxrss_kb"] for r in ok) / 1024,
            tree_rss_mib=max(r["tree_rss_kb"] for r in ok) / 1024,
            gbps_median=pair["bytes"] / 1e9 / statistics.median(walls),
            gbps_best=pair["bytes"] / 1e9 / min(walls),
            load_before=statistics.median(r["load_before"] for r in ok),
        )
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description="benchmark real-data msprobe compare (GB/s), ours against the reference")
    ap.add_argument("--gb", type=float, default=2.0, help="tensor bytes per side of the main pair (1e9 bytes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=DEFAULT_OUT, help="folder of the generated main pair (reused when it matches)")
    ap.add_argument("--data", help="use this pair folder (holding compare.json) as is")
    ap.add_argument("--jobs", default="1,2", help="comma-separated -j values for our tool ('' = no -j)")
    ap.add_argument("--pool", default="auto", help="comma-separated MSPROBE_COMPARE_POOL values: auto,thread,process")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", default="cold,warm", help="comma-separated page-cache modes: cold, drop, warm")
    ap.add_argument("--ref-cache", default="cold", help="page-cache mode of the reference runs (default cold)")
    ap.add_argument("--ours", help="command for our tool (default: msprobe on PATH, else python3 -m msprobe_compare)")
    ap.add_argument("--ref", help="reference msprobe executable (default: $MSPROBE_REF, if set and present)")
    ap.add_argument("--skip-ref", action="store_true")
    ap.add_argument("--ref-gb", type=float, help="run the reference on a smaller pair of this size (GB per side)")
    ap.add_argument("--ref-repeat", type=int, default=1, help="runs of the reference (default 1; it is slow)")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per run (0 = none)")
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        help="before each run wait until the CPUs are this %% idle over 2 s (shared machines)",
    )
    ap.add_argument("--wait-max", type=float, default=600, help="longest wait for --wait-idle, seconds")
    ap.add_argument("--workdir", default="/var/tmp/msprobe_bench_tensors_runs", help="outputs and logs")
    ap.add_argument("--keep", action="store_true", help="keep the xlsx outputs")
    ap.add_argument("--json", help="write all results to this JSON file")
    ap.add_argument(
        "--baseline",
        help="also run our source tree as of this git revision (e.g. HEAD), round-robin "
        "with ours in every configuration, and print the speed-ups",
    )
    a = ap.parse_args(argv)

    ref = None
    if not a.skip_ref:
        ref = a.ref or (DEFAULT_REF if os.path.exists(DEFAULT_REF) else None)
        if ref and not os.path.exists(ref):
            print(f"reference not found: {ref}; skipping it")
            ref = None
    ours = shlex.split(a.ours) if a.ours else find_ours(ref)
    os.makedirs(a.workdir, exist_ok=True)

    main_dir = os.path.abspath(a.data) if a.data else os.path.abspath(a.out)
    if not a.data:
        ensure_pair(main_dir, a.gb, a.seed)
    main_pair = pair_info(main_dir)
    ref_pair = main_pair
    if ref and a.ref_gb and not (a.data is None and a.ref_gb >= a.gb):
        ref_dir = f"{main_dir.rstrip('/')}_ref{a.ref_gb:g}"
        ensure_pair(ref_dir, a.ref_gb, a.seed)
        ref_pair = pair_info(ref_dir)

    caches = [c.strip() for c in a.cache.split(",") if c.strip()]
    for c in caches + [a.ref_cache]:
        if c not in ("cold", "drop", "warm"):
            ap.error(f"unknown cache mode {c!r}")

    jobs_list = [int(j) for j in a.jobs.split(",") if j.strip()] or [None]
    pools = [p.strip() for p in a.pool.split(",") if p.strip()] or [None]
    base = baseline_command(a.baseline, a.workdir) if a.baseline else None
    configs = []
    for cache in caches:
        for pool in pools:
            for jobs in jobs_list:
                label = f"ours_j{jobs if jobs else 'def'}_{pool or 'env'}_{cache}"
                configs.append((label, ours, main_pair, jobs, pool, cache, a.repeat))
                if base:
                    configs.append(("base" + label[4:], base, main_pair, jobs, pool, cache, a.repeat))
    if ref and ref_pair is not main_pair:
        configs.append((f"ours_refpair_{a.ref_cache}", ours, ref_pair, None, None, a.ref_cache, a.repeat))
    results = measure_all(configs, a, a.workdir)
    ours_on_ref = results[-1] if ref and ref_pair is not main_pair else None
    ref_res = None
    if ref:
        cfg = (f"ref_{a.ref_cache}", [ref], ref_pair, None, None, a.ref_cache, a.ref_repeat)
        ref_res = measure_all([cfg], a, a.workdir)[0]
        results.append(ref_res)

    print()
    print(
        f"machine: {os.cpu_count()} cpus, python {platform.python_version()}; cache modes: cold = tensor files "
        f"evicted before each run, drop = whole page cache dropped, warm = files cached"
    )
    for p in [main_pair] + ([ref_pair] if ref_pair is not main_pair else []):
        print(
            f"pair {p['dir']}: {p['framework']}, {p['rows']} rows, {p['files']} tensor files, "
            f"{p['bytes'] / 1e9:.3f} GB both sides"
        )
    hdr = (
        f"{'run':<26} {'pair GB':>8} {'wall med':>9} {'wall best':>9} {'cpu s':>8} {'GB/s med':>9} "
        f"{'GB/s best':>9} {'RSS MiB':>8} {'tree MiB':>8} {'load':>5}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        if not r.get("wall_median"):
            print(f"{r['label']:<26} {r['bytes'] / 1e9:>8.2f}  FAILED")
            continue
        print(
            f"{r['label']:<26} {r['bytes'] / 1e9:>8.2f} {r['wall_median']:>9.2f} {r['wall_best']:>9.2f} "
            f"{r['cpu_median']:>8.2f} {r['gbps_median']:>9.3f} {r['gbps_best']:>9.3f} {r['rss_mib']:>8.0f} "
            f"{r['tree_rss_mib']:>8.0f} "
            f"{r['load_before']:>5.2f}"
        )
    for r in results:
        b = next((x for x in results if x["label"] == "base" + r["label"][4:]), None)
        if r["label"].startswith("ours_j") and b and r.get("wall_median") and b.get("wall_median"):
            paired = [x["wall"] / y["wall"] for x, y in zip(b["runs"], r["runs"]) if x["ok"] and y["ok"]]
            print(
                f"{r['label']}: x{b['wall_median'] / r['wall_median']:.2f} faster than {a.baseline} (medians; "
                f"per round {', '.join(f'x{q:.2f}' for q in paired)}), cpu x{b['cpu_median'] / r['cpu_median']:.2f}"
            )
    if ref_res and ref_res.get("wall_median"):
        rr = ref_res
        same_cache = [
            r for r in results if r["label"].startswith("ours_j") and r.get("gbps_median") and r["cache"] == rr["cache"]
        ]
        best_ours = max(same_cache, key=lambda r: r["gbps_median"], default=None)
        if best_ours:
            note = "" if ref_pair is main_pair else f"; reference on the {ref_pair['bytes'] / 1e9:.2f} GB pair"
            print(
                f"throughput ratio ours/ref ({rr['cache']} cache{note}): {best_ours['label']} "
                f"{best_ours['gbps_median']:.3f} GB/s vs ref {rr['gbps_median']:.4f} GB/s = "
                f"x{best_ours['gbps_median'] / rr['gbps_median']:.1f}"
            )
        if ours_on_ref and ours_on_ref.get("wall_median"):
            print(
                f"same pair ({ref_pair['bytes'] / 1e9:.2f} GB, {rr['cache']} cache, our default -j/pool): ours "
                f"{ours_on_ref['wall_median']:.2f} s vs ref {rr['wall_median']:.2f} s = "
                f"x{rr['wall_median'] / ours_on_ref['wall_median']:.1f} faster"
            )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pairs": [main_pair, ref_pair], "results": results}, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
