"""Flatten the NPU and bench dump.json files, the bench side in a forked child when it pays off.

Reading is CPU-bound (parse, walk, build columns), one core per file. On a POSIX system with two or more cores
and large files the bench side is flattened in a child process forked for the purpose, which sends its finished
RowTable back packed, a column at a time, through a shared anonymous mapping (the pipe for what does not fit) and
exits; the parent flattens the NPU side meanwhile (never when other threads run: forking those is unsafe).
Results and errors are the same as reading one side after the other: an NPU error wins, then a bench error.
"""

from __future__ import annotations

import mmap
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_compare.errors import CompareError, InputError
from msprobe_compare.load.rows import RowTable, coded, flatten
from msprobe_compare.runtime import can_fork, child_load, reap, release_free_memory

PARALLEL_MIN_BYTES = 16 << 20  # below this (both files together) a fork costs more than it saves
SHARED_SLACK = 64 << 20  # the shared region: the bench file's size and this much more


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
    region = _shared_region(bench_path)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: flatten the bench side, send it (or its error), exit without cleanup handlers
        os.close(read_fd)
        os._exit(_child(bench_path, bench_entries, region, write_fd))
    os.close(write_fd)
    try:
        npu = flatten(npu_path, npu_entries, stacks)
        if meanwhile is not None:
            meanwhile()
        with os.fdopen(read_fd, "rb") as inp:  # unpickled as it arrives: no copy of a whole stream is held
            payload = _receive(inp, region)
    except BaseException:
        reap(pid, kill=True)
        raise
    finally:
        if region is not None:
            region.close()  # its pages go back now, not when this function's frame goes
    if reap(pid) != 0 or payload is None:
        raise InputError("could not be read: the reading process ended unexpectedly", bench_path)
    if payload[0] == "error":
        _, cls, problem, path = payload
        raise cls(problem, path)
    if payload[0] == "crash":
        raise RuntimeError(f"reading {bench_path} failed: {payload[1]}")
    table = unpack(payload[1])
    del payload
    release_free_memory()  # the payload's pages back to the kernel, before the next stages allocate
    return npu, table


def _shared_region(bench_path: Path) -> mmap.mmap | None:
    """A shared anonymous mapping the child writes its rows into before it exits (then neither its heap nor the
    pipe holds them while this process is still reading its own side); pages cost only once written. Its size
    bounds what goes this way: a bigger payload takes the pipe. None where it cannot be mapped."""
    try:
        size = bench_path.stat().st_size + SHARED_SLACK
        return mmap.mmap(-1, size)  # MAP_SHARED | MAP_ANONYMOUS
    except (OSError, ValueError, OverflowError):
        return None


def _child(bench_path: Path, bench_entries: Iterable[tuple[str, Any]], region: mmap.mmap | None,
           write_fd: int) -> int:  # fmt: skip
    """The forked child's work: the bench side's rows as parts (`pack_parts`), each written into the region and
    dropped before the next is made, and from the first that does not fit on, through the pipe; or its error. The
    pipe first carries ("ok", parts in the region), then the other parts and None. Its exit status."""
    try:
        with os.fdopen(write_fd, "wb") as out:
            try:
                parts = pack_parts(flatten(bench_path, bench_entries))
                in_region, part = 0, next(parts, None)
                while region is not None and part is not None:
                    at = region.tell()
                    try:
                        pickle.dump(part, region, protocol=pickle.HIGHEST_PROTOCOL)
                    except ValueError:  # it does not fit: the pipe takes it and the rest
                        region.seek(at)
                        break
                    in_region += 1
                    part = None  # dropped before the next part is made
                    part = next(parts, None)
                    release_free_memory()  # what the written part held goes back to the kernel
            except CompareError as exc:
                pickle.dump(("error", type(exc), exc.problem, exc.path), out, protocol=pickle.HIGHEST_PROTOCOL)
                return 0
            except BaseException as exc:  # reported to the parent, which re-raises
                pickle.dump(("crash", f"{type(exc).__name__}: {exc}"), out, protocol=pickle.HIGHEST_PROTOCOL)
                return 0
            pickle.dump(("ok", in_region), out, protocol=pickle.HIGHEST_PROTOCOL)
            while part is not None:
                pickle.dump(part, out, protocol=pickle.HIGHEST_PROTOCOL)
                part = None
                part = next(parts, None)
            pickle.dump(None, out, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        return 1
    return 0


def _receive(inp: Any, region: mmap.mmap | None) -> Any:
    """What `_child` sent: ("ok", the packed table) or its error; None when the stream ended early."""
    what = "the bench side's rows"
    try:
        head = child_load(inp, what)
        if head[0] != "ok":
            return head
        parts = []
        if head[1]:
            if region is None:
                return None
            region.seek(0)
            parts = [child_load(region, what) for _ in range(head[1])]
        while (part := child_load(inp, what)) is not None:
            parts.append(part)
    except EOFError:  # the child ended before it sent everything
        return None
    return ("ok", assemble(parts))


_JOINED = ("entries", "names")  # mostly distinct texts: one NUL-joined text each
_CODED = ("dtype", "shape", "data_name")  # few distinct texts: codes into a table (shared objects stay shared)


def pack(table: RowTable) -> Any:
    """A RowTable in a form that pickles fast: long lists of texts become one text or codes and a table (pickling
    a million strings one by one costs a second). Texts holding NUL are left to pickle as they are."""
    return assemble(list(pack_parts(table, consume=False)))


def pack_parts(table: RowTable, consume: bool = True) -> Iterator[tuple[str, Any]]:
    """`pack` as (column, packed column) parts, made one at a time; with `consume` the table's text columns are
    emptied once packed (nothing else may hold the table: the columns are freed as they go). A table with a NUL
    inside a text is one part, ("table", table)."""
    joined = {name: _joined(getattr(table, name)) for name in _JOINED}
    present = np.fromiter((x is not None for x in table.md5), dtype=bool, count=len(table.md5))
    md5 = (present, _joined([x for x in table.md5 if x is not None]))
    if any(joined[name] is None for name in _JOINED) or md5[1] is None:
        yield "table", table  # a NUL inside a text: plain pickle
        return
    if consume:
        table.entries, table.names, table.md5 = [], [], []
    for name in _JOINED:
        yield name, joined.pop(name)
    yield "md5", md5
    del md5
    for name in _CODED:
        part = coded(getattr(table, name))
        if consume:
            setattr(table, name, [])
        yield name, part
    del part
    yield "rest", {f.name: getattr(table, f.name) for f in fields(table) if f.name not in _PACKED}


def assemble(parts: list[tuple[str, Any]]) -> Any:
    """The packed table from its parts (`pack_parts`)."""
    if len(parts) == 1 and parts[0][0] == "table":
        return parts[0][1]
    packed = dict(parts)
    rest = packed.pop("rest")
    return _Packed(packed, rest)


_PACKED = frozenset((*_JOINED, *_CODED, "md5"))


def unpack(data: Any) -> RowTable:
    """The RowTable `pack` packed."""
    if isinstance(data, RowTable):
        return data
    packed, rest = data.packed, data.rest  # each packed column is dropped once unpacked: its bytes go early
    columns: dict[str, Any] = {name: _split(packed.pop(name)) for name in _JOINED}
    for name in _CODED:
        codes, table = packed.pop(name)
        objects = np.empty(len(table), dtype=object)
        objects[:] = table
        columns[name] = objects[codes].tolist()
    present, texts = packed.pop("md5")
    md5 = np.full(len(present), None, dtype=object)
    md5[present] = _split(texts)
    columns["md5"] = md5.tolist()
    return RowTable(**columns, **rest)


def _joined(items: list[str]) -> tuple[int, bytes] | None:
    """(count, NUL-joined UTF-8) of texts, or None when a text holds a NUL itself."""
    joined = "\0".join(items)
    if joined.count("\0") != max(len(items) - 1, 0):
        return None
    return len(items), joined.encode("utf-8", "surrogatepass")


def _split(packed: tuple[int, bytes]) -> list[str]:
    count, raw = packed
    return raw.decode("utf-8", "surrogatepass").split("\0") if count else []


class _Packed:
    __slots__ = ("packed", "rest")

    def __init__(self, packed: dict[str, Any], rest: dict[str, Any]) -> None:
        self.packed, self.rest = packed, rest

    def __reduce__(self) -> Any:
        return (_Packed, (self.packed, self.rest))


def _worth_forking(npu_path: Path, bench_path: Path) -> bool:
    if not can_fork():
        return False
    try:
        return npu_path.stat().st_size + bench_path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:
        return False
