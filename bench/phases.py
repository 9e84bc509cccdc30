#!/usr/bin/env python3
"""Where the time of one compare goes: start-up, read, pair, measure, judge, write.

Runs `msprobe -f pytorch compare -i DIR/compare.json -o OUT -s --format FORMATS` in a child process that wraps the
pipeline's stage functions (as `api` calls them; nothing in the package changes) with timers, and prints per phase
the wall time, the CPU time of the process (all its threads) plus that of the children it reaped meanwhile (the
forked reader of the bench side, the second writer of a csv), and the share of the whole run:

    start-up  from the parent's start of the child process to the end of the imports
    read      open_dump, stack.json, both dump.json flattened (and construct.json, read meanwhile)
    pair      mapping keys, exact / fuzzy / data-mapping match, dtype gate, the risk_level note
    measure   statistics differences (stat_diffs), real-data metrics (measure_tensors)
    judge     verdicts, colours, the advisor, the root cause
    write     every result file (report.write_all)
    other     the rest of the run: argument parsing, configuration, summaries, exit

`--repeat N` runs N children and prints the median of each figure. The machine's load moves wall times (CPU
times less), so the load average is printed too.

Usage: python3 bench/phases.py --data DIR [--format csv] [--repeat 3] [--src DIR] [--keep OUT]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "src")
PHASES = ("start-up", "read", "pair", "measure", "judge", "write", "other")
STAGES = {  # api attribute -> phase
    "open_dump": "read", "read_stack_json": "read", "flatten_sides": "read",
    "_mapped_keys": "pair", "match_exact": "pair", "match_fuzzy": "pair", "match_data_mapping": "pair",
    "apply_dtype_gate": "pair", "param_grad_keys": "pair", "risk_level_note": "pair",
    "measure_tensors": "measure", "measure": "measure", "judge": "judge",
}  # fmt: skip


def _cpu():
    import resource

    own = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + kids.ru_utime + kids.ru_stime


def child(argv, result_path, started):
    """One compare in this process, stages timed; the figures go to result_path as JSON. `started`: the parent's
    time.time() just before it started this process."""
    from msprobe_compare import cli  # first, as `python -m msprobe_compare` does (it sets the BLAS threads)
    from msprobe_compare import api
    from msprobe_compare.render import report

    wall = dict.fromkeys(PHASES, 0.0)
    cpu = dict.fromkeys(PHASES, 0.0)
    wall["start-up"] = time.time() - started
    cpu["start-up"] = _cpu()  # CPU since this process started: interpreter start and imports

    def timed(fn, phase):
        def wrapper(*args, **kwargs):
            w, c = time.perf_counter(), _cpu()
            try:
                return fn(*args, **kwargs)
            finally:
                wall[phase] += time.perf_counter() - w
                cpu[phase] += _cpu() - c

        return wrapper

    for name, phase in STAGES.items():
        if hasattr(api, name):
            setattr(api, name, timed(getattr(api, name), phase))
    report.write_all = timed(report.write_all, "write")
    api.report = report
    t1, c1 = time.perf_counter(), _cpu()
    code = cli.main(argv)
    total_wall, total_cpu = time.perf_counter() - t1, _cpu() - c1
    wall["other"] = total_wall - sum(wall[p] for p in PHASES[1:-1])
    cpu["other"] = total_cpu - sum(cpu[p] for p in PHASES[1:-1])
    with open(result_path, "w") as f:
        json.dump({"code": code, "wall": wall, "cpu": cpu}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder with compare.json")
    ap.add_argument("--format", default="csv")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--src", default=os.path.join(ROOT, "src"), help="folder holding the msprobe_compare package")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--keep", default=None, help="output folder to keep (default: a temporary one, removed)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--started", type=float, default=0.0, help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.child:
        child(rest[1:] if rest[:1] == ["--"] else rest, args.child, args.started)
        return
    res = measure_phases(args.data, args.format, args.repeat, args.src, args.python, args.keep)
    print(
        f"{args.data}, --format {args.format}: median of {len(res['runs'])} run(s); load average "
        f"{min(res['loads']):.2f}-{max(res['loads']):.2f} at the starts"
    )
    print("| phase | wall s | CPU s | share of wall |")
    print("|---|---:|---:|---:|")
    for p, w, c, share in phase_rows(res):
        print(f"| {p} | {w:.3f} | {c:.3f} | {share:.0%} |")


def measure_phases(data, fmt="csv", repeat=1, src=SRC, python=sys.executable, keep=None):
    """Run `repeat` timed children on the pair in `data`; the median wall and CPU per phase, every run, the loads.

    Exits with a one-line message (and the tail of the child's stderr) when a compare fails."""
    runs = []
    loads = []
    for _ in range(repeat):
        out = keep or tempfile.mkdtemp(prefix="msprobe_phases_")
        fd, result = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        cmd = [python, os.path.abspath(__file__), "--data", data, "--child", result, "--started", "0", "--",
               "-f", "pytorch", "compare", "-i", "compare.json", "-o", os.path.abspath(out), "-s",
               "--format", fmt]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
        loads.append(os.getloadavg()[0])
        cmd[cmd.index("--started") + 1] = repr(time.time())
        proc = subprocess.run(cmd, env=env, cwd=data, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        with open(result) as f:
            text = f.read()
        os.unlink(result)
        if not keep:
            shutil.rmtree(out, ignore_errors=True)
        if proc.returncode != 0 or not text or json.loads(text)["code"] != 0:
            sys.exit(f"the compare failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        runs.append(json.loads(text))
    wall = {p: statistics.median(r["wall"][p] for r in runs) for p in PHASES}
    cpu = {p: statistics.median(r["cpu"][p] for r in runs) for p in PHASES}
    return {"wall": wall, "cpu": cpu, "runs": runs, "loads": loads}


def phase_rows(res):
    """(phase, wall s, CPU s, share of the total wall) per phase, then ("total", ...)."""
    wall, cpu = res["wall"], res["cpu"]
    total_wall, total_cpu = sum(wall.values()), sum(cpu.values())
    rows = [(p, wall[p], cpu[p], wall[p] / total_wall if total_wall else 0.0) for p in PHASES]
    return rows + [("total", total_wall, total_cpu, 1.0)]


if __name__ == "__main__":
    main()
