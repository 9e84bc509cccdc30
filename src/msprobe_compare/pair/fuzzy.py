"""Fuzzy matching (`-f`, spec §3.4): align rows whose names differ only by call counters.

Works on rows of any mode (decision D7: the reference only manages real-data dumps). Every NPU row
stays in the result, in NPU order; rows never paired are unmatched.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np

from msprobe_compare.load.rows import RowTable
from msprobe_compare.records import dataclass


def rename_api(name: str) -> str:
    """Drop the call counter before the first `forward`/`backward` (the reference's normalisation).

    `Functional.relu.3.forward.input.0` -> `Functional.relu.forward.input.0`. For module names this
    drops the class name instead (`Module.fc.Linear.forward.0.input.0` -> `Module.fc.forward.0.input.0`),
    as the reference does; pairs are still tested on the whole normalised name and the shape.
    """
    for direction in ("forward", "backward"):
        idx = name.find(direction)
        if idx >= 0:
            head = name[:idx].rstrip(".")
            head = head.rsplit(".", 1)[0] if "." in head else ""
            return f"{head}.{direction}{name[idx + len(direction) :]}"
    return name


@dataclass
class FuzzyResult:
    match: np.ndarray  # bench row per NPU row, -1 when unmatched
    failed_tests: list[tuple[str, str]] = field(default_factory=list)  # pairs tested and refused (first ones)
    failed_count: int = 0


def match_fuzzy(
    npu: RowTable, bench: RowTable, keep_failures: int = 100, keys: list[str | None] | None = None
) -> FuzzyResult:
    """Stream both row lists, pairing each new row with the oldest compatible pending row of the other side.

    `keys` replaces the NPU names in the test (the compare keys of `-cm`/`-am`); messages keep the names.
    """
    n_keys = [(rename_api(name) if name is not None else None, shape)
              for name, shape in zip(npu.names if keys is None else keys, npu.shape)]  # fmt: skip
    b_keys = [(rename_api(name), shape) for name, shape in zip(bench.names, bench.shape)]
    match = np.full(len(npu), -1, dtype=np.int64)
    result = FuzzyResult(match)
    n_q: list[int] = []
    b_q: list[int] = []

    def test(i: int, j: int) -> bool:
        if n_keys[i] == b_keys[j]:
            return True
        result.failed_count += 1
        if len(result.failed_tests) < keep_failures:
            result.failed_tests.append((npu.names[i], bench.names[j]))
        return False

    def find() -> tuple[int, int] | None:
        newest_n, newest_b = len(n_q) - 1, len(b_q) - 1
        for q in range(newest_b):  # newest NPU row against each older bench row
            if test(n_q[newest_n], b_q[q]):
                return newest_n, q
        if test(n_q[newest_n], b_q[newest_b]):
            return newest_n, newest_b
        for p in range(newest_n):  # each older NPU row against the newest bench row
            if test(n_q[p], b_q[newest_b]):
                return p, newest_b
        return None

    for i in range(max(len(npu), len(bench))):
        if i < len(npu):
            n_q.append(i)
        if i < len(bench):
            b_q.append(i)
        if not n_q or not b_q:
            if n_q or b_q:
                break  # one side has run out
            continue
        hit = find()
        if hit is not None:
            p, q = hit
            match[n_q[p]] = b_q[q]
            del n_q[: p + 1]
            del b_q[: q + 1]
    return result
