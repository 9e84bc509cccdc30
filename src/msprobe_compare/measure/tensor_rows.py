"""Real-data compare of every matched row: load both tensor files, measure, keep codes (spec §4.8).

Rows are spread over `jobs` workers, threads or processes (the `pool` argument, Options.pool; see `choose_pool`).
Each worker holds at most one tensor pair (memory-mapped) and its chunk buffers, and at most a few batches of
row tasks are queued ahead, so memory stays bounded. Results come back in row order to the main process, which
alone calls `on_row`. A `RowBackend` (the `backend` argument) runs the batches elsewhere instead, e.g. on a Ray
cluster (`msprobe_compare.distribute`).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from collections.abc import Callable
from dataclasses import field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from msprobe_compare.errors import FileProblem, TensorFileError
from msprobe_compare.load.rows import NO_DATA_FILE, RowTable
from msprobe_compare.measure.blas import single_threaded_blas
from msprobe_compare.runtime import POOL_KINDS
from msprobe_compare.measure.tensor_compare import compare_tensors
from msprobe_compare.measure.tensor_metrics import (
    METRIC_FIELDS,
    MetricState,
    TensorMetric,
    TensorMetrics,
    TensorMsg,
)
from msprobe_compare.records import dataclass

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future


@dataclass(frozen=True)
class RowTask:
    row: int
    npu_name: str
    npu_file: str  # data_name or NO_DATA_FILE
    bench_file: str | None  # data_name or NO_DATA_FILE; None: the row has no bench counterpart


@dataclass
class TensorColumns:
    """Per-row real-data results, used by judge/ and render/."""

    values: np.ndarray  # float64 (n, len(TensorMetric)) metric values (NaN unless state VALUE)
    states: np.ndarray  # int8 (n, len(TensorMetric)) MetricState
    metrics: list[TensorMetrics]
    read_failed: dict[int, tuple[str, str]]  # row -> (file text of READ_FAILED, why: our extra sentence)
    npu_files: list[str]
    bench_files: list[str | None]  # None: unmatched
    # per row, the fraction of elements beyond `excess_units` unit roundoffs of the coarser dtype, and that
    # tolerance (NaN: not measured); for the root cause only, not a column
    beyond: np.ndarray = field(default_factory=lambda: np.zeros(0))
    beyond_tol: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def column(self, metric: TensorMetric | str) -> np.ndarray:
        """A metric (or its field name) as float with NaN where it is not a number (for the colour rules)."""
        k = metric.column if isinstance(metric, TensorMetric) else METRIC_FIELDS.index(metric)
        return np.where(self.states[:, k] == MetricState.VALUE, self.values[:, k], np.nan)


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


def _measure(task: RowTask, npu_dir: Path, bench_dir: Path,
             excess_units: float | None = None) -> tuple[TensorMetrics, Failure]:  # fmt: skip
    """Pre-checks on the data names, then load and compare."""
    if task.npu_file == NO_DATA_FILE:
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.NPU_NO_DATA_FILE), NO_FAILURE
    if task.bench_file == NO_DATA_FILE:
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.BENCH_NO_DATA_FILE), NO_FAILURE
    if task.bench_file is None:
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.BENCH_UNMATCHED), NO_FAILURE
    from msprobe_compare.load.tensors import load_tensor  # only when tensors are read (start-up speed)

    failed: list[tuple[str, TensorFileError]] = []
    loaded = []
    for directory, name in ((npu_dir, task.npu_file), (bench_dir, task.bench_file)):
        try:
            loaded.append(load_tensor(directory, name))
        except TensorFileError as exc:
            failed.append((name, exc))
        except Exception as exc:  # hostile input: whatever breaks stays this row's problem
            failed.append((name, TensorFileError("corrupt", name, f"cannot be read ({type(exc).__name__})")))
    if failed:
        files = failed[0][0] if len(failed) == 1 else str([task.npu_file, task.bench_file])
        why = "".join(f" {exc}." for _, exc in failed if exc.kind is not FileProblem.MISSING)
        return TensorMetrics.uniform(MetricState.UNSUPPORTED, TensorMsg.READ_FAILED), (files, why)
    return compare_tensors(loaded[0], loaded[1], excess_units=excess_units), NO_FAILURE


# auto: processes (forked) whenever at least this many rows per worker read tensor files, threads otherwise.
# Measured on 2 cores (bench/TENSOR_RESULTS.md): processes are as fast as threads on large tensors (a 4.5 GB pair
# of 52 rows: 3.6 s vs 4.0 s) and much faster on many small ones, where the per-row Python work (zip parsing,
# unpickling, small numpy calls) makes threads fight over the GIL (4356 rows of ~7 KB: 5.0 s vs 9.7 s, slower
# than one thread). Threads remain for a handful of rows (no fork cost) and where fork is unsafe (_fork_context).
PROCESS_MIN_ROWS_PER_WORKER = 2
_BATCH_BYTES = 4 << 20  # a process task batch holds about this much tensor data ...
_BATCH_MAX = 64  # ... and at most this many rows
_WINDOW_PER_WORKER = 2  # batches queued ahead per worker
# Rows holding at least this fraction of one worker's share of all bytes go first, largest first: a huge
# tensor near the end (an embedding grad) would otherwise run alone while the other workers idle.
_BIG_FRACTION = 0.05
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


def choose_pool(pool: str, pair_bytes: Sequence[int], workers: int) -> str:
    """'thread' or 'process' for `pool` (one of POOL_KINDS)."""
    if pool not in POOL_KINDS:
        raise ValueError(f"pool must be one of {', '.join(POOL_KINDS)}, not {pool!r}")
    if pool != "auto":
        return pool
    reading = sum(1 for b in pair_bytes if b > 0)
    return "process" if workers > 1 and reading >= PROCESS_MIN_ROWS_PER_WORKER * workers else "thread"


@single_threaded_blas()  # BLAS on one thread (deterministic dot products) also in non-forked workers
def _measure_batch(tasks: list[RowTask], npu_dir: Path, bench_dir: Path,
                   excess_units: float | None = None) -> list[tuple[TensorMetrics, Failure]]:  # fmt: skip
    return [_measure(t, npu_dir, bench_dir, excess_units) for t in tasks]


class RowBackend(Protocol):
    """Runs batches of row tasks outside the local pools (see `measure_rows`)."""

    workers: int  # tasks running at once: sizes the batches and the submission window
    batch_bytes: int  # a batch holds about this much tensor data ...
    max_rows: int  # ... and at most this many rows

    def run(
        self, fn: Callable[[list[RowTask]], list[Any]], batches: list[list[RowTask]], window: int
    ) -> Iterator[tuple[list[RowTask], list[Any]]]:
        """(batch, fn(batch)) for every batch as it finishes, with at most `window` batches unfinished."""
        ...


def _batches(
    tasks: list[RowTask], pair_bytes: Sequence[int], workers: int, max_rows: int, batch_bytes: int = _BATCH_BYTES
) -> list[list[RowTask]]:
    """Task batches in submission order: the big rows first (largest first, one per batch), then the others in
    row order, consecutive rows grouped up to `batch_bytes` of data or `max_rows` rows."""
    share = sum(pair_bytes) / workers
    big = {t.row for t in tasks if pair_bytes[t.row] > 0 and pair_bytes[t.row] >= _BIG_FRACTION * share}
    batches = [[t] for t in sorted((t for t in tasks if t.row in big), key=lambda t: -pair_bytes[t.row])]
    batch: list[RowTask] = []
    held = 0
    for task in tasks:
        if task.row in big:
            continue
        batch.append(task)
        held += pair_bytes[task.row]
        if held >= batch_bytes or len(batch) >= max_rows:
            batches.append(batch)
            batch, held = [], 0
    if batch:
        batches.append(batch)
    return batches


def _fork_context() -> Any:
    """The "fork" start method when it is safe (POSIX but macOS, no other thread running), else None.

    Workers must not be started with spawn/forkserver: those re-run the main module in every worker, and
    `python -m msprobe_compare` has no `if __name__ == "__main__"` guard. Without fork we use threads."""
    import multiprocessing  # only when rows go to workers (start-up speed)

    if sys.platform == "darwin" or "fork" not in multiprocessing.get_all_start_methods():
        return None
    if threading.active_count() != 1:
        return None
    return multiprocessing.get_context("fork")


def _finished(
    executor: Executor, fn: Callable[[list[RowTask]], list[Any]], batches: list[list[RowTask]], window: int
) -> Iterator[tuple[list[RowTask], list[Any]]]:
    """(batch, fn(batch)) as batches finish, with at most `window` batches submitted and unfinished at any time
    (each worker holds one tensor pair; finished results are small)."""
    from concurrent.futures import FIRST_COMPLETED, wait  # only with workers (start-up speed)

    pending: dict[Future[list[Any]], list[RowTask]] = {}
    queue = iter(batches)
    try:
        while True:
            while len(pending) < window:
                batch = next(queue, None)
                if batch is None:
                    break
                pending[executor.submit(fn, batch)] = batch
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                batch = pending.pop(future)
                yield batch, future.result()
    finally:
        for future in pending:
            future.cancel()


def _in_row_order(finished: Iterator[tuple[list[RowTask], list[Any]]]) -> Iterator[Any]:
    """The results of finished batches (see `_finished`, `RowBackend.run`), yielded in row order."""
    done_rows: dict[int, Any] = {}
    next_row = 0
    try:
        for batch, results in finished:
            for task, result in zip(batch, results, strict=True):
                done_rows[task.row] = result
            while next_row in done_rows:
                yield done_rows.pop(next_row)
                next_row += 1
    finally:
        close = getattr(finished, "close", None)
        if close is not None:  # stop submitting (and cancel) when the caller stops early
            close()
    if done_rows:  # cannot happen: every row is in exactly one batch
        raise RuntimeError("tensor rows finished out of the row range")


@single_threaded_blas()  # for the whole run; forked workers inherit it (measure/blas.py)
def measure_rows(
    npu: RowTable,
    bench: RowTable,
    match: np.ndarray,
    npu_dir: Path,
    bench_dir: Path,
    jobs: int | None = None,
    on_row: Callable[[RowTask, TensorMetrics, Failure], None] | None = None,
    pool: str = "auto",
    backend: RowBackend | None = None,
    excess_units: float | None = None,
) -> TensorColumns:
    """Measure every NPU row; `on_row` is called in row order, in this process (per-row logs and progress).

    `pool`: "thread", "process" or "auto" (Options.pool).
    `backend`: run the rows there instead (`jobs` and `pool` are then not used).
    `excess_units`: also count the elements beyond that many unit roundoffs (`TensorColumns.beyond`)."""
    n = len(npu)
    bench_files = [bench.data_name[j] if j >= 0 else None for j in match.tolist()]
    tasks = [RowTask(i, npu.names[i], npu.data_name[i], bench_files[i]) for i in range(n)]
    workers = max(1, jobs or os.cpu_count() or 1)
    # Tensor bytes a row will read (0 when it is settled without reading), estimated from the dump.json shapes.
    pair_bytes = [
        0 if t.npu_file == NO_DATA_FILE or t.bench_file in (NO_DATA_FILE, None)
        else 2 * _estimated_bytes(npu.shape[t.row], npu.dtype[t.row])
        for t in tasks
    ]  # fmt: skip
    kind = choose_pool(pool, pair_bytes, workers) if workers > 1 and n > 1 and backend is None else "serial"
    context = _fork_context() if kind == "process" else None
    if kind == "process" and context is None:
        kind = "thread"
    results: list[tuple[TensorMetrics, Failure]] = []
    if backend is not None:
        fn = partial(_measure_batch, npu_dir=npu_dir, bench_dir=bench_dir, excess_units=excess_units)
        batches = _batches(tasks, pair_bytes, backend.workers, max_rows=backend.max_rows,
                           batch_bytes=backend.batch_bytes)  # fmt: skip
        window = backend.workers * _WINDOW_PER_WORKER
        _collect(tasks, _in_row_order(backend.run(fn, batches, window)), results, on_row)
    elif kind == "serial":
        stream: Iterator[tuple[TensorMetrics, Failure]] = (_measure(t, npu_dir, bench_dir, excess_units)
                                                           for t in tasks)  # fmt: skip
        _collect(tasks, stream, results, on_row)
    else:
        fn = partial(_measure_batch, npu_dir=npu_dir, bench_dir=bench_dir, excess_units=excess_units)
        window = workers * _WINDOW_PER_WORKER
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor  # only with workers (start-up speed)

        executor: Executor
        if kind == "thread":  # one row per batch: threads share the GIL-free kernels evenly
            executor = ThreadPoolExecutor(max_workers=workers)
            batches = _batches(tasks, pair_bytes, workers, max_rows=1)
        else:
            executor = ProcessPoolExecutor(max_workers=workers, mp_context=context)
            batches = _batches(tasks, pair_bytes, workers, max_rows=_BATCH_MAX)
        with executor:
            _collect(tasks, _in_row_order(_finished(executor, fn, batches, window)), results, on_row)
    values = np.full((n, len(TensorMetric)), np.nan)
    states = np.zeros((n, len(TensorMetric)), dtype=np.int8)
    metrics = [m for m, _ in results]
    for i, m in enumerate(metrics):
        for k, metric in enumerate(m.cells):
            states[i, k] = metric.state
            values[i, k] = metric.value
    read_failed = {i: f for i, (_, f) in enumerate(results) if f != NO_FAILURE}
    beyond = np.fromiter((m.beyond for m in metrics), dtype=np.float64, count=n)
    beyond_tol = np.fromiter((m.beyond_tol for m in metrics), dtype=np.float64, count=n)
    return TensorColumns(values, states, metrics, read_failed, list(npu.data_name), bench_files, beyond,
                         beyond_tol)  # fmt: skip
