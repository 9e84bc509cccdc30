"""measure.tensor_metrics: parity with the reference's real outputs (tests/data), equality with a plain
whole-array formula on random data, chunking invariance, and no writes into the caller's arrays."""

from __future__ import annotations

import ast
import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

from msprobe_compare.judge.accuracy import Accuracy, accuracy_reached
from msprobe_compare.load.tensor_data import BF16, TensorData
from msprobe_compare.measure.tensor_compare import compare_tensors
from msprobe_compare.measure.tensor_metrics import (
    FLOAT_EPSILON,
    Metric,
    MetricState,
    TensorMetrics,
    TensorMsg,
)
from msprobe_compare.render.texts import TENSOR_MSG_TEXT as MSG_TEXT, messages_text

DATA = Path(__file__).resolve().parents[1] / "data"
S = MetricState
METRIC_COLUMNS = {
    "cosine": "Cosine",
    "euc_dist": "EucDist",
    "max_abs_err": "MaxAbsErr",
    "max_rel_err": "MaxRelativeErr",
    "one_thousandth": "One Thousandth Err Ratio",
    "five_thousandths": "Five Thousandths Err Ratio",
}
STATE_OF_CELL = {
    "Nan": S.NAN,
    "unsupported": S.UNSUPPORTED,
    "shape unmatched": S.SHAPE_UNMATCHED,
    "N/A": S.NOT_AVAILABLE,
}
ACCURACY_OF_CELL = {"Yes": Accuracy.YES, "No": Accuracy.NO, "Unmatched": Accuracy.UNMATCHED, "None": Accuracy.NONE}
NOT_REAL_DATA_TEXT = ("Requires_grad inconsistent. ", "No bench data matched.")  # set elsewhere in the row


# ---------------------------------------------------------------------------------------------------------------
# loading fixture tensors


def _read_numpy(path: Path) -> TensorData:
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
    return TensorData(arr, arr.dtype.name)


def _read_torch(path: Path) -> TensorData:
    torch = pytest.importorskip("torch")
    t = torch.load(path, map_location="cpu", weights_only=True).detach()
    if t.dtype == torch.bfloat16:
        return TensorData(t.view(torch.int16).numpy().view(np.uint16), BF16)
    arr = t.numpy()
    return TensorData(arr, arr.dtype.name)


def load(tensor_dir: Path, name: str) -> TensorData:
    try:
        from msprobe_compare.load.tensors import load_tensor
    except ImportError:
        return _read_numpy(tensor_dir / name) if name.endswith(".npy") else _read_torch(tensor_dir / name)
    return load_tensor(tensor_dir, name)


def _case_rows(case: str) -> tuple[Path, Path, list[tuple[str, dict[str, str]]]]:
    folder = DATA / case
    config = json.loads((folder / "compare.json").read_text())
    npu_dir = (folder / config["npu_path"]).parent / "dump_tensor_data"
    bench_dir = (folder / config["bench_path"]).parent / "dump_tensor_data"
    csvs = (
        [folder / "expected" / "hl.csv"]
        if case.startswith(("pytorch", "mindspore"))
        else sorted((folder / "expected").glob("*.csv"))
    )
    rows = []
    for path in csvs:
        with open(path, newline="") as f:
            rows += [(path.name, row) for row in csv.DictReader(f)]
    return npu_dir, bench_dir, rows


def _data_names(cell: str) -> tuple[str, str] | None:
    if not cell.startswith("["):
        return None
    npu_name, bench_name = ast.literal_eval(cell)
    if "-1" in (npu_name, bench_name) or "N/A" in (npu_name, bench_name):
        return None
    return npu_name, bench_name


HIGHLIGHT_REASONS = {  # spec §4.7: appended after the real-data messages (after '\n' unless the cell was empty)
    "maximum or minimum is nan, -inf, or inf",
    "maximum absolute error exceeds 1e+10",
    "requires_grad is inconsistent",
    "maximum absolute error of both input/parameters and output exceed 1, with the output larger by an order of "
    "magnitude",
    "The input/parameter's one thousandth err ratio exceeds 0.9, while the output's is below 0.6",
    "The output's one thousandth err ratio decreases by more than 0.1 compared to the input/parameter's",
    "The output's cosine decreases by more than 0.1 compared to the input/parameter's",
}


def parse_messages(cell: str) -> list[TensorMsg]:
    """The real-data sentences of an Err_message cell; row-level texts and highlight reasons are dropped."""
    first, *reasons = cell.split("\n")
    text = first
    for other in NOT_REAL_DATA_TEXT:
        text = text.replace(other, "")
    plain = {m: t for m, t in MSG_TEXT.items() if m is not TensorMsg.READ_FAILED}
    found = []
    while text and text not in HIGHLIGHT_REASONS:
        match = next((m for m, t in plain.items() if text.startswith(t)), None)
        assert match is not None, f"unknown Err_message text: {text!r}"
        found.append(match)
        text = text[len(plain[match]) :]
    assert all(r in HIGHLIGHT_REASONS for r in reasons), reasons
    return found


def _cell_mismatch(metric: Metric, cell: str) -> str | None:
    if cell in STATE_OF_CELL:
        return None if metric.state is STATE_OF_CELL[cell] else f"state {metric.state.name} != {cell!r}"
    expected = float(cell)
    if metric.state is not S.VALUE:
        return f"state {metric.state.name} != {cell!r}"
    if math.isinf(expected) or math.isinf(metric.value):
        return None if expected == metric.value else f"{metric.value!r} != {cell!r}"
    tolerance = 1e-9 * max(abs(expected), abs(metric.value)) + 1e-12
    return None if abs(metric.value - expected) <= tolerance else f"{metric.value!r} != {cell!r}"


PARITY_CASES = [
    "pytorch/mlp_same_tensor",
    "pytorch/mlp_bug_tensor",
    "pytorch/mlp_lowprec_tensor",
    "pytorch/mlp_struct_tensor",
    "pytorch/cnn_bug_tensor",
    "mindspore/L0_tensor",
    "mindspore/L0_tensor_diff",
    "cross/L0_tensor",
]


@pytest.mark.parametrize("case", PARITY_CASES)
def test_parity_with_reference_outputs(case: str) -> None:
    npu_dir, bench_dir, rows = _case_rows(case)
    problems, checked, cache = [], 0, {}
    for csv_name, row in rows:
        names = _data_names(row["Data_name"])
        if names is None:
            continue
        if names not in cache:
            cache[names] = compare_tensors(load(npu_dir, names[0]), load(bench_dir, names[1]), chunk_elems=4096)
        ours = cache[names]
        where = f"{csv_name}:{row['NPU Name']}"
        npu_dtype = row["NPU Dtype"].lower()
        fp16 = "float16" in npu_dtype and "bfloat16" not in npu_dtype  # D5: relative error deliberately differs
        for attr, column in METRIC_COLUMNS.items():
            if fp16 and attr in ("max_rel_err", "one_thousandth", "five_thousandths"):
                continue
            problem = _cell_mismatch(getattr(ours, attr), row[column])
            if problem:
                problems.append(f"{where} {column}: {problem}")
        expected_msgs = parse_messages(row["Err_message"])
        assert len(ours.messages) == len(set(ours.messages)) and list(ours.messages) == sorted(ours.messages)
        if not fp16 and set(ours.messages) != set(expected_msgs):
            problems.append(f"{where} messages {ours.messages} != {expected_msgs}")
        expected_acc = ACCURACY_OF_CELL[row["Accuracy Reached or Not"]]
        if row["Cosine"] == "Nan" and expected_acc is Accuracy.YES:
            expected_acc = Accuracy.NO  # D6
        if not fp16 and accuracy_reached(ours) is not expected_acc:
            problems.append(f"{where} accuracy {accuracy_reached(ours).name} != {expected_acc.name}")
        checked += 1
    assert checked > 0
    assert not problems, "\n".join(problems[:20])


def test_parity_covers_the_interesting_rows() -> None:
    """The fixtures exercise bf16-vs-fp32 float32 relative errors, 0-d NaN, mask mismatch and shape mismatch."""
    seen = set()
    for case in PARITY_CASES:
        for _, row in _case_rows(case)[2]:
            if _data_names(row["Data_name"]) is None:
                continue
            seen.add(("bf16", row["NPU Dtype"] == "torch.bfloat16" and row["Bench Dtype"] == "torch.float32"))
            seen.update(("cell", row[c]) for c in METRIC_COLUMNS.values() if row[c] in STATE_OF_CELL)
    assert {
        ("bf16", True),
        ("cell", "Nan"),
        ("cell", "N/A"),
        ("cell", "shape unmatched"),
        ("cell", "unsupported"),
    } <= seen


# ---------------------------------------------------------------------------------------------------------------
# a plain whole-array formula of the same definitions


def to_compute(t: TensorData) -> np.ndarray:
    arr = np.asarray(t.array)
    if t.dtype_name == BF16:
        # np.uint32(16): with numpy < 2 a 0-d uint32 array << a Python int promotes to int64 (legacy value-based
        # casting), and int64 cannot be viewed as float32
        return (arr.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return arr


def _fmt(x: float) -> float:
    return float(f"{x:.12f}")


def reference(npu: TensorData, bench: TensorData) -> dict:
    """Whole-array float64 formulas; relative error in float32 when the pair promotes to float32 (D5: never fp16)."""
    n, b = to_compute(npu), to_compute(bench)
    msgs: set[TensorMsg] = set()
    unsup = (S.UNSUPPORTED, math.nan)
    readable = all(a.dtype.kind in "biuf" for a in (n, b))
    if n.size == 0:
        return {"states": [S.UNSUPPORTED] * 6, "msgs": {TensorMsg.EMPTY}}
    both_float = n.dtype.kind == "f" and b.dtype.kind == "f"
    re_dtype = np.float32 if both_float and np.result_type(n.dtype, b.dtype) == np.float32 else np.float64

    def rel_err(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = x.astype(re_dtype), y.astype(re_dtype)
        eps = re_dtype(FLOAT_EPSILON)
        zero = y == 0
        x, y = np.where(zero, x + eps, x), np.where(zero, y + eps, y)
        return np.abs((x - y) / y)

    with np.errstate(all="ignore"):
        if n.ndim == 0:
            if not readable:
                return {"states": [S.UNSUPPORTED] * 6, "msgs": {TensorMsg.UNREADABLE}}
            if b.size == 0:  # the reference crashes here
                return {"states": [S.SHAPE_UNMATCHED] * 6, "msgs": {TensorMsg.SHAPE_MISMATCH}}
            arith = np.result_type(n.dtype, b.dtype) if both_float else np.float64
            max_abs = float(np.max(np.abs(n.astype(arith) - b.astype(arith))))
            max_rel = float(np.max(rel_err(np.broadcast_to(n, b.shape), b)))
            msgs.add(TensorMsg.ZERO_DIM)
            values = [unsup, unsup, (S.VALUE, max_abs), (S.VALUE, max_rel), unsup, unsup]
            for i, msg in ((2, TensorMsg.MAX_ABS_NAN), (3, TensorMsg.MAX_REL_NAN)):
                if math.isnan(values[i][1]):
                    values[i] = (S.NAN, math.nan)
                    msgs.add(msg)
            return {"values": values, "msgs": msgs}
        if n.shape != b.shape:
            return {"states": [S.SHAPE_UNMATCHED] * 6, "msgs": {TensorMsg.SHAPE_MISMATCH}}
        if not readable:
            return {"states": [S.UNSUPPORTED] * 6, "msgs": {TensorMsg.UNREADABLE}}
        n64, b64 = n.astype(np.float64), b.astype(np.float64)
        if not (np.array_equal(np.isnan(n64), np.isnan(b64)) and np.array_equal(np.isinf(n64), np.isinf(b64))):
            return {"states": [S.NOT_AVAILABLE] * 6, "msgs": {TensorMsg.NAN_INF_MISMATCH}}
        bad = ~np.isfinite(n64)
        n, b = np.where(bad, 0, n).astype(n.dtype), np.where(bad, 0, b).astype(b.dtype)
        n64, b64 = n.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
        if n.dtype != b.dtype:
            msgs.add(TensorMsg.DTYPE_MISMATCH)
        re = rel_err(n, b).reshape(-1)
        if n64.size == 1:
            cos = unsup
            msgs.add(TensorMsg.ONE_ELEMENT)
        else:
            na, nb = np.linalg.norm(n64), np.linalg.norm(b64)
            if na <= FLOAT_EPSILON and nb <= FLOAT_EPSILON:
                cos = (S.VALUE, 1.0)
            elif na <= FLOAT_EPSILON:
                cos = (S.NAN, math.nan)
                msgs.add(TensorMsg.COSINE_NPU_ZERO)
            elif nb <= FLOAT_EPSILON:
                cos = (S.NAN, math.nan)
                msgs.add(TensorMsg.COSINE_BENCH_ZERO)
            else:
                value = float(n64.dot(b64) / (na * nb))
                cos = (S.NAN, math.nan) if math.isnan(value) else (S.VALUE, value)
                if math.isnan(value):
                    msgs.add(TensorMsg.COSINE_NAN)
        values = [
            cos,
            (S.VALUE, float(np.linalg.norm(n64 - b64))),
            (S.VALUE, float(np.max(np.abs(n64 - b64)))),
            (S.VALUE, float(np.max(re))),
            (S.VALUE, np.count_nonzero(re < re_dtype(0.001)) / re.size),
            (S.VALUE, np.count_nonzero(re < re_dtype(0.005)) / re.size),
        ]
        return {"values": values, "msgs": msgs}


def _close_rounded(ours: float, raw: float, decimals: int) -> bool:
    """`ours` is `raw` rounded to `decimals` places, allowing the other side of a tie that summation order can flip."""
    unit = 10.0**-decimals
    if abs(ours - round(raw, decimals)) <= 1e-13 * max(1.0, abs(raw)):
        return True
    near_tie = abs(abs(raw / unit - math.floor(raw / unit)) - 0.5) < 1e-6
    return near_tie and abs(ours - raw) <= unit


def assert_matches_reference(ours: TensorMetrics, ref: dict) -> None:
    assert set(ours.messages) == ref["msgs"]
    assert list(ours.messages) == sorted(set(ours.messages))
    metrics = [getattr(ours, a) for a in METRIC_COLUMNS]
    if "states" in ref:
        assert [m.state for m in metrics] == ref["states"]
        return
    for i, (metric, (state, raw)) in enumerate(zip(metrics, ref["values"])):
        assert metric.state is state, (i, metric, state, raw)
        if state is not S.VALUE:
            continue
        if math.isinf(raw) or math.isinf(metric.value):
            assert metric.value == raw
        elif i == 0:  # Cosine: 12 decimals, 6 above 0.9999
            assert _close_rounded(metric.value, raw, 6 if _fmt(raw) > 0.9999 else 12), (metric.value, raw)
        elif i == 1:  # EucDist: not rounded; summation order differs
            assert metric.value == pytest.approx(raw, rel=1e-12, abs=1e-300)
        else:  # maxima and counts are exact
            assert metric.value == _fmt(raw), (i, metric.value, raw)


# ---------------------------------------------------------------------------------------------------------------
# random pairs

DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint8", "bool", BF16]
SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-3, 3.0e-8, 65504.0, 1e-30]


def _as_dtype(values: np.ndarray, name: str) -> TensorData:
    if name == BF16:
        bits = values.astype(np.float32).view(np.uint32) >> 16
        return TensorData(bits.astype(np.uint16), BF16)
    dtype = np.dtype(name)
    if dtype.kind == "b":
        return TensorData(values != 0, "bool")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        clean = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
        return TensorData(np.clip(np.round(clean), info.min, info.max).astype(dtype), dtype.name)
    with np.errstate(over="ignore"):
        return TensorData(values.astype(dtype), dtype.name)


@st.composite
def tensor_pairs(draw: st.DrawFn) -> tuple[TensorData, TensorData]:
    shape = draw(array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
    size = math.prod(shape)
    n_dtype = draw(st.sampled_from(DTYPES))
    b_dtype = draw(st.one_of(st.just(n_dtype), st.sampled_from(DTYPES)))
    element = st.one_of(st.sampled_from(SPECIALS), st.floats(-1e4, 1e4, allow_nan=False, width=32))
    n_vals = np.array(draw(st.lists(element, min_size=size, max_size=size)), dtype=np.float64).reshape(shape)
    relation = draw(st.sampled_from(["same", "close", "independent"]))
    if relation == "same":
        b_vals = n_vals.copy()
    elif relation == "close":
        rel = draw(st.sampled_from([1e-6, 4e-4, 2e-3, 1e-2]))
        b_vals = n_vals * (1 + rel * np.cos(np.arange(size)).reshape(shape))
    else:
        b_vals = np.array(draw(st.lists(element, min_size=size, max_size=size)), dtype=np.float64).reshape(shape)
    if size and draw(st.booleans()):  # NaN/inf at the same positions, or not
        flat_n, flat_b = n_vals.reshape(-1), b_vals.reshape(-1)
        positions = draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=3))
        for p in positions:
            special = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
            flat_n[p] = special
            flat_b[p] = special if draw(st.integers(0, 4)) else draw(st.sampled_from([math.nan, math.inf, 1.0]))
    if draw(st.integers(0, 9)) == 0:  # occasionally a different bench shape
        b_vals = np.zeros(draw(array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4)))
    return _as_dtype(n_vals, n_dtype), _as_dtype(b_vals, b_dtype)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=tensor_pairs(), chunk=st.integers(1, 300))
def test_random_pairs_match_whole_array_formula(pair: tuple[TensorData, TensorData], chunk: int) -> None:
    npu, bench = pair
    before = (npu.array.copy(), bench.array.copy())
    ours = compare_tensors(npu, bench, chunk_elems=chunk)
    assert_matches_reference(ours, reference(npu, bench))
    np.testing.assert_array_equal(npu.array, before[0])  # inputs untouched
    np.testing.assert_array_equal(bench.array, before[1])


@pytest.mark.parametrize(
    "dtypes",
    [
        ("float32", "float32"),
        (BF16, "float32"),
        ("float64", "float64"),
        ("float16", "float16"),
        ("int64", "int64"),
        ("float32", "float64"),
    ],
)
def test_chunk_size_does_not_change_results(dtypes: tuple[str, str]) -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((37, 41, 13))
    zero_share = np.where(np.arange(base.size).reshape(base.shape) < base.size // 2, 0.5, 0.01)  # both fix paths
    base[rng.random(base.shape) < zero_share] = 0.0
    bench_vals = base * (1 + rng.choice([0.0, 3e-4, 3e-3, 3e-2], size=base.shape))
    bench_vals[rng.random(base.shape) < 0.02] = 0.0
    npu, bench = _as_dtype(base, dtypes[0]), _as_dtype(bench_vals, dtypes[1])
    whole = compare_tensors(npu, bench, chunk_elems=base.size)
    assert_matches_reference(whole, reference(npu, bench))
    for chunk in (61, 1000, 4096, 19_999):
        part = compare_tensors(npu, bench, chunk_elems=chunk)
        assert part.messages == whole.messages
        for attr in METRIC_COLUMNS:
            a, b = getattr(part, attr), getattr(whole, attr)
            assert a.state is b.state
            assert a.value == pytest.approx(b.value, rel=1e-12, abs=1e-12), (attr, chunk)


# ---------------------------------------------------------------------------------------------------------------
# memory safety and layouts


def test_read_only_memmaps_with_masked_nans(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = rng.standard_normal((64, 33)).astype(np.float32)
    n[5, 7], n[9, 1], n[0, 0] = np.nan, np.inf, -np.inf
    b = n + np.float32(1e-3) * rng.standard_normal(n.shape).astype(np.float32)
    b[0, 0] = np.inf  # sign of inf not checked
    b[3] = 0.0
    np.save(tmp_path / "n.npy", n)
    np.save(tmp_path / "b.npy", b)
    raw = [(tmp_path / f).read_bytes() for f in ("n.npy", "b.npy")]
    npu, bench = (TensorData(np.load(tmp_path / f, mmap_mode="r"), "float32") for f in ("n.npy", "b.npy"))
    assert not npu.array.flags.writeable
    ours = compare_tensors(npu, bench, chunk_elems=100)
    assert_matches_reference(ours, reference(TensorData(n, "float32"), TensorData(b, "float32")))
    assert ours.cosine.state is S.VALUE and ours.max_rel_err.value > 1e10  # bench zeros: ~|x|/eps
    assert [(tmp_path / f).read_bytes() for f in ("n.npy", "b.npy")] == raw


def test_non_contiguous_layouts_equal_contiguous_copies() -> None:
    rng = np.random.default_rng(5)
    n = rng.standard_normal((6, 9, 11))
    b = n + 1e-3 * rng.standard_normal(n.shape)
    views = [
        lambda a: a.transpose(2, 0, 1),
        lambda a: a[::-1, ::2, 1:],
        lambda a: np.broadcast_to(a[:, :1, :], (6, 9, 11)),
        lambda a: np.asfortranarray(a),
        lambda a: a[:, 3, :],
    ]
    for view in views:
        nv, bv = view(n), view(b)
        for chunk in (1, 5, 13, 64, 1000):
            strided = compare_tensors(TensorData(nv, "float64"), TensorData(bv, "float64"), chunk_elems=chunk)
            contiguous = compare_tensors(
                TensorData(np.ascontiguousarray(nv), "float64"),
                TensorData(np.ascontiguousarray(bv), "float64"),
                chunk_elems=chunk,
            )
            assert strided == contiguous


# ---------------------------------------------------------------------------------------------------------------
# pre-checks, messages, decisions


def _td(values, dtype: str = "float32") -> TensorData:
    return _as_dtype(np.asarray(values, dtype=np.float64), dtype)


def test_pre_check_order_and_states() -> None:
    assert compare_tensors(_td(np.zeros((0, 3))), _td(np.zeros(4))) == TensorMetrics.uniform(
        S.UNSUPPORTED, TensorMsg.EMPTY
    )
    assert compare_tensors(_td([1.0, 2.0]), _td([1.0, 2.0, 3.0])) == TensorMetrics.uniform(
        S.SHAPE_UNMATCHED, TensorMsg.SHAPE_MISMATCH
    )
    assert compare_tensors(_td([1.0, np.nan]), _td([1.0, 2.0])) == TensorMetrics.uniform(
        S.NOT_AVAILABLE, TensorMsg.NAN_INF_MISMATCH
    )
    text = TensorData(np.array(["1", "2"]), "str")
    assert compare_tensors(text, text) == TensorMetrics.uniform(S.UNSUPPORTED, TensorMsg.UNREADABLE)
    mixed = compare_tensors(_td([1.0, 2.0, np.inf]), _td([1.0, 2.0, np.inf], "float64"))
    assert mixed.messages == (TensorMsg.DTYPE_MISMATCH,) and mixed.cosine == Metric.of(1.0)


def test_zero_dim_message_once_d4() -> None:
    ours = compare_tensors(_td(2.0), _td(1.0))
    assert ours.messages == (TensorMsg.ZERO_DIM,)
    assert (ours.max_abs_err.value, ours.max_rel_err.value) == (1.0, 1.0)
    assert ours.cosine.state is ours.euc_dist.state is ours.one_thousandth.state is S.UNSUPPORTED
    nan = compare_tensors(_td(np.nan), _td(1.0))
    assert nan.messages == (TensorMsg.ZERO_DIM, TensorMsg.MAX_ABS_NAN, TensorMsg.MAX_REL_NAN)
    assert nan.max_abs_err.state is nan.max_rel_err.state is S.NAN
    assert accuracy_reached(nan) is Accuracy.NONE
    assert messages_text(nan.messages).count("0-d tensor") == 1


def test_cosine_special_cases() -> None:
    one = compare_tensors(_td([[3.0]]), _td([[3.0]]))
    assert one.cosine.state is S.UNSUPPORTED and one.messages == (TensorMsg.ONE_ELEMENT,)
    assert one.euc_dist == Metric.of(0.0) and one.one_thousandth == Metric.of(1.0)
    assert compare_tensors(_td([0.0, 0.0]), _td([0.0, 0.0])).cosine == Metric.of(1.0)
    npu_zero = compare_tensors(_td([0.0, 0.0]), _td([0.5, 0.0]))
    assert npu_zero.cosine.state is S.NAN and npu_zero.messages == (TensorMsg.COSINE_NPU_ZERO,)
    bench_zero = compare_tensors(_td([0.5, 0.0]), _td([0.0, 0.0]))
    assert bench_zero.messages == (TensorMsg.COSINE_BENCH_ZERO,)
    assert compare_tensors(_td([1.0, 2.0]), _td([1.0, 2.0001])).cosine == Metric.of(1.0)
    assert compare_tensors(_td([1.0, 0.0]), _td([1.0, 1.0])).cosine == Metric.of(round(0.5**0.5, 12))


def test_cosine_nan_is_not_accurate_d6() -> None:
    ours = compare_tensors(_td([0.0, 0.0, 0.0]), _td([0.0, 0.5, 0.0]))
    assert ours.cosine.state is S.NAN and ours.max_abs_err == Metric.of(0.5)
    assert accuracy_reached(ours) is Accuracy.NO  # the reference says Yes


def test_float16_bench_zeros_d5() -> None:
    values = [0.0, 0.0, 1.5, -2.0, 0.0]
    same = compare_tensors(_td(values, "float16"), _td(values, "float16"))
    assert same.max_rel_err == Metric.of(0.0) and same.messages == ()
    assert same.one_thousandth == same.five_thousandths == Metric.of(1.0)
    mixed = compare_tensors(_td(values, "float16"), _td(values, "float32"))  # the reference gives RE 1 at 0 vs 0
    assert mixed.max_rel_err == Metric.of(0.0) and mixed.one_thousandth == Metric.of(1.0)
    assert mixed.messages == (TensorMsg.DTYPE_MISMATCH,)
    off = compare_tensors(_td([0.0, 1.0], "float16"), _td([0.0, 0.0], "float16"))
    assert off.max_rel_err == Metric.of(_fmt(1.0 / FLOAT_EPSILON)) and off.one_thousandth == Metric.of(0.5)


def test_float32_relative_error_arithmetic() -> None:
    """float32 data: RE in float32, eps added in float32 where the bench is 0 (matches the fixtures)."""
    n = np.array([1.0000001, 3e-3, 0.0, 7.0], dtype=np.float32)
    b = np.array([1.0, 0.0, 0.0, 7.0001], dtype=np.float32)
    ours = compare_tensors(TensorData(n, "float32"), TensorData(b, "float32"))
    eps = np.float32(FLOAT_EPSILON)
    expected = max(abs((n[0] - b[0]) / b[0]), abs(((n[1] + eps) - eps) / eps), abs((n[3] - b[3]) / b[3]))
    assert ours.max_rel_err == Metric.of(_fmt(float(expected)))
    assert ours.one_thousandth == Metric.of(0.75)
    bf16 = TensorData((n.view(np.uint32) >> 16).astype(np.uint16), BF16)
    widened = compare_tensors(bf16, TensorData(b, "float32"))
    assert widened.messages == ()  # bf16 counts as float32: no dtype message


@pytest.mark.parametrize(
    ("cosine", "max_abs", "expected"),
    [
        (Metric.of(0.995), Metric.of(0.5), Accuracy.YES),
        (Metric.of(0.98), Metric.of(0.002), Accuracy.NO),
        (Metric.of(0.98), Metric.of(0.0005), Accuracy.YES),
        (Metric.of(0.89), Metric.of(0.0), Accuracy.NO),
        (Metric.of(1.0), Metric.of(1.5), Accuracy.NO),
        (Metric(S.NAN), Metric.of(0.1), Accuracy.NO),
        (Metric(S.UNSUPPORTED), Metric.of(0.1), Accuracy.NONE),
        (Metric(S.UNSUPPORTED), Metric(S.NAN), Accuracy.NONE),
        (Metric(S.NOT_AVAILABLE), Metric(S.NOT_AVAILABLE), Accuracy.NO),
        (Metric(S.SHAPE_UNMATCHED), Metric(S.SHAPE_UNMATCHED), Accuracy.UNMATCHED),
    ],
)
def test_accuracy_rule(cosine: Metric, max_abs: Metric, expected: Accuracy) -> None:
    other = Metric.of(0.0)
    assert accuracy_reached(TensorMetrics(cosine, other, max_abs, other, other, other)) is expected


def test_messages_text_concatenates_reference_sentences() -> None:
    assert messages_text([TensorMsg.READ_FAILED], "['a.pt', 'b.pt']") == (
        "Dump file: ['a.pt', 'b.pt'] not found or read failed."
    )
    assert messages_text([TensorMsg.ZERO_DIM, TensorMsg.MAX_ABS_NAN]).endswith("in dump data.")
    assert parse_messages(messages_text(list(TensorMsg)[4:]) + "\nrequires_grad is inconsistent") == list(TensorMsg)[4:]


def test_results_survive_pickling() -> None:
    """Rows come back from worker processes: equality must not depend on the identity of the NaN placeholder."""
    import pickle

    ours = compare_tensors(_td([0.0, 0.0]), _td([0.5, 0.0]))
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert Metric(S.NAN, float("nan")) == Metric(S.NAN) != Metric.of(0.0)
