"""Output names: each run that shares a folder gets its own stamp; nothing is replaced or half-published."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import openpyxl
import pytest

from conftest import DATA
from msprobe_compare.errors import OutputError
from msprobe_compare.render.files import atomic_output, claim_names, new_output, part_path

NOW = dt.datetime(2024, 5, 6, 7, 8, 9)
SET = ["compare_result_{ts}.xlsx", "compare_report_{ts}.html", "advisor_{ts}.txt"]
SRC = Path(__file__).resolve().parents[2] / "src"


def stamp(seconds: int) -> str:
    return (NOW + dt.timedelta(seconds=seconds)).strftime("%Y%m%d%H%M%S")


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry (symlinks not followed): kind, size, mtime and content of regular files, target of links."""
    out: dict[str, tuple] = {}
    for p in folder.iterdir():
        st = os.lstat(p)
        if p.is_symlink():
            out[p.name] = ("link", os.readlink(p))
        elif p.is_file():
            out[p.name] = ("file", st.st_size, st.st_mtime_ns, p.read_bytes())
        else:
            out[p.name] = ("other", st.st_mode)
    return out


def test_taken_names_move_the_stamp_on(tmp_path):
    (tmp_path / f"compare_result_{stamp(0)}.xlsx").write_text("user's file")
    os.symlink(tmp_path / "nowhere", tmp_path / f"compare_report_{stamp(1)}.html")  # dangling
    (tmp_path / f"advisor_{stamp(2)}.txt").mkdir()
    os.mkfifo(tmp_path / f"compare_result_{stamp(3)}.xlsx")
    part_path(tmp_path / f"advisor_{stamp(4)}.txt").write_text("")  # another run is writing it
    before = snapshot(tmp_path)
    with claim_names(tmp_path, SET, now=NOW) as claim:
        assert claim.ts == stamp(5)
        for pattern in SET:
            with atomic_output(claim.path(pattern)) as tmp:
                tmp.write_text(pattern)
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing there was touched
    assert sorted(set(after) - set(before)) == sorted(p.format(ts=stamp(5)) for p in SET)
    for pattern in SET:
        path = tmp_path / pattern.format(ts=stamp(5))
        assert path.read_text() == pattern
        assert path.stat().st_mode & 0o777 == 0o640


def test_claim_reserves_until_released(tmp_path):
    with claim_names(tmp_path, SET, now=NOW) as first:
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".owner")) == sorted(
            f".{p.format(ts=stamp(0))}.part" for p in SET)  # fmt: skip
        for p in SET:  # each part has its owner twin (the same file), naming this host and process
            part = tmp_path / f".{p.format(ts=stamp(0))}.part"
            owners = list(tmp_path.glob(f".{p.format(ts=stamp(0))}.*.{os.getpid()}-*.owner"))
            assert len(owners) == 1 and os.path.samefile(part, owners[0])
        with claim_names(tmp_path, ["advisor_{ts}.txt"], now=NOW) as other:
            assert (first.ts, other.ts) == (stamp(0), stamp(1))
    assert list(tmp_path.iterdir()) == []  # nothing written: every reservation is gone
    with claim_names(tmp_path, SET, now=NOW) as again:
        assert again.ts == stamp(0)


def test_claim_released_on_exception(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with claim_names(tmp_path, SET, now=NOW) as claim:
            with atomic_output(claim.path(SET[0])) as tmp:
                tmp.write_text("complete")
            with atomic_output(claim.path(SET[1])) as tmp:
                tmp.write_text("partial")
                raise RuntimeError("boom")
    # all or nothing: the finished file is not published either, and no reservation is left
    assert list(tmp_path.iterdir()) == []
    with claim_names(tmp_path, SET, now=NOW) as claim:
        assert claim.ts == stamp(0)


def test_no_partial_file_under_the_final_name(tmp_path):
    final = tmp_path / "result.xlsx"
    with atomic_output(final) as tmp:
        tmp.write_text("half")
        assert tmp.name.startswith(".") and tmp.parent == tmp_path
        assert not os.path.lexists(final)
    assert final.read_text() == "half"
    assert [p.name for p in tmp_path.iterdir()] == ["result.xlsx"]


def test_atomic_output_alone_refuses_any_entry(tmp_path):
    link = tmp_path / "result.xlsx"
    os.symlink("missing-target", link)
    with pytest.raises(OutputError, match="already exists"):
        with atomic_output(link) as tmp:
            tmp.write_text("x")
    assert os.readlink(link) == "missing-target" and sorted(os.listdir(tmp_path)) == ["result.xlsx"]
    busy = tmp_path / "other.xlsx"
    part_path(busy).write_text("")
    with pytest.raises(OutputError, match="being written by another run"):
        with atomic_output(busy):
            pass
    assert sorted(os.listdir(tmp_path)) == [".other.xlsx.part", "result.xlsx"]


def test_new_output_moves_on(tmp_path):
    taken = tmp_path / "diff_analyze_{ts}.json"
    (tmp_path / f"diff_analyze_{dt.datetime.now():%Y%m%d%H%M%S}.json").write_text("{}")
    with new_output(tmp_path, taken.name) as (final, tmp):
        tmp.write_text("[]")
    assert final.read_text() == "[]" and re.fullmatch(r"diff_analyze_\d{14}\.json", final.name)
    assert len(list(tmp_path.iterdir())) == 2


def test_threads_never_share_a_stamp(tmp_path):
    n = 16
    barrier = threading.Barrier(n)
    stamps: list[str] = []

    def run() -> None:
        barrier.wait()
        with claim_names(tmp_path, SET, now=NOW) as claim:
            stamps.append(claim.ts)
            barrier.wait()  # every claim held at once

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(stamps) == [stamp(k) for k in range(n)]
    assert list(tmp_path.iterdir()) == []


def _claim_in_process(folder: str, barrier, queue) -> None:
    barrier.wait()
    with claim_names(Path(folder), SET, now=NOW) as claim:
        for pattern in SET:
            with atomic_output(claim.path(pattern)) as tmp:
                tmp.write_text(f"{os.getpid()}")
        queue.put((os.getpid(), claim.ts))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_processes_never_share_a_stamp(tmp_path):
    ctx = multiprocessing.get_context("fork")
    n = 8
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_process, args=(str(tmp_path), barrier, queue)) for _ in range(n)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=60) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len({ts for _, ts in got}) == n
    for pid, ts in got:  # each set written whole by one process
        assert [(tmp_path / p.format(ts=ts)).read_text() for p in SET] == [str(pid)] * 3
    assert len(list(tmp_path.iterdir())) == 3 * n


def _killed_while_writing(folder: str) -> None:
    with claim_names(Path(folder), SET, now=NOW) as claim:
        with atomic_output(claim.path(SET[0])) as tmp:
            tmp.write_text("complete")
        with atomic_output(claim.path(SET[1])) as tmp:
            tmp.write_text("half of it")
            os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_killed_run_leaves_only_hidden_parts(tmp_path):
    proc = multiprocessing.get_context("fork").Process(target=_killed_while_writing, args=(str(tmp_path),))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL
    names = {p.format(ts=stamp(0)) for p in SET}
    left = {p.name: p.read_text() for p in tmp_path.iterdir() if not p.name.endswith(".owner")}
    # nothing is published before the whole set is complete: the finished file too is only a hidden part
    assert left == {f".{SET[0].format(ts=stamp(0))}.part": "complete", f".{SET[1].format(ts=stamp(0))}.part":
                    "half of it", f".{SET[2].format(ts=stamp(0))}.part": ""}  # fmt: skip
    assert not any(os.path.lexists(tmp_path / n) for n in names)
    owners = list(tmp_path.glob(f".*.{proc.pid}-*.owner"))
    assert len(owners) == 3
    scratch = tmp_path / f".compare_result_x.csv.part.{owners[0].name.split('.')[-3]}.{proc.pid}-7.scratch"
    scratch.write_text("half of a table")  # a forked writer's temporary (render/flat.py), same dead process
    with claim_names(tmp_path, SET, now=NOW) as claim:  # the next run removes the dead run's parts
        assert claim.ts == stamp(0)
    assert list(tmp_path.iterdir()) == []


def _live_writer(folder: str, ready, stop) -> None:
    with claim_names(Path(folder), SET, now=NOW):
        ready.set()
        stop.wait(60)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_parts_of_live_runs_and_unknown_owners_are_left_alone(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_live_writer, args=(str(tmp_path), ready, stop))
    proc.start()
    try:
        assert ready.wait(60)
        (tmp_path / ".compare_result_20000101000000.xlsx.part").write_text("no owner record")
        for odd in (".owner", ".x.owner", ".a.b.owner", ".a.b.x-1.owner", ".a.elsewhere.99999999.scratch"):
            (tmp_path / odd).write_text("a user's file")  # never ours, or of a pid that cannot be dead here
        other_host = tmp_path / ".advisor_20000101000000.txt.elsewhere.1.owner"
        other_host.write_text("")
        os.link(other_host, tmp_path / ".advisor_20000101000000.txt.part")
        before = snapshot(tmp_path)
        with claim_names(tmp_path, SET, now=NOW) as claim:
            assert claim.ts == stamp(1)  # the live run keeps its stamp
        assert snapshot(tmp_path) == before
    finally:
        stop.set()
        proc.join(timeout=60)


def test_eight_runs_into_one_folder(tmp_path):
    """Eight real compares started at once into one -o folder: eight whole result sets, nothing clobbered."""
    case = DATA / "pytorch" / "mlp_bug_stat"
    out = tmp_path / "out"
    out.mkdir()
    now = dt.datetime.now()
    for k in range(3):  # a user's files at the next stamps, and a dangling symlink
        (out / f"compare_result_{now + dt.timedelta(seconds=k):%Y%m%d%H%M%S}.xlsx").write_bytes(b"mine %d" % k)
    os.symlink(out / "gone", out / f"advisor_{now + dt.timedelta(seconds=3):%Y%m%d%H%M%S}.txt")
    before = snapshot(out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "msprobe_compare", "-f", "pytorch", "compare", "-i", "compare.json", "-o", str(out),
           "-s"]  # fmt: skip
    procs = [subprocess.Popen(cmd, cwd=case, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for _ in range(8)]  # fmt: skip
    outputs = [p.communicate(timeout=300)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, "\n".join(outputs)
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before} == before
    new = sorted(set(after) - set(before))
    stamps = sorted({re.search(r"_(\d{14})\.", name).group(1) for name in new})
    assert len(stamps) == 8
    kinds = [("compare_result", "xlsx"), ("compare_report", "html"), ("advisor", "txt")]
    assert new == sorted(f"{p}_{ts}.{ext}" for ts in stamps for p, ext in kinds)  # each set shares its stamp
    expected_advisor = (case / "expected" / "hl.advisor.txt").read_text()
    by_stamp = sorted(outputs, key=lambda o: re.search(r"compare_result_(\d{14})", o).group(1))
    for ts, text in zip(stamps, by_stamp):
        assert f"Compare result is {out / f'compare_result_{ts}.xlsx'}" in text
        ws = openpyxl.load_workbook(out / f"compare_result_{ts}.xlsx", read_only=True).active
        rows = list(ws.values)
        assert rows[0][0] == "NPU Name" and len(rows) > 50
        assert (out / f"advisor_{ts}.txt").read_text().startswith(expected_advisor)
        assert "</html>" in (out / f"compare_report_{ts}.html").read_text()
