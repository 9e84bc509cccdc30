"""The tables of the MindSpore kernel-dump compare (spec §7.5) and of the static-graph single-point compare
(spec §7.6): the reference's columns and cell texts, written by the project's xlsx and csv writers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np

from msprobe_compare.measure.kernel_metrics import KernelCheck, NpyRow, RelState, Side, StatPair
from msprobe_compare.judge.accuracy import accuracy_reached, statistic_accuracy
from msprobe_compare.measure.tensor_metrics import Metric, MetricState, TensorMetric, TensorMetrics, TensorMsg
from msprobe_compare.render.texts import ACCURACY_TEXT, STATE_TEXT, messages_text
from msprobe_compare.render.flat import write_csv
from msprobe_compare.render.table import METRIC_HEADERS, STAT_DIFFS, STAT_RELATIVE
from msprobe_compare.render.xlsx import write_xlsx_columns

BASE = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
        "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm",
        "Accuracy Reached or Not", "Err_message"]  # fmt: skip
NPY_HEADER = BASE + METRIC_HEADERS
STAT_HEADER = BASE + STAT_DIFFS + STAT_RELATIVE + ["NPU CSV File", "Bench CSV File"]
COMMON_HEADER = ["Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape", *METRIC_HEADERS,
                 "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
                 "Bench l2norm", "Accuracy Reached or Not", "Err_message", "Data_name"]  # fmt: skip

CHECK_TEXT = {
    KernelCheck.NOT_NDARRAY: "Dump file is not ndarray.\n",
    KernelCheck.READ_FAILED: "Dump file: {} not found or read failed.\n",
    KernelCheck.EMPTY: "This is empty data, can not compare.\n",
    KernelCheck.SCALAR: "This is type of scalar data, can not compare.\n",
    KernelCheck.SHAPE: "Shape of NPU and bench Tensor do not match.\n",
    KernelCheck.DTYPE: "Dtype of NPU and bench Tensor do not match. Skipped.\n",
    KernelCheck.NAN_INF: "The position of inf or nan in NPU and bench Tensor do not match.\n",
    KernelCheck.STAT_SHAPE: "Tensor shapes do not match.\n",
    KernelCheck.STAT_DTYPE: "Dtype of NPU and bench Tensor do not match. Skipped.\n",
}


def number(value: Any) -> Any:
    """A statistic cell: NaN empty, +-inf as text (as the reference's sheets hold them), others as they are."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


def csv_stat(value: Any) -> Any:
    """A statistic of result.csv: numpy's shortest text for its own dtype (float32 `1.6028571`)."""
    if isinstance(value, np.floating) and math.isfinite(float(value)):
        return str(value)
    return number(value)


def shape_text(shape: tuple[int, ...]) -> str:
    return str(tuple(shape))


def metric_cell(m: Metric) -> Any:
    return number(m.value) if m.state is MetricState.VALUE else STATE_TEXT[m.state]


def check_text(checks: Sequence[KernelCheck], read_failed: str = "") -> str:
    return "".join(CHECK_TEXT[c].format(read_failed) for c in checks)


def _side_cells(side: Side | None) -> list[Any]:
    if side is None:
        return [None] * 6
    stats = side.stats or (None,) * 4
    return [side.dtype, shape_text(side.shape), *(number(v) for v in stats)]


def npy_cells(npu_name: str, bench_name: str, row: NpyRow) -> list[Any]:
    n, b = _side_cells(row.npu), _side_cells(row.bench)
    head = [npu_name, bench_name, n[0], b[0], n[1], b[1], *n[2:], *b[2:]]
    if row.metrics is None:
        return head + ["", check_text(row.checks, row.read_failed)] + [None] * 6
    m = row.metrics
    return head + [ACCURACY_TEXT[accuracy_reached(m)], messages_text(m.messages)] + metric_cells(m)


def metric_cells(m: TensorMetrics) -> list[Any]:
    return [metric_cell(getattr(m, metric.field)) for metric in TensorMetric]


def common_cells(name: str, npu_file: str, bench_file: str, row: NpyRow) -> list[Any]:
    """A result.csv row of the single-point compare."""
    data_name = str([npu_file, bench_file])
    if row.metrics is None or row.npu is None or row.bench is None:
        return [name, None, None, None, None, *(["N/A"] * len(TensorMetric)), *([None] * 8), "No",
                check_text(row.checks, row.read_failed), data_name]  # fmt: skip
    m = row.metrics
    stats = [csv_stat(v) for side in (row.npu, row.bench) for v in (side.stats or (None,) * 4)]
    return [name, row.npu.dtype, row.bench.dtype, shape_text(row.npu.shape), shape_text(row.bench.shape),
            *metric_cells(m), *stats, ACCURACY_TEXT[accuracy_reached(m)],
            messages_text(x for x in m.messages if x is not TensorMsg.DTYPE_MISMATCH),  # as the reference
            data_name]  # fmt: skip


def stat_accuracy(pair: StatPair) -> str:
    """`Yes` / `No` (judge.accuracy.statistic_accuracy); empty when the row was not measured."""
    accuracy = statistic_accuracy(pair.magnitude)
    return "" if accuracy is None else ACCURACY_TEXT[accuracy]


def _rel_cell(state: RelState, value: float) -> str:
    if state is RelState.NOT_AVAILABLE:
        return "N/A"
    if state is RelState.NAN:
        return "Nan"
    return f"{value!r}%"


def stat_cells(pair: StatPair) -> list[Any]:
    n, b = pair.npu, pair.bench
    head = [n.key if n else "", b.key if b else "", n.dtype if n else None, b.dtype if b else None,
            n.shape if n else None, b.shape if b else None,
            *(number(v) for v in pair.npu_stats), *(number(v) for v in pair.bench_stats)]  # fmt: skip
    files = [str(n.csv_file) if n else None, str(b.csv_file) if b else None]
    if pair.diffs is None or pair.rel is None:
        return head + ["", check_text(pair.checks)] + [None] * 8 + files
    return (
        head
        + [stat_accuracy(pair), ""]
        + [number(d) for d in pair.diffs]
        + [_rel_cell(s, v) for s, v in pair.rel]
        + files
    )


def write_table(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    """The table as .xlsx (uncoloured: the kernel compare has no highlight)."""
    columns = [list(col) for col in zip(*rows)] if rows else [[] for _ in header]
    write_xlsx_columns(path, header, columns, np.zeros(len(rows), dtype=np.int8))


def write_result_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    """The single-point compare's result.csv (no colour column)."""
    columns = [list(col) for col in zip(*rows)] if rows else [[] for _ in header]
    write_csv(path, header, columns, None)
