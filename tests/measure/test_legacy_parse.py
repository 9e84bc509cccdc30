"""measure.legacy_parse: the reference's lossy str -> float parse (pandas 2.0.3 to_numeric).

The bit-for-bit check against pandas itself over >2M values lives outside the suite
(it needs the reference's pandas); here are pairs observed from that run, plus properties.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.native_helpers import native_module
from msprobe_compare.measure.legacy_parse import (
    reference_parse,
    reference_parse_numpy,
)
from oracles import reference_parse_one, reference_parse_text

# (value, pd.to_numeric(pd.Series([value]).astype(str), errors="coerce")) as observed from
# pandas 2.0.3 (numpy 1.26.4) to_numeric; not computed by this project.
OBSERVED = [
    (-0.0015122282784432173, -0.0015122282784432),
    (-0.0015121945179998875, -0.0015121945179998),
    (2.0379083566675815e-41, 2.0379083566675812e-41),
    (9606.465588459401, 9606.4655884594),
    (-3.2026976626298165e-09, -3.202697662629816e-09),
    (28246.084292350122, 28246.08429235012),
    (-0.0015888640175362255, -0.0015888640175362),
    (-2.5872790455361863e-33, -2.5872790455361866e-33),
    (-2.049383289320638e-166, -2.0493832893206382e-166),
    (-1.3707245312369241e-76, -1.370724531236924e-76),
    (2.1340253023037217e-308, 2.134025302303721e-308),
    (-2.7920203072933786e224, -2.792020307293378e224),
    (0.21421098428771512, 0.2142109842877151),
    (7.960483015624829e-08, 7.96048301562483e-08),
    (0.37344000000000005, 0.37344),
    (-6.034601816349086e-212, -6.034601816349085e-212),
    (-2.012968339650155e77, -2.0129683396501551e77),
    (-1.0435580444731646e170, -1.0435580444731647e170),
    (0.08565077112849595, 0.0856507711284959),
    (1.2962051320386159e19, 1.296205132038616e19),
    (1.7930081324203733e-37, 1.7930081324203731e-37),
    (-0.06717181205749512, -0.0671718120574951),
    (3.6592569145881093e27, 3.659256914588109e27),
    (-121.78133120933549, -121.78133120933548),
    (0.010392240468989039, 0.010392240468989),
    (1.0258957164664604e52, 1.0258957164664605e52),
    (-0.29180363585590796, -0.2918036358559079),
    (-0.00046518522971642336, -0.0004651852297164),
    (-1.0439106994315576e-89, -1.0439106994315577e-89),
    (2.766393515191511e-23, 2.7663935151915113e-23),
    (0.0010185388105792845, 0.0010185388105792),
    (-1.8390751463633733e-34, -1.839075146363373e-34),
    (128368595.59717317, 128368595.59717315),
    (0.26087343799216406, 0.260873437992164),
    (0.30855000000000005, 0.30855),
    (0.12425866837177611, 0.1242586683717761),
    (3.4028234663852886e38, 3.402823466385289e38),  # float32 max
    (0.30000000000000004, 0.3),
    (123456789.12345679, 123456789.1234568),
    (0.00012345678901234567, 0.0001234567890123),
    (0.00010049999999999999, 0.0001004999999999),  # worst relative change seen (9.9e-13)
    # unchanged by the parse
    (-8.193706781566752e17, -8.193706781566752e17),
    (1.0290260203033438e-18, 1.0290260203033438e-18),
    (14.421875, 14.421875),
    (-3.746547855413293e30, -3.746547855413293e30),
    (9.810351190493062e98, 9.810351190493062e98),
    (1.3443619282783085e-150, 1.3443619282783085e-150),
    (0.5, 0.5),
    (1.25, 1.25),
    (4.0, 4.0),
    (-0.0, -0.0),
    (1e16, 1e16),
    (1e15, 1e15),
    (1.5e-05, 1.5e-05),
    (-3.4e38, -3.4e38),
    (5e-324, 5e-324),
    (2.2250738585072014e-308, 2.2250738585072014e-308),
    (1.7976931348623157e308, 1.7976931348623157e308),
    (0.1, 0.1),
    (1234567890123456.8, 1234567890123456.8),
    (9007199254740992.0, 9007199254740992.0),
]

# Texts (ints and odd spellings) as observed from pandas 2.0.3 to_numeric(errors="coerce"),
# in columns that also held a float (an all-int column comes back as int64).
OBSERVED_TEXT = [
    ("4", 4.0),
    ("-17", -17.0),
    ("12345678901234567891", 1.2345678901234567e19),
    ("9007199254740993", 9007199254740992.0),
    ("00000000000000001.5", 1.0),
    ("0.12345678901234567", 0.1234567890123456),
    ("12345678901234567.0", 1.2345678901234568e16),
    ("1.5E+3", 1500.0),
    (" 1.5", 1.5),
    ("1.5 ", 1.5),
    ("1e309", math.nan),
    ("9e308", math.nan),
    ("1.8e308", math.nan),
    ("-1e-700", 0.0),
    ("1e-400", 0.0),
    ("1e", math.nan),
    ("N/A", math.nan),
    ("nan", math.nan),
    ("inf", math.inf),
    ("-inf", -math.inf),
]


def bits(x: float) -> int:
    return int(np.float64(x).view(np.int64))


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or bits(a) == bits(b)


@pytest.mark.parametrize(("value", "expected"), OBSERVED)
def test_observed_pairs_scalar(value, expected):
    assert same(reference_parse_one(value), expected)


def test_observed_pairs_vectorised():
    values = np.array([v for v, _ in OBSERVED])
    expected = np.array([e for _, e in OBSERVED])
    got = reference_parse(values)
    assert got.dtype == np.float64
    assert np.array_equal(got.view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize(("text", "expected"), OBSERVED_TEXT)
def test_observed_texts(text, expected):
    assert same(reference_parse_text(text), expected)


def test_python_ints():
    assert same(reference_parse_one(4), 4.0)
    assert same(reference_parse_one(-17), -17.0)
    assert same(reference_parse_one(12345678901234567891), 1.2345678901234567e19)
    assert same(reference_parse_one(9007199254740993), 9007199254740992.0)


def test_mean_diff_example():
    # Mean diff the reference reports for these two means; exact subtraction gives
    # -3.3760443329811096e-08.
    npu, bench = -0.0015122282784432173, -0.0015121945179998875
    assert npu - bench == -3.3760443329811096e-08
    assert reference_parse_one(npu) - reference_parse_one(bench) == -3.3760443399850557e-08
    parsed = reference_parse(np.array([npu, bench]))
    assert parsed[0] - parsed[1] == -3.3760443399850557e-08


def test_non_finite_pass_through_and_shape():
    values = np.array([[np.nan, np.inf], [-np.inf, 0.30000000000000004]])
    got = reference_parse(values)
    assert got.shape == (2, 2)
    assert np.isnan(got[0, 0]) and got[0, 1] == np.inf and got[1, 0] == -np.inf
    assert got[1, 1] == 0.3
    assert values[1, 1] == 0.30000000000000004  # input untouched
    assert reference_parse(np.array([])).shape == (0,)
    assert reference_parse(np.array([np.nan])).shape == (1,)
    assert math.isnan(reference_parse_one(math.nan))
    assert reference_parse_one(-math.inf) == -math.inf


finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=400, deadline=None)
@given(st.lists(finite, min_size=1, max_size=50))
def test_vectorised_matches_scalar_and_text(values):
    got = reference_parse(np.array(values))
    for v, g in zip(values, got.tolist()):
        assert same(g, reference_parse_one(v))
        assert same(g, reference_parse_text(str(v)))


@settings(max_examples=1000, deadline=None)
@given(finite)
def test_close_to_input(v):
    r = reference_parse_one(v)
    a = abs(v)
    if a < 2.2250738585072014e-308:  # subnormal: one subnormal step at most
        assert abs(r - v) <= 5e-324
        return
    # 17 digit characters are kept; the '0.000' of values in [1e-4, 1e-3) takes 4 of them,
    # leaving 13 significant digits (observed up to 9.9e-13 relative, see OBSERVED).
    bound = 1e-12 if 1e-4 <= a < 1e-3 else 1e-13
    assert abs(r - v) <= bound * a
    assert math.copysign(1.0, r) == math.copysign(1.0, v)


@settings(max_examples=1000, deadline=None)
@given(st.integers(-(10**6), 10**6), st.integers(-8, 8))
def test_short_decimals_exact(mantissa, exp10):
    v = float(f"{mantissa}e{exp10}")
    assert same(reference_parse_one(v), v)
    assert same(float(reference_parse(np.array([v]))[0]), v)


@pytest.mark.parametrize("v", [0.5, 1.25, 4.0, 0.1, 100.0, -2.75, 1e-05, 3.0e20, 65504.0, 0.0])
def test_short_decimals_examples(v):
    assert same(reference_parse_one(v), v)


# -- the native twin (_legacyparse.c) ------------------------------------------------------------------------------
def _native_or_skip():  # type: ignore[no-untyped-def]
    return native_module("_legacyparse")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=60))
def test_native_is_bit_identical_to_numpy(values):
    _native_or_skip()
    arr = np.array(values, dtype=np.float64)
    got = reference_parse(arr)
    want = reference_parse_numpy(arr)
    assert got.tobytes() == want.tobytes() or all(same(a, b) for a, b in zip(got.tolist(), want.tolist()))


def test_native_on_many_values_and_shapes():
    _native_or_skip()
    rng = np.random.default_rng(11)
    values = rng.standard_normal(200_000) * 10.0 ** rng.integers(-320, 308, 200_000)
    values[::97] = 0.0
    values[1::89] = -0.0
    values[2::83] = np.nan
    values = np.concatenate([values, [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e-5, 0.1]])
    want = reference_parse_numpy(values)
    got = reference_parse(values)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)].view(np.int64), want[~np.isnan(want)].view(np.int64))
    grid = values[:200_000].reshape(500, 400)[:, ::3]  # not contiguous, 2-D
    assert reference_parse(grid).shape == grid.shape
    assert np.array_equal(reference_parse(grid), reference_parse_numpy(grid), equal_nan=True)


def test_native_on_finite_values_only():
    """All finite (what stat_diffs hands over): parsed straight into the result; 16 and 17 digits, few digits."""
    _native_or_skip()
    rng = np.random.default_rng(5)
    values = rng.standard_normal(100_000) * 10.0 ** rng.integers(-300, 300, 100_000)
    values[::7] = np.round(values[::7], 3)  # short mantissas: the integer accumulation alone
    values[1::11] = 1.0 + rng.integers(1, 1 << 52, len(values[1::11])) * 2.0**-52  # 16-17 digits near 1
    values = np.concatenate([values, [1e-5, 1.2345e-5, -9.999e-5, 123456789012345.6, 1234567890123456.7, 5e-324]])
    want = reference_parse_numpy(values)
    assert reference_parse(values).view(np.int64).tolist() == want.view(np.int64).tolist()
    grid = values[:90_000].reshape(300, 300)[:, ::2]  # not contiguous, 2-D
    assert reference_parse(grid).view(np.int64).tolist() == reference_parse_numpy(grid).view(np.int64).tolist()
    assert reference_parse(np.empty(0)).shape == (0,)
