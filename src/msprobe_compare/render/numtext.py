"""The texts of numbers, a whole float64 array at once: repr's text of each float (str of each int), as every
output format writes it.

orjson writes the shortest round-trip digits of a whole array in one call, the digits Python's repr chooses; where
its layout differs from repr's (exponents, whose spelling depends on orjson's release, and 1e-5 <= |x| < 1e-4) the
text is rewritten in a few vectorised splices. Both paths are checked once per process, when a block first has
enough numbers to pay for the check (`ORJSON_DIGITS`, `floattext.worth`); if orjson ever disagrees, repr writes
every number.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

import numpy as np

from msprobe_compare import floattext

INT_BULK_LIMIT = 1e16  # integers below this are written in bulk (orjson prints them as "D.0")


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(starts[k], starts[k] + lengths[k]) over k, vectorised."""
    total = int(lengths.sum())
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


class _Pieces:
    """A table of byte strings that splices insert, addressed by number."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.bytes = np.frombuffer(b"".join(pieces), dtype=np.uint8)
        self.length = np.array([len(p) for p in pieces], dtype=np.int64)
        self.at = np.cumsum(self.length) - self.length


_COMMA, _MINUS, _E = ord(","), ord("-"), ord("e")
# splice pieces of the layout fix
_PLUS_SIGN = ord("+")
_LAYOUT = _Pieces([b"", b".", b"e-05", b"+", b"0", b"+0", b"nan", b"inf", b"-inf"])
_CUT, _DOT, _E05, _PLUS, _ZERO, _PLUS_ZERO, _NAN, _INF, _NINF = range(9)


def _splice(arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, piece: np.ndarray, pieces: _Pieces) -> bytes:
    """`arr` (uint8) with each byte range [starts[k], ends[k]) replaced by piece number piece[k] of `pieces`.

    Ranges are sorted and do not overlap; an empty range inserts. Vectorised: one delete, one insert.
    """
    width = ends - starts
    kept, shift = arr, 0
    if width.any():
        cut = width > 0
        keep = np.ones(len(arr), dtype=bool)
        keep[_ranges(starts[cut], width[cut])] = False
        kept = arr[keep]
        shift = np.cumsum(width) - width  # bytes deleted before each range
    lengths = pieces.length[piece]
    flat = pieces.bytes[_ranges(pieces.at[piece], lengths)]
    return np.insert(kept, np.repeat(starts - shift, lengths), flat).tobytes()


_NEWLINE = ord("\n")
_SMALL_PREFIX = np.frombuffer(b"0.0000", dtype=np.uint8)


def _repr_layout(
    text: bytes, values: np.ndarray, odd: np.ndarray, ints: np.ndarray | None = None, numbers: np.ndarray | None = None
) -> bytes:  # fmt: skip
    """orjson's texts of `values` (separated by commas or newlines) in repr's layout where `odd`.

    The same digits either way; the layouts (floattext.py has a table): exponents are 1.5e16 or 1.5e+16 and 2e-7
    to orjson, 1.5e+16 and 2e-07 (a sign and two digits at least) to repr; 1e-5 <= |x| < 1e-4 is 0.0000ddd to
    orjson, d.dde-05 to repr; non-finite values are "null" to orjson. Where `ints` (integral values below 1e16),
    "D.0" becomes "D", as str(int). Only `numbers` (default: all) are numbers; the other texts stay as they are.
    """
    arr = np.frombuffer(text, dtype=np.uint8)
    n = len(arr)
    cut_s, cut_e, kinds = [], [], []  # splices as (start, end, piece) arrays, merged and sorted below
    with np.errstate(invalid="ignore"):
        a = np.abs(values)
        small = np.flatnonzero(odd & (a >= 1e-5) & (a < 1e-4))
        bad = np.flatnonzero(~np.isfinite(values) if numbers is None else ~np.isfinite(values) & numbers)
    int_at = np.flatnonzero(ints) if ints is not None else small[:0]
    if len(small) or len(bad) or len(int_at):  # where each text starts and ends
        seps = np.flatnonzero((arr == _COMMA) | (arr == _NEWLINE))
        starts = np.concatenate(([0], seps + 1))
        ends = np.concatenate((seps, [n]))
    if len(small):  # [-]0.0000dddd -> [-]d.ddde-05 (a text with an exponent is left to the next step)
        z = starts[small] + (arr[starts[small]] == _MINUS)
        plain = (z + 6 < ends[small]) & (arr[np.minimum(z[:, None] + np.arange(6), n - 1)] == _SMALL_PREFIX).all(1)
        z, end = z[plain], ends[small][plain]
        more = end - (z + 6) > 1
        cut_s += [z, z[more] + 7, end]
        cut_e += [z + 6, z[more] + 7, end]
        kinds += [np.full(len(z), _CUT), np.full(int(more.sum()), _DOT), np.full(len(z), _E05)]
    e_at = np.flatnonzero(arr == _E)
    if len(e_at):  # e16 -> e+16, e-7 -> e-07, e+16 stays
        after_e = arr[np.minimum(e_at + 1, n - 1)]
        signed = (after_e == _MINUS) | (after_e == _PLUS_SIGN)
        d0 = e_at + 1 + signed
        single = np.ones(len(e_at), dtype=bool)
        inside = d0 + 1 < n
        after = arr[d0[inside] + 1]
        single[inside] = (after == _COMMA) | (after == _NEWLINE)
        piece = np.where(signed, np.where(single, _ZERO, -1), np.where(single, _PLUS_ZERO, _PLUS))
        keep = piece >= 0
        cut_s.append(d0[keep])
        cut_e.append(d0[keep])
        kinds.append(piece[keep])
    if len(bad):  # null -> nan, inf, -inf
        v = values[bad]
        cut_s.append(starts[bad])
        cut_e.append(ends[bad])
        kinds.append(np.where(np.isnan(v), _NAN, np.where(v > 0, _INF, _NINF)))
    if len(int_at):  # D.0 -> D
        cut_s.append(ends[int_at] - 2)
        cut_e.append(ends[int_at])
        kinds.append(np.full(len(int_at), _CUT))
    if not cut_s:
        return text
    s = np.concatenate(cut_s).astype(np.int64)
    order = np.argsort(s, kind="stable")
    return _splice(arr, s[order], np.concatenate(cut_e).astype(np.int64)[order],
                   np.concatenate(kinds).astype(np.int64)[order], _LAYOUT)  # fmt: skip


def _odd(values: np.ndarray) -> np.ndarray:
    """Where repr writes an exponent (or nan/inf), and orjson's layout may differ."""
    with np.errstate(invalid="ignore"):
        a = np.abs(values)
        return ~((a >= 1e-4) & (a < 1e16)) & (values != 0)


def _numbers_orjson(values: np.ndarray, numbers: np.ndarray | None = None, ints: np.ndarray | None = None) -> bytes:
    """`_numbers_python` from orjson's text of the whole array, re-laid out in a few vectorised splices."""
    text = floattext.orjson_array(values)[1:-1]
    odd = _odd(values) if numbers is None else _odd(values) & numbers
    if odd.any() or ints is not None:
        text = _repr_layout(text, values, odd, ints, numbers)
    return text


def _numbers_python(values: np.ndarray, numbers: np.ndarray | None = None, ints: np.ndarray | None = None) -> bytes:
    """The texts of a float64 array joined by commas: repr(float(x)), str(int(x)) where `ints`, "null" outside
    `numbers` (default: all are numbers). Exact, one repr per value."""
    texts = list(map(float.__repr__, np.asarray(values, dtype=np.float64).tolist()))
    if numbers is not None:
        for i in np.flatnonzero(~numbers).tolist():
            texts[i] = "null"
    if ints is not None:
        for i, x in zip(np.flatnonzero(ints).tolist(), values[ints].tolist()):
            texts[i] = str(int(x))
    return ",".join(texts).encode("ascii")


def _float_reprs_orjson(values: np.ndarray) -> list[str]:
    v = np.ascontiguousarray(values, dtype=np.float64)
    return _numbers_orjson(v).decode("ascii").split(",") if len(v) else []


def _float_reprs_python(values: np.ndarray) -> list[str]:
    return list(map(repr, np.asarray(values, dtype=np.float64).tolist()))


def _orjson_agrees() -> bool:
    """Whether the orjson paths give the exact paths' texts on floattext.hard_doubles(): all numbers, and numbers
    among placeholders with integral values as ints (the two ways the writers use them)."""
    sample = floattext.hard_doubles().copy()
    if _float_reprs_orjson(sample) != _float_reprs_python(sample):
        return False
    numbers = np.isfinite(sample) & (np.arange(len(sample)) % 7 != 3)
    sample[~numbers] = np.nan  # placeholders, as _Format.cells puts them
    with np.errstate(invalid="ignore"):
        ints = numbers & (sample == np.trunc(sample)) & (np.abs(sample) < INT_BULK_LIMIT)
    sample[ints & (sample == 0)] = 0.0
    return _numbers_orjson(sample, numbers, ints) == _numbers_python(sample, numbers, ints)


def _orjson_digits() -> bool:
    """ORJSON_DIGITS: whether the orjson paths are in use (else repr's), checked on first use, not at import (start-up
    speed); a value a test sets is kept."""
    verdict = globals().get("ORJSON_DIGITS")
    if verdict is None:
        verdict = globals()["ORJSON_DIGITS"] = floattext.agrees("numtext", _orjson_agrees)
    return verdict


def __getattr__(name: str) -> Any:
    if name == "ORJSON_DIGITS":
        return _orjson_digits()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _bulk(n: int) -> bool:
    """Whether n values go through orjson's digits (a small block takes repr's: the same texts, no check run)."""
    return floattext.worth("numtext", n) and _orjson_digits()


def number_texts(values: np.ndarray, numbers: np.ndarray | None = None, ints: np.ndarray | None = None) -> bytes:
    """The texts of a float64 array joined by commas: repr(float(x)), str(int(x)) where `ints` (integral values
    below 1e16), "null" outside `numbers` (default: all); from orjson's digits while ORJSON_DIGITS, else by repr."""
    return (_numbers_orjson if _bulk(len(values)) else _numbers_python)(values, numbers, ints)


def float_reprs(values: np.ndarray) -> list[str]:
    """repr(float(x)) of each element of a float array."""
    return (_float_reprs_orjson if _bulk(len(values)) else _float_reprs_python)(values)
