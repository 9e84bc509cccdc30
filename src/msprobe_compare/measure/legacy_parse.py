"""The reference's lossy text -> float parse of statistics values.

The reference converts each statistic to text (``str(v)``, i.e. Python's
shortest round-trip repr) and parses it back with pandas 2.0.3
``to_numeric(..., errors='coerce')``.  That parser is not correctly rounded;
its behaviour, determined empirically against pandas 2.0.3, is:

1. Walk the mantissa's digit characters left to right (leading zeros such as
   the ``0`` of ``0.00123`` and trailing zeros such as ``1200.0`` count too).
   Only the first 17 digit characters are used; later ones are dropped
   (truncated, not rounded).  The kept digits are accumulated in double
   precision as ``acc = acc * 10 + d`` (each step rounded to float64).
2. The decimal exponent is ``I - K + e``: ``I`` the number of digit
   characters before the decimal point, ``K`` the number kept (<= 17) and
   ``e`` the value after ``e``/``E``.
3. The sign is applied, then ``acc`` is scaled by a correctly rounded
   double ``10**|x|``: multiplied for ``x > 0``, divided for ``-308 <= x < 0``,
   divided by ``10**(-308 - x)`` and then by ``1e308`` for ``x < -308``
   (0.0 below -616).  ``x > 308`` or an infinite result is a parse error,
   which ``errors='coerce'`` turns into NaN.

Texts without a decimal point (``str(4)`` -> ``'4'``) go through the same
parse: small integers are exact; an all-integer column comes back as int64
(exact) in the reference, which is outside this module's float64 contract.

``reference_parse`` is vectorised with numpy over a fixed-width byte matrix
of the reprs (the tests check it against scalar forms of these rules).
"""

from __future__ import annotations


from types import ModuleType
from typing import Any

import numpy as np

from msprobe_compare import floattext, native

MAX_DIGITS = 17

# Correctly rounded doubles 10**0 .. 10**308 (what the C literals 1e0..1e308 are).
_POW10 = np.array([float(f"1e{k}") for k in range(309)], dtype=np.float64)

_D0 = ord("0")
_DIGITS = "0123456789"
_DOT = ord(".")
_MINUS = ord("-")


_CHUNK = 1 << 14
_WIDTH = 26  # longest float repr is 24 bytes ('-2.2250738585072014e-308'); + NUL padding


_C: Any = native.built("_legacyparse")  # measure's C module (legacy_parse.py, stats.py)


def _py_reference_parse(values: np.ndarray, parsed_before: int = 0) -> np.ndarray:
    """float64 array -> float64 array: the value pandas 2.0.3 to_numeric(str(v)) yields for each v (NaN/inf unchanged).
    `parsed_before`: values the caller parsed already in earlier calls of the same job (a chunked caller's chunks
    count together towards paying for the C twin's check; `reference_parse_numpy` here)."""
    return reference_parse_numpy(values)


def _c_reference_parse(values: np.ndarray, parsed_before: int = 0) -> np.ndarray:
    """_py_reference_parse in C from orjson's text of the values (`_legacyparse.reference_parse_orjson`), once
    orjson's layout is checked to give the numpy path's values (once per process, and only for enough values to pay
    for the check: floattext.worth; else the Python twin, the same values)."""
    arr = np.asarray(values, dtype=np.float64)
    fast = _C if floattext.worth("_legacyparse", parsed_before + arr.size) else None
    if fast is not None and floattext.agrees("_legacyparse", lambda: _orjson_parse_agrees(fast)):
        finite = np.isfinite(arr)
        if finite.all():  # the common case (stat_diffs parses finite values only): no positions to take and put
            out = np.empty(arr.shape, dtype=np.float64)
            if out.size:
                fast.reference_parse_orjson(floattext.orjson_array(arr.reshape(-1)), out.reshape(-1))
            return out
        out = np.array(arr, dtype=np.float64)  # a C-ordered copy: non-finite values stay as they are
        flat = out.reshape(-1)
        fin = np.flatnonzero(finite.reshape(-1))
        if len(fin):
            # orjson writes the shortest round-trip digits (repr's) of a whole array fast; C re-lays them out
            parsed = np.empty(len(fin), dtype=np.float64)
            fast.reference_parse_orjson(floattext.orjson_array(flat[fin]), parsed)
            flat[fin] = parsed
        return out
    return reference_parse_numpy(arr)


reference_parse = native.twin("_legacyparse", _c_reference_parse, _py_reference_parse)


def _orjson_parse_agrees(fast: ModuleType) -> bool:
    """Whether the native parse of orjson's text gives the numpy path's values (from repr's texts) on
    floattext.hard_doubles(), bit for bit: else orjson's layout is not one the C code knows."""
    sample = floattext.hard_doubles()
    fin = np.ascontiguousarray(sample[np.isfinite(sample)])
    parsed = np.empty(len(fin), dtype=np.float64)
    fast.reference_parse_orjson(floattext.orjson_array(fin), parsed)
    expected = reference_parse_numpy(fin)
    nan = np.isnan(expected)
    same = parsed[~nan].view(np.int64) == expected[~nan].view(np.int64)  # signed zeros too
    return bool((np.isnan(parsed) == nan).all() and same.all())


def reference_parse_numpy(values: np.ndarray) -> np.ndarray:
    """`reference_parse` in numpy (the path without the native module)."""
    arr = np.asarray(values, dtype=np.float64)
    out = arr.copy()
    flat = out.reshape(-1)
    fin = np.flatnonzero(np.isfinite(flat))
    if fin.size == 0:
        return out
    # Python's repr is what the reference parses (pandas astype(str) of a float).
    # Chunked so the per-text work arrays stay cache-sized.
    for lo in range(0, fin.size, _CHUNK):
        idx = fin[lo : lo + _CHUNK]
        texts = np.array(list(map(float.__repr__, flat[idx].tolist())), dtype=f"S{_WIDTH}")
        flat[idx] = _parse_repr_texts(texts)
    return out


_K = np.arange(MAX_DIGITS)
_HORNER15 = _POW10[14::-1].copy()  # 1e14 .. 1e0
_DIGIT_VALUE = np.zeros(256)  # byte -> digit value, 0.0 for non-digits
_DIGIT_VALUE[_D0 : _D0 + 10] = np.arange(10)


def _parse_repr_texts(texts: np.ndarray) -> np.ndarray:
    """The parse above, vectorised over an ``S{_WIDTH}`` array of repr texts."""
    m = texts.size
    w = _WIDTH
    b = texts.view(np.uint8).reshape(m, w)  # NUL-padded ASCII
    neg = b[:, 0] == _MINUS
    length = np.count_nonzero(b, axis=1).astype(np.intp)  # repr texts hold no NUL (np.char: start-up speed)

    flat = b.reshape(-1)
    e_at = np.flatnonzero(flat == ord("e"))  # at most one per text
    e_row = e_at // w
    end = length.copy()  # end of the mantissa
    end[e_row] = e_at - e_row * w
    dot_at = np.flatnonzero(flat == _DOT)
    dot_row = dot_at // w
    has_dot = np.zeros(m, dtype=np.intp)
    has_dot[dot_row] = 1
    ineg = neg.astype(np.intp)
    ndig = end - ineg - has_dot  # digit characters in the mantissa
    int_digits = ndig.copy()
    int_digits[dot_row] = dot_at - dot_row * w - ineg[dot_row]
    kept = np.minimum(ndig, MAX_DIGITS)

    # The mantissa's digit characters, left-aligned: blank the exponent, drop
    # the '-' then the '.'; non-digits read as 0 (only beyond the kept digits).
    if e_at.size:
        blanked = flat.copy()
        for j in range(5):  # 'e', sign, up to 3 digits; all inside the row
            blanked[e_at + j] = 0
        b = blanked.reshape(m, w)
    a = np.where(neg[:, None], b[:, 1 : MAX_DIGITS + 2], b[:, : MAX_DIGITS + 1])
    a = np.where(_K >= int_digits[:, None], a[:, 1:], a[:, :-1])
    d = _DIGIT_VALUE[a]

    # acc = acc * 10 + d over the kept digits, in float64 as the reference does.
    # Prefixes of <= 15 digits are below 2**53, so that part is exact integer
    # arithmetic (one dot product); digits 16 and 17 are stepped in float64.
    acc = d[:, :15] @ _HORNER15  # kept digits followed by zeros: exact
    short = kept < 15
    acc[short] /= _POW10[15 - kept[short]]  # exact: drops the zero padding
    for j in (15, 16):
        acc = np.where(kept > j, acc * 10.0 + d[:, j], acc)
    acc[neg] *= -1.0

    x = int_digits - kept
    if e_at.size:
        ev = np.zeros(e_at.size, dtype=np.intp)
        pos = e_at + 1
        eneg = flat[pos] == _MINUS
        pos = pos + (eneg | (flat[pos] == ord("+")))
        going = np.ones(e_at.size, dtype=bool)
        for j in range(4):
            c = flat[np.minimum(pos + j, flat.size - 1)]
            going &= (c >= _D0) & (c <= _D0 + 9)
            ev = np.where(going, ev * 10 + (c.astype(np.intp) - _D0), ev)
        x[e_row] += np.where(eneg, -ev, ev)

    res = np.empty(m)
    with np.errstate(over="ignore", under="ignore"):
        up = x > 0
        res[up] = acc[up] * _POW10[np.minimum(x[up], 308)]
        mid = (x <= 0) & (x >= -308)
        res[mid] = acc[mid] / _POW10[-x[mid]]
        low = x < -308
        if low.any():
            xl = x[low]
            r = acc[low] / _POW10[np.clip(-308 - xl, 0, 308)] / _POW10[308]
            res[low] = np.where(xl < -616, 0.0, r)
    res[(x > 308) | np.isinf(res)] = np.nan
    return res
