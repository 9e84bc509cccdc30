"""BLAS pinning for the real-data kernel (measure/blas.py): pin and restore, counting across threads, and the
same metrics bit for bit however compare_tensors is called (directly, in threads, in a forked process)."""

from __future__ import annotations

import multiprocessing
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from msprobe_compare.load.tensor_data import BF16, TensorData
from msprobe_compare.measure import blas
from msprobe_compare.measure.tensor_compare import compare_tensors
from msprobe_compare.measure.tensor_metrics import TensorMetrics


def _pinned_now() -> bool:
    """Whether numpy's BLAS is pinned to one thread now (the state `single_threaded_blas` keeps)."""
    return blas._pinned


CHUNK = 1 << 15  # several chunks, each long enough for OpenBLAS to split a ddot over its threads


def _pairs() -> list[tuple[TensorData, TensorData]]:
    rng = np.random.default_rng(11)
    base = rng.standard_normal(5 * CHUNK + 123).astype(np.float32)
    bench = base * (1 + np.float32(3e-3) * rng.standard_normal(base.size).astype(np.float32))
    bench[::97] = 0.0

    def bf16(x: np.ndarray) -> np.ndarray:
        return (x.view(np.uint32) >> 16).astype(np.uint16)

    return [
        (TensorData(base, "float32"), TensorData(bench, "float32")),
        (TensorData(bf16(base), BF16), TensorData(bf16(bench), BF16)),
        (TensorData(base.astype(np.float64), "float64"), TensorData(bench.astype(np.float64), "float64")),
    ]


def _all(pairs: list[tuple[TensorData, TensorData]]) -> list[TensorMetrics]:
    return [compare_tensors(n, b, chunk_elems=CHUNK) for n, b in pairs]


def _blas_threads() -> list[int]:
    controller = blas._blas_controller()
    return [] if controller is False else [info["num_threads"] for info in controller.info()]


def test_pin_is_counted_and_restored() -> None:
    before = _blas_threads()
    with blas.single_threaded_blas() as outer:
        assert _pinned_now() == outer
        if outer:
            assert _blas_threads() and all(n == 1 for n in _blas_threads())
        with blas.single_threaded_blas() as inner:
            assert inner == outer
        assert _pinned_now() == outer  # still pinned: the outer user has not left
        done = threading.Event()

        def other_thread() -> None:
            with blas.single_threaded_blas():
                pass
            done.set()

        threading.Thread(target=other_thread).start()
        assert done.wait(10)
        assert _pinned_now() == outer
    assert not _pinned_now()
    assert _blas_threads() == before


def test_fast_dot_is_used_when_threadpoolctl_controls_numpys_blas() -> None:
    pytest.importorskip("threadpoolctl")
    name = blas._numpy_blas_name()
    if not any(lib in name for lib in ("openblas", "mkl", "blis")):
        pytest.skip(f"numpy's BLAS is {name or 'unknown'}")
    with blas.single_threaded_blas() as pinned:
        assert pinned


def _in_child(conn: Any) -> None:
    conn.send(_all(_pairs()))
    conn.close()


def test_metrics_are_bit_identical_however_called() -> None:
    pairs = _pairs()
    direct = _all(pairs)
    with blas.single_threaded_blas():
        nested = _all(pairs)
        with ThreadPoolExecutor(max_workers=3) as pool:
            threaded = list(pool.map(lambda _: _all(pairs), range(6)))
        if sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            parent, child = ctx.Pipe(duplex=False)
            process = ctx.Process(target=_in_child, args=(child,))
            process.start()
            forked = [parent.recv()]
            process.join(60)
        else:
            forked = []
    for other in (nested, *threaded, *forked):
        assert other == direct  # Metric equality is exact (NaN equal to NaN)


def test_einsum_fallback_agrees_within_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = _pairs()
    fast = _all(pairs)
    monkeypatch.setattr(blas, "_controller", False)  # as without threadpoolctl or with an unknown BLAS
    with blas.single_threaded_blas() as pinned:
        assert not pinned
        slow = _all(pairs)
    assert _all(pairs) == slow  # deterministic too
    for a, b in zip(fast, slow, strict=True):
        assert a.messages == b.messages
        for field in ("cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth", "five_thousandths"):
            x, y = getattr(a, field), getattr(b, field)
            assert x.state is y.state
            assert x.value == pytest.approx(y.value, rel=1e-12, abs=1e-12), field
