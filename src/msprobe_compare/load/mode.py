"""The dump mode of a compare, decided from the two dump headers and the rows read (spec §2.7)."""

from __future__ import annotations

from enum import Enum

from msprobe_compare.errors import InputError
from msprobe_compare.load.stream import DumpHeader


class Mode(Enum):
    """Dump mode derived from the two dumps (spec §2.7)."""

    SUMMARY = "summary"  # task statistics
    MD5 = "md5"  # task statistics with md5 fields
    ALL = "all"  # task tensor (real data)


def check_tasks(npu: DumpHeader, bench: DumpHeader) -> None:
    """Both dumps must have the same task, one that can be compared (spec §2.7); checked before reading entries."""
    if npu.task != bench.task:
        raise InputError(
            f"the dump tasks differ: npu is '{npu.task}' but bench ({bench.path}) is '{bench.task}'; "
            "compare dumps made with the same task",
            npu.path,
        )
    if npu.task not in ("tensor", "statistics"):
        raise InputError(f"task '{npu.task}' cannot be compared; only 'tensor' and 'statistics' dumps", npu.path)


def detect_mode(npu: DumpHeader, bench: DumpHeader, npu_md5: bool, bench_md5: bool) -> Mode:
    """Dump mode from the two tasks and the presence of md5 fields (spec §2.7; `RowTable.has_md5`)."""
    check_tasks(npu, bench)
    if npu.task == "tensor":
        return Mode.ALL
    if npu_md5 != bench_md5:
        with_md5 = npu.path if npu_md5 else bench.path
        raise InputError(
            f"only one side has md5 values ({with_md5}); dump both sides with the same summary_mode", npu.path
        )
    return Mode.MD5 if npu_md5 else Mode.SUMMARY
