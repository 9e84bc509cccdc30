"""bench/limits.py: argument parsing, the goals' verdicts and the report's tables, on canned numbers (no runs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


@pytest.fixture(scope="module")
def limits():
    sys.path.insert(0, str(BENCH))
    try:
        import limits as mod
    finally:
        sys.path.remove(str(BENCH))
    return mod


def _summary(wall: float, cpu: float, peak_mib: float, n: int = 3) -> dict:
    runs = [{"ok": True, "wall": wall, "cpu": cpu, "peak_bytes": peak_mib * 2**20}] * n
    return {
        "ok": True,
        "n": n,
        "wall": wall,
        "wall_min": wall * 0.9,
        "wall_max": wall * 1.1,
        "cpu": cpu,
        "peak_bytes": peak_mib * 2**20,
        "runs": runs,
    }


def _results(limits, csv: float = 5.0, compact: float = 5.5, xlsx: float = 13.0, peak_mib: float = 900.0) -> dict:
    big = {
        "dirs": {},
        "infos": {"tensor_2g": {"tensor_bytes": 4.5e9}},
        "variants": {
            "1M csv": _summary(csv, 7.0, peak_mib),
            "1M compact csv": _summary(compact, 7.2, 800),
            "1M xlsx": _summary(xlsx, 15.0, 700),
            "2 GB tensors": _summary(0.9, 1.6, 500),
        },
        "ref": {
            "stats_1m": {
                "status": "cached",
                "source": "run_all",
                "date": "2026-11-30T08:00:00Z",
                "ok": True,
                "wall": 2400.0,
                "cpu": 2300.0,
                "maxrss_kb": 6 * 2**20,
                "tree_pss_kb": 0,
            },
            "tensor_2g": None,
        },
    }
    side = {
        "small": {
            "dir": "x",
            "rows": 103,
            "tensor_bytes": None,
            "ours": _summary(0.25, 0.25, 40),
            "reference": _summary(4.0, 3.9, 400),
        }
    }
    side["small"]["ratios"] = {"wall": 16.0, "cpu": 3.9 / 0.25, "peak_bytes": 10.0}
    st = {"wall": 0.16, "wall_min": 0.13, "cpu": 0.16, "n": 15}
    p = {
        "wall": dict.fromkeys(("start-up", "read", "pair", "measure", "judge", "write", "other"), 1.0),
        "cpu": dict.fromkeys(("start-up", "read", "pair", "measure", "judge", "write", "other"), 0.5),
        "runs": [{}],
        "loads": [0.5],
    }
    return {
        "date_start": "d0",
        "date_end": "d1",
        "machine": "2 vCPU",
        "load_start": "0.10, 0.20, 0.30",
        "load_end": "0.40, 0.50, 0.60",
        "ours": "py -m msprobe_compare",
        "src": "src",
        "ref": "ref/msprobe",
        "ref_version": "8.3.3",
        "quick": False,
        "runs": 3,
        "side": side,
        "big": big,
        "startup": st,
        "goals": limits.goal_rows(big, st),
        "phases": p,
    }


def test_arguments(limits):
    a = limits.parse_args([])
    assert (a.runs, a.start_runs, a.sections) == (3, 15, {"side", "big", "phases"})
    q = limits.parse_args(["--quick", "--sections", "side"])
    assert (q.runs, q.start_runs, q.sections) == (1, 3, {"side"})
    assert q.workdir.endswith("_quick")
    assert limits.parse_args(["--quick", "--runs", "4"]).runs == 4
    with pytest.raises(SystemExit):
        limits.parse_args(["--sections", "side,nope"])
    with pytest.raises(SystemExit):
        limits.parse_args(["--phase-runs", "0"])


def test_goals(limits):
    res = _results(limits)
    assert [g["status"] for g in res["goals"]] == ["met", "NOT met", "met", "met", "NOT met", "NOT met"]
    compact = next(g for g in res["goals"] if g["goal"].startswith("compact"))
    assert compact["value"] == pytest.approx(1.1)
    tensor = next(g for g in res["goals"] if g["goal"].startswith("tensor"))
    assert tensor["value"] == pytest.approx(5.0)
    over = limits.goal_rows(_results(limits, compact=5.8, peak_mib=1100)["big"], {"wall": 0.15, "wall_min": 0.1})
    assert [g["status"] for g in over] == ["met", "NOT met", "NOT met", "NOT met", "NOT met", "met"]


def test_goals_without_runs(limits):
    big = _results(limits)["big"]
    big["variants"]["1M xlsx"] = {"ok": False, "n": 0, "runs": [{}]}
    rows = limits.goal_rows(big, {})
    assert [g["status"] for g in rows][1] == "n/a" and rows[-1]["status"] == "n/a"


def test_report_markdown(limits):
    text = limits.report(_results(limits), markdown=True)
    assert "| small | 103 rows | reference | ok x3 | 4.00 (3.60-4.40) | 3.90 | 400 | 16.0x | 15.6x | 10.0x |" in text
    assert "| 1M rows, coloured xlsx, median wall | 13.00 s | <= 12 s | NOT met |" in text
    assert "| compact / indent 1, csv median wall | 1.10x (5.50 s; CPU 1.03x) | <= 1.15x | met |" in text
    assert "| read | 1.00 | 0.50 | 14% |" in text
    # the reference on the 1M pair: cached, with its date and the ratio to our xlsx run
    assert "Reference on stats_1m (cached, run_all run of 2026-11-30T08:00:00Z): 2400.0 s wall" in text
    assert "wall 184.6x" in text
    assert "Reference on tensor_2g: not cached, not run" in text
    assert "0.10, 0.20, 0.30 before, 0.40, 0.50, 0.60 after" in text
    for line in text.splitlines():
        if line.startswith("|"):
            assert line.endswith("|")


def test_report_plain_alignment(limits):
    lines = limits.report(_results(limits), markdown=False).splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("phase"))
    body = lines[head + 2 : head + 10]
    assert [ln.split()[0] for ln in body] == ["start-up", "read", "pair", "measure", "judge", "write", "other", "total"]
    assert len({len(ln) for ln in body}) == 1  # numbers right-aligned to one width
