"""Every float cell of every format (csv, JSON lines, xlsx cell XML) is Python's repr of the value, whatever orjson's
release writes: on the native and the Python paths, with orjson's digits or without them (the fallback)."""

from __future__ import annotations

import csv
import json
import math
import re
import struct
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_compare import floattext
from msprobe_compare.judge.highlight import Colour
from msprobe_compare.measure import legacy_parse
from msprobe_compare.render import flat, numtext, xlsx
from msprobe_compare.render.table import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT, Column
from tests.native_helpers import native_module

_SHEET = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
BOUNDS = [0.0, 5e-324, 1e-310, 2.225073858507201e-308, 2.2250738585072014e-308, 1e-300, 2.5e-300, 1e-7, 1e-5, 1.5e-5,
          9.99999e-5, 1e-4, 0.1, 1.0, 2.0**53, 9999999999999998.0, 1e15, 1e16, 1.5e16, 1e17, 1.5e17, 1e20, 1e21, 1e22,
          2.0**63, 3.4028234663852886e38, 1e300, 1.7976931348623157e308, math.inf, math.nan]  # fmt: skip


def _bits(b: int) -> float:
    return struct.unpack("<d", b.to_bytes(8, "little"))[0]


# doubles of every exponent (uniform over bit patterns, subnormals and NaN payloads included), the bounds of repr's
# plain layout and their neighbours, integers around 2**53, 1e16 and 1e17, and decimal-looking values
_bounds = st.tuples(st.sampled_from(BOUNDS), st.sampled_from([-1, 0, 1]), st.booleans()).map(
    lambda t: (-1.0 if t[2] else 1.0) * (math.nextafter(t[0], math.inf * t[1]) if t[1] else t[0])
)
_ints = st.one_of(*(st.integers(c - 64, c + 64) for c in (2**53, 10**16, 10**17))).map(float)
_decimal = st.builds(lambda m, e: float(f"{m}e{e}"), st.integers(-(10**17), 10**17), st.integers(-345, 310))
DOUBLES = st.one_of(st.floats(), st.integers(0, 2**64 - 1).map(_bits), _bounds, _ints, _decimal)


def _column(values: list[float], kinds: list[int]) -> Column:
    """A numeric column as table.py makes them: ints integral and finite, a text among the numbers."""
    v = np.array(values, dtype=np.float64)
    k = np.array(kinds, dtype=np.int8)
    with np.errstate(invalid="ignore"):
        k[(k == KIND_INT) & ~(np.isfinite(v) & (v == np.trunc(v)) & (np.abs(v) < 1e18))] = KIND_FLOAT
    k[(k == KIND_PERCENT) & ~np.isfinite(v)] = KIND_FLOAT
    objects = np.empty(len(v), dtype=object)
    objects[k == KIND_OTHER] = "N/A"
    return Column(objects, k, v)


def expected(col: Column) -> dict[str, list[Any]]:
    """Each format's cell text, from repr and str alone: csv fields, JSON literals (raw text, or the str of a
    JSON string), and xlsx cells as (is a number cell, text)."""
    out: dict[str, list[Any]] = {"csv": [], "jsonl": [], "xlsx": []}
    for kind, v in zip(col.kind.tolist(), col.values.tolist()):
        if kind == KIND_OTHER:
            cell = ("N/A", "N/A", (False, "N/A"))
        elif kind == KIND_INT:
            cell = (str(int(v)), str(int(v)), (True, str(int(v))))
        elif kind == KIND_PERCENT:
            text = repr(v) + "%"
            cell = (("'" if math.copysign(1.0, v) < 0 else "") + text, text, (False, text))
        elif math.isfinite(v):
            cell = (repr(v), repr(v), (True, repr(v)))
        else:
            cell = (repr(v), repr(v), (False, repr(v)))
        for name, text in zip(out, cell):
            out[name].append(text)
    return out


def written(folder: Path, col: Column, native: bool, xlsx_too: bool = True) -> dict[str, list[Any]]:
    """The cells of `col` as each writer writes them, on the native or the Python path."""
    n = len(col)
    with pytest.MonkeyPatch.context() as mp:
        if not native:
            mp.setenv("MSPROBE_NATIVE", "0")
        flat.write_csv(folder / "t.csv", ["v"], [col], [Colour.NONE] * n)
        flat.write_jsonl(folder / "t.jsonl", ["v"], [col], [Colour.NONE] * n)
        if xlsx_too:
            xlsx.write_xlsx_columns(folder / "t.xlsx", ["v"], [col], [Colour.NONE] * n)
    with open(folder / "t.csv", newline="", encoding="utf-8") as f:
        fields = [row[0] for row in csv.reader(f)][1:]
    lines = (folder / "t.jsonl").read_text().splitlines()
    literals = [json.loads(x, parse_float=str, parse_int=str)["v"] for x in lines]  # raw texts of the numbers
    if not xlsx_too:
        return {"csv": fields, "jsonl": literals}
    sheet = ET.fromstring(zipfile.ZipFile(folder / "t.xlsx").read("xl/worksheets/sheet1.xml"))
    cells = []
    for row in sheet.iter(f"{_SHEET}row"):
        c = row[0]
        if c.get("t") == "inlineStr":
            cells.append((False, "".join(c.itertext())))
        else:
            cells.append((True, c.find(f"{_SHEET}v").text))  # type: ignore[union-attr]
    return {"csv": fields, "jsonl": literals, "xlsx": cells[1:]}


def assert_exact(folder: Path, col: Column, paths: tuple[bool, ...] = (True, False)) -> None:
    want = expected(col)
    for native in paths:
        got = written(folder, col, native)
        for name in want:
            assert got[name] == want[name], (name, "native" if native else "python")


KINDS = st.sampled_from([KIND_FLOAT] * 6 + [KIND_INT, KIND_PERCENT, KIND_OTHER])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(DOUBLES, KINDS), min_size=1, max_size=60))
def test_generated_doubles_in_every_format(cells: list[tuple[float, int]]) -> None:
    col = _column([v for v, _ in cells], [k for _, k in cells])
    with tempfile.TemporaryDirectory() as folder:
        assert_exact(Path(folder), col)


@settings(max_examples=300, deadline=None)
@given(st.lists(DOUBLES, min_size=1, max_size=80))
def test_generated_doubles_as_float_reprs(values: list[float]) -> None:
    v = np.array(values, dtype=np.float64)
    want = [repr(x) for x in v.tolist()]
    assert numtext.float_reprs(v) == want
    assert numtext._numbers_orjson(v).decode().split(",") == want  # orjson's digits, re-laid out
    assert numtext._numbers_python(v).decode().split(",") == want


def _many(n: int, seed: int) -> Column:
    """Doubles of every exponent and the bounds, in every kind of cell."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64, n, dtype=np.uint64).view(np.float64)
    values[::5] = rng.integers(1, 10**6, len(values[::5])) * 10.0 ** rng.integers(-330, 300, len(values[::5]))
    near = np.array(BOUNDS) * rng.choice([-1.0, 1.0], (3, len(BOUNDS)))
    with np.errstate(over="ignore"):
        near = np.concatenate([near[0], np.nextafter(near[1], np.inf), np.nextafter(near[2], -np.inf)])
    values[3 : 3 + 7 * len(near) : 7] = near
    values[4::13] = np.trunc(rng.uniform(-1, 1, len(values[4::13])) * 10.0 ** rng.integers(0, 18, len(values[4::13])))
    kinds = rng.choice([KIND_FLOAT, KIND_INT, KIND_PERCENT, KIND_OTHER], n, p=[0.7, 0.1, 0.1, 0.1])
    kinds[4::13] = KIND_INT
    return _column(values.tolist(), kinds.tolist())


def test_many_doubles_in_every_format(tmp_path: Path) -> None:
    assert_exact(tmp_path, _many(30_000, 11))


# --- orjson's texts not as the fast paths expect: the exact path takes over --------------------------------------


class OtherRelease:
    """orjson with another spelling of its float arrays (a stand-in for a release that changed its output)."""

    def __init__(self, spell: Callable[[np.ndarray, bytes], bytes]) -> None:
        self.spell = spell

    def dumps(self, obj: Any, option: int | None = None) -> bytes:
        text = orjson.dumps(obj, option=option)
        return self.spell(obj, text) if isinstance(obj, np.ndarray) else text

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)


def _seventeen_digits(values: np.ndarray, _: bytes) -> bytes:
    return ("[" + ",".join(format(x, ".17g") if math.isfinite(x) else "null" for x in values.tolist()) + "]").encode()


SPELLINGS = {
    "capital E": lambda values, text: text.replace(b"e", b"E"),
    "three-digit exponents": lambda values, text: re.sub(
        rb"e([+-]?)(\d+)", lambda m: b"e" + (m[1] or b"+") + m[2].rjust(3, b"0"), text),
    "17 significant digits": _seventeen_digits,
}  # fmt: skip


@pytest.fixture(params=sorted(SPELLINGS))
def other_release(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """orjson replaced by OtherRelease for the fast paths (the name of its spelling); the checks run again."""
    monkeypatch.setattr(floattext, "orjson", OtherRelease(SPELLINGS[request.param]))
    monkeypatch.setattr(floattext, "_VERDICTS", {})
    monkeypatch.setattr(numtext, "ORJSON_DIGITS", floattext.agrees("numtext", numtext._orjson_agrees))
    return str(request.param)


def test_other_release_falls_back_to_repr_everywhere(other_release: str, tmp_path: Path) -> None:
    col = _many(6_000, 12)
    assert numtext._numbers_orjson(col.values) != numtext._numbers_python(col.values)  # the fast path would be wrong
    assert not numtext.ORJSON_DIGITS
    assert_exact(tmp_path, col)
    assert numtext.float_reprs(col.values) == [repr(x) for x in col.values.tolist()]


def test_other_release_native_rows_check_on_their_own(other_release: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    fast = native_module("_csvrows")
    monkeypatch.setattr(numtext, "ORJSON_DIGITS", True)  # as if numtext's own check had passed (not for xlsx)
    assert not flat.orjson_digits(fast)
    col = _many(6_000, 13)
    want = expected(col)
    got = written(tmp_path, col, native=True, xlsx_too=False)
    assert got["csv"] == want["csv"] and got["jsonl"] == want["jsonl"]


def test_other_release_legacy_parse_falls_back(other_release: str) -> None:
    fast = native_module("_legacyparse")
    # the parse reads the digits and the exponent's value: three-digit exponents are harmless to it
    assert legacy_parse._orjson_parse_agrees(fast) == (other_release == "three-digit exponents")
    values = _many(6_000, 14).values
    want = legacy_parse.reference_parse_numpy(values)
    got = legacy_parse.reference_parse(values)
    assert np.array_equal(got, want, equal_nan=True) and (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()


def test_the_fallback_writes_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the checks failed (repr for every number, in Python and in C), every file is byte for byte the one
    orjson's digits give."""
    col = _many(20_000, 15)
    names = [f"Functional.op{k % 9}.{k}.forward" for k in range(len(col))]
    colours = [Colour(k % 3) for k in range(len(col))]

    def files(folder: Path) -> dict[str, bytes]:
        folder.mkdir()
        flat.write_csv(folder / "t.csv", ["n", "v"], [names, col], colours)
        flat.write_jsonl(folder / "t.jsonl", ["n", "v"], [names, col], colours)
        xlsx.write_xlsx_columns(folder / "t.xlsx", ["n", "v"], [names, col], colours)
        sheet = zipfile.ZipFile(folder / "t.xlsx").read("xl/worksheets/sheet1.xml")
        return {"csv": (folder / "t.csv").read_bytes(), "jsonl": (folder / "t.jsonl").read_bytes(), "xlsx": sheet}

    fast = files(tmp_path / "fast")
    monkeypatch.setitem(floattext._VERDICTS, "_csvrows", False)  # _csvrows: Python's repr of each number
    assert files(tmp_path / "native_exact") == fast
    monkeypatch.setattr(numtext, "ORJSON_DIGITS", False)  # numtext too
    assert files(tmp_path / "exact") == fast
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    assert files(tmp_path / "python_exact") == fast
    monkeypatch.setattr(numtext, "ORJSON_DIGITS", True)
    assert files(tmp_path / "python") == fast


def test_native_modules_use_orjson_digits_with_the_installed_release() -> None:
    """Every release from 3.8 to 3.13 passes the native modules' checks (their outputs are exact: see above)."""
    assert flat.orjson_digits(native_module("_csvrows")), orjson.__version__
    assert legacy_parse._orjson_parse_agrees(native_module("_legacyparse")), orjson.__version__
