#!/usr/bin/env python3
"""Start-up budget: how long a small compare takes from process start to exit, against the interpreter's floor.

Runs, round-robin so that load from other jobs falls on every variant alike,

    PY -c pass
    PY -c "import numpy"
    PY -c "import numpy" with OPENBLAS_NUM_THREADS=1 (as the CLI sets it before numpy starts its BLAS threads)
    PY -m msprobe_compare -f pytorch compare -i compare.json -o OUT -s --format csv    (per source tree)

`--repeat` times each, then once more per source tree with `-X importtime`, and prints per variant the median and
best wall time, the median CPU time (user+sys of the child), the total import time (the sum of the top-level
modules' cumulative times from `-X importtime`, itself inflated by the measuring) and the overhead over `-c pass`
and over the pinned `import numpy`, then the goal: the median wall time of a small compare <= 0.15 s. This is a
measurement, not a test: the machine's load moves it, so the load average is printed with it. `--instructions`
also counts each variant's instructions once under valgrind's callgrind (PYTHONHASHSEED=0), which load does not
move: the figure to compare two trees by on a busy machine.

Source trees: `--src LABEL=DIR` (repeatable; DIR holds the `msprobe_compare` package, e.g. another checkout's
`src`), default this checkout's `src`. Each is byte-compiled first (`compileall`), as an installed package is,
so that a PYTHONDONTWRITEBYTECODE environment does not time the compiler (`--no-compile` to skip).
The case defaults to examples/pytorch_mlp_bug_stat (103 rows); `--case DIR` takes a folder with compare.json.

Usage: python3 bench/start.py [--repeat 15] [--src main=OTHER/src --src new=src] [--case DIR] [--python PY]
                              [--instructions]
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import load1, machine_info, machine_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GOAL_S = 0.15
COMPARE = ["-m", "msprobe_compare", "-f", "pytorch", "compare", "-i", "compare.json", "-s", "--format", "csv"]


def timed(cmd, cwd, env):
    """(wall s, CPU s of the child) of one run; the run must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.decode(errors='replace')[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_total(cmd, cwd, env):
    """Seconds of import time of a run: the cumulative times of the modules imported at the top level."""
    proc = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    total = 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        if not name.startswith("  "):  # depth 0: imported by the program itself, children included
            total += int(cumulative)
    return total / 1e6


def instructions(cmd, cwd, env):
    """Instructions of one run under callgrind (valgrind must be installed), or None."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], cwd=cwd,
                          env={**env, "PYTHONHASHSEED": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)  # fmt: skip
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--src", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--case", default=os.path.join(ROOT, "examples", "pytorch_mlp_bug_stat"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--instructions", action="store_true", help="also count instructions under callgrind")
    args = ap.parse_args()
    trees = [s.split("=", 1) if "=" in s else (s, s) for s in args.src] or [("ours", os.path.join(ROOT, "src"))]
    if not args.no_compile:
        for _, tree in trees:
            subprocess.run([args.python, "-m", "compileall", "-q", os.path.join(tree, "msprobe_compare")],
                           check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = tempfile.mkdtemp(prefix="msprobe_start_")
    variants = [("python -c pass", [args.python, "-c", "pass"], base_env, None),
                ('python -c "import numpy"', [args.python, "-c", "import numpy"], base_env, None),
                ('the same, OPENBLAS_NUM_THREADS=1', [args.python, "-c", "import numpy"],
                 {**base_env, "OPENBLAS_NUM_THREADS": "1"}, None)]  # fmt: skip
    for label, tree in trees:
        env = {**base_env, "PYTHONPATH": os.path.abspath(tree)}
        variants.append((f"compare ({label})", [args.python, *COMPARE, "-o", out], env, args.case))
    loads = [load1()]
    walls = {v[0]: [] for v in variants}
    cpus = {v[0]: [] for v in variants}
    try:
        for _ in range(args.repeat):
            for name, cmd, env, cwd in variants:
                wall, cpu = timed(cmd, cwd, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
                shutil.rmtree(out, ignore_errors=True)
            loads.append(load1())
        imports = {name: import_total(cmd, cwd, env) for name, cmd, env, cwd in variants}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    floor = statistics.median(walls["python -c pass"])
    numpy_floor = statistics.median(walls["the same, OPENBLAS_NUM_THREADS=1"])  # the numpy the CLI imports
    print(f"{machine_line(machine_info())}; load average {min(loads):.2f}-{max(loads):.2f} during the runs")
    print(f"case: {args.case}; {args.repeat} runs per variant, round-robin")
    numpy_cpu = statistics.median(cpus["the same, OPENBLAS_NUM_THREADS=1"])
    print(
        "| variant | median wall s | best wall s | median CPU s | import total s | wall over -c pass | "
        "wall over pinned numpy | CPU over pinned numpy |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, *_ in variants:
        med = statistics.median(walls[name])
        print(f"| {name} | {med:.3f} | {min(walls[name]):.3f} | {statistics.median(cpus[name]):.3f} | "
              f"{imports[name]:.3f} | {med - floor:+.3f} | {med - numpy_floor:+.3f} | "
              f"{statistics.median(cpus[name]) - numpy_cpu:+.3f} |")  # fmt: skip
    if args.instructions and shutil.which("valgrind"):
        print("| variant | instructions (callgrind) |")
        print("|---|---:|")
        for name, cmd, env, cwd in variants:
            count = instructions(cmd, cwd, env)
            shutil.rmtree(out, ignore_errors=True)
            print(f"| {name} | {count:,} |" if count else f"| {name} | n/a |")
    for name, *_ in variants[3:]:
        med = statistics.median(walls[name])
        print(f"goal: {name} median wall {med:.3f} s <= {GOAL_S} s: {'met' if med <= GOAL_S else 'NOT met'}")


if __name__ == "__main__":
    main()
