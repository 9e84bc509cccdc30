"""Test oracles: slow, obvious implementations the project's fast paths are checked against.

They lived in src/ although only the tests use them: a whole-document dump.json read (`read_dump_json`), the
scalar forms of the reference's lossy number parse (`reference_parse_text`, `reference_parse_one`; the project
has only the vectorised and native ones) and the per-cell columns of a result table (`table_columns`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import DumpFile, check_dump_header, read_json
from msprobe_compare.measure.legacy_parse import MAX_DIGITS
from msprobe_compare.model import CompareOutcome
from msprobe_compare.render import table


def read_dump_json(path: Path) -> DumpFile:
    """Read a whole dump.json into memory and check `task` and `data` (spec §2.2), as `stream.open_dump` does."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("is not a JSON object; expected a dump.json written by msprobe", path)
    data = doc.get("data")
    task, level, framework = check_dump_header(path, doc, type(data) if "data" in doc else None)
    assert isinstance(data, dict)  # check_dump_header refused anything else
    return DumpFile(path=path, task=task, level=level, framework=framework, data=data)


def table_columns(outcome: CompareOutcome, style: table.Style) -> list[list[Any]]:
    """The cell values of each column of `table.header(outcome)`, one list per column, in NPU row order."""
    return [c.cells() for c in table.column_data(outcome, style)]


# -- the reference's number parse, one value at a time (measure/legacy_parse.py describes the rules) -------------
_D0 = ord("0")
_DIGITS = "0123456789"
_POW10_LIST = [float(f"1e{k}") for k in range(309)]  # correctly rounded doubles 10**0 .. 10**308


def _scale(acc: float, exponent: int) -> float:
    if exponent > 308:
        return math.nan
    if exponent > 0:
        r = acc * _POW10_LIST[exponent]
    elif exponent < -308:
        if exponent < -616:
            return 0.0
        r = acc / _POW10_LIST[-308 - exponent] / _POW10_LIST[308]
    else:
        r = acc / _POW10_LIST[-exponent]
    return math.nan if math.isinf(r) else r


def reference_parse_text(text: str) -> float:
    """The float pandas 2.0.3 ``to_numeric(errors='coerce')`` gives for ``text``.

    Covers the texts Python's ``str`` of a float or an int produces (plus
    ``E``, a ``+`` sign and surrounding blanks); anything else is NaN.
    """
    s = text.strip()
    low = s.lower()
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return math.inf
    if low in ("-inf", "-infinity"):
        return -math.inf
    i, n = 0, len(s)
    negative = False
    if i < n and s[i] in "+-":
        negative = s[i] == "-"
        i += 1
    acc = 0.0
    ndig = 0  # digit characters seen in the mantissa
    kept = 0
    int_digits = 0
    while i < n and s[i] in _DIGITS:
        if kept < MAX_DIGITS:
            acc = acc * 10.0 + (ord(s[i]) - _D0)
            kept += 1
        ndig += 1
        int_digits += 1
        i += 1
    if i < n and s[i] == ".":
        i += 1
        while i < n and s[i] in _DIGITS:
            if kept < MAX_DIGITS:
                acc = acc * 10.0 + (ord(s[i]) - _D0)
                kept += 1
            ndig += 1
            i += 1
    if ndig == 0:
        return math.nan
    exp10 = 0
    if i < n and s[i] in "eE":
        j = i + 1
        eneg = False
        if j < n and s[j] in "+-":
            eneg = s[j] == "-"
            j += 1
        k = j
        while j < n and s[j] in _DIGITS:
            j += 1
        if j > k:  # 'e' without digits is left unconsumed -> trailing junk
            exp10 = int(s[k:j])
            exp10 = -exp10 if eneg else exp10
            i = j
    if i != n:
        return math.nan
    if negative:
        acc = -acc
    return _scale(acc, int_digits - kept + exp10)


def _parse_repr(s: str) -> float:
    """`reference_parse_text` for Python's own float/int texts ([-]d+[.d+][e[+-]d+])."""
    mant, _, exp = s.partition("e")
    negative = mant[0] == "-"
    if negative:
        mant = mant[1:]
    int_part, _, frac = mant.partition(".")
    digits = (int_part + frac)[:MAX_DIGITS]
    if len(digits) <= 15:
        acc = float(int(digits))  # every prefix < 2**53: accumulation is exact
    else:
        acc = float(int(digits[:15]))
        for c in digits[15:]:
            acc = acc * 10.0 + (ord(c) - _D0)
    if negative:
        acc = -acc
    return _scale(acc, len(int_part) - len(digits) + (int(exp) if exp else 0))


def reference_parse_one(v: float) -> float:
    """`legacy_parse.reference_parse` for one value (a Python int is parsed from ``str(v)`` too)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return _parse_repr(str(int(v)))
    v = float(v)
    if v - v != 0.0:  # NaN / inf pass through
        return v
    return _parse_repr(float.__repr__(v))
