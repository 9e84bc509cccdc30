"""bench/run_all.py: a quick end-to-end run on small generated inputs, the `/usr/bin/time -v` parser, the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"

TIME_V = """\
[rank2]NPU API/Module Read Progress:   2%|  | 407/25000\r[rank2]NPU API/Module Read Progress: 100%|##| 25000/25000
2026-11-30 08:46:27 (26488) [INFO] *                        msprobe compare ends successfully.                        *
\tCommand being timed: "/work/refvenv/bin/msprobe -f pytorch compare -i {cfg} -o /tmp/x/out -s"
\tUser time (seconds): 30.42
\tSystem time (seconds): 38.61
\tPercent of CPU this job got: 53%
\tElapsed (wall clock) time (h:mm:ss or m:ss): {elapsed}
\tAverage shared text size (kbytes): 0
\tMaximum resident set size (kbytes): 5941380
\tFile system inputs: 1523552
\tPage size (bytes): 4096
\tExit status: 0
"""


@pytest.fixture(scope="module")
def run_all():
    sys.path.insert(0, str(BENCH))
    try:
        import run_all as mod
    finally:
        sys.path.remove(str(BENCH))
    return mod


def make_pair(folder: Path, npu_text: str, bench_text: str, ranks: int = 0) -> Path:
    """A statistics-shaped pair: only the files the fingerprint looks at, plus compare.json."""
    names = [f"rank{r}" for r in range(ranks)] if ranks else ["rank"]
    for side, text in (("npu", npu_text), ("bench", bench_text)):
        for name in names:
            d = folder / side / "step0" / name
            d.mkdir(parents=True, exist_ok=True)
            (d / "dump.json").write_text(text)
    (folder / "compare.json").write_text(
        json.dumps(
            {
                "npu_path": str(folder / "npu/step0/rank/dump.json"),
                "bench_path": str(folder / "bench/step0/rank/dump.json"),
            }
        )
    )
    return folder


def test_parse_time_v(run_all):
    r = run_all.parse_time_v(TIME_V.format(cfg="/d/compare.json", elapsed="2:10.13"))
    assert r["command"] == "/work/refvenv/bin/msprobe -f pytorch compare -i /d/compare.json -o /tmp/x/out -s"
    assert r["user"] == 30.42 and r["sys"] == 38.61 and r["cpu"] == pytest.approx(69.03)
    assert r["wall"] == pytest.approx(130.13)
    assert r["maxrss_kb"] == 5941380 and r["exit_status"] == 0 and r["fs_inputs"] == 1523552
    assert r["cpu_percent"] == "53%"
    assert run_all.parse_time_v(TIME_V.format(cfg="c", elapsed="1:02:03"))["wall"] == 3723
    assert run_all.parse_time_v("no timing here\n") is None
    truncated = TIME_V.format(cfg="c", elapsed="0:01.5").split("\tMaximum")[0]
    assert run_all.parse_time_v(truncated) is None


def test_cache_key_depends_on_content_not_location(run_all, tmp_path):
    a = make_pair(tmp_path / "a", '{"data": {}}', '{"data": {"x": 1}}')
    b = make_pair(tmp_path / "b", '{"data": {}}', '{"data": {"x": 1}}')
    c = make_pair(tmp_path / "c", '{"data": {}}', '{"data": {"x": 12}}')
    fa, fb, fc = (run_all.fingerprint("stats", str(p)) for p in (a, b, c))
    assert run_all.cache_key("stats_1m", fa) == run_all.cache_key("stats_1m", fb)
    assert run_all.cache_key("stats_1m", fa) != run_all.cache_key("stats_1m", fc)
    assert run_all.cache_key("stats_1m", fa) != run_all.cache_key("stats_200k", fa)
    assert run_all.cache_key("stats_1m", fa).startswith("stats_1m:")
    ranks = make_pair(tmp_path / "r", '{"data": {}}', '{"data": {"x": 1}}', ranks=2)
    assert len(run_all.fingerprint("stats", str(ranks))["dump_json"]) == 4
    # tensor pairs: tensor file count, bytes and names, not the dump.json (it holds the absolute data folder)
    keys = []
    for name, size in (("t1", 10), ("t2", 10), ("t3", 11)):
        for side in ("npu", "bench"):
            d = tmp_path / name / side / "step0" / "rank" / "dump_tensor_data"
            d.mkdir(parents=True)
            (d / "Module.a.forward.0.output.0.pt").write_bytes(b"x" * size)
            (d.parent / "dump.json").write_text(json.dumps({"dump_data_dir": str(d)}))
        keys.append(run_all.cache_key("tensor_2g", run_all.fingerprint("tensor", str(tmp_path / name))))
    assert keys[0] == keys[1] != keys[2]


def test_import_ref_runs(run_all, tmp_path):
    pair = make_pair(tmp_path / "pair", '{"data": {}}', '{"data": {}}')
    runs = tmp_path / "runs"
    for case, files in {
        "stats_1m": {"rc": "0\n", "start": "2026-11-30T09:00:00Z\n", "end": "2026-11-30T09:02:10Z\n"},
        "stats_200k": {"start": "2026-11-30T09:00:00Z\n"},  # still running
        "ranks8": {"rc": "1\n", "start": "s", "end": "e"},  # failed
    }.items():
        d = runs / case
        d.mkdir(parents=True)
        (d / "log.txt").write_text("log line\n" + TIME_V.format(cfg=pair / "compare.json", elapsed="2:10.13"))
        for name, text in files.items():
            (d / name).write_text(text)
    cache_path = tmp_path / "cache.json"
    messages = []
    keys = run_all.import_ref_runs(str(runs), str(cache_path), log=messages.append)
    expected = run_all.cache_key("stats_1m", run_all.fingerprint("stats", str(pair)))
    assert keys == [expected]
    entry = json.loads(cache_path.read_text())["entries"][expected]
    assert entry["wall"] == pytest.approx(130.13) and entry["cpu"] == pytest.approx(69.03)
    assert entry["maxrss_kb"] == 5941380 and entry["rc"] == 0 and entry["ok"]
    assert entry["date"] == "2026-11-30T09:00:00Z" and entry["input_dir"] == str(pair)
    assert entry["machine"]["nproc"] >= 1 and "python" in entry["machine"]
    assert any("stats_200k" in m and "not complete" in m for m in messages)
    assert any("ranks8" in m and "exit code 1" in m for m in messages)


def test_quick_run_writes_json(tmp_path):
    out = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    cmd = [
        sys.executable,
        str(BENCH / "run_all.py"),
        "--quick",
        "--skip-ref",
        "--cases",
        "stats_1m,ranks8",
        "--json",
        str(out),
        "--data-root",
        str(tmp_path / "data"),
        "--workdir",
        str(tmp_path / "work"),
        "--ref-cache",
        str(tmp_path / "cache.json"),
        "--ours",
        f"{sys.executable} -m msprobe_compare",
    ]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    failed = [ln for ln in p.stdout.splitlines() if "FAILED" in ln or ln.startswith("    ")]
    assert p.returncode == 0, "\n".join(failed) + "\n" + p.stdout[-2000:] + p.stderr[-3000:]
    res = json.loads(out.read_text())
    assert set(res["cases"]) == {"stats_1m", "ranks8"}
    assert set(res["cases"]["stats_1m"]["variants"]) == {"csv", "jsonl", "xlsx", "default"}
    assert res["cases"]["ranks8"]["ranks"] == 2
    for case in res["cases"].values():
        assert case["rows"] > 0 and case["generated"]
        assert case["ref"] is None and case["ref_status"] == "skipped"
        for v in case["variants"].values():
            assert v["ok"] and v["wall"] > 0 and v["cpu"] > 0 and v["throughput"] > 0
            assert v["maxrss_kb"] > 0
    assert {t["target"] for t in res["targets"]} >= {"stats_1m --format csv wall < 15 s"}
    assert "stats_1m" in p.stdout and "Targets" in p.stdout
    assert not (tmp_path / "cache.json").exists() or json.loads((tmp_path / "cache.json").read_text())["entries"] == {}
