"""Pairing of kernel-dump rows (spec §7.5): by compare key and, within a key, by occurrence in timestamp order."""

from __future__ import annotations

from collections.abc import Sequence


def occurrence(keys: Sequence[str], timestamps: Sequence[int]) -> list[int]:
    """Per row, how many rows of the same key have an earlier timestamp (ties: the earlier row first)."""
    order = sorted(range(len(keys)), key=lambda i: timestamps[i])  # stable
    seen: dict[str, int] = {}
    out = [0] * len(keys)
    for i in order:
        out[i] = seen.get(keys[i], 0)
        seen[keys[i]] = out[i] + 1
    return out


def pair_kernel(npu_keys: Sequence[str], npu_ts: Sequence[int], bench_keys: Sequence[str],
                bench_ts: Sequence[int]) -> list[tuple[int, int]]:  # fmt: skip
    """(npu index, bench index) pairs, -1 for a missing side: every NPU row in its order, then the bench rows
    nobody paired, in theirs (the reference's outer join)."""
    bench_at = {(k, n): j for j, (k, n) in enumerate(zip(bench_keys, occurrence(bench_keys, bench_ts)))}
    pairs = []
    used = set()
    for i, (k, n) in enumerate(zip(npu_keys, occurrence(npu_keys, npu_ts))):
        j = bench_at.get((k, n), -1)
        if j >= 0:
            used.add(j)
        pairs.append((i, j))
    pairs.extend((-1, j) for j in range(len(bench_keys)) if j not in used)
    return pairs
