"""Deterministic float64 dot products for the real-data kernel.

`np.dot` runs BLAS `ddot`, about 2 to 4 times faster than `np.einsum("i,i->")`. OpenBLAS splits a long `ddot`
over its threads, and the sum then depends on the thread count (measured: the last bits differ between 1 and 2
threads). Inside worker pools these threads also oversubscribe the CPU. So the fast path is used only while
numpy's BLAS is pinned to one thread (threadpoolctl); otherwise the kernel falls back to the single-threaded
einsum (`tensor_compare._blas_dot` / `_einsum_dot`).

`single_threaded_blas()` pins for its duration. It is re-entrant and counts its users across threads: the pin is
set by the first one and undone by the last one, so concurrent `compare_tensors` calls never see it change.
Forked workers inherit both the pin and the count. The choice of dot function only depends on whether pinning is
possible in this environment (threadpoolctl installed and it controls numpy's BLAS), never on the -j value, the
pool kind or the scheduling, so the same inputs give bit-identical metrics however rows are spread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["single_threaded_blas"]

_lock = threading.Lock()
_depth = 0  # callers inside single_threaded_blas(), all threads together
_limiter: Any = None  # threadpoolctl limiter to undo when the last caller leaves
_pinned = False  # numpy's BLAS runs on one thread now: np.dot is deterministic
_controller: Any = None  # threadpoolctl controller of numpy's BLAS; False when it cannot be controlled


def _numpy_blas_name() -> str:
    """numpy's BLAS as named in its build configuration ("scipy-openblas", "mkl", "accelerate"...), "" if unknown."""
    try:
        config = np.show_config(mode="dicts")  # numpy >= 1.26
        return str(config["Build Dependencies"]["blas"]["name"]).lower()
    except Exception:  # older numpy: no machine-readable config
        return ""


def _blas_controller() -> Any:
    """A threadpoolctl controller of the BLAS libraries numpy can be using, or False (cached)."""
    global _controller
    if _controller is None:
        _controller = False
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            return _controller
        try:
            blas = ThreadpoolController().select(user_api="blas")
        except Exception:  # threadpoolctl could not inspect this process
            return _controller
        apis = {c.internal_api for c in blas.lib_controllers}
        name = _numpy_blas_name()
        # numpy's own BLAS must be among those controlled (not e.g. Accelerate next to another package's OpenBLAS).
        if apis and (not name or any(api in name for api in apis)):
            _controller = blas
    return _controller


def _pin() -> tuple[bool, Any]:
    controller = _blas_controller()
    if controller is False:
        return False, None
    try:
        limiter = controller.limit(limits=1)
        pinned = all(info.get("num_threads") == 1 for info in controller.info())
    except Exception:
        return False, None
    if not pinned:
        limiter.restore_original_limits()
        return False, None
    return True, limiter


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[bool]:
    """Pin numpy's BLAS to one thread while inside; yields whether it is pinned (dot products may use BLAS)."""
    global _depth, _limiter, _pinned
    with _lock:
        if _depth == 0:
            _pinned, _limiter = _pin()
        _depth += 1
        pinned = _pinned
    try:
        yield pinned
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                limiter, _limiter, _pinned = _limiter, None, False
                if limiter is not None:
                    limiter.restore_original_limits()
