"""Process-level helpers shared by the stages."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import os
import pickle
import platform
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:  # annotations only
    import mmap

# How tensor rows run in parallel (measure/tensor_rows.py); Options.pool (config.py) chooses one. Here, not in
# tensor_rows, so that checking the option does not import the tensor reader (start-up speed).
POOL_KINDS = ("auto", "thread", "process")


class _LazyPattern:
    """A regular expression compiled on its first use; from then on its methods are the compiled pattern's own,
    bound once, so a call costs what it costs on the pattern."""

    _METHODS = ("search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer")

    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._source: tuple[Any, int] = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for names not yet set on the instance
        if name.startswith("__"):
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for method in self._METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


@overload
def lazy_regex(pattern: str, flags: int = 0) -> re.Pattern[str]: ...
@overload
def lazy_regex(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]: ...


def lazy_regex(pattern: str | bytes, flags: int = 0) -> Any:
    """`re.compile(pattern, flags)`, compiled when first used: a module's patterns for paths a run may not take
    cost nothing at import (start-up speed). Only the pattern's methods (search, match, sub...) are used on it."""
    return _LazyPattern(pattern, flags)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector. A compare makes millions of acyclic objects (rows, cell texts)
    that each collection would rescan with the whole large heap (over a quarter of the reading time of a
    1M-row dump); reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def tune_malloc() -> bool:
    """On glibc: keep freed memory for reuse instead of handing it back to the kernel at once.

    A compare allocates and frees many large numpy temporaries and lists; by default glibc maps each block of
    more than a few MB afresh and trims the heap eagerly, so the same memory is faulted in and zeroed by the
    kernel again and again (about 1.5 s of system time in a 1M-row compare). Blocks up to 32 MiB now come from
    the heap, which grows in 256 MiB steps and is trimmed only above 1 GiB free. Peak memory is unchanged (freed
    blocks are reused); the process is short-lived. Returns whether the settings took effect (False elsewhere).
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":  # musl has no such knobs
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, 32 << 20) == 1
    ok &= mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1
    ok &= mallopt(_M_TOP_PAD, 256 << 20) == 1
    return bool(ok)


_KEPT: list[Any] | None = None  # what the command keeps until it ends (exiting_now); None: not the command


@contextlib.contextmanager
def exiting_now() -> Iterator[None]:
    """While the command runs: `keep_until_exit` keeps what it is given (the command then ends by `exit_now`)."""
    global _KEPT
    _KEPT = []
    try:
        yield
    except BaseException:  # an exception ends the process the usual way: nothing kept
        _KEPT = None
        raise


def keep_until_exit(obj: Any) -> None:
    """Keep `obj` (a finished compare's tables: millions of objects) alive until the command ends, when the
    process exits without freeing them one by one (about 0.15 s on 1M rows); outside the command, nothing."""
    if _KEPT is not None:
        _KEPT.append(obj)


def exit_now(code: int) -> None:
    """End the command's process with `code` after flushing its output streams, without the interpreter's
    teardown (what `keep_until_exit` kept is not freed object by object). Every result file is closed and in
    place by then; no exit handler of this package is left to run."""
    flush_output()
    os._exit(code)


def flush_output() -> None:
    """Flush stdout and stderr (a closed or absent stream: nothing to flush)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def release_free_memory() -> bool:
    """On glibc: hand the heap's free pages back to the kernel (`malloc_trim`), before forking a child that runs
    beside this process. Pages still mapped after the fork are shared copy-on-write, so this process's next
    allocations would reuse free pages at the cost of a copy each; the analysis before the render leaves a few
    hundred MB of them (tune_malloc keeps freed memory). Returns whether it ran (False elsewhere)."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    trim(0)
    return True


def can_fork() -> bool:
    """Whether a helper process may be forked here: POSIX, two or more cores, and no other thread running (forking
    a process that runs other threads, such as Ray's or a host application's, is unsafe)."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) >= 2 and threading.active_count() == 1


def reap(pid: int, kill: bool = False) -> int:
    """Wait for a forked child (killed first when `kill`); its exit status (-1 if it cannot be known)."""
    if kill:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return -1


_T = TypeVar("_T")


class Later(Generic[_T]):
    """A value computed by a forked child while this process goes on with other work (`Later.start`); `get()`
    waits for it. The child writes `pack(value)` into an unnamed file and exits (its memory is released as soon as
    it is done, not when the value is read); this process reads it with `child_load` and rebuilds it with `unpack`
    (so a child need not send back what this process holds already). When no child can be forked, or the child
    fails (killed, out of memory), the value is computed here instead: the answer is the same either way, and an
    error the computation raises shows here with its message."""

    def __init__(self, work: Callable[[], _T], what: str, unpack: Callable[[Any], _T] | None = None) -> None:
        self._work: Callable[[], _T] | None = work
        self._what, self._unpack = what, unpack
        self._pid = 0
        self._file: IO[bytes] | None = None
        self._done = False
        self._value: Any = None
        self._finalizer: weakref.finalize | None = None
        self.forked = False  # whether a child computed the value (tests)

    @classmethod
    def start(cls, work: Callable[[], _T], *, what: str, fork: bool = True,
              pack: Callable[[_T], Any] | None = None, unpack: Callable[[Any], _T] | None = None) -> Later[_T]:  # fmt: skip
        """`work()` in a forked child when `fork` and `can_fork()`, else here, now."""
        later = cls(work, what, unpack)
        if not (fork and can_fork()):
            later._set(work())
            return later
        file = _unnamed_file()
        flush_output()  # what the child prints must not repeat what waits in this process's buffers
        release_free_memory()  # free pages would be shared copy-on-write with the child: each reuse a copy
        with gc_paused():  # no collection between the fork and the child's exit: it would touch every object
            pid = os.fork()
            if pid == 0:  # child: compute, write, exit without cleanup handlers
                status = 1
                try:
                    value = work()
                    pickle.dump(pack(value) if pack else value, file, protocol=pickle.HIGHEST_PROTOCOL)
                    file.flush()
                    status = 0
                finally:
                    os._exit(status)
        later._pid, later._file, later.forked = pid, file, True
        later._finalizer = weakref.finalize(later, _abandon, pid, file)  # dropped unread: the child is ended
        return later

    def get(self) -> _T:
        """The value: waits for the child (or computes it here if the child failed)."""
        if not self._done:
            assert self._finalizer is not None and self._file is not None  # not done: a child was forked
            self._finalizer.detach()
            value: Any = None
            with self._file as f:
                ok = reap(self._pid) == 0
                if ok:
                    f.seek(0)
                    try:
                        value = child_load(f, self._what)
                    except (EOFError, pickle.UnpicklingError, OSError):  # incomplete: computed here instead
                        ok = False
            if ok:
                self._set(self._unpack(value) if self._unpack else value)
            else:
                assert self._work is not None
                self.forked = False
                self._set(self._work())
        return self._value

    def _set(self, value: _T) -> None:
        self._value, self._done = value, True
        keep_until_exit(self._work)  # what the work held (a compare's tables) is not freed object by object now
        self._work = self._unpack = None


def _unnamed_file() -> IO[bytes]:
    """A read/write file with no name (memory-backed where the system has memfd), closed and gone when dropped."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        with contextlib.suppress(OSError):
            return os.fdopen(memfd("msprobe-compare", getattr(os, "MFD_CLOEXEC", 0)), "w+b")
    import tempfile  # only where memfd is missing (start-up speed)

    return tempfile.TemporaryFile()


def _abandon(pid: int, file: IO[bytes]) -> None:
    """A `Later` dropped before its value was read: end its child and close its file."""
    reap(pid, kill=True)
    file.close()


def child_loads(data: bytes, what: str) -> Any:
    """Unpickle what a child process of this package sent (`what` names it in the error): only this package's
    classes, numpy's arrays, dtypes and scalars and a few builtin types are built, never arbitrary objects."""
    return child_load(io.BytesIO(data), what)


def child_load(file: IO[bytes] | mmap.mmap, what: str) -> Any:
    """`child_loads` straight from a file (a pipe): no copy of the whole stream is held beside what it makes.
    EOFError when the stream ends before the object does."""
    loader = _Restricted(file)
    loader.what = what
    return loader.load()


_NUMPY = {  # what numpy arrays, dtypes and scalars pickle as (numpy 1 and 2 module names)
    (mod, name)
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray")
    for name in ("_reconstruct", "scalar")
} | {(mod, "_frombuffer") for mod in ("numpy.core.numeric", "numpy._core.numeric")} | {
    ("numpy", "ndarray"), ("numpy", "dtype")}  # fmt: skip
_BUILTINS = frozenset({"set", "frozenset", "tuple", "list", "dict", "bytes", "bytearray", "complex", "float", "int",
                       "str", "bool"})  # fmt: skip


class _Restricted(pickle.Unpickler):
    """Builds only this package's classes (and its module-level constants, instances of them), numpy's arrays,
    dtypes and scalars, and a few builtin types; never a function."""

    what = "data of a child process"

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _NUMPY or (module == "builtins" and name in _BUILTINS):
            return super().find_class(module, name)
        if module.startswith("msprobe_compare.") and "." not in name:
            found = super().find_class(module, name)
            if isinstance(found, type) or type(found).__module__.startswith("msprobe_compare."):
                return found  # a class of ours, or one of our module-level constants (load.rows._ABSENT)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in {self.what}")
