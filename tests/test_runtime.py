"""runtime: process-level helpers."""

from __future__ import annotations

import functools
import gc
import platform
import sys
import time

import os
import pickle

import numpy as np
import pytest

from msprobe_compare.runtime import Later, can_fork, gc_paused, release_free_memory, tune_malloc


def test_tune_malloc_takes_effect_on_glibc_only() -> None:
    expected = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert tune_malloc() is expected


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_release_free_memory_hands_freed_heap_pages_back() -> None:
    assert tune_malloc()  # freed memory is kept: up to 1 GiB of free heap stays mapped
    blocks = [bytearray(8 << 20) for _ in range(24)]  # 192 MiB from the heap (below the 32 MiB mmap threshold)
    for b in blocks:
        b[::4096] = b"\x01" * len(b[::4096])  # touched: resident
    before_free = _rss()
    del blocks, b
    kept = _rss()
    assert release_free_memory() is True
    after = _rss()
    assert before_free - kept < 64 << 20  # freeing alone returned little to the kernel
    assert kept - after > 128 << 20  # the trim handed the freed pages back


def test_child_loads_builds_only_our_classes_and_arrays():
    """What a child of ours sends is read with the restricted unpickler: our row table and numpy arrays come back,
    a global outside them (os.system) is refused naming what was being read."""
    from msprobe_compare.load.mode import Mode
    from msprobe_compare.runtime import child_loads

    back = child_loads(pickle.dumps((Mode.SUMMARY, np.arange(3.0), {"a": [1, "b"]})), "a test")
    assert back[0] is Mode.SUMMARY and back[1].tolist() == [0.0, 1.0, 2.0] and back[2] == {"a": [1, "b"]}
    with pytest.raises(pickle.UnpicklingError, match="posix.system is not allowed in the bench side"):
        child_loads(pickle.dumps(os.system), "the bench side's rows")
    with pytest.raises(pickle.UnpicklingError, match="child_loads is not allowed"):  # our functions neither
        child_loads(pickle.dumps(child_loads), "a test")


def test_child_loads_reads_a_real_bench_table_as_its_child_sends_it():
    """The forked bench read's payload (load.sides.pack of a real row table, whose raw statistic cells hold the
    module-level marker load.rows._ABSENT) comes back whole through the restricted unpickler."""
    from pathlib import Path

    from msprobe_compare.load.stream import open_dump
    from msprobe_compare.load.rows import _ABSENT, flatten
    from msprobe_compare.load.sides import pack, unpack
    from msprobe_compare.runtime import child_loads

    assert child_loads(pickle.dumps(_ABSENT), "a test") is _ABSENT
    path = Path(__file__).parent / "data" / "parallel" / "own" / "n2" / "step0" / "rank0" / "dump.json"
    table = flatten(path, open_dump(path)[1])
    sent = pickle.dumps(("ok", pack(table)), protocol=pickle.HIGHEST_PROTOCOL)
    assert b"_ABSENT" in sent  # the marker is in what crosses
    back = unpack(child_loads(sent, "the bench side's rows")[1])
    assert back.names == table.names and back.entries == table.entries and len(back) == len(table)


def test_lazy_regex_compiles_on_first_use_and_then_is_the_pattern() -> None:
    import re

    from msprobe_compare.runtime import lazy_regex

    lazy = lazy_regex(rb'"[^"\\]*"', re.S)
    assert "match" not in vars(lazy)  # nothing compiled yet
    text = b'x "ab\\"c" "d"'
    compiled = re.compile(rb'"[^"\\]*"', re.S)
    assert lazy.search(text).span() == compiled.search(text).span()
    assert lazy.match is not None and "match" in vars(lazy)
    assert lazy.findall(text) == compiled.findall(text) and lazy.sub(b"S", text) == compiled.sub(b"S", text)
    assert lazy.pattern == compiled.pattern and lazy.flags == compiled.flags
    assert not hasattr(lazy, "__missing_dunder__")  # dunder look-ups (copy, pickle probes) do not compile
    try:
        lazy_regex("[").search("x")
    except re.error:
        pass
    else:
        raise AssertionError("a bad pattern must fail where it is used")


def _parent_only(pid: int, value: int) -> int:
    """A computation that fails in a forked child (as one killed would) and succeeds in the process `pid`."""
    if os.getpid() != pid:
        os._exit(3)
    return value


@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_later_computes_in_a_child_and_sends_back_what_unpack_rebuilds() -> None:
    parent = os.getpid()
    later = Later.start(
        lambda: {"pid": os.getpid(), "rows": np.arange(5)},
        what="a test value",
        pack=lambda v: (v["pid"], v["rows"]),
        unpack=lambda p: {"pid": p[0], "rows": p[1] * 2},
    )
    assert later.forked
    value = later.get()
    assert value["pid"] != parent and value["rows"].tolist() == [0, 2, 4, 6, 8]
    assert later.get() is value  # read once


@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_later_falls_back_to_this_process_when_the_child_fails() -> None:
    later = Later.start(functools.partial(_parent_only, os.getpid(), 7), what="a test value")
    assert later.forked
    assert later.get() == 7 and not later.forked  # computed here after the child exited with 3


def test_later_without_fork_computes_at_once_and_errors_show_here() -> None:
    calls: list[int] = []
    later = Later.start(lambda: calls.append(1) or 5, what="a test value", fork=False)
    assert calls == [1] and later.get() == 5 and not later.forked
    with pytest.raises(ZeroDivisionError):
        Later.start(lambda: 1 // 0, what="a test value", fork=False)


@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_later_dropped_unread_ends_its_child() -> None:
    later = Later.start(lambda: time.sleep(30), what="a test value")
    pid = later._pid
    del later
    gc.collect()
    with pytest.raises(ChildProcessError):  # killed and reaped by the finalizer: no such child any more
        os.waitpid(pid, os.WNOHANG)


@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_later_refuses_what_the_child_must_not_send() -> None:
    """What a child writes is read by the restricted unpickler: a function in the stream is refused and the value
    computed here instead."""
    later = Later.start(lambda: os.getpid(), what="a test value", pack=lambda v: os.getpid, unpack=lambda p: -1)
    assert later.get() == os.getpid() and not later.forked
