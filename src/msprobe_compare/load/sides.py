"""Flatten the NPU and bench dump.json files, the bench side in a forked child when it pays off.

Reading is CPU-bound Python (parse, walk, build columns), one core per file. On a POSIX system with
two or more cores and large files the bench side is flattened in a child process forked for the
purpose, which sends its finished RowTable back through a pipe; the parent flattens the NPU side
meanwhile (never when other threads run: forking those is unsafe). Results and errors are the same as reading one side after the other: an NPU error wins,
then a bench error.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from msprobe_compare.errors import CompareError, InputError
from msprobe_compare.load.rows import RowTable, flatten

PARALLEL_MIN_BYTES = 16 << 20  # below this (both files together) a fork costs more than it saves


def flatten_sides(
    npu_path: Path,
    npu_entries: Iterable[tuple[str, Any]],
    stacks: dict[str, list[str]],
    bench_path: Path,
    bench_entries: Iterable[tuple[str, Any]],
    parallel: bool = True,
) -> tuple[RowTable, RowTable]:
    """(npu, bench) row tables; the bench side in a forked child when `parallel` and worthwhile."""
    if not (parallel and _worth_forking(npu_path, bench_path)):
        return flatten(npu_path, npu_entries, stacks), flatten(bench_path, bench_entries)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: flatten the bench side, send it (or its error), exit without cleanup handlers
        os.close(read_fd)
        status = 0
        try:
            payload: Any = ("ok", flatten(bench_path, bench_entries))
        except CompareError as exc:
            payload = ("error", type(exc), exc.problem, exc.path)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which re-raises
            payload = ("crash", f"{type(exc).__name__}: {exc}")
        try:
            with os.fdopen(write_fd, "wb") as out:
                pickle.dump(payload, out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001
            status = 1
        os._exit(status)
    os.close(write_fd)
    try:
        npu = flatten(npu_path, npu_entries, stacks)
        with os.fdopen(read_fd, "rb") as inp:
            data = inp.read()  # until the child closes its end
    except BaseException:
        _reap(pid, kill=True)
        raise
    if _reap(pid) != 0 or not data:
        raise InputError("could not be read: the reading process ended unexpectedly", bench_path)
    payload = pickle.loads(data)
    if payload[0] == "error":
        _, cls, problem, path = payload
        raise cls(problem, path)
    if payload[0] == "crash":
        raise RuntimeError(f"reading {bench_path} failed: {payload[1]}")
    return npu, payload[1]


def _worth_forking(npu_path: Path, bench_path: Path) -> bool:
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return False
    if threading.active_count() > 1:  # forking a process that runs other threads (Ray, a host app) is unsafe
        return False
    try:
        return npu_path.stat().st_size + bench_path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:
        return False


def _reap(pid: int, kill: bool = False) -> int:
    """Wait for the child (killed first when `kill`); its exit status (-1 if it cannot be known)."""
    if kill:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return -1
