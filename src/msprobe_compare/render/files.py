"""Output names and atomic, no-clobber file writing."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from msprobe_compare.errors import OutputError

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
    """One name this process reserved: `part` is the hidden file its content is written to."""

    pid: int
    part: Path
    done: bool = False  # the part was published or removed by atomic_output


_held: dict[str, _Held] = {}  # absolute final path -> its reservation, for the names claimed in this process
_held_lock = threading.Lock()


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


def _taken(path: Path) -> bool:
    """Anything at all at `path` (a file, a directory, a symlink even if dangling)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _reserve(final: Path) -> Path | None:
    """Create `final`'s part file exclusively; None when the name or its part is taken (by anything)."""
    if _taken(final):
        return None
    part = part_path(final)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        os.close(os.open(part, flags, FILE_MODE))
    except FileExistsError:
        return None
    except OSError as exc:
        raise OutputError(f"cannot be written ({exc.strerror or exc})", final) from None
    if _taken(final):  # published by a run whose part we saw gone: it links before it unlinks the part
        part.unlink()
        return None
    return part


def _release(parts: list[Path]) -> None:
    for part in parts:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()


@contextlib.contextmanager
def claim_names(out_dir: Path, patterns: list[str], now: _dt.datetime | None = None) -> Iterator[NameClaim]:
    """Reserve `pattern.format(ts=...)` for every pattern under the first free YYYYmmddHHMMSS stamp from `now` on.

    A name is taken if anything is at it or at its part file (another run is writing it); then the stamp moves
    on by a second for the whole set, so the names keep their documented form and never replace a file (the
    reference deletes an existing one). Each reservation is a hidden part file created with O_EXCL, so runs
    sharing a folder never get the same stamp; `atomic_output` writes into it and publishes it. On leaving the
    block, parts not published are removed, also on failure. A run killed meanwhile leaves only its hidden
    part files (never a file under a result name); they keep that stamp taken.
    """
    names = list(dict.fromkeys(patterns))
    moment = (now or _dt.datetime.now()).replace(microsecond=0)
    for _ in range(100000):
        ts = moment.strftime("%Y%m%d%H%M%S")
        got: list[Path] = []
        try:
            for pattern in names:
                part = _reserve(out_dir / pattern.format(ts=ts))
                if part is None:
                    break
                got.append(part)
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
    held = [_Held(pid, part) for part in got]
    with _held_lock:
        _held.update(zip(keys, held))
    try:
        yield claim
    finally:
        with _held_lock:
            for key in keys:
                _held.pop(key, None)
        if os.getpid() == pid:  # never a forked child's business
            _release([h.part for h in held if not h.done])


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
    """Yield the hidden part path of `final`; publish it as `final` only if the block succeeds.

    Inside `claim_names` the part is the claim's reservation; otherwise it is reserved here (an error if the
    name is taken). Publishing never replaces anything; a reader never sees a partial file under `final`.
    On failure nothing is left behind.
    """
    with _held_lock:
        held = _held.get(os.path.abspath(final))
    if held is not None and (held.pid != os.getpid() or held.done):  # a forked child's copy, or written already
        held = None
    if held is not None:
        tmp = held.part
    else:
        part = _reserve(final)
        if part is None:
            why = "already exists; not overwritten" if _taken(final) else "is being written by another run"
            raise OutputError(why, final)
        tmp = part
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        _publish(tmp, final)
    except OSError as exc:
        raise OutputError(f"cannot be written ({exc.strerror or exc})", final) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if held is not None:
            held.done = True


@contextlib.contextmanager
def new_output(out_dir: Path, pattern: str) -> Iterator[tuple[Path, Path]]:
    """(final, tmp) of one file `pattern` under its own claimed stamp: write tmp; it is published as final."""
    with claim_names(out_dir, [pattern]) as claim:
        final = claim.path(pattern)
        with atomic_output(final) as tmp:
            yield final, tmp
