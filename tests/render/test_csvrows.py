"""The native CSV row assembly (_csvrows.c) writes the bytes the Python path writes, for every kind of cell."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.render import flat
from msprobe_compare.render.celltext import csv_field
from msprobe_compare.render.columntext import CsvFormat
from msprobe_compare.render.table import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT, Column
from tests.native_helpers import native_module
from tests.parity import assert_same_bytes


def _module():  # type: ignore[no-untyped-def]
    return native_module("_csvrows")


def _numeric_column(values: np.ndarray, kind: np.ndarray, texts: list[object]) -> Column:
    objects = np.empty(len(values), dtype=object)
    for i in np.flatnonzero(kind == KIND_OTHER).tolist():
        objects[i] = texts[i % len(texts)]
    return Column(objects, kind, values)


def _rows(col: Column) -> list[str]:
    fast = _module()
    n = len(col)
    spec = flat._csv_spec(CsvFormat(), col, 0, n, flat.orjson_digits(fast))
    return fast.csv_block([spec], n).decode("utf-8").split("\r\n")[:-1]


def _every_kind(n: int, seed: int) -> Column:
    """A numeric column with floats of every magnitude, repr's e-05 band, non-finite values, ints and texts."""
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-330, 308, n)
    values[::11] = 10.0 ** rng.integers(-20, 25, len(values[::11]))
    values[::17], values[1::19], values[2::23], values[3::29] = np.nan, np.inf, -np.inf, -0.0
    band = values[5::37]
    values[5::37] = rng.uniform(1e-5, 1e-4, len(band)) * rng.choice([-1, 1], len(band))  # repr's e-05 band
    kind = rng.integers(0, 4, n).astype(np.int8)
    ints = kind == KIND_INT
    values[ints] = np.clip(np.trunc(np.nan_to_num(values[ints], nan=7.0)), -9e18, 9e18)
    return _numeric_column(values, kind, ["N/A", "=x,y", 'quo"te', "None", "-", "ünï", "\\back"])


def test_many_numbers_of_every_kind() -> None:
    col = _every_kind(60_000, 3)
    col.values[::3] = np.where(col.kind[::3] == KIND_INT, np.trunc(col.values[::3] / 1e3), col.values[::3])
    assert _rows(col) == [csv_field(v) for v in col.cells()]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([KIND_FLOAT, KIND_INT, KIND_PERCENT, KIND_OTHER]),
                          st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=40))  # fmt: skip
def test_generated_numbers(cells: list[tuple[int, float]]) -> None:
    kind = np.array([k for k, _ in cells], dtype=np.int8)
    values = np.array([v for _, v in cells], dtype=np.float64)
    ints = kind == KIND_INT
    values[ints] = np.clip(np.trunc(np.nan_to_num(values[ints], nan=0.0, posinf=1e300, neginf=-1e300)), -1e300, 1e300)
    col = _numeric_column(values, kind, ["N/A", "x"])
    assert _rows(col) == [csv_field(v) for v in col.cells()]


def test_whole_file_equals_the_python_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module()
    n = 5000
    rng = np.random.default_rng(9)
    names = [f"Functional.op{k % 13}.{k}.forward.input.{k % 3}" for k in range(n)]
    texts = [("=cmd" if k % 97 == 0 else 'a "q", t' if k % 31 == 0 else f"t{k % 7}") for k in range(n)]
    kind = rng.integers(0, 4, n).astype(np.int8)
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 20, n)
    values[kind == KIND_INT] = np.trunc(values[kind == KIND_INT])
    coded = Column(codes=(np.arange(n) % 3).astype(np.int32), table=["pass", "Warning", "=error"])
    columns = [names, texts, _numeric_column(values, kind, ["N/A", "unsupported"]), coded]
    colours = [Colour.RED if k % 11 == 0 else Colour.NONE for k in range(n)]
    flat.write_csv(tmp_path / "native.csv", ["A", "B", "C", "D"], columns, colours)
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    flat.write_csv(tmp_path / "python.csv", ["A", "B", "C", "D"], columns, colours)
    assert_same_bytes((tmp_path / "native.csv").read_bytes(), (tmp_path / "python.csv").read_bytes())


def test_json_lines_of_every_kind() -> None:
    from msprobe_compare.render.celltext import json_value
    from msprobe_compare.render.columntext import JsonFormat

    col = _every_kind(40_000, 4)
    col.values[col.kind == KIND_INT] = np.clip(col.values[col.kind == KIND_INT], -(2.0**53), 2.0**53)  # orjson: 64 bits
    n = len(col)
    fmt = JsonFormat("k", "{", "}\n")
    fast = _module()
    spec = flat._json_spec(fmt, col, 0, n, flat.orjson_digits(fast))
    got = fast.csv_block([spec], n, True).decode("utf-8").splitlines()
    assert got == ["{" + '"k":' + json_value(v) + "}" for v in col.cells()]


def test_jsonl_file_equals_the_python_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module()
    n = 3000
    rng = np.random.default_rng(8)
    names = [f"Functional.op{k % 13}.{k}.forward" for k in range(n)]
    kind = rng.integers(0, 4, n).astype(np.int8)
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 20, n)
    values[kind == KIND_INT] = np.clip(np.trunc(values[kind == KIND_INT]), -(2.0**53), 2.0**53)  # as table makes them
    values[(np.arange(n) % 31 == 0) & (kind != KIND_INT)] = np.nan
    coded = Column(codes=(np.arange(n) % 3).astype(np.int32), table=["pass", "Warning", 'e"rror'])
    columns = [names, _numeric_column(values, kind, ["N/A", "x"]), coded, _numeric_column(-values, kind, ["y"])]
    colours = [Colour.RED if k % 11 == 0 else Colour.NONE for k in range(n)]
    header = ["Name", "Value", "Result", "Name"]  # a repeated name keeps its first place and its last value
    flat.write_jsonl(tmp_path / "native.jsonl", header, columns, colours)
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    flat.write_jsonl(tmp_path / "python.jsonl", header, columns, colours)
    assert_same_bytes((tmp_path / "native.jsonl").read_bytes(), (tmp_path / "python.jsonl").read_bytes())


def test_fields_read_in_place_are_quoted_past_a_nul() -> None:
    """Texts read from a whole list (the names) are quoted where they hold a comma, a quote or a line end, also
    after a NUL inside the text (the search for them stops at a NUL)."""
    fast = _module()
    texts = ["plain", "a\0b,c", 'x\0\0"q"', "end\0", "\0\n", "=f,1", "-inf", "a,b", "fine\0too"]
    got = fast.csv_block([(texts, 0, None)], len(texts)).decode("utf-8")
    assert got == "".join(csv_field(t) + "\r\n" for t in texts)
    assert '"a\0b,c"' in got and '"\0\n"' in got and "fine\0too\r\n" in got
