"""Output names and atomic, no-clobber file writing."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
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


def free_timestamp(out_dir: Path, patterns: list[str], now: _dt.datetime | None = None) -> str:
    """A YYYYmmddHHMMSS stamp for which no `pattern.format(ts=...)` file exists yet.

    The reference deletes an existing file of the same name; we never do: the stamp moves on by a
    second instead, so the names keep their documented form.
    """
    moment = (now or _dt.datetime.now()).replace(microsecond=0)
    for _ in range(100000):
        ts = moment.strftime("%Y%m%d%H%M%S")
        if not any((out_dir / p.format(ts=ts)).exists() for p in patterns):
            return ts
        moment += _dt.timedelta(seconds=1)
    raise OutputError("no free output file name", out_dir)


@contextlib.contextmanager
def atomic_output(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside `final`; publish it as `final` only if the block succeeds.

    Publishing never replaces an existing file. On failure nothing is left behind.
    """
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        try:
            os.link(tmp, final)
        except FileExistsError:
            raise OutputError("already exists; not overwritten", final) from None
        except OSError:  # file systems without hard links
            if final.exists():
                raise OutputError("already exists; not overwritten", final) from None
            os.rename(tmp, final)
    except OSError as exc:
        raise OutputError(f"cannot be written ({exc.strerror or exc})", final) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
