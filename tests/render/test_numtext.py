"""Number texts (render.numtext): repr's text of every float, from orjson's digits re-laid out or from repr."""

from __future__ import annotations

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_compare.render import numtext


def test_float_reprs_match_repr_on_hard_values():
    powers = 10.0 ** np.arange(-324, 309, dtype=np.float64)
    rng = np.random.default_rng(5)
    values = np.concatenate([
        powers, -powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf),
        [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
         1e-5, 1e-4, 9.999999999999999e-05, 1.0000000000000001e-05, 9999999999999998.0, 1e16, 0.1, 1.5, 100.0],
        rng.integers(0, 2**64, 50_000, dtype=np.uint64).view(np.float64),
        rng.uniform(1e-5, 1e-4, 5_000) * rng.choice([-1, 1], 5_000),
        rng.standard_normal(5_000).astype(np.float32).astype(np.float64),
    ])  # fmt: skip
    assert numtext.float_reprs(values) == [repr(float(x)) for x in values]
    for one in ([1e-7], [1e16], [1.5e-5], [np.nan], [-1e-5, 2.0], [2.0, 1e-5], [np.inf, 1e-7, 1.25e-5]):
        assert numtext.float_reprs(np.array(one)) == [repr(float(x)) for x in one]
    assert numtext.float_reprs(np.zeros(0)) == []


def test_orjson_digits_are_used_with_the_installed_release():
    # 3.8 to 3.13 all pass the checks once both exponent spellings are understood; the texts are checked above
    assert numtext.ORJSON_DIGITS, f"orjson {orjson.__version__}: the layout is not one celltext knows"
    values = np.array([1e16, 1.5e17, 3.4028234663852886e38, 1e-7, -2.5e-300, 1.5e-5, 5e-324, 2.0**53])
    assert numtext._numbers_orjson(values) == ",".join(map(repr, values.tolist())).encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=40))
def test_float_reprs_property(values):
    assert numtext.float_reprs(np.array(values, dtype=np.float64)) == [repr(float(x)) for x in values]
