"""The root cause analysed beside the rest of a compare.

In statistics and md5 mode the analysis (judge/rootcause.analyse) needs only the two row tables, the pairing and
the module trees, all known before the statistics are measured. `start_analysis` forks a child that runs it while
this process measures, judges and writes the tables; the child leaves the RootCause in a scratch file and exits, without
what this process already has (the entry list, the module tree; call states as one int8 array), and this process
reads it where it is first needed (`PendingRootCause.get`: the advisor, the console, the HTML report, -da). The
answer is the same as the analysis run here: a child that fails (non-zero exit, killed, unreadable data) is
replaced by the analysis run here, so an error shows with its own message. Without a fork (one core, other threads,
not POSIX, small compares) the analysis runs here at once. The child's data is read by an Unpickler that builds
only this package's classes, numpy arrays and a few builtin types (never arbitrary objects).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import weakref
from collections.abc import Callable

import numpy as np

from msprobe_compare.judge.noise import Tolerance
from msprobe_compare.judge.rootcause import CallState, RootCause, analyse
from msprobe_compare.load.mode import Mode
from msprobe_compare.measure.measured import Measured
from msprobe_compare.runtime import can_fork, child_loads, reap, release_free_memory

FORK_MIN_ROWS = 100_000  # below this the analysis takes less than a fork and the transfer cost (~0.1 s at 1M rows)
_STATES = tuple(CallState)  # the code of a call state is its position here


class PendingRootCause:
    """A root cause, ready or being analysed in a forked child; `get()` gives it (waiting for the child once)."""

    def __init__(self, value: RootCause | None = None, *, pid: int = 0, fd: int = -1,
                 inline: Callable[[], RootCause] | None = None, entries: list[str] | None = None,
                 parents: dict[str, str | None] | None = None) -> None:  # fmt: skip
        self._value, self._pid, self._fd, self._inline = value, pid, fd, inline
        self._entries, self._parents = entries, parents
        self._cleanup = weakref.finalize(self, _abandon, pid, fd) if pid else None

    @classmethod
    def ready(cls, value: RootCause) -> PendingRootCause:
        return cls(value)

    @property
    def forked(self) -> bool:
        """Whether the analysis runs (or ran) in a child process."""
        return self._pid != 0

    def get(self) -> RootCause:
        """The root cause: the child's, read once; else the analysis run here."""
        if self._value is None:
            rc = self._collect()
            if rc is None:
                assert self._inline is not None
                rc = self._inline()  # the child failed: here an error shows with its own message
            self._value, self._inline, self._entries, self._parents = rc, None, None, None
        return self._value

    def _collect(self) -> RootCause | None:
        if not self._pid:
            return None
        assert self._cleanup is not None
        self._cleanup.detach()
        status = reap(self._pid)
        try:
            with os.fdopen(self._fd, "rb") as inp:
                inp.seek(0)
                data = inp.read()
        except OSError:
            return None
        if status != 0 or not data:
            return None
        try:
            return decode(data, self._entries or [], self._parents)
        except (pickle.UnpicklingError, ValueError, TypeError, AttributeError, IndexError, EOFError):
            return None


def _abandon(pid: int, fd: int) -> None:
    """A pending root cause nobody read: the child is stopped and reaped, the scratch file closed."""
    with contextlib.suppress(OSError):
        os.close(fd)
    reap(pid, kill=True)


def start_analysis(m: Measured, parents: dict[str, str | None] | None, bench_parents: dict[str, str | None] | None,
                   tolerance: Tolerance | None, *, parallel: bool = True) -> PendingRootCause:  # fmt: skip
    """The root cause of `m` (its statistics diffs are not read): analysed in a forked child when `parallel`,
    worthwhile and possible (statistics and md5 mode), else here at once."""

    def inline() -> RootCause:
        return analyse(m, parents, bench_parents, tolerance)

    if not (parallel and m.mode is not Mode.ALL and len(m.npu) >= FORK_MIN_ROWS and can_fork()):
        return PendingRootCause.ready(inline())
    _warm(m)
    release_free_memory()  # free pages would be shared copy-on-write with the child
    fd = _scratch_fd()
    pid = os.fork()
    if pid == 0:  # child: analyse, leave the result in the scratch file, exit at once without cleanup handlers
        status = 1
        try:
            data = encode(inline())
            with os.fdopen(fd, "wb", closefd=False) as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    return PendingRootCause(pid=pid, fd=fd, inline=inline, entries=m.npu.entries, parents=parents)


def _scratch_fd() -> int:
    """A file only this process and its child can reach, in memory where possible: the child writes its result
    there and exits, instead of waiting on a pipe until this process reads (until then every page this process
    writes would be copied, being shared with the child)."""
    if hasattr(os, "memfd_create"):
        with contextlib.suppress(OSError):
            return os.memfd_create("msprobe-rootcause", getattr(os, "MFD_CLOEXEC", 0))
    import tempfile  # start-up speed: only where memfd_create is missing

    with tempfile.TemporaryFile() as f:  # unlinked already (POSIX)
        return os.dup(f.fileno())


def _warm(m: Measured) -> None:
    """The tables' per-table caches the analysis and this process both use, computed once before the fork (what
    the child computes stays in the child)."""
    for table in (m.npu, m.bench):
        table.dtype_codes  # noqa: B018 (a cached property)
    m.npu.phase_codes  # noqa: B018


def encode(rc: RootCause) -> bytes:
    """A RootCause without its entry list and module tree (the receiver has both); states as int8 codes."""
    codes = {s: k for k, s in enumerate(_STATES)}
    states = np.fromiter(map(codes.__getitem__, rc.states), dtype=np.int8, count=len(rc.states))
    entries, parents, calls = rc.entries, rc.parents, rc.states
    try:
        rc.entries, rc.parents, rc.states = [], {}, []
        return pickle.dumps((len(entries), states, rc), protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        rc.entries, rc.parents, rc.states = entries, parents, calls


def decode(data: bytes, entries: list[str], parents: dict[str, str | None] | None) -> RootCause:
    """The RootCause `encode` sent, for the compare whose NPU entries and module tree (construct.json) are given."""
    n, states, rc = child_loads(data, "a root cause")
    if not isinstance(rc, RootCause) or not isinstance(states, np.ndarray) or not n == len(entries) == len(states):
        raise ValueError("not the root cause of this compare")
    if states.dtype != np.int8 or (n and (states.min() < 0 or states.max() >= len(_STATES))):
        raise ValueError("call states out of range")
    rc.entries, rc.parents = list(entries), dict(parents or {})
    rc.states = list(map(_STATES.__getitem__, states.tolist()))
    return rc
