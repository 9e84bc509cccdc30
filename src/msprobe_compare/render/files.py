"""Output names and atomic, no-clobber file writing."""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import itertools
import os
import re
import threading
from pathlib import Path
from collections.abc import Iterator

from msprobe_compare.errors import OutputError
from msprobe_compare.records import dataclass

FILE_MODE = 0o640
DIR_MODE = 0o750


def prepare_output_dir(path: Path) -> Path:
    """Create the output directory (and parents) if missing; check it is a writable directory."""
    try:
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError("exists and is not a directory; choose another -o", path) from None
    except OSError as exc:
        raise OutputError(f"cannot create the output directory ({exc.strerror or exc})", path) from None
    if not path.is_dir():
        raise OutputError("is not a directory; choose another -o", path)
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputError("output directory is not writable; choose another -o", path)
    return path.resolve()


@dataclass
class _Held:
    """One name this process reserved: `part` is the hidden file its content is written to, `owner` its twin."""

    pid: int
    part: Path
    owner: Path
    done: bool = False  # the part was published or removed
    ready: bool = False  # its content is complete; published with the whole set


_held: dict[str, _Held] = {}  # absolute final path -> its reservation, for the names claimed in this process
_held_lock = threading.Lock()


def _host_name() -> str:
    """The host name; socket.gethostname() only where os.uname() is missing (the socket module costs start-up)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


_HOST = re.sub(r"[^A-Za-z0-9_-]", "-", _host_name() or "host")[:64]
OWNER_SUFFIX = ".owner"
SCRATCH_SUFFIX = ".scratch"  # other temporaries of a run: `.NAME.HOST.PID-N.scratch` (see scratch_path)


@dataclass(frozen=True)
class NameClaim:
    """The names of one result set, reserved under one time stamp until the claim is released."""

    out_dir: Path
    ts: str

    def path(self, pattern: str) -> Path:
        return self.out_dir / pattern.format(ts=self.ts)


def part_path(final: Path) -> Path:
    """The hidden file beside `final` that reserves its name and receives its content until it is published."""
    return final.with_name(f".{final.name}.part")


def owner_path(final: Path, serial: int = 0) -> Path:
    """The part's twin (a hard link to it) whose name records who writes it: `.NAME.HOST.PID-SERIAL.owner`
    (the serial tells this process's reservations apart)."""
    return final.with_name(f".{final.name}.{_HOST}.{os.getpid()}-{serial}{OWNER_SUFFIX}")


_serials = itertools.count(1)


def scratch_path(beside: Path) -> Path:
    """A temporary file beside `beside` for this process, named like an owner twin so that the next run removes it
    if this process dies before it does."""
    return beside.with_name(f".{beside.name.lstrip('.')}.{_HOST}.{os.getpid()}-{next(_serials)}{SCRATCH_SUFFIX}")


def _taken(path: Path) -> bool:
    """Anything at all at `path` (a file, a directory, a symlink even if dangling)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _unlink(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _reserve(final: Path) -> tuple[Path, Path] | None:
    """Reserve `final`: (part, owner) or None when the name or its part is taken (by anything).

    The owner twin is created first, under a name no other process uses, then linked to the part name: the link
    fails if the part exists, so exactly one run gets a name (also across hosts sharing the folder)."""
    if _taken(final):
        return None
    part, owner = part_path(final), owner_path(final, next(_serials))
    try:
        try:
            os.close(os.open(owner, _CREATE, FILE_MODE))
        except FileExistsError:  # left by a dead process that had our pid and reached this serial
            _remove_stale(owner, part)
            os.close(os.open(owner, _CREATE, FILE_MODE))
        try:
            os.link(owner, part)
        except FileExistsError:
            _unlink(owner)
            return None
        except OSError as exc:  # no hard links here: an exclusive part alone (no owner record)
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
                raise
            _unlink(owner)
            try:
                os.close(os.open(part, _CREATE, FILE_MODE))
            except FileExistsError:
                return None
    except OSError as exc:
        raise OutputError(f"cannot be written ({exc.strerror or exc})", final) from None
    if _taken(final):  # published by a run whose part we saw gone: it links before it unlinks the part
        _unlink(part, owner)
        return None
    return part, owner


def _remove_stale(owner: Path, part: Path) -> None:
    """Remove an owner twin and, if it is the same file, its part."""
    try:
        if os.path.samestat(os.lstat(owner), os.lstat(part)):
            _unlink(part)
    except FileNotFoundError:
        pass
    _unlink(owner)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def remove_stale_parts(out_dir: Path) -> list[str]:
    """Remove the hidden parts of runs on this host whose process is gone (killed while writing); returns the
    names removed. A part is only removed with its owner twin naming this host and a dead pid: parts of live runs,
    of other hosts, or without an owner record are left alone."""
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(out_dir) if n.startswith(".") and n.endswith((OWNER_SUFFIX, SCRATCH_SUFFIX))]
    except OSError:
        return removed
    for name in names:
        fields = name.rsplit(".", 3)
        if len(fields) != 4:
            continue  # not one of ours
        stem, host, owner_id, _ = fields
        pid_text = owner_id.partition("-")[0]
        if host != _HOST or not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        owner = out_dir / name
        if name.endswith(SCRATCH_SUFFIX):
            _unlink(owner)
            removed.append(name)
            continue
        part = out_dir / f"{stem}.part"
        _remove_stale(owner, part)
        removed.append(part.name)
    return removed


def _release(held: list[tuple[Path, Path]]) -> None:
    for part, owner in held:
        _unlink(part, owner)


@contextlib.contextmanager
def claim_names(out_dir: Path, patterns: list[str], now: _dt.datetime | None = None) -> Iterator[NameClaim]:
    """Reserve `pattern.format(ts=...)` for every pattern under the first free YYYYmmddHHMMSS stamp from `now` on.

    A name is taken if anything is at it or at its part file (another run is writing it); then the stamp moves
    on by a second for the whole set, so the names keep their documented form and never replace a file (the
    reference deletes an existing one). Each reservation is a hidden part file created exclusively, so runs
    sharing a folder never get the same stamp; `atomic_output` writes into it. The set is published when the
    block ends without an error, all of it: a file is never published before every file of the set is
    complete, and when publishing fails midway the files already published are removed again. On an error
    nothing is published and every part is removed. A run killed meanwhile leaves only hidden parts (never a
    file under a result name); the next run into the folder removes those of dead processes on this host.
    """
    remove_stale_parts(out_dir)
    names = list(dict.fromkeys(patterns))
    moment = (now or _dt.datetime.now()).replace(microsecond=0)
    for _ in range(100000):
        ts = moment.strftime("%Y%m%d%H%M%S")
        got: list[tuple[Path, Path]] = []
        try:
            for pattern in names:
                reserved = _reserve(out_dir / pattern.format(ts=ts))
                if reserved is None:
                    break
                got.append(reserved)
        except BaseException:
            _release(got)
            raise
        if len(got) == len(names):
            break
        _release(got)
        moment += _dt.timedelta(seconds=1)
    else:
        raise OutputError("no free output file name", out_dir)
    claim = NameClaim(out_dir, ts)
    pid = os.getpid()
    keys = [os.path.abspath(claim.path(p)) for p in names]
    held = [_Held(pid, part, owner) for part, owner in got]
    with _held_lock:
        _held.update(zip(keys, held))
    try:
        yield claim
        if os.getpid() == pid:
            _publish_set([(Path(k), h) for k, h in zip(keys, held) if h.ready and not h.done])
    finally:
        with _held_lock:
            for key in keys:
                _held.pop(key, None)
        if os.getpid() == pid:  # never a forked child's business
            _release([(h.part, h.owner) for h in held if not h.done])
            for h in held:
                h.done = True


def _publish_set(items: list[tuple[Path, _Held]]) -> None:
    """Publish every finished part of a set; if one cannot be, remove those published already (all or none)."""
    published: list[tuple[Path, _Held]] = []
    try:
        for final, held in items:
            _publish(held.part, final)
            published.append((final, held))
    except BaseException as exc:
        for final, held in published:
            with contextlib.suppress(OSError):
                if os.path.samestat(os.lstat(final), os.lstat(held.part)):  # ours: the part is still linked
                    final.unlink()
        if isinstance(exc, OSError):
            raise OutputError(f"cannot be written ({exc.strerror or exc})", final) from None
        raise
    for _, held in published:
        _unlink(held.part, held.owner)
        held.done = True


def _publish(tmp: Path, final: Path) -> None:
    """Give the finished `tmp` the name `final`, never replacing anything there."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise OutputError("already exists; not overwritten", final) from None
    except OSError:  # file systems without hard links
        if _taken(final):
            raise OutputError("already exists; not overwritten", final) from None
        os.rename(tmp, final)


@contextlib.contextmanager
def atomic_output(final: Path) -> Iterator[Path]:
    """Yield the hidden part path of `final`, whose content the block writes.

    Inside `claim_names` the part is the claim's reservation, published with the whole set when the claim ends;
    otherwise it is reserved here (an error if the name is taken) and published when the block succeeds.
    Publishing never replaces anything; a reader never sees a partial file under `final`. On failure nothing
    is left behind.
    """
    with _held_lock:
        held = _held.get(os.path.abspath(final))
    if held is not None and (held.pid != os.getpid() or held.done or held.ready):  # a forked child's, or done
        held = None
    if held is not None:
        try:
            yield held.part
            os.chmod(held.part, FILE_MODE)
        except OSError as exc:
            _unlink(held.part, held.owner)
            held.done = True
            raise OutputError(f"cannot be written ({exc.strerror or exc})", final) from None
        except BaseException:
            _unlink(held.part, held.owner)
            held.done = True
            raise
        held.ready = True
        return
    reserved = _reserve(final)
    if reserved is None:
        why = "already exists; not overwritten" if _taken(final) else "is being written by another run"
        raise OutputError(why, final)
    part, owner = reserved
    try:
        yield part
        os.chmod(part, FILE_MODE)
        _publish(part, final)
    except OSError as exc:
        raise OutputError(f"cannot be written ({exc.strerror or exc})", final) from None
    finally:
        _unlink(part, owner)


@contextlib.contextmanager
def new_output(out_dir: Path, pattern: str) -> Iterator[tuple[Path, Path]]:
    """(final, tmp) of one file `pattern` under its own claimed stamp: write tmp; it is published as final."""
    with claim_names(out_dir, [pattern]) as claim:
        final = claim.path(pattern)
        with atomic_output(final) as tmp:
            yield final, tmp
