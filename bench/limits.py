#!/usr/bin/env python3
"""The figures of issue 17 in one run: ours beside the reference, ours against the goals, where the time goes.

1. Side by side: three cases, each run by our tool and by the reference (mindstudio-probe 8.3.3) alternately,
   `--runs` times each (the order flips every round), as child processes measured as in bench_stats.py:

       small        examples/pytorch_mlp_bug_stat (103 rows, a real dump)
       stats_63k    gen_stats.py --entries 17700 --seed 1 (62,991 rows)
       tensor_1485  gen_tensors.py --gb 0.0358 --seq 32 --hidden 128 --heads 4 --ffn 344 --vocab 1000 --seed 1
                    (1,485 rows of real-data tensors; the page cache is warmed before each run of either tool)

   Ours: `-f FW compare -i compare.json -o OUT -s --format xlsx` (one coloured xlsx); the reference: the same
   without --format (one xlsx, not coloured: ours does a little more). Per tool: median wall, median CPU
   (user+sys of the child and what it reaped), the largest peak memory (the larger of peak RSS and the sampled
   summed PSS of the process tree), and the ratios reference / ours of the three.
2. Goals, ours only, the variants round-robin `--runs` times: the 1M-row pair in the dumper's layout
   (gen_stats.py --entries 281300 --seed 1, indent 1) as csv and as coloured xlsx, the same documents compact
   (--indent 0) as csv, the 2 GB tensor pair (gen_tensors.py --gb 2 --seed 1, warm page cache, GB/s = tensor
   bytes of both sides / wall, 1 GB = 1e9 bytes), and the start-up (bench/start.py's small csv compare). The
   reference on the 1M and 2 GB pairs takes ~40 min and ~1 min: it runs once only with --ref-big; otherwise
   bench/run_all.py's reference cache is read and a cached result is shown with its date.
3. Phases: bench/phases.py's breakdown (read, pair, measure, judge, write) of the 1M-row csv run.

Inputs are generated when their folder (under --data-root, default /var/tmp) holds no compare.json naming dumps inside it. Tensor pairs
are written by a Python that has torch (.pt files, framework pytorch): this one if it can import torch, else the
interpreter next to --ref (torch only; the reference package is never imported). --quick: small generated inputs,
one run each, a smoke test (< 1 minute); its figures mean nothing.

Usage: python3 bench/limits.py [--runs 3] [--ref PATH | --skip-ref] [--ref-big] [--markdown] [--json OUT]
           [--quick] [--data-root DIR] [--workdir DIR] [--python PY] [--start-runs 15] [--phase-runs 1]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys

from benchlib import load1, machine_info, machine_line, tail
from bench_stats import run_child
from bench_tensors import pair_info, warm_read
import phases
import run_all
import start

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "src")
DEFAULT_REF = os.environ.get("MSPROBE_REF", "")  # the reference msprobe executable (its own virtualenv)
DEFAULT_ROOT = "/var/tmp"
DEFAULT_WORKDIR = "/var/tmp/msprobe_bench_limits"
GB = 1e9
GIB = 2**30
SMALL_TENSORS = ["--seq", "32", "--hidden", "128", "--heads", "4", "--ffn", "344", "--vocab", "1000"]

# name -> (kind, folder under --data-root or None for the example, generator args, quick generator args)
SIDE_CASES = {
    "small": ("stats", None, None, None),
    "stats_63k": (
        "stats",
        "msprobe_bench_stats_63k",
        ["gen_stats.py", "--entries", "17700", "--seed", "1"],
        ["gen_stats.py", "--entries", "600", "--seed", "1"],
    ),
    "tensor_1485": (
        "tensor",
        "msprobe_bench_tensors_1485",
        ["gen_tensors.py", "--gb", "0.0358", *SMALL_TENSORS, "--seed", "1"],
        ["gen_tensors.py", "--gb", "0.003", *SMALL_TENSORS, "--seed", "1"],
    ),
}
BIG_CASES = {  # run_all's case names, so that its reference cache applies
    "stats_1m": (
        "stats",
        "msprobe_bench_stats_1m",
        ["gen_stats.py", "--entries", "281300", "--seed", "1"],
        ["gen_stats.py", "--entries", "3000", "--seed", "1"],
    ),
    "stats_1m_compact": (
        "stats",
        "msprobe_bench_stats_1m_compact",
        ["gen_stats.py", "--entries", "281300", "--seed", "1", "--indent", "0"],
        ["gen_stats.py", "--entries", "3000", "--seed", "1", "--indent", "0"],
    ),
    "tensor_2g": (
        "tensor",
        "msprobe_bench_tensors_2g",
        ["gen_tensors.py", "--gb", "2", "--seed", "1"],
        ["gen_tensors.py", "--gb", "0.02", *SMALL_TENSORS, "--seed", "1"],
    ),
}
BIG_VARIANTS = [
    ("1M csv", "stats_1m", "csv"),
    ("1M compact csv", "stats_1m_compact", "csv"),
    ("1M xlsx", "stats_1m", "xlsx"),
    ("2 GB tensors", "tensor_2g", "xlsx"),
]
GOALS = {
    "csv_s": 6.0,
    "xlsx_s": 12.0,
    "peak_bytes": GIB,
    "compact_ratio": 1.15,
    "tensor_gbs": 6.0,
    "start_s": start.GOAL_S,
}


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------- inputs


def torch_python(candidates: list[str]) -> str:
    """The first interpreter of `candidates` that imports torch (else the first one)."""
    for py in candidates:
        if (
            py
            and os.path.exists(py)
            and subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0
        ):
            return py
    return candidates[0]


def case_folder(name: str, spec: tuple, a: argparse.Namespace) -> str:
    """Folder of a case, generated first unless it holds a compare.json naming dumps inside it."""
    kind, folder, gen, quick_gen = spec
    if folder is None:
        return os.path.join(ROOT, "examples", "pytorch_mlp_bug_stat")
    path = os.path.join(a.data_root, ("msprobe_bench_quick_" + name) if a.quick else folder)
    if not _inputs_inside(path):
        args = quick_gen if a.quick else gen
        py = a.gen_python if kind == "tensor" else sys.executable
        cmd = [py, os.path.join(HERE, args[0]), *args[1:], "--out", path]
        log(f"[{name}] generating: {shlex.join(cmd)}")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


def _inputs_inside(path: str) -> bool:
    """Whether `path` holds a compare.json whose dump files exist inside `path` (a folder generated elsewhere and
    moved names its old place: it is generated again)."""
    try:
        with open(os.path.join(path, "compare.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    root = os.path.realpath(path) + os.sep
    files = [config.get(k) for k in ("npu_path", "bench_path")]
    return all(isinstance(x, str) and os.path.realpath(x).startswith(root) and os.path.exists(x) for x in files)


def describe(kind: str, folder: str) -> dict:
    """Framework, rows (from meta.json or the generator's count; None when unknown cheaply) and tensor bytes."""
    if kind == "tensor":
        p = pair_info(folder)
        return {"framework": p["framework"], "rows": p["rows"], "tensor_bytes": p["bytes"]}
    meta = os.path.join(folder, "meta.json")
    rows = None
    if os.path.exists(meta):
        with open(meta) as f:
            rows = json.load(f).get("rows_npu")
    elif os.path.getsize(os.path.join(folder, "npu", "step0", "rank", "dump.json")) < 50_000_000:
        rows = run_all.count_rows(folder)[0]
    return {"framework": "pytorch", "rows": rows, "tensor_bytes": None}


# ------------------------------------------------------------------------------------------------------ runs


@contextlib.contextmanager
def env_path(src: str | None):
    """PYTHONPATH=src for the children started inside (ours); unchanged when src is None (the reference)."""
    old = os.environ.get("PYTHONPATH")
    if src:
        os.environ["PYTHONPATH"] = src
    try:
        yield
    finally:
        if src:
            if old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old


def one_run(
    tool: str,
    cmd: list[str],
    folder: str,
    info: dict,
    fmt: str,
    label: str,
    a: argparse.Namespace,
    warm: bool,
    sample: float = 0.05,
) -> dict:
    """One compare as a child in `folder`: bench_stats.run_child's figures plus ok, load and peak bytes."""
    out = os.path.join(a.workdir, f"out_{label}")
    shutil.rmtree(out, ignore_errors=True)
    full = cmd + ["-f", info["framework"], "compare", "-i", "compare.json", "-o", out, "-s"]
    if tool == "ours":
        full += ["--format", fmt]
    if warm:
        warm_read(folder)
    logf = os.path.join(a.workdir, f"log_{label}.txt")
    load0 = load1()
    with env_path(a.src if tool == "ours" else None):
        r = run_child(full, folder, logf, a.timeout, sample=sample)
    r.update(tool=tool, load_before=load0, cmd=shlex.join(full), ok=r["rc"] == 0 and run_all.outputs_ok(out, (fmt,), 1))
    r["peak_bytes"] = run_all.peak_bytes(r)
    if r["ok"]:
        log(
            f"  {label}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, peak {r['peak_bytes'] / 2**20:.0f} MiB "
            f"(load {load0:.2f})"
        )
    else:
        log(f"  {label}: FAILED (exit {r['rc']}); last lines of {logf}:\n{tail(logf)}")
    shutil.rmtree(out, ignore_errors=True)
    return r


def summary(runs: list[dict]) -> dict:
    """Median wall and CPU, range of wall, largest peak over the successful runs."""
    ok = [r for r in runs if r["ok"]]
    if not ok:
        return {"ok": False, "n": 0, "runs": runs}
    walls = [r["wall"] for r in ok]
    return {
        "ok": len(ok) == len(runs),
        "n": len(ok),
        "wall": statistics.median(walls),
        "wall_min": min(walls),
        "wall_max": max(walls),
        "cpu": statistics.median(r["cpu"] for r in ok),
        "peak_bytes": max(r["peak_bytes"] for r in ok),
        "runs": runs,
    }


def ratio(x: float | None, y: float | None) -> float | None:
    return x / y if x and y else None


def side_by_side(a: argparse.Namespace, ours: list[str], ref: str | None) -> dict:
    """Section 1: each case, ours and the reference alternating, a.runs runs each."""
    out = {}
    for name, spec in SIDE_CASES.items():
        folder = case_folder(name, spec, a)
        info = describe(spec[0], folder)
        log(f"[{name}] {folder}: {info['rows'] or '?'} rows")
        tools = [("ours", ours)] + ([("reference", [ref])] if ref else [])
        runs: dict[str, list[dict]] = {t: [] for t, _ in tools}
        for i in range(a.runs):
            for tool, cmd in tools if i % 2 == 0 else tools[::-1]:
                runs[tool].append(
                    one_run(tool, cmd, folder, info, "xlsx", f"{name}_{tool}_{i}", a, spec[0] == "tensor")
                )
        res = {
            "dir": folder,
            **info,
            "ours": summary(runs["ours"]),
            "reference": summary(runs["reference"]) if ref else None,
        }
        o, r = res["ours"], res["reference"] or {}
        res["ratios"] = {k: ratio(r.get(k), o.get(k)) for k in ("wall", "cpu", "peak_bytes")}
        out[name] = res
    return out


def cached_reference(case: str, folder: str, cache: dict) -> dict | None:
    """run_all's cached reference result for this pair, if any (successful runs only)."""
    kind = BIG_CASES[case][0]
    entry = cache["entries"].get(run_all.cache_key(case, run_all.fingerprint(kind, folder)))
    return entry if entry and entry.get("ok") else None


def big_reference(case: str, folder: str, info: dict, a: argparse.Namespace, ref: str, cache: dict) -> dict:
    """Run the reference once on a big pair and store the result in run_all's cache."""
    kind = BIG_CASES[case][0]
    r = one_run("reference", [ref], folder, info, "xlsx", f"{case}_reference", a, kind == "tensor")
    fp = run_all.fingerprint(kind, folder)
    entry = {
        "case": case,
        "key": run_all.cache_key(case, fp),
        "fingerprint": fp,
        "input_dir": folder,
        "source": "limits",
        "date": run_all.now_utc(),
        "machine": machine_info(),
        "ref_version": run_all.ref_version(ref),
        "command": r["cmd"],
        "wall": r["wall"],
        "cpu": r["cpu"],
        "maxrss_kb": r["maxrss_kb"],
        "tree_pss_kb": r["tree_pss_kb"],
        "rc": r["rc"],
        "ok": r["ok"],
        "load_before": r["load_before"],
        "cache_mode": "warm" if kind == "tensor" else None,
    }
    if r["rc"] != "timeout" and not a.quick:
        cache["entries"][entry["key"]] = entry
        run_all.save_cache(a.ref_cache, cache)
    return entry


def big_runs(a: argparse.Namespace, ours: list[str], ref: str | None) -> dict:
    """Section 2: ours on the 1M-row and 2 GB pairs, round-robin; the reference cached or (--ref-big) run once."""
    folders = {c: case_folder(c, spec, a) for c, spec in BIG_CASES.items()}
    infos = {c: describe(BIG_CASES[c][0], f) for c, f in folders.items()}
    runs: dict[str, list[dict]] = {v[0]: [] for v in BIG_VARIANTS}
    for i in range(a.runs):
        for label, case, fmt in BIG_VARIANTS:
            tag = label.replace(" ", "_")
            runs[label].append(
                one_run(
                    "ours",
                    ours,
                    folders[case],
                    infos[case],
                    fmt,
                    f"{tag}_{i}",
                    a,
                    BIG_CASES[case][0] == "tensor",
                    sample=0.1,
                )
            )
    cache = run_all.load_cache(a.ref_cache)
    refs = {}
    for case in ("stats_1m", "tensor_2g"):
        if a.ref_big and ref:
            refs[case] = dict(big_reference(case, folders[case], infos[case], a, ref, cache), status="run")
        else:
            e = cached_reference(case, folders[case], cache)
            refs[case] = dict(e, status="cached") if e else None
    return {"dirs": folders, "infos": infos, "variants": {k: summary(v) for k, v in runs.items()}, "ref": refs}


def startup(a: argparse.Namespace) -> dict:
    """bench/start.py's small csv compare, a.start_runs times: median and best wall, median CPU."""
    py = a.python
    subprocess.run(
        [py, "-m", "compileall", "-q", os.path.join(a.src, "msprobe_compare")], check=True, stdout=subprocess.DEVNULL
    )
    env = {**os.environ, "PYTHONPATH": a.src}
    out = os.path.join(a.workdir, "out_start")
    walls, cpus = [], []
    for _ in range(a.start_runs):
        w, c = start.timed([py, *start.COMPARE, "-o", out], os.path.join(ROOT, "examples", "pytorch_mlp_bug_stat"), env)
        walls.append(w)
        cpus.append(c)
        shutil.rmtree(out, ignore_errors=True)
    return {"wall": statistics.median(walls), "wall_min": min(walls), "cpu": statistics.median(cpus), "n": len(walls)}


# ----------------------------------------------------------------------------------------------------- goals


def goal_rows(big: dict, st: dict) -> list[dict]:
    """The issue's goals, each with our value, the goal, and status met / NOT met / n/a."""
    v = big["variants"]
    out = []

    def add(name: str, value: float | None, text: str, goal: str, ok: bool | None) -> None:
        out.append(
            {
                "goal": name,
                "value": value,
                "text": text if value is not None else "-",
                "limit": goal,
                "status": "n/a" if value is None else ("met" if ok else "NOT met"),
            }
        )

    csv, xlsx, comp = v["1M csv"].get("wall"), v["1M xlsx"].get("wall"), v["1M compact csv"].get("wall")
    add(
        "1M rows, csv (indent 1), median wall",
        csv,
        f"{csv or 0:.2f} s",
        f"<= {GOALS['csv_s']:g} s",
        csv is not None and csv <= GOALS["csv_s"],
    )
    add(
        "1M rows, coloured xlsx, median wall",
        xlsx,
        f"{xlsx or 0:.2f} s",
        f"<= {GOALS['xlsx_s']:g} s",
        xlsx is not None and xlsx <= GOALS["xlsx_s"],
    )
    peaks = [v[k].get("peak_bytes") for k in ("1M csv", "1M compact csv", "1M xlsx")]
    peak = max(p for p in peaks if p) if any(peaks) else None
    add(
        "1M rows, peak memory of the process tree (csv, compact, xlsx)",
        peak,
        f"{(peak or 0) / GIB:.2f} GiB",
        "< 1 GiB",
        peak is not None and peak < GOALS["peak_bytes"],
    )
    cr = ratio(comp, csv)
    ccpu = ratio(v["1M compact csv"].get("cpu"), v["1M csv"].get("cpu"))
    add(
        "compact / indent 1, csv median wall",
        cr,
        f"{cr or 0:.2f}x ({comp or 0:.2f} s; CPU {ccpu or 0:.2f}x)",
        f"<= {GOALS['compact_ratio']:g}x",
        cr is not None and cr <= GOALS["compact_ratio"],
    )
    t = v["2 GB tensors"]
    tb = big["infos"]["tensor_2g"]["tensor_bytes"]
    gbs = tb / GB / t["wall"] if t.get("wall") else None
    add(
        "tensor pair, warm, median GB/s (both sides' bytes / wall)",
        gbs,
        f"{gbs or 0:.2f} GB/s ({tb / GB:.2f} GB in {t.get('wall') or 0:.2f} s)",
        f">= {GOALS['tensor_gbs']:g} GB/s",
        gbs is not None and gbs >= GOALS["tensor_gbs"],
    )
    s = st.get("wall") if st else None
    add(
        "start-up: small csv compare, median wall",
        s,
        f"{s or 0:.3f} s (best {st.get('wall_min', 0) if st else 0:.3f} s)",
        f"<= {GOALS['start_s']:g} s",
        s is not None and s <= GOALS["start_s"],
    )
    return out


# ---------------------------------------------------------------------------------------------------- output


def _f(x: float | None, spec: str, suffix: str = "") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec) + suffix


def side_rows(side: dict) -> list[list[str]]:
    """Rows of the side-by-side table."""
    rows = []
    for name, c in side.items():
        size = f"{c['rows']:,} rows" if c.get("rows") else "?"
        if c.get("tensor_bytes"):
            size += f", {c['tensor_bytes'] / 1e6:.0f} MB per side"
        for tool in ("ours", "reference"):
            s = c.get(tool)
            if s is None:
                rows.append([name, size, tool, "not run", "-", "-", "-", "", "", ""])
                continue
            rat = c["ratios"] if tool == "reference" else {}
            ok = "ok" if s["ok"] else f"FAIL ({s['n']} ok)"
            wall = f"{s['wall']:.2f} ({s['wall_min']:.2f}-{s['wall_max']:.2f})" if s.get("wall") else "-"
            rows.append(
                [
                    name,
                    size,
                    tool,
                    f"{ok} x{len(s['runs'])}",
                    wall,
                    _f(s.get("cpu"), ".2f"),
                    _f((s.get("peak_bytes") or 0) / 2**20 or None, ".0f"),
                    _f(rat.get("wall"), ".1f", "x"),
                    _f(rat.get("cpu"), ".1f", "x"),
                    _f(rat.get("peak_bytes"), ".1f", "x"),
                ]
            )
    return rows


SIDE_HEADER = [
    "case",
    "size",
    "tool",
    "runs",
    "wall s median (min-max)",
    "CPU s median",
    "peak MiB",
    "ref/ours wall",
    "ref/ours CPU",
    "ref/ours peak",
]
BIG_HEADER = ["run (ours)", "runs", "wall s median (min-max)", "CPU s median", "peak MiB"]
GOAL_HEADER = ["goal", "ours", "limit", "status"]
PHASE_HEADER = ["phase", "wall s", "CPU s", "share of wall"]


def big_rows(big: dict) -> list[list[str]]:
    rows = []
    for label, s in big["variants"].items():
        wall = f"{s['wall']:.2f} ({s['wall_min']:.2f}-{s['wall_max']:.2f})" if s.get("wall") else "-"
        rows.append(
            [
                label,
                f"{'ok' if s['ok'] else 'FAIL'} x{len(s['runs'])}",
                wall,
                _f(s.get("cpu"), ".2f"),
                _f((s.get("peak_bytes") or 0) / 2**20 or None, ".0f"),
            ]
        )
    return rows


def ref_lines(big: dict) -> list[str]:
    """The reference on the big pairs: cached (with its date) or run, with the ratio to ours."""
    lines = []
    for case, label, took in (("stats_1m", "1M xlsx", "~40 min"), ("tensor_2g", "2 GB tensors", "~1 min")):
        e = big["ref"].get(case)
        ours = big["variants"][label]
        if not e:
            lines.append(f"Reference on {case}: not cached, not run (--ref-big runs it: {took}).")
            continue
        when = f"{e['status']}, {e['source']} run of {e['date']}"
        if not e.get("ok"):
            lines.append(f"Reference on {case} ({when}): FAILED (exit {e.get('rc')}).")
            continue
        peak = run_all.peak_bytes(e)
        lines.append(
            f"Reference on {case} ({when}): {e['wall']:.1f} s wall, {e['cpu']:.1f} s CPU, peak "
            f"{peak / GIB:.2f} GiB; ref/ours ({label}): wall {_f(ratio(e['wall'], ours.get('wall')), '.1f')}x, "
            f"CPU {_f(ratio(e['cpu'], ours.get('cpu')), '.1f')}x, "
            f"peak {_f(ratio(peak, ours.get('peak_bytes')), '.1f')}x."
        )
    return lines


def render_table(header: list[str], rows: list[list[str]], markdown: bool, first_number: int) -> list[str]:
    """A table as Markdown or as aligned plain text; columns from `first_number` on are right-aligned."""
    if markdown:
        align = ["---" if i < first_number else "---:" for i in range(len(header))]
        return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"] + [
            "| " + " | ".join(x.replace("|", "\\|") for x in r) + " |" for r in rows
        ]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append(
            "  ".join(
                x.rjust(w) if i >= first_number else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))
            ).rstrip()
        )
    return lines


def report(res: dict, markdown: bool) -> str:
    """The whole report (plain or Markdown) from the results dict."""
    out = []
    ours, src, ref = res["ours"], res["src"], f"`{res.get('ref')}`, "
    if markdown:  # no machine paths in a text meant for the repository's README
        ours = "python -m msprobe_compare"
        src = "src" if os.path.abspath(res["src"]) == SRC else "another source tree"
        ref = ""
    para = (lambda s: out.extend([s, ""])) if markdown else (lambda s: out.append(s))
    head = [
        f"Run of {res['date_start']} to {res['date_end']}. Machine: {res['machine']}.",
        f"Load average (1, 5, 15 min): {res['load_start']} before, {res['load_end']} after.",
        f"Ours: `{ours}` with PYTHONPATH={src}. Reference: "
        + (f"{ref}mindstudio-probe {res['ref_version']}." if res.get("ref") else "not run."),
    ]
    if res.get("quick"):
        head.append("QUICK MODE: small inputs, one run each (a smoke test); the figures mean nothing.")
    for h in head:
        para(h)
    if not markdown:
        out.append("")
    title = (lambda s: out.extend([f"**{s}**", ""])) if markdown else (lambda s: out.extend([s, ""]))
    if res.get("side"):
        title(
            f"Side by side: ours and the reference alternating, {res['runs']} runs each (ours --format xlsx, "
            "coloured; the reference its xlsx, uncoloured); peak = the larger of peak RSS and tree PSS"
        )
        out.extend(render_table(SIDE_HEADER, side_rows(res["side"]), markdown, 4))
        out.append("")
        if not markdown:
            for name, c in res["side"].items():
                out.append(f"  {name}: {c['dir']}")
            out.append("")
    if res.get("big"):
        big = res["big"]
        title(f"Ours on the 1M-row and 2 GB pairs, round-robin, {res['runs']} runs each")
        out.extend(render_table(BIG_HEADER, big_rows(big), markdown, 2))
        out.append("")
        for ln in ref_lines(big):
            para(ln)
        if not markdown:
            out.append("")
        title("Goals of issue 17")
        goal = [[g["goal"], g["text"], g["limit"], g["status"]] for g in res["goals"]]
        out.extend(render_table(GOAL_HEADER, goal, markdown, 1))
        out.append("")
    if res.get("phases"):
        p = res["phases"]
        title(
            f"Where the time goes: the 1M-row csv run (bench/phases.py, median of {len(p['runs'])}; load "
            f"{min(p['loads']):.2f}-{max(p['loads']):.2f} at the starts)"
        )
        rows = [[name, f"{w:.2f}", f"{c:.2f}", f"{s:.0%}"] for name, w, c, s in phases.phase_rows(p)]
        out.extend(render_table(PHASE_HEADER, rows, markdown, 1))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "-"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="runs per tool and variant (default 3; 1 with --quick)")
    ap.add_argument("--ref", default=DEFAULT_REF, help="the reference's msprobe (default $MSPROBE_REF or %(default)s)")
    ap.add_argument("--skip-ref", action="store_true", help="never run the reference")
    ap.add_argument(
        "--ref-big",
        action="store_true",
        help="also run the reference once on the 1M-row pair (~40 min) and the 2 GB tensor pair",
    )
    ap.add_argument("--ref-cache", default=run_all.DEFAULT_CACHE, help="run_all.py's reference cache")
    ap.add_argument("--markdown", action="store_true", help="Markdown output (for bench/README.md)")
    ap.add_argument("--json", help="also write every figure and run to this JSON file")
    ap.add_argument("--quick", action="store_true", help="smoke test: small inputs, one run each (< 1 minute)")
    ap.add_argument(
        "--sections",
        default="side,big,phases",
        help="comma list of side (ours and the reference), big (1M/2 GB goals, start-up), phases",
    )
    ap.add_argument("--data-root", default=DEFAULT_ROOT, help="parent of the input folders (default %(default)s)")
    ap.add_argument("--workdir", default=None, help=f"outputs and logs (default {DEFAULT_WORKDIR}[_quick])")
    ap.add_argument("--python", default=sys.executable, help="interpreter for our tool (default this one)")
    ap.add_argument("--src", default=SRC, help="folder holding the msprobe_compare package (default this checkout's)")
    ap.add_argument("--gen-python", default=None, help="interpreter with torch for the tensor generator")
    ap.add_argument("--start-runs", type=int, default=None, help="start-up runs (default 15; 3 with --quick)")
    ap.add_argument("--phase-runs", type=int, default=1, help="phases.py runs of the 1M csv (median)")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per run (0 = none)")
    a = ap.parse_args(argv)
    a.runs = a.runs or (1 if a.quick else 3)
    a.start_runs = a.start_runs or (3 if a.quick else 15)
    a.sections = {s.strip() for s in a.sections.split(",") if s.strip()}
    unknown = a.sections - {"side", "big", "phases"}
    if unknown:
        ap.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    if a.runs < 1 or a.start_runs < 1 or a.phase_runs < 1:
        ap.error("--runs, --start-runs and --phase-runs must be at least 1")
    a.data_root = os.path.abspath(a.data_root)
    a.workdir = os.path.abspath(a.workdir or (DEFAULT_WORKDIR + ("_quick" if a.quick else "")))
    a.src = os.path.abspath(a.src)
    a.ref_cache = os.path.abspath(a.ref_cache)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    ref = None if a.skip_ref or not os.path.exists(a.ref) else a.ref
    if not ref and not a.skip_ref:
        log(f"reference not found at {a.ref}: ours only")
    ref_py = os.path.join(os.path.dirname(a.ref), "python")
    a.gen_python = a.gen_python or torch_python([sys.executable, ref_py])
    os.makedirs(a.workdir, exist_ok=True)
    ours = [a.python, "-m", "msprobe_compare"]
    res: dict = {
        "date_start": now_utc(),
        "machine": machine_line(machine_info()),
        "load_start": loadavg(),
        "ours": shlex.join(ours),
        "src": a.src,
        "ref": ref,
        "ref_version": run_all.ref_version(a.ref),
        "quick": a.quick,
        "runs": a.runs,
    }
    if "side" in a.sections:
        res["side"] = side_by_side(a, ours, ref)
    if "big" in a.sections:
        res["big"] = big_runs(a, ours, ref)
        log("[start-up] bench/start.py's small compare")
        res["startup"] = startup(a)
        res["goals"] = goal_rows(res["big"], res["startup"])
    if "phases" in a.sections:
        folder = case_folder("stats_1m", BIG_CASES["stats_1m"], a)
        log(f"[phases] {folder} --format csv")
        res["phases"] = phases.measure_phases(folder, "csv", a.phase_runs, a.src, a.python)
    res["date_end"] = now_utc()
    res["load_end"] = loadavg()
    print(report(res, a.markdown), end="")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    failed = [
        c[t] for c in (res.get("side") or {}).values() for t in ("ours", "reference") if c.get(t) and not c[t]["ok"]
    ]
    failed += [s for s in ((res.get("big") or {}).get("variants") or {}).values() if not s["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
