"""Per-row verdicts as codes: Result, Requires_grad consistency and the base Err_message flags.

Texts are produced only in render/; here everything is small integers.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

import numpy as np

from msprobe_compare.load.rows import RowTable
from msprobe_compare.measure.stats import StatDiffs
from msprobe_compare.records import dataclass


class Result(IntEnum):
    EMPTY = 0  # summary mode: nothing suspicious ("")
    WARNING = 1  # summary mode: "Warning"
    NA = 2  # unmatched: "N/A"
    PASS = 3  # md5 equal: "pass"
    DIFFERENT = 4  # md5 differ: "Different"


class Msg(IntFlag):
    """Base Err_message parts, rendered in this order without separators (spec §4.6, §4.10)."""

    NONE = 0
    NO_BENCH = 1  # "No bench data matched."
    DOUBLE_CHECK = 2  # "Need double check api accuracy. "
    REQUIRES_GRAD = 4  # "Requires_grad inconsistent. "


@dataclass(frozen=True)
class BaseVerdict:
    matched: np.ndarray  # bool (n,)
    requires_grad_consistent: np.ndarray  # bool (n,)
    result: np.ndarray  # int8 (n,) Result
    messages: np.ndarray  # int8 (n,) Msg flags


def requires_grad_consistent(npu: RowTable, bench: RowTable, match: np.ndarray) -> np.ndarray:
    """NPU and bench requires_grad texts equal after N/A filling (missing or unmatched = N/A)."""
    bench_rg = np.full(len(match), -1, dtype=np.int8)
    ok = match >= 0
    if len(bench):
        bench_rg[ok] = bench.requires_grad[match[ok]]
    return npu.requires_grad == bench_rg


def summary_verdict(npu: RowTable, bench: RowTable, match: np.ndarray, diffs: StatDiffs) -> BaseVerdict:
    matched = match >= 0
    consistent = requires_grad_consistent(npu, bench, match)
    result = np.where(matched, np.where(diffs.warning, Result.WARNING, Result.EMPTY), Result.NA).astype(np.int8)
    msgs = np.where(matched, 0, Msg.NO_BENCH) | np.where(matched & diffs.warning, Msg.DOUBLE_CHECK, 0)
    msgs |= np.where(consistent, 0, Msg.REQUIRES_GRAD)
    return BaseVerdict(matched, consistent, result, msgs.astype(np.int8))


_FILLED_MD5 = "N/A"  # what the reference fills a missing md5 (or a missing bench row) with before comparing: data,
#                     not a message (a dump's md5 "N/A" equals a missing one there, and here)


def md5_verdict(npu: RowTable, bench: RowTable, match: np.ndarray) -> BaseVerdict:
    matched = match >= 0
    consistent = requires_grad_consistent(npu, bench, match)
    # the md5 texts are compared after the reference's N/A filling (_FILLED_MD5), so a null NPU leaf without a bench
    # row is "pass"
    same = np.fromiter(
        (
            (npu.md5[i] or _FILLED_MD5) == ((bench.md5[j] or _FILLED_MD5) if j >= 0 else _FILLED_MD5)
            for i, j in enumerate(match.tolist())
        ),
        dtype=bool,
        count=len(match),
    )
    result = np.where(same, Result.PASS, np.where(matched, Result.DIFFERENT, Result.NA)).astype(np.int8)
    return BaseVerdict(matched, consistent, result, np.zeros(len(match), dtype=np.int8))


def real_data_verdict(npu: RowTable, bench: RowTable, match: np.ndarray) -> BaseVerdict:
    """Base messages of real-data rows: "No bench data matched." is replaced by the requires_grad note."""
    matched = match >= 0
    consistent = requires_grad_consistent(npu, bench, match)
    msgs = np.where(consistent, np.where(matched, 0, Msg.NO_BENCH), Msg.REQUIRES_GRAD).astype(np.int8)
    result = np.where(matched, Result.EMPTY, Result.NA).astype(np.int8)
    return BaseVerdict(matched, consistent, result, msgs)
