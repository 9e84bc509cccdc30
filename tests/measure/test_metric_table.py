"""The metrics table (measure/tensor_metrics.py's TensorMetric): every metric in it is produced by both twins of the one
pass (measure/tensor_compare.py: numpy, and the compiled kernel with each of its loops), the kernel accumulates exactly
what the table needs, each cell is made by its table entry, and a row added to the table (in a copy of the package)
reaches the result file of a real-data compare (CONTRIBUTING.md, "Adding a tensor metric")."""

from __future__ import annotations

import ast
import csv
import dataclasses
import importlib
import math
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from msprobe_compare.load.tensor_data import BF16, TensorData
from msprobe_compare.measure import tensor_compare
from msprobe_compare.measure.tensor_metrics import (
    ACCUMULATORS,
    METRIC_FIELDS,
    SUMS,
    THRESHOLDS,
    Metric,
    MetricState,
    TensorMetric,
    TensorMetrics,
    Totals,
)
from msprobe_compare.render.table import METRIC_COLUMNS, METRIC_HEADERS


def _kernel() -> types.ModuleType | None:
    try:
        return importlib.import_module("msprobe_compare._tensorkernel")
    except ImportError:
        if os.environ.get("MSPROBE_REQUIRE_NATIVE") == "1":
            raise
        return None


def _pair(kind: str) -> tuple[TensorData, TensorData]:
    rng = np.random.default_rng(3)
    n = rng.standard_normal(20_011).astype(np.float32)
    b = (n * (1 + np.float32(2e-3) * rng.standard_normal(n.size))).astype(np.float32)
    b[::50] = 0.0
    if kind == BF16:
        return tuple(TensorData((x.view(np.uint32) >> 16).astype(np.uint16), BF16) for x in (n, b))  # type: ignore
    return TensorData(n, "float32"), TensorData(b, "float32")


def _twins() -> dict[str, object]:
    """The one pass's twins: numpy, and the kernel with each loop this machine runs."""
    twins: dict[str, object] = {"numpy": None}
    kernel = _kernel()
    if kernel is not None:
        for loop in kernel.LOOPS:
            twins[loop] = types.SimpleNamespace(accumulate=lambda *a, _loop=loop: kernel.accumulate_loop(_loop, *a),
                                                SIMD=loop)  # fmt: skip
    return twins


def test_the_table_is_what_the_rest_reads() -> None:
    assert METRIC_FIELDS == tuple(f.name for f in dataclasses.fields(TensorMetrics))[: len(TensorMetric)]
    assert [m.column for m in TensorMetric] == list(range(len(TensorMetric)))
    assert METRIC_COLUMNS == {m: (m.header, m.log_name) for m in TensorMetric}
    assert METRIC_HEADERS == ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                              "Five Thousandths Err Ratio"]  # fmt: skip
    assert THRESHOLDS == (0.001, 0.005)
    for m in TensorMetric:
        assert set(m.needs) <= {*SUMS, "max_abs", "max_rel", "below"}
        assert ("below" in m.needs) == (m.threshold is not None)
    assert ACCUMULATORS == ("dot", "nn", "bb", "ss", "max_abs", "max_rel", "below 0.001", "below 0.005", "beyond")


def test_the_kernel_accumulates_what_the_table_needs() -> None:
    kernel = _kernel()
    if kernel is None:
        pytest.skip("the _tensorkernel extension is not built")
    assert tuple(kernel.SUMS) == tuple(SUMS) and tuple(kernel.THRESHOLDS) == THRESHOLDS
    one = np.ones(5, np.float32)
    assert len(kernel.accumulate(one, False, one, False)) == len(ACCUMULATORS)
    if kernel.SIMD != "portable":
        assert tensor_compare.native_kernel() is kernel or os.environ.get("MSPROBE_NATIVE") == "0"


@pytest.mark.parametrize("kind", ["float32", BF16])
def test_every_metric_is_produced_by_both_twins(kind: str) -> None:
    """Each metric of the table is a number on a plain pair, the same from every twin (the sums within rounding)."""
    npu, bench = _pair(kind)
    results = {name: tensor_compare._compare(npu, bench, 4096, twin, 2.0) for name, twin in _twins().items()}
    want = results["numpy"]
    for name, got in results.items():
        assert got.messages == want.messages == ()
        assert got.beyond == want.beyond and not math.isnan(got.beyond)
        for m in TensorMetric:
            cell, ref = getattr(got, m.field), getattr(want, m.field)
            assert cell.state is MetricState.VALUE, (name, m)
            assert cell.value == pytest.approx(ref.value, rel=1e-11, abs=2e-12), (name, m)


def test_each_cell_is_made_by_its_table_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table entry's `finish` decides its cell, from the totals of either twin: a test-only finish for EucDist (the
    root mean square of N-B instead of the Euclidean distance) changes that column and nothing else."""
    npu, bench = _pair("float32")
    before = {name: tensor_compare._compare(npu, bench, 4096, twin) for name, twin in _twins().items()}

    def rms(metric: TensorMetric, totals: Totals, messages: list) -> Metric:
        return Metric.of(math.sqrt(totals.sums["ss"] / totals.size))

    monkeypatch.setattr(TensorMetric.EUC_DIST, "finish", rms)
    for name, twin in _twins().items():
        after = tensor_compare._compare(npu, bench, 4096, twin)
        old = before[name]
        assert after.euc_dist.value == pytest.approx(old.euc_dist.value / math.sqrt(npu.size), rel=1e-12), name
        assert [getattr(after, m.field) for m in TensorMetric if m is not TensorMetric.EUC_DIST] == [
            getattr(old, m.field) for m in TensorMetric if m is not TensorMetric.EUC_DIST
        ]


def test_totals_from_the_kernel_tuple() -> None:
    part = (1.0, 2.0, 3.0, 4.0, 0.5, 0.25, 7, 9, 2)
    totals = Totals.of_kernel(part, 10, 0.01)
    assert totals.sums == {"dot": 1.0, "nn": 2.0, "bb": 3.0, "ss": 4.0}
    assert (totals.max_abs, totals.max_rel, totals.below, totals.beyond) == (0.5, 0.25, [7, 9], 2)
    assert (totals.below_count(0.001), totals.below_count(0.005)) == (7, 9)
    metrics = totals.finish(dtype_mismatch=False)
    assert metrics.cells == tuple(getattr(metrics, f) for f in METRIC_FIELDS)
    assert (metrics.one_thousandth.value, metrics.five_thousandths.value, metrics.beyond) == (0.7, 0.9, 0.2)
    assert metrics.euc_dist == Metric.of(2.0)
    assert TensorMetrics.uniform(MetricState.NAN).cells == (Metric(MetricState.NAN),) * len(TensorMetric)


# ---------------------------------------------------------------------------------------------------------------
# a metric added in one place, through the whole path

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "tests" / "data" / "pytorch" / "mlp_bug_tensor"
RMS_ROW = """    RMS = MetricSpec("rms", "RMS", "rms", ("ss",), lambda _, t, messages: Metric.of(math.sqrt(t.sums["ss"] / t.size)))
"""


def _with_rms_metric(tmp_path: Path) -> Path:
    """A copy of the package whose tensor_metrics.py alone has one more table row (and its TensorMetrics field)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
    path = src / "msprobe_compare" / "measure" / "tensor_metrics.py"
    text = path.read_text(encoding="utf-8")
    row_end = text.index("\n\n", text.index("    FIVE_THOUSANDTHS = MetricSpec(")) + 1
    text = text[:row_end] + RMS_ROW + text[row_end:]
    text = text.replace("    five_thousandths: Metric\n", "    five_thousandths: Metric\n    rms: Metric\n", 1)
    path.write_text(text, encoding="utf-8")
    return src


def _csv_rows(src: Path, out: Path, native: str) -> list[dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(src), "MSPROBE_NATIVE": native}
    subprocess.run([sys.executable, "-m", "msprobe_compare", "-f", "pytorch", "compare", "-i", "compare.json", "-o",
                    str(out), "--format", "csv"], cwd=CASE, env=env, check=True, capture_output=True)  # fmt: skip
    (result,) = out.glob("*.csv")
    with open(result, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_metric_added_to_the_table_reaches_the_result_file(tmp_path: Path) -> None:
    """One table row and its field in tensor_metrics.py, nothing else: the real-data compare writes the new column
    after the others, the same from both twins, and every other column as before."""
    src = _with_rms_metric(tmp_path)
    before = _csv_rows(ROOT / "src", tmp_path / "before", "1")
    for native in ("1", "0"):
        rows = _csv_rows(src, tmp_path / f"rms{native}", native)
        header = list(rows[0])
        assert header[header.index("Five Thousandths Err Ratio") + 1] == "RMS"
        assert [{k: v for k, v in row.items() if k != "RMS"} for row in rows] == before
        numbers = 0
        for row in rows:
            try:
                euc = float(row["EucDist"])
            except ValueError:  # a row without metrics: the same placeholder as every metric
                assert row["RMS"] == row["EucDist"]
                continue
            size = math.prod(ast.literal_eval(row["NPU Tensor Shape"]) or [1])
            assert float(row["RMS"]) == pytest.approx(euc / math.sqrt(size), rel=1e-9, abs=1e-12)
            numbers += 1
        assert numbers > 10
