"""MindSpore graph-mode (kernel-by-kernel) dumps: the folders of a dump root by (rank, step), and the kernel
tensors (`.npy`) or `statistic.csv` rows of a folder (spec §7.5, reference.md §7.5).

A dump root holds `rank_<R>/<net>/<graph>/<step>/` folders (other trees: the rank is the fourth- or third-last
numeric path component). Only the deepest folders count. Nothing here reads tensor data; the .npy files are only
named (measure/kernel_metrics.py opens them one pair at a time).
"""

from __future__ import annotations

import csv
import enum
import math
import os
import re
import stat
from dataclasses import field
from pathlib import Path
from typing import Any

from msprobe_compare.errors import InputError
from msprobe_compare.records import dataclass

MAX_DEPTH = 400  # folder levels below the root, as the reference
NPY_NAME = re.compile(
    r"^([^.]+)\.([^.]+)\.([^.]+)\.([^.]+)\.(\d+(?:\.\d+)*)\.((?:in|out)put(?:\.\d+)*)\.([^.]+)\.([^.]+)"
    r"\.npy$"
)  # OpType.OpName.TaskId.StreamId.Timestamp.{input|output}[.Idx].Slot.Format.npy
STAT_COLUMNS = ("Data Type", "Shape", "Max Value", "Min Value", "Avg Value", "L2Norm Value")
STAT_MIN_FIELDS = 13
_SPECIAL = {"null": 0.0, "False": 0.0, "True": 1.0}  # statistic.csv words read as numbers (as the reference)


class KernelMode(enum.Enum):
    NPY = "npy"
    STATISTIC = "statistic"


@dataclass(frozen=True)
class KernelFile:
    """One kernel tensor file: its folder and file name, compare key and timestamp."""

    folder: Path
    name: str
    key: str  # OpName.TaskId.{input|output}[.Idx].Slot
    timestamp: int

    @property
    def path(self) -> Path:
        return self.folder / self.name


@dataclass(frozen=True)
class StatRow:
    """One statistic.csv row: key, timestamp, dtype and shape texts (None when the file has no such column),
    the four statistics (NaN when absent), and the file it came from."""

    key: str  # OpName.TaskId.IO.Slot, also the row's name
    timestamp: int
    dtype: str | None
    shape: str | None
    stats: tuple[float, float, float, float]
    csv_file: Path


def _number(part: str) -> int:
    """A path component as a rank or step number, -1 when it is none (int() as the reference: ' 1', '+1')."""
    try:
        return int(part)
    except ValueError:
        return -1


def rank_step(folder: Path) -> tuple[int, int]:
    """(rank, step) of a deepest folder, from its absolute path as the reference reads it; -1 when unknown."""
    text = os.path.abspath(folder)
    parts = text.split("/")
    rank = -1
    if "rank_" in text:  # KBK layout: rank_<R>/<net>/<graph>/<step>
        if len(parts) > 4:
            rank = _number(parts[-4].split("_")[-1])
    else:
        if len(parts) > 4:
            rank = _number(parts[-4])
        if rank == -1 and len(parts) > 3:
            rank = _number(parts[-3])
    return rank, _number(parts[-1])


def _is_dir(path: str) -> bool:
    """A real folder (symbolic links are never followed)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def utf8_name(name: str, folder: str | Path) -> str:
    """A name os.listdir gave for `folder`, refused when its bytes are not UTF-8 (they come as lone surrogates,
    which no output can hold), as JSON bytes that are not UTF-8 are."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"holds a name that is not valid UTF-8: {os.fsencode(name)!r}", Path(folder)) from None
    return name


def deepest_folders(root: Path) -> list[Path]:
    """The folders below `root` that hold no folder, in sorted order (the root itself never counts)."""
    found: list[Path] = []

    def walk(current: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InputError(f"has more than {MAX_DEPTH} folder levels", Path(current))
        try:
            names = sorted(os.listdir(current))
        except OSError as exc:
            raise InputError(f"cannot be read ({exc.strerror})", Path(current)) from None
        for name in names:
            full = os.path.join(current, name)
            if not _is_dir(full):
                continue
            utf8_name(name, current)
            try:
                inner = os.listdir(full)
            except OSError as exc:
                raise InputError(f"cannot be read ({exc.strerror})", Path(full)) from None
            if any(_is_dir(os.path.join(full, sub)) for sub in inner):
                walk(full, depth + 1)
            else:
                found.append(Path(full))

    walk(os.path.abspath(root), 0)
    return found


def rank_step_folders(root: Path, ranks: list[int], steps: list[int]) -> dict[tuple[int, int], list[Path]]:
    """The deepest folders of `root` by (rank, step), sorted, kept when their rank/step is in the filters
    (an empty filter keeps all); folders without a rank or step number are left out."""
    found: dict[tuple[int, int], list[Path]] = {}
    for folder in deepest_folders(root):
        rank, step = rank_step(folder)
        if rank == -1 or step == -1 or (ranks and rank not in ranks) or (steps and step not in steps):
            continue
        found.setdefault((rank, step), []).append(folder)
    return dict(sorted(found.items()))


def _read_csv(path: Path) -> list[list[str]]:
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise InputError("is a symbolic link; refused", path)
        with open(path, newline="", encoding="utf-8-sig") as f:
            return list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot be read ({getattr(exc, 'strerror', None) or exc})", path) from None


def _mapping(folder: Path) -> dict[str, str]:
    """mapping.csv: short file name -> kernel file name (first two columns, after the header)."""
    path = folder / "mapping.csv"
    if not os.path.lexists(path):
        return {}
    return {row[0]: row[1] for row in _read_csv(path)[1:] if len(row) >= 2}


def npy_files(folder: Path) -> list[KernelFile]:
    """The kernel .npy files of `folder` (names through mapping.csv; other names are left out), sorted."""
    mapping = _mapping(folder)
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".npy"):
            continue
        utf8_name(name, folder)
        m = NPY_NAME.match(mapping.get(name, name))
        if m is None:
            continue
        key = ".".join((m.group(2), m.group(3), m.group(6), m.group(7)))
        out.append(KernelFile(folder, name, key, int(m.group(5).split(".")[0])))
    return out


def _stat_value(text: str, path: Path) -> float:
    text = text.strip()
    if text in _SPECIAL:
        return _SPECIAL[text]
    try:
        return float(text)
    except ValueError:
        raise InputError(f"statistic value {text!r} is not a number", path) from None


def statistic_rows(folder: Path) -> tuple[list[StatRow], list[str]]:
    """The rows of `folder`/statistic.csv and the statistic columns its header lacks."""
    path = folder / "statistic.csv"
    content = _read_csv(path)
    if not content:
        raise InputError("is empty", path)
    header = content[0]
    index = {name: header.index(name) if name in header else None for name in STAT_COLUMNS}
    rows = []
    for line, data in enumerate(content[1:], start=2):
        if len(data) < STAT_MIN_FIELDS:
            raise InputError(f"line {line} has {len(data)} fields, a kernel statistic row has at least "
                             f"{STAT_MIN_FIELDS}", path)  # fmt: skip
        try:
            timestamp = int(data[4])
        except ValueError:
            raise InputError(f"line {line}: timestamp {data[4]!r} is not an integer", path) from None

        def field(name: str, data: list[str] = data) -> str | None:
            k = index[name]
            return data[k] if k is not None and k < len(data) else None

        values = [field(n) for n in STAT_COLUMNS[2:]]
        stats = tuple(math.nan if v is None else _stat_value(v, path) for v in values)
        name = f"{data[1]}.{data[2]}.{data[5]}.{data[6]}"
        rows.append(StatRow(name, timestamp, field("Data Type"), field("Shape"), stats, path))  # type: ignore[arg-type]
    return rows, [name for name, k in index.items() if k is None]


def folder_mode(folder: Path) -> KernelMode | None:
    """NPY when the folder holds .npy files, else STATISTIC when it holds statistic.csv, else None."""
    names = os.listdir(folder)
    if any(n.endswith(".npy") for n in names):
        return KernelMode.NPY
    if "statistic.csv" in names:
        return KernelMode.STATISTIC
    return None


@dataclass(frozen=True)
class GraphRequest:
    """What compare.json asks for: the kernel compare (rank/step filters) or the single-point one."""

    kind: str  # "kernel" | "common"
    ranks: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    map_dict: dict[str, str] = field(default_factory=dict)
    shown: tuple[str, ...] = ()  # npu_path, bench_path as compare.json gives them: the single-point Data_name's roots


def _int_list(doc: dict[str, Any], key: str, source: Path) -> tuple[int, ...]:
    value = doc.get(key, [])
    if value is None:
        value = []
    if not isinstance(value, list):
        raise InputError(f"'{key}' must be a list of integers", source)
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise InputError(f"'{key}' must be a list of integers, got {v!r}", source)
        try:
            out.append(int(v))
        except ValueError:
            raise InputError(f"'{key}' must be a list of integers, got {v!r}", source) from None
    return tuple(out)


def graph_request(doc: dict[str, Any], source: Path) -> GraphRequest | None:
    """The graph-mode compare compare.json asks for (`rank_id` present: kernel; `"common": true`: single
    point), else None."""
    if doc.get("rank_id") is not None:
        return GraphRequest("kernel", _int_list(doc, "rank_id", source), _int_list(doc, "step_id", source))
    if doc.get("common") is True:
        mapping = doc.get("map_dict") or {}
        if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in mapping.items()):  # fmt: skip
            raise InputError("'map_dict' must map names to names", source)
        return GraphRequest("common", map_dict=dict(mapping))
    return None
