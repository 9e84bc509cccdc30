"""Read one dumped tensor file into TensorData by its name: the name resolved safely inside the dump's tensor folder
(no absolute names, `..`, symlinks or special files), then read by its suffix: `.pt` (pt.py: torch.save zip archives,
without torch and without pickle code) or `.npy` (npy.py). Every array returned is read-only.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path, PureWindowsPath

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.npy import read_npy
from msprobe_compare.load.pt import read_pt
from msprobe_compare.load.tensor_data import TensorData

__all__ = ["load_tensor", "read_npy", "read_pt", "resolve_tensor_path"]  # the readers: for callers with a path


def resolve_tensor_path(tensor_dir: Path, data_name: str) -> Path:
    """The regular file `data_name` inside `tensor_dir` (a dump's `dump_tensor_data` folder).

    Refused as "unsafe": an absolute name, a name with `..`, backslashes or NUL, a symlinked folder or
    file on the way, a special file. "missing": the folder or file does not exist.
    """
    return Path(_resolve(tensor_dir, data_name))


@functools.lru_cache(maxsize=64)
def _folder_text(tensor_dir: Path | str) -> str:
    return str(Path(tensor_dir))


def _resolve(tensor_dir: Path | str, data_name: str) -> str:
    """resolve_tensor_path on plain strings (pathlib costs more than the lstat calls on small tensors)."""
    name = str(data_name)
    if not name or "\x00" in name or "\\" in name:
        raise TensorFileError("unsafe", name, "data_name is empty or contains NUL or a backslash")
    if name.startswith("/") or (":" in name and PureWindowsPath(name).anchor):
        raise TensorFileError("unsafe", name, "data_name is an absolute path")
    parts = [part for part in name.split("/") if part not in ("", ".")]  # PurePosixPath(name).parts
    if ".." in parts or not parts:
        raise TensorFileError("unsafe", name, "data_name escapes the tensor folder")

    current = _folder_text(tensor_dir)
    last = len(parts)
    for index in range(last + 1):
        if index:
            current = os.path.join(current, parts[index - 1])
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            raise TensorFileError("missing", name, f"{current} does not exist") from None
        except OSError as exc:
            raise TensorFileError("missing", name, f"cannot stat {current}: {exc.strerror}") from None
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            raise TensorFileError("unsafe", name, f"{current} is a symbolic link")
        if index < last and not stat.S_ISDIR(mode):
            raise TensorFileError("missing", name, f"{current} is not a folder")
        if index == last and not stat.S_ISREG(mode):
            if stat.S_ISDIR(mode):
                raise TensorFileError("missing", name, f"{current} is a folder, not a file")
            raise TensorFileError("unsafe", name, f"{current} is not a regular file")
    return current


def load_tensor(tensor_dir: Path, data_name: str) -> TensorData:
    """Resolve `data_name` safely inside `tensor_dir` and read it by its suffix (.pt or .npy)."""
    path = _resolve(tensor_dir, data_name)
    last = os.path.basename(path)
    dot = last.rfind(".")
    suffix = last[dot:].lower() if 0 < dot < len(last) - 1 else ""  # as Path.suffix
    if suffix == ".pt":
        return read_pt(path, data_name)
    if suffix == ".npy":
        return read_npy(path, data_name)
    raise TensorFileError("unsupported", data_name, f"unknown tensor file type {suffix or '(no suffix)'!r}")
