"""Real-data compare of every matched row: load both tensor files, measure, keep codes (spec §4.8).

Rows are spread over `jobs` workers, threads or processes (POOL_ENV / the `pool` argument; see `choose_pool`).
Each worker holds at most one tensor pair (memory-mapped) and its chunk buffers, and at most a few batches of
row tasks are queued ahead, so memory stays bounded. Results come back in row order to the main process, which
alone calls `on_row`.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
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


def _collect(
    tasks: list[RowTask],
    stream: Iterator[tuple[TensorMetrics, Failure]],
    results: list[tuple[TensorMetrics, Failure]],
    on_row: Callable[[RowTask, TensorMetrics, Failure], None] | None,
) -> None:
    for t, (m, f) in zip(tasks, stream, strict=True):
        results.append((m, f))
        if on_row:
            on_row(t, m, f)


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


POOL_ENV = "MSPROBE_COMPARE_POOL"  # "thread", "process" or "auto" (the default)
POOL_KINDS = ("auto", "thread", "process")
# auto: processes when the average tensor pair is below this many bytes (per-row Python work dominates and
# threads contend for the GIL), threads otherwise (numpy kernels release the GIL; no process start-up).
PROCESS_BELOW_BYTES = 4 << 20
_BATCH_BYTES = 4 << 20  # a process task batch holds about this much tensor data ...
_BATCH_MAX = 64  # ... and at most this many rows
_WINDOW_PER_WORKER = 2  # batches queued ahead per worker
_ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4,
             "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}  # fmt: skip
_INTS = re.compile(r"\d+")


def _estimated_bytes(shape: str, dtype: str) -> int:
    """Bytes of one tensor from its dump.json shape text and dtype ("torch.float32", "Float32", ...)."""
    size = 1
    for dim in _INTS.findall(shape):
        size *= int(dim)
    key = dtype.rsplit(".", 1)[-1].lower()
    return size * _ITEMSIZE.get(key, 4)


def choose_pool(pool: str | None, pair_bytes: Sequence[int], workers: int) -> str:
    """'thread' or 'process' for `pool` (None: the POOL_ENV variable, else "auto")."""
    kind = (pool or os.environ.get(POOL_ENV) or "auto").strip().lower()
    if kind not in POOL_KINDS:
        raise ValueError(f"{POOL_ENV} / pool must be one of {', '.join(POOL_KINDS)}, not {kind!r}")
    if kind != "auto":
        return kind
    loaded = [b for b in pair_bytes if b > 0]
    if workers < 2 or len(loaded) < 2 * workers:
        return "thread"
    return "process" if sum(loaded) / len(loaded) < PROCESS_BELOW_BYTES else "thread"


def _measure_batch(tasks: list[RowTask], npu_dir: Path, bench_dir: Path) -> list[tuple[TensorMetrics, Failure]]:
    return [_measure(t, npu_dir, bench_dir) for t in tasks]


def _batches(tasks: list[RowTask], pair_bytes: Sequence[int]) -> Iterator[list[RowTask]]:
    batch: list[RowTask] = []
    held = 0
    for task in tasks:
        batch.append(task)
        held += pair_bytes[task.row]
        if held >= _BATCH_BYTES or len(batch) >= _BATCH_MAX:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _fork_context() -> Any:
    """The "fork" start method when it is safe (POSIX but macOS, no other thread running), else None.

    Workers must not be started with spawn/forkserver: those re-run the main module in every worker, and
    `python -m msprobe_compare` has no `if __name__ == "__main__"` guard. Without fork we use threads."""
    if sys.platform == "darwin" or "fork" not in multiprocessing.get_all_start_methods():
        return None
    if threading.active_count() != 1:
        return None
    return multiprocessing.get_context("fork")


def _in_order(executor: Executor, fn: Callable[[list[RowTask]], list[Any]], batches: Iterator[list[RowTask]],
              window: int) -> Iterator[Any]:
    """Results of fn over the batches, in order, with at most `window` batches submitted and not yet consumed."""
    pending: deque[Future[list[Any]]] = deque()
    for batch in batches:
        pending.append(executor.submit(fn, batch))
        if len(pending) >= window:
            yield from pending.popleft().result()
    while pending:
        yield from pending.popleft().result()


def measure_rows(
    npu: RowTable,
    bench: RowTable,
    match: np.ndarray,
    npu_dir: Path,
    bench_dir: Path,
    jobs: int | None = None,
    on_row: Callable[[RowTask, TensorMetrics, Failure], None] | None = None,
    pool: str | None = None,
) -> TensorColumns:
    """Measure every NPU row; `on_row` is called in row order, in this process (per-row logs and progress).

    `pool`: "thread", "process" or "auto" (None: the MSPROBE_COMPARE_POOL variable, else "auto")."""
    n = len(npu)
    bench_files = [bench.data_name[j] if j >= 0 else NA for j in match.tolist()]
    tasks = [RowTask(i, npu.names[i], npu.data_name[i], bench_files[i]) for i in range(n)]
    workers = max(1, jobs or os.cpu_count() or 1)
    # Tensor bytes a row will read (0 when it is settled without reading), estimated from the dump.json shapes.
    pair_bytes = [
        0 if t.npu_file in ("-1",) or t.bench_file in ("-1", NA)
        else 2 * _estimated_bytes(npu.shape[t.row], npu.dtype[t.row])
        for t in tasks
    ]  # fmt: skip
    kind = choose_pool(pool, pair_bytes, workers) if workers > 1 and n > 1 else "serial"
    context = _fork_context() if kind == "process" else None
    if kind == "process" and context is None:
        kind = "thread"
    results: list[tuple[TensorMetrics, Failure]] = []
    if kind == "serial":
        stream: Iterator[tuple[TensorMetrics, Failure]] = (_measure(t, npu_dir, bench_dir) for t in tasks)
        _collect(tasks, stream, results, on_row)
    elif kind == "thread":
        with ThreadPoolExecutor(max_workers=workers) as executor:
            fn = partial(_measure_batch, npu_dir=npu_dir, bench_dir=bench_dir)
            batches = ([t] for t in tasks)  # one row per task: threads share the GIL-free kernels evenly
            _collect(tasks, _in_order(executor, fn, batches, workers * _WINDOW_PER_WORKER), results, on_row)
    else:
        fn = partial(_measure_batch, npu_dir=npu_dir, bench_dir=bench_dir)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as executor:
            stream = _in_order(executor, fn, _batches(tasks, pair_bytes), workers * _WINDOW_PER_WORKER)
            _collect(tasks, stream, results, on_row)
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
