"""Real-data compare of every matched row: load both tensor files, measure, keep codes (spec §4.8).

Rows are spread over a thread pool (numpy releases the GIL in the chunked kernels and file reads);
each worker holds at most one tensor pair's chunk buffers, so memory stays bounded.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.rows import RowTable
from msprobe_compare.load.tensors import load_tensor
from msprobe_compare.measure.tensor_metrics import (
    STATE_TEXT,
    Accuracy,
    MetricState,
    TensorMetrics,
    TensorMsg,
    accuracy_reached,
    compare_tensors,
    messages_text,
)

NA = "N/A"
ACCURACY_TEXT = {Accuracy.YES: "Yes", Accuracy.NO: "No", Accuracy.UNMATCHED: "Unmatched", Accuracy.NONE: "None"}
METRIC_FIELDS = ("cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth", "five_thousandths")


@dataclass(frozen=True)
class RowTask:
    row: int
    npu_name: str
    npu_file: str  # data_name or "-1"
    bench_file: str  # data_name, "-1", or "N/A" (unmatched)


@dataclass
class TensorColumns:
    """Per-row real-data results, used by judge/ and render/."""

    values: np.ndarray  # float64 (n, 6) metric values (NaN unless state VALUE)
    states: np.ndarray  # int8 (n, 6) MetricState
    metrics: list[TensorMetrics]
    read_failed: dict[int, tuple[str, str]]  # row -> (file text of READ_FAILED, why: our extra sentence)
    accuracy: np.ndarray  # int8 (n,) Accuracy
    npu_files: list[str]
    bench_files: list[str]

    def column(self, field: str) -> np.ndarray:
        """A metric as float with NaN where it is not a number (for the colour rules)."""
        k = METRIC_FIELDS.index(field)
        return np.where(self.states[:, k] == MetricState.VALUE, self.values[:, k], np.nan)

    # -- rendering helpers ----------------------------------------------------------------------
    def metric_cells(self, i: int, style: Any) -> list[Any]:
        out: list[Any] = []
        for k in range(6):
            state = MetricState(int(self.states[i, k]))
            out.append(style.number(float(self.values[i, k])) if state is MetricState.VALUE else STATE_TEXT[state])
        return out

    def accuracy_text(self, i: int) -> str:
        return ACCURACY_TEXT[Accuracy(int(self.accuracy[i]))]

    def message(self, i: int, base: str) -> str:
        files, why = self.read_failed.get(i, ("", ""))
        return base + messages_text(self.metrics[i].messages, files) + why

    def data_name_cell(self, i: int) -> str:
        return str([self.npu_files[i], self.bench_files[i]])


Failure = tuple[str, str]  # (file text of the READ_FAILED message, our explanation; both "" when none)
NO_FAILURE: Failure = ("", "")


def _measure(task: RowTask, npu_dir: Path, bench_dir: Path) -> tuple[TensorMetrics, Failure]:
    """Pre-checks on the data names, then load and compare."""
    if task.npu_file == "-1":
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.NPU_NO_DATA_FILE), NO_FAILURE
    if task.bench_file == "-1":
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.BENCH_NO_DATA_FILE), NO_FAILURE
    if task.bench_file == NA:
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.BENCH_UNMATCHED), NO_FAILURE
    failed: list[tuple[str, TensorFileError]] = []
    loaded = []
    for directory, name in ((npu_dir, task.npu_file), (bench_dir, task.bench_file)):
        try:
            loaded.append(load_tensor(directory, name))
        except TensorFileError as exc:
            failed.append((name, exc))
    if failed:
        files = failed[0][0] if len(failed) == 1 else str([task.npu_file, task.bench_file])
        why = "".join(f" {exc}." for _, exc in failed if exc.kind != "missing")
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.READ_FAILED), (files, why)
    return compare_tensors(loaded[0], loaded[1]), NO_FAILURE


def measure_rows(
    npu: RowTable,
    bench: RowTable,
    match: np.ndarray,
    npu_dir: Path,
    bench_dir: Path,
    jobs: int | None = None,
    on_row: Callable[[RowTask, TensorMetrics, Failure], None] | None = None,
) -> TensorColumns:
    """Measure every NPU row; `on_row` is called in row order (for per-row logs and progress)."""
    n = len(npu)
    bench_files = [bench.data_name[j] if j >= 0 else NA for j in match.tolist()]
    tasks = [RowTask(i, npu.names[i], npu.data_name[i], bench_files[i]) for i in range(n)]
    workers = max(1, jobs or os.cpu_count() or 1)
    results: list[tuple[TensorMetrics, Failure]] = []
    if workers == 1 or n < 2:
        results = [_measure(t, npu_dir, bench_dir) for t in tasks]
        for t, (m, f) in zip(tasks, results):
            if on_row:
                on_row(t, m, f)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for t, (m, f) in zip(tasks, pool.map(lambda t: _measure(t, npu_dir, bench_dir), tasks)):
                results.append((m, f))
                if on_row:
                    on_row(t, m, f)
    values = np.full((n, 6), np.nan)
    states = np.zeros((n, 6), dtype=np.int8)
    metrics = [m for m, _ in results]
    for i, m in enumerate(metrics):
        for k, field in enumerate(METRIC_FIELDS):
            metric = getattr(m, field)
            states[i, k] = metric.state
            values[i, k] = metric.value
    accuracy = np.fromiter((accuracy_reached(m) for m in metrics), dtype=np.int8, count=n)
    read_failed = {i: f for i, (_, f) in enumerate(results) if f != NO_FAILURE}
    return TensorColumns(values, states, metrics, read_failed, accuracy, list(npu.data_name), bench_files)
