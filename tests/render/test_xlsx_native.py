"""The xlsx sheet rows assembled in C (_csvrows.xml_block) against the Python path, and a big sheet written by two
processes (the second half deflated by a forked child) against one process: the same sheet XML, a valid zip."""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.render import xlsx
from msprobe_compare.render.column import TakenRows, TextRange
from msprobe_compare.render.columntext import XmlFormat
from msprobe_compare.render.table import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT, Column
from tests.native_helpers import native_module

HOSTILE = ["", "plain", "amp & lt < gt > \"q\" 'a'", "ctl \x00 \x01 \x07 \x08 \x0b \x0c \x0e \x1f end",
           "tab\tnl\ncr\r", "\ufffe\uffff\ufffd", "é 中文 😀 \U0010ffff", "x" * 16383, "y" * 16384, "😀" * 17000,
           "=cmd|' /C calc'!A0", "<c s=\"9\">", "-", "-inf", "ends with <"]  # fmt: skip


def _columns(n: int) -> tuple[list[str], list[Any], np.ndarray]:
    rng = np.random.default_rng(n)
    texts = [HOSTILE[k % len(HOSTILE)] for k in range(n)]
    mixed: list[Any] = [
        [None, True, False, 7, -(2**70), 1.5, -0.0, math.nan, math.inf, "a<b"][k % 10] for k in range(n)
    ]
    kinds = rng.choice([KIND_FLOAT, KIND_INT, KIND_PERCENT, KIND_OTHER], n).astype(np.int8)
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    values[::7] = np.nan
    values[3::11] = -np.inf
    values[kinds == KIND_INT] = np.trunc(values[kinds == KIND_INT])
    values[5::13] = 2.0**80  # big ints among the ints
    kinds[5::13] = KIND_INT
    values[6::17] = -0.0
    values[(kinds == KIND_INT) & ~np.isfinite(values)] = 3.0  # the table's ints are integral
    objects = np.empty(n, dtype=object)
    others = ["N/A", "Nan", None, "inf\t", True, 2**65, "x&y"]
    for k in np.flatnonzero(kinds == KIND_OTHER).tolist():
        objects[k] = others[k % len(others)]
    numeric = Column(objects, kinds, values)
    percents = Column(np.full(n, "N/A", dtype=object), np.full(n, KIND_PERCENT, dtype=np.int8),
                      rng.standard_normal(n) * 100)  # fmt: skip
    coded = Column(codes=(np.arange(n) % 3).astype(np.int32), table=["pass", "a<b", ""])
    coded2 = Column(codes=(np.arange(n) % 2).astype(np.int32), table=["TRUE", "FALSE"])
    names = Column(TextRange(["pad"] * 3 + texts, 3, 3 + n))
    taken = Column(TakenRows(HOSTILE + [None, 2.5], rng.integers(-1, len(HOSTILE) + 2, n), "N/A"))
    colours = rng.integers(0, 3, n).astype(np.int8)
    header = ["t", "m", "v", "p", "c", "c2", "n", "b"]
    return header, [texts, mixed, numeric, percents, coded, coded2, names, taken], colours


@pytest.mark.parametrize("n", [0, 1, 45, 300])
def test_native_rows_are_the_python_rows(n: int) -> None:
    native_module("_csvrows")
    _, columns, colours = _columns(n)
    for digits in (False, True):
        for lo, hi in ((0, n), (n // 3, n)):
            want = xlsx._sheet_rows(XmlFormat(), columns, colours, lo, hi, 7).encode("utf-8")
            assert xlsx._py_sheet_block(XmlFormat(), columns, colours, lo, hi, 7, digits) == want
            got = xlsx._c_sheet_block(XmlFormat(), columns, colours, lo, hi, 7, digits)
            assert got == want


def test_native_rows_refuse_bad_specs() -> None:
    fast = native_module("_csvrows")
    with pytest.raises(ValueError, match="colour"):
        fast.xml_block([["<c/>"]], 1, 2, np.array([5], dtype=np.int8), ["", ' s="1"'])
    with pytest.raises(ValueError, match="wrong length"):
        fast.xml_block([["<c/>"]], 2, 2, np.zeros(2, dtype=np.int8), [""])
    with pytest.raises(IndexError):
        fast.xml_block([(np.array([4], dtype=np.int32), ["<c/>"])], 1, 2, np.zeros(1, dtype=np.int8), [""])
    with pytest.raises(ValueError, match="start"):
        fast.xml_block([(["a"], 1, str)], 1, 2, np.zeros(1, dtype=np.int8), [""])


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:  # read() checks each member's CRC-32
        return {name: zf.read(name) for name in zf.namelist()}


def _write(path: Path, columns: list[Any], header: list[str], colours: np.ndarray) -> None:
    xlsx.write_xlsx_columns(path, header, columns, colours)


@pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork, 2 cores")
@pytest.mark.parametrize("n", [19, 20, 41, 300])
def test_two_processes_write_the_same_sheet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    header, columns, colours = _columns(n)
    _write(tmp_path / "one.xlsx", columns, header, colours)
    monkeypatch.setattr(xlsx, "BLOCK_ROWS", 10)
    monkeypatch.setattr(xlsx, "PARALLEL_MIN_ROWS", 20)
    forks: list[int] = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    _write(tmp_path / "two.xlsx", columns, header, colours)
    assert forks == ([1] if n >= 20 else [])
    assert _members(tmp_path / "two.xlsx") == _members(tmp_path / "one.xlsx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.xlsx", "two.xlsx"]  # no part file left
    if n == 300:  # what a spreadsheet reader sees: values and fills
        openpyxl = pytest.importorskip("openpyxl")
        a = openpyxl.load_workbook(tmp_path / "one.xlsx").active
        b = openpyxl.load_workbook(tmp_path / "two.xlsx").active
        cells = lambda ws: [(c.value, c.fill.fgColor.rgb) for row in ws.iter_rows() for c in row]  # noqa: E731
        assert cells(a) == cells(b)


@pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork, 2 cores")
def test_a_failing_child_leaves_the_rest_to_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header, columns, colours = _columns(100)
    _write(tmp_path / "one.xlsx", columns, header, colours)
    monkeypatch.setattr(xlsx, "BLOCK_ROWS", 10)
    monkeypatch.setattr(xlsx, "PARALLEL_MIN_ROWS", 20)
    parent, real = os.getpid(), xlsx._c_sheet_block

    def failing_in_child(*args: Any) -> bytes:
        if os.getpid() != parent:
            raise OSError("disk full (in the child only)")
        return real(*args)

    monkeypatch.setattr(xlsx, "sheet_block", failing_in_child)
    monkeypatch.setattr(xlsx, "_sheet_rows", lambda *a: (_ for _ in ()).throw(AssertionError("not native")))
    native_module("_csvrows")
    _write(tmp_path / "two.xlsx", columns, header, colours)
    assert _members(tmp_path / "two.xlsx") == _members(tmp_path / "one.xlsx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.xlsx", "two.xlsx"]


def test_python_path_writes_the_native_sheet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    native_module("_csvrows")
    header, columns, colours = _columns(120)
    _write(tmp_path / "c.xlsx", columns, header, colours)
    monkeypatch.setenv("MSPROBE_NATIVE", "0")  # the Python twins
    _write(tmp_path / "py.xlsx", columns, header, colours)
    assert _members(tmp_path / "py.xlsx") == _members(tmp_path / "c.xlsx")


@pytest.mark.parametrize("sizes", [(0, 0), (0, 5), (5, 0), (1, 1), (1000, 12345), (3, 1 << 20)])
def test_crc32_combine_is_zlibs(sizes: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(sizes))
    a, b = (rng.integers(0, 256, k, dtype=np.uint8).tobytes() for k in sizes)
    assert xlsx.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
