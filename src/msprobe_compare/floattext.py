"""The shortest round-trip digits of whole float64 arrays, from orjson, and the checks the fast paths run on them.

Python's repr writes the shortest digits that read back as the same double; orjson writes the same digits for a
whole array in one call, which is far faster than repr per value. Its layout, though, depends on the release
(measured on 3.8.3, 3.9.15, 3.10.18, 3.11.9, 3.12.0, 3.13.0):

=================  ===============  ===============  ==========
value              orjson <= 3.10    orjson >= 3.11   repr
=================  ===============  ===============  ==========
1e16, 1.5e17       1e16, 1.5e17     1e+16, 1.5e+17   1e+16, 1.5e+17
1e-7, -2.5e-300    1e-7, -2.5e-300  (the same)       1e-07, -2.5e-300
1.5e-5             0.000015         (the same)       1.5e-05
1e15, 2.0          1000000000000000.0, 2.0 (all)     (the same)
nan, inf           null             null             nan, inf
=================  ===============  ===============  ==========

Subnormals (5e-324, 1e-310) are written as repr writes them, with a negative exponent. The fast paths
(render/numtext.py, _csvrows.c, _legacyparse.c) rewrite either layout into repr's, and each checks its own
whole result on `hard_doubles()` against an exact path once per process (`agrees`): if a release writes anything
else, that path falls back to the exact one (repr) and the output stays the same, only slower. A check costs
about as much as the exact path on its sample, so a process whose work is smaller than the sample takes the exact
path without checking (`worth`): a small compare starts faster and writes the same bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import orjson

_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def orjson_array(values: np.ndarray) -> bytes:
    """orjson's text of a 1-d float64 array: "[a,b,...]", null for non-finite values."""
    return orjson.dumps(np.ascontiguousarray(values, dtype=np.float64), option=_NUMPY)


@functools.cache
def hard_doubles() -> np.ndarray:
    """A read-only sample of doubles on which layouts differ: every exponent, subnormals, signed zeros, non-finite
    values, integers around 2**53 and 1e16, the bounds 1e-5, 1e-4 and 1e16 of repr's plain layout and their
    neighbours, float32 values and integral values of every size below 1e16."""
    with np.errstate(over="ignore"):  # nextafter(max, inf) is inf, wanted too
        rng = np.random.default_rng(12345)
        bits = rng.integers(-(2**63), 2**63 - 1, 4096, dtype=np.int64).view(np.float64)
        powers = 10.0 ** np.arange(-325, 309, dtype=np.float64)
        bounds = np.array([1e-5, 1e-4, 1e15, 1e16, 1e17, 1e20, 1e21, 1e22, 2.0**53, 2.0**63, 2.0**64, 5e-324,
                           2.2250738585072014e-308, 1.7976931348623157e308, 3.4028234663852886e38])  # fmt: skip
        near = np.concatenate([bounds + k for k in (-2.0, -1.0, 1.0, 2.0)])
        floats32 = rng.standard_normal(4096).astype(np.float32).astype(np.float64)
        floats32 *= 10.0 ** rng.integers(-12, 20, 4096)
        integral = np.trunc(rng.uniform(-1, 1, 2048) * 10.0 ** rng.integers(0, 17, 2048))
        sample = np.concatenate([
            bits, powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf), bounds, np.nextafter(bounds, 0),
            np.nextafter(bounds, np.inf), near, 2.0**53 + np.arange(-8, 9), 1e16 + np.arange(-8, 9) * 2,
            rng.uniform(1e-5, 1e-4, 1024), floats32, integral, np.arange(1, 1025) * 5e-324,
            [0.0, -0.0, 1.0, -1.0, 0.1, 1.5, 100.0, 9999999999999998.0, np.inf, -np.inf, np.nan],
        ])  # fmt: skip
    sample = np.concatenate([sample, -sample])
    sample.flags.writeable = False
    return sample


_VERDICTS: dict[str, bool] = {}
BULK_MIN = 28680  # len(hard_doubles()): below this many values the exact path costs less than the check


def worth(name: str, n: int) -> bool:
    """Whether the fast path `name` should serve `n` values: when its check has run already, or when `n` is at
    least the check's own sample (start-up speed: a small run never pays for the check)."""
    return n >= BULK_MIN or name in _VERDICTS


def agrees(name: str, check: Callable[[], bool]) -> bool:
    """`check()` (a fast path's result equals the exact path's on `hard_doubles()`), run once per process and
    name; an exception counts as a disagreement."""
    if name not in _VERDICTS:
        try:
            _VERDICTS[name] = bool(check())
        except Exception:  # any failure of the fast path means: do not use it
            _VERDICTS[name] = False
    return _VERDICTS[name]
