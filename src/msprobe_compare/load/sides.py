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
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_compare import native
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
    meanwhile: Callable[[], None] | None = None,
) -> tuple[RowTable, RowTable]:
    """(npu, bench) row tables; the bench side in a forked child when `parallel` and worthwhile. `meanwhile` runs
    once in this process after the NPU side is read (while the child may still be reading)."""
    if not (parallel and _worth_forking(npu_path, bench_path)):
        npu = flatten(npu_path, npu_entries, stacks)
        if meanwhile is not None:
            meanwhile()
        return npu, flatten(bench_path, bench_entries)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: flatten the bench side, send it (or its error), exit without cleanup handlers
        os.close(read_fd)
        status = 0
        try:
            payload: Any = ("ok", pack(flatten(bench_path, bench_entries)))
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
        if meanwhile is not None:
            meanwhile()
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
    return npu, unpack(payload[1])


_JOINED = ("entries", "names")  # mostly distinct texts: one NUL-joined text each
_CODED = ("dtype", "shape", "data_name")  # few distinct texts: codes into a table (shared objects stay shared)


def pack(table: RowTable) -> Any:
    """A RowTable in a form that pickles fast: long lists of texts become one text or codes and a table (pickling
    a million strings one by one costs a second). Texts holding NUL are left to pickle as they are."""
    packed: dict[str, Any] = {}
    for name in _JOINED:
        items = getattr(table, name)
        joined = "\0".join(items)
        if joined.count("\0") != max(len(items) - 1, 0):
            return table  # a NUL inside a text: plain pickle
        packed[name] = (len(items), joined.encode("utf-8", "surrogatepass"))
    join = native.load("_join")
    for name in _CODED:
        items = getattr(table, name)
        if join is not None and type(items) is list:
            raw, distinct = join.code_objects(items)  # by identity, in C
            packed[name] = (np.frombuffer(raw, dtype=np.int32), distinct)
        else:
            index: dict[str, int] = {}
            codes = np.fromiter((index.setdefault(x, len(index)) for x in items), dtype=np.int32, count=len(items))
            packed[name] = (codes, list(index))
    md5 = table.md5
    present = np.fromiter((x is not None for x in md5), dtype=bool, count=len(md5))
    texts = [x for x in md5 if x is not None]
    joined = "\0".join(texts)
    if joined.count("\0") != max(len(texts) - 1, 0):
        return table
    packed["md5"] = (present, len(texts), joined.encode("utf-8", "surrogatepass"))
    rest = {f.name: getattr(table, f.name) for f in fields(table) if f.name not in packed}
    return _Packed(packed, rest)


def unpack(data: Any) -> RowTable:
    """The RowTable `pack` packed."""
    if isinstance(data, RowTable):
        return data
    packed, rest = data.packed, data.rest
    columns: dict[str, Any] = {}
    for name in _JOINED:
        count, raw = packed[name]
        columns[name] = raw.decode("utf-8", "surrogatepass").split("\0") if count else []
    for name in _CODED:
        codes, table = packed[name]
        objects = np.empty(len(table), dtype=object)
        objects[:] = table
        columns[name] = objects[codes].tolist()
    present, count, raw = packed["md5"]
    md5 = np.full(len(present), None, dtype=object)
    if count:
        md5[present] = raw.decode("utf-8", "surrogatepass").split("\0")
    columns["md5"] = md5.tolist()
    return RowTable(**columns, **rest)


class _Packed:
    __slots__ = ("packed", "rest")

    def __init__(self, packed: dict[str, Any], rest: dict[str, Any]) -> None:
        self.packed, self.rest = packed, rest

    def __reduce__(self) -> Any:
        return (_Packed, (self.packed, self.rest))


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
