"""The compiled real-data kernel (_tensorkernel.c) against the numpy path of measure/tensor_compare.py (the one pass's
two twins, `_c_accumulate` and `_py_accumulate`, called directly).

On hypothesis-generated float32 and bfloat16 pairs (zeros of both signs, subnormals, huge values, NaN/inf at the
same or different positions, sizes around the unroll width and the block size, strided, reversed, unaligned and
memory-mapped views, any chunk size) the maxima, counts (the root cause's count of relative errors beyond a
dtype-aware tolerance too) and messages must be identical and the sums equal within
1e-12 relative (the dot product relative to sqrt(N.N * B.B), its bound by Cauchy-Schwarz). Every loop the machine
can run (portable C, SSE2, AVX2, AVX-512) must give bit-identical results, and one call over many chunks
(`chunk`, `sums`) exactly what one call per chunk, added up in chunk order, gives.

Skipped when the module is not built, unless MSPROBE_REQUIRE_NATIVE=1, which makes a missing module a failure.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import shutil
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprobe_compare import native
from msprobe_compare.load.tensor_data import BF16, TensorData
from msprobe_compare.measure import tensor_compare, tensor_io, tensor_metrics
from msprobe_compare.measure.tensor_compare import compare_tensors
from msprobe_compare.measure.tensor_metrics import MetricState, TensorMetrics
from tests.native_helpers import examples

SUM_RTOL = 1e-12


@pytest.fixture(scope="module")
def kernel() -> types.ModuleType:
    try:
        return importlib.import_module("msprobe_compare._tensorkernel")
    except ImportError as exc:
        if os.environ.get("MSPROBE_REQUIRE_NATIVE") == "1":
            pytest.fail(f"MSPROBE_REQUIRE_NATIVE=1 but msprobe_compare._tensorkernel is not importable: {exc}")
        pytest.skip("the _tensorkernel extension is not built")


# ---------------------------------------------------------------------------------------------------------------
# helpers


def _bf16(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of float32 values, truncated (NaN stays NaN for the NaNs used here)."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _side(values: np.ndarray, kind: str) -> TensorData:
    return TensorData(_bf16(values), BF16) if kind == BF16 else TensorData(np.asarray(values, np.float32), "float32")


def _flat(t: TensorData) -> np.ndarray:
    return np.asarray(t.array).reshape(-1)


def _with_loop(kernel: types.ModuleType, loop: str) -> types.SimpleNamespace:
    """A stand-in for the module whose accumulate() runs the named loop."""
    return types.SimpleNamespace(accumulate=functools.partial(kernel.accumulate_loop, loop), SIMD=loop)


def _totals(npu: TensorData, bench: TensorData, chunk: int, kernel: object | None,
            tolerance: float | None = None) -> tensor_metrics.Totals | None:  # fmt: skip
    """The one pass by the C twin with `kernel`, or by the Python twin when None."""
    n_arr, b_arr = np.asarray(npu.array), np.asarray(bench.array)
    if kernel is None:
        return tensor_compare._py_accumulate(npu, bench, n_arr, b_arr, chunk, tolerance)
    return tensor_compare._c_accumulate(npu, bench, n_arr, b_arr, chunk, tolerance, kernel=kernel)


def assert_same_totals(native: tensor_metrics.Totals | None, ref: tensor_metrics.Totals | None) -> None:
    """Maxima and counts identical, sums within SUM_RTOL."""
    assert (native is None) == (ref is None)
    if native is None or ref is None:
        return
    assert (native.max_abs, native.max_rel, native.below, native.beyond) == (
        ref.max_abs,
        ref.max_rel,
        ref.below,
        ref.beyond,
    )
    assert len(native.below) == 2  # the one- and five-thousandths counts
    for name in ("nn", "bb", "ss"):  # sums of squares: no cancellation
        a, b = native.sums[name], ref.sums[name]
        assert a == pytest.approx(b, rel=SUM_RTOL, abs=1e-300), name
    bound = math.sqrt(ref.sums["nn"] * ref.sums["bb"])
    assert abs(native.sums["dot"] - ref.sums["dot"]) <= SUM_RTOL * bound, (native.sums["dot"], ref.sums["dot"], bound)


def assert_same_metrics(native: TensorMetrics, ref: TensorMetrics) -> None:
    """Identical messages, states, maxima and ratios; Cosine and EucDist as close as their sums."""
    assert native.messages == ref.messages
    assert (native.beyond, native.beyond_tol) == (ref.beyond, ref.beyond_tol) or (
        math.isnan(native.beyond) and math.isnan(ref.beyond)
    )
    for name in ("max_abs_err", "max_rel_err", "one_thousandth", "five_thousandths"):
        assert getattr(native, name) == getattr(ref, name), name
    for name in ("cosine", "euc_dist"):
        a, b = getattr(native, name), getattr(ref, name)
        assert a.state is b.state, name
        if a.state is MetricState.VALUE:  # Cosine is rounded: a last-bit difference may flip the last decimal
            assert a.value == pytest.approx(b.value, rel=1e-11, abs=2e-12 if name == "cosine" else 1e-300), name


def check_pair(kernel: types.ModuleType, npu: TensorData, bench: TensorData, chunk: int) -> None:
    """Every loop against the numpy path, the loops bit-identical to each other, inputs untouched."""
    before = (np.array(npu.array, copy=True), np.array(bench.array, copy=True))
    units = tensor_metrics.EXCESS_UNITS
    ref_metrics = tensor_compare._compare(npu, bench, chunk, None, units)
    tol = tensor_compare.beyond_tolerance(npu, bench, units)
    per_loop = []
    for loop in kernel.LOOPS:
        shim = _with_loop(kernel, loop)
        assert_same_metrics(tensor_compare._compare(npu, bench, chunk, shim, units), ref_metrics)
        if npu.size and np.ndim(npu.array) and npu.shape == bench.shape:  # what reaches the kernel
            native_totals = _totals(npu, bench, chunk, shim, tol)
            assert_same_totals(native_totals, _totals(npu, bench, chunk, None, tol))
            per_loop.append(None if native_totals is None else vars(native_totals))
    assert all(t == per_loop[0] for t in per_loop), per_loop
    np.testing.assert_array_equal(npu.array, before[0])
    np.testing.assert_array_equal(bench.array, before[1])


# ---------------------------------------------------------------------------------------------------------------
# generated pairs

F32_SPECIALS = [0.0, -0.0, 1.0, -1.0, 1e-3, 5e-3, 2.0**-52, 1e-30, 1e-40, -1e-45, 65504.0, 1e23, -3.0e38, 3.4e38]
NONFINITE = [math.nan, math.inf, -math.inf]


def _bf16_bits_value(bits: int) -> float:
    return float(np.array([bits << 16], np.uint32).view(np.float32)[0])


finite_f32 = st.one_of(
    st.sampled_from(F32_SPECIALS),
    st.floats(-1e4, 1e4, width=32),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.integers(0, 0xFFFF).map(_bf16_bits_value).filter(math.isfinite),  # every finite bf16, subnormals too
)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[TensorData, TensorData, int]:
    size = draw(st.one_of(st.integers(0, 40), st.sampled_from([63, 64, 65, 127, 129, 300])))
    kinds = draw(st.sampled_from([("float32", "float32"), (BF16, BF16), ("float32", BF16), (BF16, "float32")]))
    n = np.array(draw(st.lists(finite_f32, min_size=size, max_size=size)), dtype=np.float32)
    relation = draw(st.sampled_from(["same", "close", "independent", "bench zeros", "ulps", "thresholds"]))
    with np.errstate(over="ignore"):
        if relation == "same":
            b = n.copy()
        elif relation == "close":
            rel = draw(st.sampled_from([1e-6, 4e-4, 2e-3, 1e-2]))
            b = (n * (1 + rel * np.cos(np.arange(size)))).astype(np.float32)
        elif relation == "independent":
            b = np.array(draw(st.lists(finite_f32, min_size=size, max_size=size)), dtype=np.float32)
        elif relation == "bench zeros":
            b = n.copy()
            b[np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)), dtype=bool)] = 0.0
        elif relation == "thresholds":  # RE exactly 0.001 or 0.005 (in float32) and next to them
            m = np.array(draw(st.lists(st.sampled_from([1, -1, 3, 8, -64, 125]), min_size=size, max_size=size)))
            j = np.array(draw(st.lists(st.sampled_from([0, 1, -1, 5, -5, 2, 4, 6]), min_size=size, max_size=size)))
            b = (m * 1000).astype(np.float32)
            n = (m * (1000 + j)).astype(np.float32)
        else:  # a few bf16 units in the last place apart (float32 values keep only their bf16 part)
            bits = _bf16(n).astype(np.int32)
            steps = np.array(draw(st.lists(st.integers(-2, 2), min_size=size, max_size=size)), dtype=np.int32)
            b = (np.clip(bits + steps, 0, 0xFFFF).astype(np.uint32) << 16).view(np.float32)
            b = np.where(np.isfinite(b), b, n)
    if size and draw(st.booleans()):  # NaN/inf at the same positions (sign of inf free), or not
        for p in draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4)):
            n[p] = draw(st.sampled_from(NONFINITE))
            same = draw(st.integers(0, 3)) > 0
            if same:
                b[p] = -n[p] if math.isinf(n[p]) and draw(st.booleans()) else n[p]
            else:
                b[p] = draw(st.sampled_from(NONFINITE + [1.0, 0.0]))
    npu, bench = _side(n, kinds[0]), _side(b, kinds[1])
    layout = draw(st.sampled_from(["contiguous", "strided", "reversed", "2-d transposed"]))
    if layout == "strided":
        npu, bench = (TensorData(np.repeat(t.array, 3)[1::3], t.dtype_name) for t in (npu, bench))
    elif layout == "reversed":
        npu, bench = (TensorData(t.array[::-1], t.dtype_name) for t in (npu, bench))
    elif layout == "2-d transposed" and size % 3 == 0 and size:
        npu, bench = (TensorData(t.array.reshape(3, -1).T, t.dtype_name) for t in (npu, bench))
    chunk = draw(st.one_of(st.integers(1, 70), st.just(tensor_compare.DEFAULT_CHUNK_ELEMS)))
    return npu, bench, chunk


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=pairs())
def test_generated_pairs_match_numpy_path(kernel: types.ModuleType, pair: tuple[TensorData, TensorData, int]) -> None:
    npu, bench, chunk = pair
    check_pair(kernel, npu, bench, chunk)


# ---------------------------------------------------------------------------------------------------------------
# sizes, blocks, layouts


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 15, 17, 4095, 4096, 4097, 8191, 8193, 12_289, 16_384, 24_577])
@pytest.mark.parametrize("kinds", [("float32", "float32"), (BF16, BF16), ("float32", BF16)])
def test_sizes_around_lanes_and_blocks(kernel: types.ModuleType, size: int, kinds: tuple[str, str]) -> None:
    rng = np.random.default_rng(size)
    n = rng.standard_normal(size).astype(np.float32)
    b = (n * (1 + rng.choice([0.0, 3e-4, 3e-3, 3e-2], size=size))).astype(np.float32)
    b[rng.random(size) < 0.05] = 0.0
    n[rng.random(size) < 0.05] = 0.0
    if size > 4100:  # NaN/inf in two blocks and in the last, partial one
        for p in (5, 4097, size - 1):
            n[p] = b[p] = [np.nan, np.inf, -np.inf][p % 3]
    for chunk in (size, 1000, tensor_compare.DEFAULT_CHUNK_ELEMS):
        check_pair(kernel, _side(n, kinds[0]), _side(b, kinds[1]), chunk)


def test_mismatch_in_a_later_block_and_chunk(kernel: types.ModuleType) -> None:
    n = np.ones(9000, np.float32)
    b = n.copy()
    n[8999] = np.nan
    for chunk in (100, 9000):
        assert tensor_compare._compare(_side(n, "float32"), _side(b, "float32"), chunk, kernel) == (
            TensorMetrics.uniform(MetricState.NOT_AVAILABLE, tensor_metrics.TensorMsg.NAN_INF_MISMATCH)
        )
    b[8999] = np.nan
    same = tensor_compare._compare(_side(n, "float32"), _side(b, "float32"), 100, kernel)
    assert same.cosine.value == 1.0 and same.max_rel_err.value == 0.0 and same.one_thousandth.value == 1.0


@pytest.mark.parametrize("where", [None, 100, 4096 + 100, 8192 + 4096 + 1])
@pytest.mark.parametrize("same", [True, False])
def test_nan_in_either_block_of_a_pair(kernel: types.ModuleType, where: int | None, same: bool) -> None:
    """The widest loop takes two whole blocks at a time: a NaN in the first or the second of them (at the same
    position on both sides: that block is redone with the checks; on one side only: no result)."""
    rng = np.random.default_rng(5)
    n = rng.standard_normal(4 * 4096 + 333).astype(np.float32)
    b = (n * (1 + np.float32(1e-3) * rng.standard_normal(n.size))).astype(np.float32)
    if where is not None:
        n[where] = np.nan
        b[where] = np.nan if same else 1.0
    for kinds in (("float32", "float32"), (BF16, BF16)):
        check_pair(kernel, _side(n, kinds[0]), _side(b, kinds[1]), tensor_compare.DEFAULT_CHUNK_ELEMS)
        check_pair(kernel, _side(n, kinds[0]), _side(b, kinds[1]), 3 * 4096)


def test_large_pair_sums(kernel: types.ModuleType) -> None:
    rng = np.random.default_rng(11)
    n = rng.standard_normal(300_007).astype(np.float32) * np.float32(100)
    b = (n * (1 + np.float32(1e-3) * rng.standard_normal(n.size))).astype(np.float32)
    b[::97] = 0.0
    for kinds in (("float32", "float32"), (BF16, BF16)):
        check_pair(kernel, _side(n, kinds[0]), _side(b, kinds[1]), tensor_compare.DEFAULT_CHUNK_ELEMS)


def test_strided_offset_and_unaligned_views_equal_contiguous(kernel: types.ModuleType) -> None:
    """The summation order does not depend on the layout: views give exactly the contiguous copy's results."""
    rng = np.random.default_rng(4)
    n = rng.standard_normal(5001).astype(np.float32)
    b = (n * (1 + np.float32(2e-3) * rng.standard_normal(n.size))).astype(np.float32)
    b[::13] = 0.0
    for is_bf16 in (False, True):
        x, y = (_bf16(n), _bf16(b)) if is_bf16 else (n, b)
        expected = kernel.accumulate(x, is_bf16, y, is_bf16)
        unaligned = []
        for arr in (x, y):
            raw = bytearray(arr.nbytes + 1)
            view = np.frombuffer(raw, arr.dtype, count=arr.size, offset=1)
            np.copyto(view, arr)
            unaligned.append(view)
        assert not unaligned[0].flags.aligned
        assert kernel.accumulate(unaligned[0], is_bf16, unaligned[1], is_bf16) == expected
        for view in (lambda a: np.repeat(a, 2)[::2], lambda a: np.repeat(a, 3)[2::3]):
            assert kernel.accumulate(view(x), is_bf16, view(y), is_bf16) == expected
        assert kernel.accumulate(x, is_bf16, np.repeat(y, 2)[::2], is_bf16) == expected  # one side strided
        assert kernel.accumulate(x[::-1].copy()[::-1], is_bf16, y, is_bf16) == expected
        mixed = kernel.accumulate(x[::-1], is_bf16, y[::-1], is_bf16)  # other order: same maxima and counts
        assert mixed[4:] == expected[4:]


def test_read_only_memmaps(kernel: types.ModuleType, tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    n = rng.standard_normal((64, 33)).astype(np.float32)
    n[5, 7], n[9, 1] = np.nan, np.inf
    b = n + np.float32(1e-3) * rng.standard_normal(n.shape).astype(np.float32)
    b[3] = 0.0
    np.save(tmp_path / "n.npy", n)
    np.save(tmp_path / "b.npy", _bf16(b))
    npu = TensorData(np.load(tmp_path / "n.npy", mmap_mode="r"), "float32")
    bench = TensorData(np.load(tmp_path / "b.npy", mmap_mode="r"), BF16)
    assert not npu.array.flags.writeable
    check_pair(kernel, npu, bench, 100)


def test_empty_and_zero_dim(kernel: types.ModuleType) -> None:
    empty = np.zeros(0, np.float32)
    assert kernel.accumulate(empty, False, empty, False) == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0)
    for loop in kernel.LOOPS:
        assert kernel.accumulate_loop(loop, _bf16(empty), True, empty, False) == (0.0,) * 6 + (0, 0, 0)
    check_pair(kernel, _side(empty.reshape(0, 3), "float32"), _side(empty.reshape(0, 3), BF16), 10)
    check_pair(kernel, _side(np.float32(2.5), "float32"), _side(np.float32(0.0), BF16), 10)  # 0-d: numpy only


def test_relative_errors_at_the_thresholds(kernel: types.ModuleType) -> None:
    """RE exactly float32(0.001) and float32(0.005) counts as not below them."""
    b = np.array([1000, 1000, -1000, 2000, 1000, 1000, 1000, 8000], np.float32)
    n = np.array([1001, 1005, -1001, 2010, 999, 995, 1000.5, 8008], np.float32)
    rel = np.abs((n - b) / b)
    assert rel[0] == np.float32(0.001) and rel[1] == np.float32(0.005)
    for kinds in (("float32", "float32"), ("float32", BF16)):
        check_pair(kernel, _side(n, kinds[0]), _side(b, kinds[1]), 8)
    ours = tensor_compare._compare(_side(n, "float32"), _side(b, "float32"), 8, kernel)
    assert (ours.one_thousandth.value, ours.five_thousandths.value) == (1 / 8, 5 / 8)


def test_elements_beyond_a_tolerance(kernel: types.ModuleType) -> None:
    """`beyond` counts RE > float32(tolerance): an RE equal to it is not beyond; without a tolerance nothing is;
    the tolerance is excess_units unit roundoffs of the coarser dtype (bf16 2^-8, fp32 2^-24)."""
    b = np.array([1000, 1000, 1000, 1000, 0, 1000, 1000, 1000, 1000], np.float32)
    n = np.array([1000, 1001, 1010, 1007.8125, 0, 999, 990, -1000, 1000.001], np.float32)
    rel = np.abs((n - b) / np.where(b == 0, 1, b))
    tol = 2.0**-7  # 2 units of bfloat16
    assert rel[3] == np.float32(tol)
    expected = int(np.count_nonzero(rel > np.float32(tol)))
    assert expected == 3  # 1010, 990, -1000
    for loop in kernel.LOOPS:
        assert kernel.accumulate_loop(loop, n, False, b, False, tol)[8] == expected
        assert kernel.accumulate_loop(loop, n, False, b, False)[8] == 0
        assert kernel.accumulate_loop(loop, n, False, b, False, None)[8] == 0
    with pytest.raises(ValueError):
        kernel.accumulate(n, False, b, False, -1.0)
    ours = tensor_compare._compare(_side(n, "float32"), _side(b, BF16), 4, kernel, 2.0)
    assert (ours.beyond, ours.beyond_tol) == (expected / n.size, tol)
    numpy = tensor_compare._compare(_side(n, "float32"), _side(b, BF16), 4, None, 2.0)
    assert (numpy.beyond, numpy.beyond_tol) == (ours.beyond, ours.beyond_tol)
    fp32 = tensor_compare._compare(_side(n, "float32"), _side(b, "float32"), 4, kernel, 2.0)
    assert fp32.beyond_tol == 2.0**-23 and fp32.beyond == 7 / 9  # every differing element (1000.001 too)
    assert math.isnan(tensor_compare._compare(_side(n, "float32"), _side(b, BF16), 4, kernel).beyond)
    ints = TensorData(np.arange(9, dtype=np.int32), "int32")
    assert math.isnan(tensor_compare._compare(ints, ints, 4, None, 2.0).beyond)


def test_negative_zero_and_subnormals(kernel: types.ModuleType) -> None:
    tiny = np.float32(1e-45)
    n = np.array([-0.0, 0.0, -0.0, tiny, -tiny, 1e-40, 1e-38, 3e-39, 0.0, 1.0], np.float32)
    b = np.array([0.0, -0.0, -0.0, 0.0, tiny, -1e-40, 0.0, 1e-39, tiny, -0.0], np.float32)
    for kinds in (("float32", "float32"), (BF16, BF16), ("float32", BF16), (BF16, "float32")):
        for chunk in (1, 3, 100):
            check_pair(kernel, _side(n, kinds[0]), _side(b, kinds[1]), chunk)


# ---------------------------------------------------------------------------------------------------------------
# the switch, determinism, the interface


def test_compare_tensors_uses_the_kernel_unless_turned_off(
    kernel: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(8)
    n = rng.standard_normal(20_000).astype(np.float32)
    npu, bench = _side(n, "float32"), _side(n * np.float32(1.0001), BF16)
    monkeypatch.setenv("MSPROBE_NATIVE", "1")
    assert (tensor_compare.native_kernel() is None) == (kernel.SIMD == "portable")
    # the twins are bound once (native.twin): a call goes to the kernel's while MSPROBE_NATIVE is not 0
    assert native.TWINS["msprobe_compare.measure.tensor_compare.accumulate"] == (
        "_tensorkernel",
        tensor_compare._c_accumulate,
        tensor_compare._py_accumulate,
    )
    assert compare_tensors(npu, bench) == tensor_compare._compare(
        npu, bench, tensor_compare.DEFAULT_CHUNK_ELEMS, tensor_compare._KERNEL
    )
    calls = []

    def counted(*args: object) -> object:
        calls.append(args)
        return kernel.accumulate(*args)

    monkeypatch.setattr(tensor_compare, "_KERNEL", types.SimpleNamespace(accumulate=counted, SIMD=kernel.SIMD))
    compare_tensors(npu, bench)
    assert bool(calls) == (kernel.SIMD != "portable")  # the kernel ran (a build without SIMD binds numpy alone)
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    assert tensor_compare.native_kernel() is None
    calls.clear()
    assert compare_tensors(npu, bench).cosine.value == pytest.approx(0.999999, abs=1e-6)
    assert not calls  # MSPROBE_NATIVE is read at each call: numpy now
    assert tensor_compare._py_accumulate(npu, bench, npu.array, bench.array, 1000) is not None


def test_other_dtypes_take_the_numpy_path(kernel: types.ModuleType) -> None:
    calls = []

    def accumulate(*args: object) -> object:
        calls.append(args)
        return kernel.accumulate(*args)

    spy = types.SimpleNamespace(accumulate=accumulate, SIMD=kernel.SIMD)
    values = np.linspace(-2, 2, 50)
    for n_arr, b_arr in (
        (values.astype(np.float16), values.astype(np.float32)),
        (values, values.astype(np.float32)),
        (values.astype(">f4"), values.astype(np.float32)),
        (values.astype(np.int32), values.astype(np.int32)),
    ):
        npu, bench = TensorData(n_arr, n_arr.dtype.name), TensorData(b_arr, b_arr.dtype.name)
        assert tensor_compare._compare(npu, bench, 7, spy) == tensor_compare._compare(npu, bench, 7, None)
    assert calls == []


def test_threads_give_identical_results(kernel: types.ModuleType) -> None:
    rng = np.random.default_rng(9)
    n = rng.standard_normal(400_000).astype(np.float32)
    b = (n * (1 + np.float32(1e-3) * rng.standard_normal(n.size))).astype(np.float32)
    pair = (_side(n, BF16), _side(b, BF16))
    alone = tensor_compare._compare(*pair, 50_000, kernel)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: tensor_compare._compare(*pair, 50_000, kernel), range(8)))
    assert all(r == alone for r in results)
    assert all(r.euc_dist.value == alone.euc_dist.value for r in results)  # bit for bit, not just rounded


def _per_chunk_fold(kernel: types.ModuleType, loop: str, n: np.ndarray, n_bf16: bool, b: np.ndarray, b_bf16: bool,
                    tol: float | None, chunk: int) -> tuple | None:  # fmt: skip
    """One call per chunk, folded as tensor_metrics.py folded them before the kernel took many chunks per call."""
    sums, max_abs, max_rel, counts = [0.0] * 4, 0.0, 0.0, [0, 0, 0]
    for start in range(0, n.size, chunk):
        part = kernel.accumulate_loop(loop, n[start : start + chunk], n_bf16, b[start : start + chunk], b_bf16, tol)
        if part is None:
            return None
        sums = [s + p for s, p in zip(sums, part[:4], strict=True)]
        max_abs, max_rel = max(max_abs, part[4]), max(max_rel, part[5])
        counts = [c + p for c, p in zip(counts, part[6:], strict=True)]
    return (*sums, max_abs, max_rel, *counts)


@pytest.mark.parametrize("kinds", [(False, False), (True, True), (True, False)])
def test_many_chunks_per_call_equal_one_call_per_chunk(kernel: types.ModuleType, kinds: tuple[bool, bool]) -> None:
    rng = np.random.default_rng(21)
    n = (rng.standard_normal(50_001) * 1e3).astype(np.float32)
    b = (n * (1 + np.float32(1e-3) * rng.standard_normal(n.size))).astype(np.float32)
    b[::37] = 0.0
    n[[7, 40_000]] = b[[7, 40_000]] = np.nan
    sides = [_bf16(x) if bf else x for x, bf in zip((n, b), kinds, strict=True)]
    for loop in kernel.LOOPS:
        for chunk in (1000, 4096, 7777, 50_001, 10**9):
            want = _per_chunk_fold(kernel, loop, sides[0], kinds[0], sides[1], kinds[1], 0.004, chunk)
            got = kernel.accumulate_loop(loop, sides[0], kinds[0], sides[1], kinds[1], 0.004, chunk)
            assert got == want, (loop, chunk)
            # split in two calls, the running sums carried from the first into the second
            cut = (n.size // 2) // chunk * chunk if chunk < n.size else n.size
            first = kernel.accumulate_loop(loop, sides[0][:cut], kinds[0], sides[1][:cut], kinds[1], 0.004, chunk)
            second = kernel.accumulate_loop(loop, sides[0][cut:], kinds[0], sides[1][cut:], kinds[1], 0.004, chunk,
                                            first[:4])  # fmt: skip
            assert second[:4] == want[:4], (loop, chunk)
    n[9] = np.nan  # NaN on one side only: no result, however the chunks are grouped
    for loop in kernel.LOOPS:
        assert kernel.accumulate_loop(loop, n, False, b, False, None, 1000) is None


def test_the_widest_loop_is_used(kernel: types.ModuleType) -> None:
    assert kernel.SIMD == kernel.LOOPS[-1]
    assert list(kernel.LOOPS) == [loop for loop in ("portable", "sse2", "avx2", "avx512") if loop in kernel.LOOPS]


def test_interface_errors(kernel: types.ModuleType) -> None:
    f32 = np.ones(8, np.float32)
    bits = _bf16(f32)
    with pytest.raises(TypeError):
        kernel.accumulate(np.ones(8), False, f32, False)  # float64
    with pytest.raises(TypeError):
        kernel.accumulate(f32, True, f32, False)  # float32 given as bf16 bits
    with pytest.raises(TypeError):
        kernel.accumulate(f32.reshape(2, 4), False, f32.reshape(2, 4), False)
    with pytest.raises(TypeError):
        kernel.accumulate(f32.astype(">f4" if np.little_endian else "<f4"), False, f32, False)
    with pytest.raises(ValueError):
        kernel.accumulate(f32, False, bits[:7], True)
    with pytest.raises(TypeError):
        kernel.accumulate(f32, False, f32)
    with pytest.raises(ValueError):
        kernel.accumulate_loop("no such loop", f32, False, f32, False)
    assert kernel.SIMD in kernel.LOOPS and "portable" in kernel.LOOPS
    with pytest.raises(ValueError):
        kernel.accumulate(f32, False, f32, False, None, 0)  # chunk
    with pytest.raises(TypeError):
        kernel.accumulate(f32, False, f32, False, None, 4, (0.0, 0.0))  # sums
    with pytest.raises(TypeError):
        kernel.accumulate(f32, False, f32, False, None, 4, None, 1)
    assert kernel.accumulate(memoryview(f32), 0, memoryview(bits), 1)[6:] == (8, 8, 0)  # any buffer


# ---------------------------------------------------------------------------------------------------------------
# accumulate_file: the pair read from files with pread into reused buffers


def _write_sides(tmp_path: Path, sides: list[np.ndarray], pads: tuple[int, int]) -> list[tuple[int, int]]:
    """Each side written to its own file after `pad` bytes of junk: (descriptor, offset) of each."""
    opened = []
    for k, (side, pad) in enumerate(zip(sides, pads, strict=True)):
        path = tmp_path / f"side{k}.bin"
        path.write_bytes(b"\xa5" * pad + side.tobytes() + b"\x5a" * 13)
        opened.append((os.open(path, os.O_RDONLY), pad))
    return opened


@pytest.mark.parametrize("kinds", [(False, False), (True, True), (True, False), (False, True)])
def test_file_reads_equal_the_buffers_bit_for_bit(kernel: types.ModuleType, tmp_path: Path,
                                                   kinds: tuple[bool, bool]) -> None:  # fmt: skip
    """Every piece size (buffer length), chunk size, odd offset and tail: the same tuple as accumulate()."""
    rng = np.random.default_rng(33)
    n = (rng.standard_normal(70_003) * 1e3).astype(np.float32)
    b = (n * (1 + np.float32(1e-3) * rng.standard_normal(n.size))).astype(np.float32)
    b[::41] = 0.0
    n[[5, 8191, 8192, 40_000, 70_002]] = b[[5, 8191, 8192, 40_000, 70_002]] = np.nan  # same positions: masked
    n[9000] = b[9000] = np.inf
    sides = [_bf16(x) if bf else x for x, bf in zip((n, b), kinds, strict=True)]
    opened = _write_sides(tmp_path, sides, (3, 64))
    try:
        (n_fd, n_off), (b_fd, b_off) = opened
        for chunk in (1000, 4096, 8192 + 5, 1 << 17):
            for count in (n.size, 8192 * 3, 4097, 1):
                want = kernel.accumulate(sides[0][:count], kinds[0], sides[1][:count], kinds[1], 0.004, chunk,
                                         (1.0, 2.0, 3.0, 4.0))  # fmt: skip
                for buffer_bytes in (2 * 8192 * 4, 3 * 8192 * 4 + 100, 1 << 20):
                    bufs = bytearray(buffer_bytes), bytearray(buffer_bytes)
                    got = kernel.accumulate_file(n_fd, n_off, kinds[0], b_fd, b_off, kinds[1], count, 0.004, chunk,
                                                 (1.0, 2.0, 3.0, 4.0), *bufs)  # fmt: skip
                    assert got == want, (chunk, count, buffer_bytes)
                ahead = kernel.accumulate_file(n_fd, n_off, kinds[0], b_fd, b_off, kinds[1], count, 0.004, chunk,
                                               (1.0, 2.0, 3.0, 4.0), *bufs, 5000)  # fmt: skip
                assert ahead == want, (chunk, count, "read ahead")
        bufs = bytearray(1 << 16), bytearray(1 << 16)
        assert kernel.accumulate_file(n_fd, n_off, kinds[0], b_fd, b_off, kinds[1], 0, None, 7, None, *bufs) == (
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0,
            0,
            0,
        )
    finally:
        for fd, _ in opened:
            os.close(fd)


def test_file_reads_mismatch_and_errors(kernel: types.ModuleType, tmp_path: Path) -> None:
    n = np.linspace(-3, 3, 30_000, dtype=np.float32)
    b = n.copy()
    b[25_000] = np.nan  # one side only, in a later chunk and piece: no result
    opened = _write_sides(tmp_path, [n, b], (0, 0))
    (n_fd, _), (b_fd, _) = opened
    bufs = bytearray(1 << 16), bytearray(1 << 16)
    try:
        assert kernel.accumulate_file(n_fd, 0, False, b_fd, 0, False, n.size, None, 10_000, None, *bufs) is None
        assert kernel.accumulate(n, False, b, False, None, 10_000) is None
        assert kernel.accumulate_file(n_fd, 0, False, n_fd, 0, False, n.size, None, 10_000, None, *bufs)[6] == n.size
        with pytest.raises(OSError):  # the file ends before the tensor does
            kernel.accumulate_file(n_fd, 0, False, n_fd, 0, False, n.size + 10, None, 10_000, None, *bufs)
        with pytest.raises(OSError):  # not an open descriptor
            kernel.accumulate_file(n_fd, 0, False, 10_000, 0, False, 100, None, 10_000, None, *bufs)
        with pytest.raises(ValueError):  # buffers below two blocks
            kernel.accumulate_file(n_fd, 0, False, b_fd, 0, False, 100, None, 100, None, bytearray(100), bufs[1])
        with pytest.raises(BufferError):  # read-only buffer
            kernel.accumulate_file(n_fd, 0, False, b_fd, 0, False, 100, None, 100, None, bytes(1 << 16), bufs[1])
        with pytest.raises(ValueError):
            kernel.accumulate_file(n_fd, -1, False, b_fd, 0, False, 100, None, 100, None, *bufs)
        with pytest.raises(ValueError):
            kernel.accumulate_file(n_fd, 0, False, b_fd, 0, False, 100, None, 100, None, *bufs, -1)
        with pytest.raises(TypeError):
            kernel.accumulate_file(n_fd, 0, False, b_fd, 0, False, 100, None, 100, None, bufs[0])
    finally:
        for fd, _ in opened:
            os.close(fd)


def _kernel_compare(kernel: types.ModuleType, npu: TensorData, bench: TensorData,
                    chunk_elems: int = tensor_compare.DEFAULT_CHUNK_ELEMS,
                    excess_units: float | None = None) -> TensorMetrics:  # fmt: skip
    """compare_tensors where it runs the C twin with `kernel` (MSPROBE_NATIVE bound it), else that twin directly."""
    if tensor_compare._KERNEL is kernel:
        return compare_tensors(npu, bench, chunk_elems, excess_units)
    return tensor_compare._compare(npu, bench, chunk_elems, kernel, excess_units)


def test_compare_tensors_reads_mapped_files_with_the_same_results(kernel: types.ModuleType, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Memory-mapped tensors with a FileSpan go through accumulate_file: the metrics (and the root cause's
    count beyond a tolerance) equal those through the mapping, bit for bit; a file replaced since it was read,
    or one that cannot be read, goes through the mapping."""
    from msprobe_compare.load import tensor_files, tensors

    monkeypatch.setattr(tensor_files, "READ_WHOLE_MAX", 0)
    rng = np.random.default_rng(5)
    n = (rng.standard_normal((300, 701)) * 10).astype(np.float32)
    b = (n * (1 + np.float32(2e-3) * rng.standard_normal(n.shape))).astype(np.float32)
    b[0, :50] = 0.0
    n[3, 3] = b[3, 3] = np.nan
    calls: list[int] = []
    real = kernel.accumulate_file

    def counting(*args: object) -> object:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(kernel, "accumulate_file", counting)
    for kinds in ((BF16, BF16), ("float32", "float32"), (BF16, "float32")):
        paths = []
        for k, (values, kind) in enumerate(zip((n, b), kinds, strict=True)):
            data = _bf16(values) if kind == BF16 else values
            paths.append(tmp_path / f"{kind}{k}.npy")
            np.save(paths[-1], data)
        sides = [tensors.read_npy(p, p.name) for p in paths]
        sides = [TensorData(t.array, kind, t.source) for t, kind in zip(sides, kinds, strict=True)]
        assert all(t.source is not None for t in sides)
        mapped = [TensorData(t.array, t.dtype_name) for t in sides]
        for chunk in (1 << 17, 5000):
            calls.clear()
            got = _kernel_compare(kernel, *sides, chunk_elems=chunk, excess_units=2.0)
            assert calls == [1]
            want = _kernel_compare(kernel, *mapped, chunk_elems=chunk, excess_units=2.0)
            assert calls == [1]
            assert repr(got) == repr(want) and (got.beyond, got.beyond_tol) == (want.beyond, want.beyond_tol)
        # the bench file replaced after reading (another inode): read through the mapping, same metrics
        replaced = paths[1].with_suffix(".new")
        shutil.copyfile(paths[1], replaced)
        os.replace(replaced, paths[1])
        calls.clear()
        again = _kernel_compare(kernel, *sides, excess_units=2.0)
        assert calls == [] and repr(again) == repr(_kernel_compare(kernel, *mapped, excess_units=2.0))
    b[7, 7] = np.nan  # one side only: N/A either way
    np.save(tmp_path / "m.npy", b)
    nan_side = tensors.read_npy(tmp_path / "m.npy", "m.npy")
    first = tensors.read_npy(tmp_path / "float320.npy", "x")
    assert repr(_kernel_compare(kernel, first, nan_side)) == repr(
        _kernel_compare(kernel, TensorData(first.array, "float32"), TensorData(nan_side.array, "float32"))
    )
    assert _kernel_compare(kernel, first, nan_side).messages == (tensor_metrics.TensorMsg.NAN_INF_MISMATCH,)


def test_uncached_files_are_read_ahead_with_the_same_results(kernel: types.ModuleType, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A mapped tensor whose pages are not all in the page cache is read with read-ahead requests: the same
    metrics. (Where the file system cannot drop the pages, tmpfs for one, both runs are the cached case.)"""
    from msprobe_compare.load import tensors

    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise to drop the pages")
    rng = np.random.default_rng(8)
    n = rng.standard_normal(3_000_000).astype(np.float32)  # 12 MB: more than one read-ahead window
    b = (n * np.float32(1.001)).astype(np.float32)
    paths = [tmp_path / "n.npy", tmp_path / "b.npy"]
    for path, values in zip(paths, (n, b), strict=True):
        np.save(path, values)
    sides = [tensors.read_npy(p, p.name) for p in paths]
    assert not tensor_io.uncached(np.zeros(4 << 20, np.float32))  # not a mapping: unknown, False
    advised: list[int] = []
    real = kernel.accumulate_file
    monkeypatch.setattr(kernel, "accumulate_file", lambda *args: advised.append(args[-1]) or real(*args))
    for path in paths:
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    cold = tensor_io.uncached(np.asarray(sides[0].array)) or tensor_io.uncached(np.asarray(sides[1].array))
    got = _kernel_compare(kernel, *sides)  # before anything maps the pages (mapped pages stay cached)
    assert advised == [tensor_io.ReadAhead.READ_AHEAD if cold else 0]
    want = _kernel_compare(kernel, *[TensorData(t.array, t.dtype_name) for t in sides])
    assert repr(got) == repr(want)
    advised.clear()
    assert repr(_kernel_compare(kernel, *sides)) == repr(want)
    assert advised == [0]  # all read now
