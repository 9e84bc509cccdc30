#!/usr/bin/env python3
"""Run every benchmark case and print one summary: our tool against the reference (mindstudio-probe 8.3.3).

Cases (inputs generated when their folder holds no compare.json; default folders under /var/tmp):

    stats_200k  statistics pair, gen_stats.py --entries 200000 --seed 1 (~712k result rows);
                ours with --format xlsx and with the default formats
    stats_1m    statistics pair, gen_stats.py --entries 281300 --seed 1 (1,000,705 result rows);
                ours with --format csv, jsonl, xlsx, and the default formats (once, for information)
    tensor_2g   real-data pair, gen_tensors.py --gb 2 --seed 1 (2.25 GB of tensor files per side);
                ours with a warm page cache (the tensor files are read once before each run)
    ranks8      8 ranks of gen_stats.py --entries 25000 --seed r+1 as npu/step0/rank{r} and bench/step0/rank{r},
                compare.json naming the two step0 folders (the layout of bench/run_reference.sh)

Every run is `TOOL -f pytorch compare -i compare.json -o OUT -s [flags]` as a child process, measured as in
bench_stats.py: wall time, CPU time (user+sys of the child and the workers it reaped), peak RSS (ru_maxrss: the
largest single process) and peak tree PSS (summed Pss of the process tree, sampled every 0.1 s).  Ours runs
--repeat times (best wall reported, peaks are the maximum over runs); the reference once per case, writing xlsx.
Throughput: result rows/s (statistics cases, rows = leaves of the NPU dump.json) or GB/s (tensor case: tensor
file bytes of both sides / wall time, 1 GB = 1e9 bytes).  Ratios are reference / ours for wall, CPU and peak
memory (peak = the larger of peak RSS and tree PSS of each tool; imported reference runs have only peak RSS).

Reference results are cached in a JSON file (--ref-cache, default DEFAULT_CACHE, in /var/tmp), keyed
by case name and an input fingerprint: the sizes of the dump.json files (statistics cases) or the count and bytes
of the tensor files per side (tensor case).  The generators are deterministic, so a regenerated pair (same
options) keeps its key, wherever it lives.  Cached entries are reused unless --refresh-ref; --skip-ref never runs
the reference but still shows cached results.  --import-ref-runs DIR adds runs made outside this script: each
DIR/<case>/ holding log.txt (ending with `/usr/bin/time -v` output), rc, start and end (UTC ISO) and exit status 0
becomes a cache entry (its input folder is read from the -i argument of the timed command).  With
--import-ref-runs the script exits after importing unless --cases is given.

Usage: python3 bench/run_all.py [--cases stats_200k,stats_1m,tensor_2g,ranks8] [--repeat N] [--skip-ref]
           [--refresh-ref] [--json OUT] [--markdown] [--quick] [--data CASE=DIR ...] [--data-root DIR]
           [--workdir DIR] [--ref-cache FILE] [--import-ref-runs DIR] [--ours CMD] [--ref PATH] [--jobs N]
"""

import argparse
import datetime
import glob
import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time

from benchlib import find_ours, load1, machine_info, machine_line, tail
from bench_stats import count_rows, run_child
from bench_tensors import pair_info, warm_read

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REF = os.environ.get("MSPROBE_REF", "")  # the reference msprobe executable (its own virtualenv)
DEFAULT_CACHE = "/var/tmp/msprobe_bench_ref_cache.json"
DEFAULT_ROOT = "/var/tmp"
DEFAULT_WORKDIR = "/var/tmp/msprobe_bench_run_all"
DEFAULT_FORMATS = ("xlsx", "html")  # our tool's default --format
GB = 1e9

CASES = {
    "stats_200k": {
        "kind": "stats",
        "folder": "msprobe_bench_stats_200k",
        "entries": 200_000,
        "quick": 4_000,
        "variants": ["xlsx", "default"],
    },
    "stats_1m": {
        "kind": "stats",
        "folder": "msprobe_bench_stats_1m",
        "entries": 281_300,
        "quick": 5_000,
        "variants": ["csv", "jsonl", "xlsx", "default"],
        "once": ["default"],
    },
    "tensor_2g": {
        "kind": "tensor",
        "folder": "msprobe_bench_tensors_2g",
        "gb": 2.0,
        "quick": 0.05,
        "variants": ["default"],
    },
    "ranks8": {
        "kind": "ranks",
        "folder": "msprobe_bench_ranks8",
        "ranks": 8,
        "entries": 25_000,
        "quick": (2, 2_000),
        "variants": ["default"],
    },
}
TARGET_NOTE = "2 GB = 2e9 bytes; peak = larger of peak RSS and tree PSS"


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def variant_flags(variant):
    """Extra command-line flags and expected output formats of a variant ('default' = our default formats)."""
    if variant == "default":
        return [], DEFAULT_FORMATS
    return ["--format", variant], (variant,)


# ---------------------------------------------------------------------------------------------------- inputs


def generate(case, spec, folder, quick):
    """Generate the inputs of a case into `folder` (called when it holds no compare.json)."""
    t0 = time.perf_counter()
    py = sys.executable
    if spec["kind"] == "stats":
        entries = spec["quick"] if quick else spec["entries"]
        cmd = [py, os.path.join(HERE, "gen_stats.py"), "--entries", str(entries), "--seed", "1", "--out", folder]
        print(f"[{case}] generating: {shlex.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True)
    elif spec["kind"] == "tensor":
        gb = spec["quick"] if quick else spec["gb"]
        cmd = [py, os.path.join(HERE, "gen_tensors.py"), "--gb", str(gb), "--seed", "1", "--out", folder]
        print(f"[{case}] generating: {shlex.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True)
    else:
        ranks, entries = spec["quick"] if quick else (spec["ranks"], spec["entries"])
        print(
            f"[{case}] generating {ranks} ranks x gen_stats.py --entries {entries} --seed r+1 into {folder}", flush=True
        )
        gen_ranks(folder, ranks, entries)
    return time.perf_counter() - t0


def gen_ranks(folder, ranks, entries):
    """Multi-rank statistics pair: rank r = gen_stats.py --entries N --seed r+1, moved to {npu,bench}/step0/rank{r}.

    compare.json names the two step0 folders (written last: its presence marks a complete pair); meta.json holds
    the result rows per rank."""
    folder = os.path.abspath(folder)
    if os.path.exists(folder):
        leftovers = set(os.listdir(folder)) - {"npu", "bench", "meta.json"}
        if any(not n.startswith("tmp") for n in leftovers):
            raise SystemExit(f"{folder} exists without compare.json and holds other files; remove it first")
        shutil.rmtree(folder)
    for side in ("npu", "bench"):
        os.makedirs(os.path.join(folder, side, "step0"))
    rows = []
    for r in range(ranks):
        tmp = os.path.join(folder, f"tmp{r}")
        subprocess.run(
            [
                sys.executable,
                os.path.join(HERE, "gen_stats.py"),
                "--entries",
                str(entries),
                "--seed",
                str(r + 1),
                "--out",
                tmp,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(os.path.join(tmp, "meta.json")) as f:
            rows.append(json.load(f)["rows_npu"])
        for side in ("npu", "bench"):
            os.rename(os.path.join(tmp, side, "step0", "rank"), os.path.join(folder, side, "step0", f"rank{r}"))
        shutil.rmtree(tmp)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(
            {
                "ranks": ranks,
                "entries_per_rank": entries,
                "seeds": list(range(1, ranks + 1)),
                "rows_npu": sum(rows),
                "rows_per_rank": rows,
            },
            f,
            indent=1,
        )
    with open(os.path.join(folder, "compare.json"), "w") as f:
        json.dump(
            {
                "npu_path": os.path.join(folder, "npu", "step0"),
                "bench_path": os.path.join(folder, "bench", "step0"),
                "is_print_compare_log": True,
            },
            f,
        )


def _rank_dirs(folder, side="npu"):
    base = os.path.join(folder, side, "step0")
    names = [n for n in os.listdir(base) if n.startswith("rank") and os.path.isdir(os.path.join(base, n))]
    return [os.path.join(base, n) for n in sorted(names, key=lambda n: int(n[4:] or -1))]


def _leaf_rows(dump_json):
    """Result rows of one dump.json (leaves of its entries), parsed."""
    sys.path.insert(0, HERE)
    from gen_stats import leaf_count

    with open(dump_json) as f:  # json, not orjson: dumps hold NaN/Infinity literals
        data = json.load(f)["data"]
    return sum(leaf_count(v) for v in data.values())


def case_inputs(kind, folder):
    """Sizes of a case's inputs: rows, dump.json bytes, ranks, and for tensors files/bytes/framework."""
    info = {"dir": folder, "framework": "pytorch", "ranks": 1}
    if kind == "tensor":
        p = pair_info(folder)
        info.update(framework=p["framework"], tensor_files=p["files"], tensor_bytes=p["bytes"], rows=p["rows"])
    elif kind == "stats":
        info["rows"], info["entries"] = count_rows(folder)
    else:
        ranks = _rank_dirs(folder)
        info["ranks"] = len(ranks)
        meta = {}
        if os.path.exists(os.path.join(folder, "meta.json")):
            with open(os.path.join(folder, "meta.json")) as f:
                meta = json.load(f)
        info["rows"] = meta.get("rows_npu") or sum(_leaf_rows(os.path.join(d, "dump.json")) for d in ranks)
    info["dump_json_bytes"] = sum(os.path.getsize(p) for p in dump_jsons(folder))
    return info


def dump_jsons(folder):
    """All dump.json files of a pair (both sides, every rank), sorted."""
    return sorted(
        glob.glob(os.path.join(folder, "npu", "**", "dump.json"), recursive=True)
        + glob.glob(os.path.join(folder, "bench", "**", "dump.json"), recursive=True)
    )


def fingerprint(kind, folder):
    """Content fingerprint of a case's inputs, independent of the folder's location and of file times.

    Statistics (single or multi-rank): relative path -> size of every dump.json.  Tensor: per side, the number
    and total bytes of the tensor files and a hash of their names (tensor dump.json holds the absolute data
    folder, so its size depends on the location)."""
    if kind == "tensor":
        fp = {}
        for side in ("npu", "bench"):
            d = os.path.join(folder, side, "step0", "rank", "dump_tensor_data")
            files = [os.path.join(d, n) for n in sorted(os.listdir(d))]
            names = hashlib.sha1("\n".join(os.path.basename(p) for p in files).encode()).hexdigest()[:12]
            fp[side] = [len(files), sum(os.path.getsize(p) for p in files), names]
        return {"kind": "tensor", "tensor_files": fp}
    return {"kind": "stats", "dump_json": {os.path.relpath(p, folder): os.path.getsize(p) for p in dump_jsons(folder)}}


def cache_key(case, fp):
    """Reference-cache key: case name + short hash of the fingerprint."""
    return f"{case}:{hashlib.sha1(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]}"


# ------------------------------------------------------------------------------------------ reference cache


def load_cache(path):
    try:
        with open(path) as f:
            data = json.load(f)
        if isinstance(data.get("entries"), dict):
            return data
    except (OSError, ValueError, AttributeError):
        pass
    return {"version": 1, "entries": {}}


def save_cache(path, cache):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def ref_version(ref):
    """Version of mindstudio-probe in the reference's virtualenv (None when not found)."""
    venv = os.path.dirname(os.path.dirname(os.path.realpath(ref))) if ref else None
    for d in glob.glob(
        os.path.join(venv or "/nonexistent", "lib", "python*", "site-packages", "mindstudio_probe-*.dist-info")
    ):
        return os.path.basename(d)[len("mindstudio_probe-") : -len(".dist-info")]
    return None


def _seconds(text):
    """'h:mm:ss', 'm:ss.ss' or 'ss.ss' -> seconds."""
    total = 0.0
    for part in text.strip().split(":"):
        total = total * 60 + float(part)
    return total


def parse_time_v(text):
    """Parse the `/usr/bin/time -v` block at the end of a log (the last one). None when there is none.

    Returns command, user, sys, cpu, wall (seconds), cpu_percent, maxrss_kb, fs_inputs (512-byte blocks),
    exit_status (None if killed; then signal)."""
    lines = text.replace("\r", "\n").splitlines()
    start = max((i for i, ln in enumerate(lines) if ln.strip().startswith("Command being timed:")), default=None)
    if start is None:
        return None
    fields = {}
    for ln in lines[start:]:
        key, sep, value = ln.strip().partition(": ")
        if sep:
            fields[key] = value.strip()
    cmd = fields.get("Command being timed", "")
    if len(cmd) >= 2 and cmd[0] == cmd[-1] == '"':
        cmd = cmd[1:-1]
    try:
        user = float(fields["User time (seconds)"])
        syst = float(fields["System time (seconds)"])
        wall = _seconds(fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"])
        maxrss = int(fields["Maximum resident set size (kbytes)"])
    except (KeyError, ValueError):
        return None
    out = {
        "command": cmd,
        "user": user,
        "sys": syst,
        "cpu": round(user + syst, 2),
        "wall": wall,
        "maxrss_kb": maxrss,
        "cpu_percent": fields.get("Percent of CPU this job got"),
        "fs_inputs": int(fields["File system inputs"]) if fields.get("File system inputs", "").isdigit() else None,
        "exit_status": int(fields["Exit status"]) if fields.get("Exit status", "").lstrip("-").isdigit() else None,
    }
    for ln in lines[:start][-5:]:
        if "Command terminated by signal" in ln:
            out["signal"] = ln.strip().rsplit(" ", 1)[-1]
    return out


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def import_ref_runs(run_dir, cache_path, ref=DEFAULT_REF, log=print):
    """Import complete reference runs (DIR/<case>/{log.txt,rc,start,end}, rc 0) into the cache; returns keys."""
    cache = load_cache(cache_path)
    imported = []
    for case in sorted(CASES):
        d = os.path.join(run_dir, case)
        if not os.path.isdir(d):
            continue
        rc, start, end = _read(os.path.join(d, "rc")), _read(os.path.join(d, "start")), _read(os.path.join(d, "end"))
        if rc is None or end is None:
            log(f"  {case}: not complete (no rc/end yet), skipped")
            continue
        if rc != "0":
            log(f"  {case}: exit code {rc}, skipped")
            continue
        tv = parse_time_v(_read(os.path.join(d, "log.txt")) or "")
        if tv is None or tv["exit_status"] != 0:
            log(f"  {case}: no complete `/usr/bin/time -v` block with exit status 0 in log.txt, skipped")
            continue
        argv = shlex.split(tv["command"])
        cfg = argv[argv.index("-i") + 1] if "-i" in argv[:-1] else None
        if not cfg or not os.path.exists(cfg):
            log(f"  {case}: input {cfg!r} of the timed command not found, skipped")
            continue
        folder = os.path.dirname(os.path.abspath(cfg))
        fp = fingerprint(CASES[case]["kind"], folder)
        key = cache_key(case, fp)
        cache["entries"][key] = {
            "case": case,
            "key": key,
            "fingerprint": fp,
            "input_dir": folder,
            "source": f"import:{d}",
            "date": start,
            "end": end,
            "machine": machine_info(),
            "machine_note": "recorded at import",
            "ref_version": ref_version(ref),
            "command": tv["command"],
            "wall": tv["wall"],
            "cpu": tv["cpu"],
            "user": tv["user"],
            "sys": tv["sys"],
            "cpu_percent": tv["cpu_percent"],
            "maxrss_kb": tv["maxrss_kb"],
            "tree_pss_kb": None,
            "rc": 0,
            "ok": True,
            "cache_mode": "uncontrolled",
            "fs_input_bytes": tv["fs_inputs"] * 512 if tv["fs_inputs"] is not None else None,
        }
        imported.append(key)
        log(
            f"  {case}: imported {key} ({tv['wall']:.1f} s wall, {tv['cpu']:.1f} s CPU, "
            f"{tv['maxrss_kb'] / 2**20:.2f} GiB peak RSS; started {start})"
        )
    save_cache(cache_path, cache)
    return imported


# ---------------------------------------------------------------------------------------------------- runs


def outputs_ok(out, formats, expected):
    """True when `out` holds at least `expected` result files of every format."""
    for fmt in formats:
        pattern = "compare_report*.html" if fmt == "html" else f"compare_result*.{fmt}"
        if len(glob.glob(os.path.join(out, pattern))) < expected:
            return False
    return True


def measure(tool_cmd, info, flags, formats, label, a, timeout, warm):
    """One child run in the case's workdir; returns bench_stats.run_child's dict plus ok, cmd, log, load."""
    work = a.case_work
    out = os.path.join(work, f"out_{label}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = tool_cmd + [
        "-f",
        info["framework"],
        "compare",
        "-i",
        os.path.join(info["dir"], "compare.json"),
        "-o",
        out,
        "-s",
        *flags,
    ]
    if warm:
        warm_read(info["dir"])
    log = os.path.join(work, f"log_{label}.txt")
    load0, started = load1(), now_utc()
    print(f"  running {label}: {shlex.join(cmd)}", flush=True)
    r = run_child(cmd, work, log, timeout, sample=0.1)
    r.update(
        cmd=shlex.join(cmd),
        log=log,
        load_before=load0,
        date=started,
        ok=r["rc"] == 0 and outputs_ok(out, formats, info["ranks"]),
    )
    if r["ok"]:
        print(
            f"    {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, peak RSS {r['maxrss_kb'] / 1024:.0f} MiB, "
            f"tree PSS {r['tree_pss_kb'] / 1024:.0f} MiB (load {load0:.2f} before)",
            flush=True,
        )
    else:
        why = "outputs missing" if r["rc"] == 0 else f"exit {r['rc']}"
        print(f"    FAILED ({why}); last lines of {log}:\n{tail(log)}", flush=True)
    if not a.keep:
        shutil.rmtree(out, ignore_errors=True)
    return r


def peak_bytes(r):
    return max(r.get("maxrss_kb") or 0, r.get("tree_pss_kb") or 0) * 1024


def throughput(info, kind, wall):
    if not wall:
        return None
    return info["tensor_bytes"] / GB / wall if kind == "tensor" else info["rows"] / wall


def summarize_variant(runs, info, kind):
    ok = [r for r in runs if r["ok"]]
    res = {"ok": bool(ok) and len(ok) == len(runs), "runs": runs}
    if ok:
        best = min(ok, key=lambda r: r["wall"])
        res.update(
            wall=best["wall"],
            cpu=best["cpu"],
            cmd=best["cmd"],
            maxrss_kb=max(r["maxrss_kb"] for r in ok),
            tree_pss_kb=max(r["tree_pss_kb"] for r in ok),
            throughput=throughput(info, kind, best["wall"]),
        )
        res["peak_bytes"] = peak_bytes(res)
    return res


def ratios(ref, ours):
    """Reference / ours for wall, CPU and peak memory (None where either is missing)."""
    if not (ref and ref.get("ok") and ours.get("wall")):
        return None
    rp, op = peak_bytes(ref), ours.get("peak_bytes")
    return {
        "wall": ref["wall"] / ours["wall"],
        "cpu": ref["cpu"] / max(ours["cpu"], 1e-9),
        "peak": rp / op if rp and op else None,
    }


def run_case(case, folder, a, ours, ref, cache):
    spec = CASES[case]
    kind = spec["kind"]
    res = {"kind": kind, "dir": folder, "generated": False}
    if not os.path.exists(os.path.join(folder, "compare.json")):
        res["gen_seconds"] = generate(case, spec, folder, a.quick)
        res["generated"] = True
    info = case_inputs(kind, folder)
    res.update(info)
    fp = fingerprint(kind, folder)
    res["fingerprint"], res["key"] = fp, cache_key(case, fp)
    warm = kind == "tensor"
    res["cache_mode"] = "warm" if warm else None
    size = (
        f"{info['tensor_bytes'] / GB:.2f} GB of tensor files in {info['tensor_files']} files"
        if kind == "tensor"
        else f"{info['rows']:,} result rows"
    )
    print(
        f"[{case}] {folder}: {size}, {info['ranks']} rank(s), dump.json {info['dump_json_bytes'] / 1e6:.0f} MB",
        flush=True,
    )
    a.case_work = os.path.join(a.workdir, case)
    os.makedirs(a.case_work, exist_ok=True)
    jobs = ["-j", str(a.jobs)] if a.jobs else []
    runs = {v: [] for v in spec["variants"]}
    for i in range(a.repeat):  # round-robin, so a load change hits all variants alike
        for v in spec["variants"]:
            if i and v in spec.get("once", ()):
                continue
            flags, formats = variant_flags(v)
            runs[v].append(measure(ours, info, flags + jobs, formats, f"ours_{v}_{i}", a, a.timeout, warm))
    res["variants"] = {v: summarize_variant(runs[v], info, kind) for v in spec["variants"]}

    entry = cache["entries"].get(res["key"])
    if ref and not a.skip_ref and (entry is None or a.refresh_ref):
        r = measure([ref], info, [], ("xlsx",), "ref", a, a.ref_timeout, warm)
        entry = {
            "case": case,
            "key": res["key"],
            "fingerprint": fp,
            "input_dir": folder,
            "source": "run_all",
            "date": r["date"],
            "machine": machine_info(),
            "ref_version": ref_version(ref),
            "command": r["cmd"],
            "wall": r["wall"],
            "cpu": r["cpu"],
            "maxrss_kb": r["maxrss_kb"],
            "tree_pss_kb": r["tree_pss_kb"],
            "rc": r["rc"],
            "ok": r["ok"],
            "load_before": r["load_before"],
            "cache_mode": "warm" if warm else None,
        }
        if r["rc"] != "timeout":  # a timeout depends on --ref-timeout: not worth keeping
            cache["entries"][res["key"]] = entry
            save_cache(a.ref_cache, cache)
        res["ref_status"] = "ran"
    elif entry is not None:
        res["ref_status"] = "cached"
        state = "" if entry.get("ok") else f", FAILED (exit {entry.get('rc')}; --refresh-ref runs it again)"
        print(
            f"  reference: cached {entry['source']} from {entry['date']} ({entry['wall']:.1f} s wall{state})",
            flush=True,
        )
    else:
        res["ref_status"] = "skipped" if a.skip_ref else "not installed"
    res["ref"] = entry
    if entry and entry.get("ok"):
        entry = dict(entry, throughput=throughput(info, kind, entry["wall"]))
        res["ref"] = entry
    for v in res["variants"].values():
        v["ratios"] = ratios(res["ref"], v)
    return res


# ------------------------------------------------------------------------------------------------- targets


def targets(cases):
    """(name, value text, status) of each issue target; status 'met', 'NOT met' or 'n/a'."""
    out = []

    def var(case, v):
        return (cases.get(case, {}).get("variants") or {}).get(v) or {}

    def check(name, value, ok, fmt):
        out.append(
            {
                "target": name,
                "value": fmt(value) if value is not None else "-",
                "status": "n/a" if value is None else ("met" if ok(value) else "NOT met"),
            }
        )

    for v, limit in (("csv", 15), ("jsonl", 15), ("xlsx", 60)):
        check(
            f"stats_1m --format {v} wall < {limit} s",
            var("stats_1m", v).get("wall"),
            lambda x, m=limit: x < m,
            lambda x: f"{x:.1f} s",
        )
    peaks = [var("stats_1m", v).get("peak_bytes") for v in ("csv", "jsonl", "xlsx")]
    peaks = [p for p in peaks if p]
    check(
        "stats_1m peak memory < 2 GB (csv, jsonl, xlsx)",
        max(peaks) if peaks else None,
        lambda x: x < 2 * GB,
        lambda x: f"{x / GB:.2f} GB",
    )
    check(
        "tensor_2g throughput >= 1 GB/s (warm)",
        var("tensor_2g", "default").get("throughput"),
        lambda x: x >= 1.0,
        lambda x: f"{x:.2f} GB/s",
    )
    rat = var("tensor_2g", "default").get("ratios") or {}
    check("tensor_2g ratio >= 30x (reference wall / ours)", rat.get("wall"), lambda x: x >= 30, lambda x: f"{x:.1f}x")
    return out


# ------------------------------------------------------------------------------------------------- output


def _f(x, spec, dash="-"):
    return dash if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table_rows(cases):
    """Summary rows (lists of strings) for the plain and Markdown tables."""
    rows = []
    for case, c in cases.items():
        unit = "GB/s" if c["kind"] == "tensor" else "rows/s"
        size = f"{c['tensor_bytes'] / GB:.2f} GB" if c["kind"] == "tensor" else f"{c['rows']:,} rows"
        for v, r in c["variants"].items():
            rat = r.get("ratios") or {}
            tp = _f(r.get("throughput"), ".2f" if unit == "GB/s" else ",.0f")
            rows.append(
                [
                    case,
                    f"ours {v}",
                    size,
                    "ok" if r["ok"] else "FAIL",
                    _f(r.get("wall"), ".2f"),
                    _f(r.get("cpu"), ".2f"),
                    f"{tp} {unit}" if r.get("throughput") else "-",
                    _f((r.get("maxrss_kb") or 0) / 1024 or None, ".0f"),
                    _f((r.get("tree_pss_kb") or 0) / 1024 or None, ".0f"),
                    _f(rat.get("wall"), ".1f") + ("x" if rat.get("wall") else ""),
                    _f(rat.get("cpu"), ".1f") + ("x" if rat.get("cpu") else ""),
                    _f(rat.get("peak"), ".1f") + ("x" if rat.get("peak") else ""),
                ]
            )
        e = c.get("ref")
        if e:
            tp = _f(e.get("throughput"), ".3f" if unit == "GB/s" else ",.0f")
            src = (
                "imported" if e["source"].startswith("import") else ("cached" if c["ref_status"] == "cached" else "run")
            )
            rows.append(
                [
                    case,
                    f"reference ({src} {e['date'][:10]})",
                    size,
                    "ok" if e.get("ok") else "FAIL",
                    _f(e.get("wall"), ".2f"),
                    _f(e.get("cpu"), ".2f"),
                    f"{tp} {unit}" if e.get("throughput") else "-",
                    _f((e.get("maxrss_kb") or 0) / 1024 or None, ".0f"),
                    _f((e.get("tree_pss_kb") or 0) / 1024 or None, ".0f"),
                    "",
                    "",
                    "",
                ]
            )
        else:
            rows.append([case, f"reference ({c['ref_status']})", size, "-", "-", "-", "-", "-", "-", "", "", ""])
    return rows


HEADER = [
    "case",
    "run",
    "size",
    "status",
    "wall s",
    "CPU s",
    "throughput",
    "peak RSS MiB",
    "tree PSS MiB",
    "wall ref/ours",
    "CPU ref/ours",
    "peak ref/ours",
]


def notes(results):
    """Context lines: date, machine, load, cache modes, reference sources."""
    m = results["machine"]
    loads = [r.get("load_before") for c in results["cases"].values() for v in c["variants"].values() for r in v["runs"]]
    loads = [x for x in loads if x is not None and not math.isnan(x)]
    lines = [
        f"Date: {results['date']} (UTC). Machine: {machine_line(m)}."
        + (f" Reference: mindstudio-probe {results['ref_version']}." if results.get("ref_version") else ""),
        f"Load average (1 min): {_f(results['load_start'], '.2f')} at start, {_f(results['load_end'], '.2f')} "
        f"at end" + (f", {min(loads):.2f}-{max(loads):.2f} before our runs." if loads else "."),
    ]
    if results.get("quick"):
        lines.append("QUICK MODE: small inputs (smoke test); the figures and targets are not meaningful.")
    for case, c in results["cases"].items():
        e = c.get("ref")
        if c["kind"] == "tensor":
            rc = e.get("cache_mode") if e else None
            lines.append(
                f"{case}: page cache warm for ours (tensor files read once before each run); reference: "
                + (
                    {"warm": "warm", None: "-"}.get(
                        rc,
                        "not controlled (imported run"
                        + (f"; it read {e['fs_input_bytes'] / GB:.2f} GB from disk" if e.get("fs_input_bytes") else "")
                        + ")",
                    )
                    if e
                    else "not measured"
                )
                + "."
            )
        if e:
            src = "run by run_all.py" if e["source"] == "run_all" else e["source"]
            lines.append(
                f"{case}: reference ({src}) started {e['date']}: `{e['command']}`"
                + (f" (exit {e['rc']})" if not e.get("ok") else "")
            )
    return lines


def print_plain(results):
    rows = table_rows(results["cases"])
    widths = [max(len(str(x)) for x in col) for col in zip(HEADER, *rows)]
    print()
    for ln in notes(results):
        print(ln)
    print()
    print("  ".join(h.ljust(w) for h, w in zip(HEADER, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(x).rjust(w) if i >= 4 else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths))))
    print()
    print(f"Targets ({TARGET_NOTE}):")
    for t in results["targets"]:
        print(f"  {t['status']:<8} {t['target']}: {t['value']}")


def print_markdown(results):
    rows = table_rows(results["cases"])
    print()
    for ln in notes(results):
        print(ln + "  ")
    print()
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "|".join("---" if i < 4 else "---:" for i in range(len(HEADER))) + "|")
    for r in rows:
        print("| " + " | ".join(str(x).replace("|", "\\|") for x in r) + " |")
    print()
    print(f"| target ({TARGET_NOTE}) | value | status |")
    print("|---|---:|---|")
    for t in results["targets"]:
        print(f"| {t['target']} | {t['value']} | {t['status']} |")


# ---------------------------------------------------------------------------------------------------- main


def parse_data(items):
    out = {}
    for item in items or []:
        case, sep, path = item.partition("=")
        if not sep or case not in CASES:
            raise SystemExit(f"--data wants CASE=DIR with CASE in {', '.join(CASES)}: {item!r}")
        out[case] = os.path.abspath(path)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="run every benchmark case: ours against the reference, one summary")
    ap.add_argument("--cases", help=f"comma-separated cases (default all: {','.join(CASES)})")
    ap.add_argument("--repeat", type=int, default=1, help="runs of our tool per variant (best wall reported)")
    ap.add_argument("--skip-ref", action="store_true", help="never run the reference (cached results still shown)")
    ap.add_argument("--refresh-ref", action="store_true", help="run the reference even when cached")
    ap.add_argument("--ref-cache", default=DEFAULT_CACHE, help=f"reference-results cache (default {DEFAULT_CACHE})")
    ap.add_argument(
        "--import-ref-runs",
        metavar="DIR",
        help="import DIR/<case>/{log.txt,rc,start,end} reference runs into the cache, then exit "
        "(unless --cases is given)",
    )
    ap.add_argument("--json", help="write all results to this JSON file")
    ap.add_argument("--markdown", action="store_true", help="print the summary as Markdown (for bench/README.md)")
    ap.add_argument(
        "--quick", action="store_true", help="small inputs for a smoke test (5k entries, 0.05 GB tensors, 2 ranks x 2k)"
    )
    ap.add_argument("--data", action="append", metavar="CASE=DIR", help="input folder of a case (repeatable)")
    ap.add_argument("--data-root", help=f"parent of the default input folders (default {DEFAULT_ROOT})")
    ap.add_argument("--workdir", help=f"outputs and logs (default {DEFAULT_WORKDIR}[_quick])")
    ap.add_argument("--keep", action="store_true", help="keep the compare outputs")
    ap.add_argument("--ours", help="command for our tool (default: msprobe on PATH, else python3 -m msprobe_compare)")
    ap.add_argument("--ref", help="reference msprobe executable (default: $MSPROBE_REF, if set and present)")
    ap.add_argument("--jobs", type=int, help="pass -j N to our tool")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per run of ours (0 = none)")
    ap.add_argument("--ref-timeout", type=float, default=0, help="seconds per reference run (0 = none)")
    a = ap.parse_args(argv)

    ref_path = a.ref or DEFAULT_REF
    if a.import_ref_runs:
        print(f"importing reference runs from {a.import_ref_runs} into {a.ref_cache}")
        import_ref_runs(a.import_ref_runs, a.ref_cache, ref_path)
        if not a.cases:
            return 0
    cases = [c.strip() for c in (a.cases or ",".join(CASES)).split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    ref = ref_path if os.path.exists(ref_path) else None
    if not ref and not a.skip_ref:
        print(f"reference not found at {ref_path}: not running it (cached results are still used)")
    ours = shlex.split(a.ours) if a.ours else find_ours(ref_path)
    root = os.path.abspath(a.data_root or DEFAULT_ROOT)
    data = parse_data(a.data)
    a.workdir = os.path.abspath(a.workdir or (DEFAULT_WORKDIR + ("_quick" if a.quick else "")))
    a.ref_cache = os.path.abspath(a.ref_cache)
    cache = load_cache(a.ref_cache)

    results = {
        "date": now_utc(),
        "machine": machine_info(),
        "load_start": load1(),
        "quick": a.quick,
        "ours": shlex.join(ours),
        "ref": ref,
        "ref_version": ref_version(ref_path),
        "ref_cache": a.ref_cache,
        "repeat": a.repeat,
        "cases": {},
    }
    for case in cases:
        spec = CASES[case]
        folder = data.get(case) or os.path.join(root, ("msprobe_bench_quick_" + case) if a.quick else spec["folder"])
        results["cases"][case] = run_case(case, folder, a, ours, ref, cache)
    results["load_end"] = load1()
    results["targets"] = targets(results["cases"])
    (print_markdown if a.markdown else print_plain)(results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"\nresults written to {a.json}")
    ok = all(v["ok"] for c in results["cases"].values() for v in c["variants"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
