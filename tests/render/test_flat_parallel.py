"""csv/jsonl written by two processes (second half in a forked child) are byte-identical to one process."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.render import flat
from msprobe_compare.render.table import Column

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork, 2 cores")


def _table(n: int) -> tuple[list[str], list[object], list[Colour]]:
    rng = np.random.default_rng(5)
    names = [f"Functional.op{k % 13}.{k}.forward.input.{k % 3}" for k in range(n)]
    texts = [("=cmd" if k % 97 == 0 else 'a "quoted", text' if k % 31 == 0 else f"t{k % 7}") for k in range(n)]
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    values[::17] = np.nan
    floats = [float(v) if k % 5 else "N/A" for k, v in enumerate(values)]
    codes = Column(codes=(np.arange(n) % 3).astype(np.int32), table=["pass", "Warning", "error"])
    colours = [Colour.RED if k % 11 == 0 else Colour.YELLOW if k % 7 == 0 else Colour.NONE for k in range(n)]
    return ["Name", "Text", "Value", "Result"], [names, texts, floats, codes], colours


@pytest.mark.parametrize("writer", ["write_csv", "write_jsonl"])
@pytest.mark.parametrize("n", [0, 1, 9, 40, 41, 123])
def test_two_processes_write_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str,
                                            n: int) -> None:  # fmt: skip
    header, columns, colours = _table(n)
    monkeypatch.setattr(flat, "PARALLEL_MIN_ROWS", 1 << 60)
    getattr(flat, writer)(tmp_path / "one", header, columns, colours)
    monkeypatch.setattr(flat, "BLOCK_ROWS", 10)
    monkeypatch.setattr(flat, "PARALLEL_MIN_ROWS", 20)
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    getattr(flat, writer)(tmp_path / "two", header, columns, colours)
    assert forks == ([1] if n >= 20 else [])
    assert (tmp_path / "two").read_bytes() == (tmp_path / "one").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]  # no part file left


def test_a_failing_child_leaves_the_rest_to_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header, columns, colours = _table(100)
    flat.write_csv(tmp_path / "one", header, columns, colours)
    monkeypatch.setattr(flat, "BLOCK_ROWS", 10)
    monkeypatch.setattr(flat, "PARALLEL_MIN_ROWS", 20)
    parent = os.getpid()
    real = flat.row_items

    def failing_in_child(*args: object) -> object:
        if os.getpid() != parent:
            raise OSError("disk full (in the child only)")
        return real(*args)

    monkeypatch.setattr(flat, "row_items", failing_in_child)
    flat.write_csv(tmp_path / "two", header, columns, colours)
    assert (tmp_path / "two").read_bytes() == (tmp_path / "one").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]


@pytest.mark.parametrize("writer", ["write_csv", "write_jsonl"])
def test_a_child_failing_after_some_blocks_leaves_no_trace_of_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   writer: str) -> None:  # fmt: skip
    """The parent appends the child's blocks while the child still writes: a child that fails later must not leave
    the blocks already appended (the parent writes its whole half again, once)."""
    header, columns, colours = _table(100)
    getattr(flat, writer)(tmp_path / "one", header, columns, colours)
    monkeypatch.setattr(flat, "BLOCK_ROWS", 10)
    monkeypatch.setattr(flat, "PARALLEL_MIN_ROWS", 20)
    parent = os.getpid()
    real = flat._in_block

    def failing_late_in_child(cols: object, colour: object, lo: int, hi: int) -> object:
        if os.getpid() != parent and lo >= 80:  # the child's rows are [50, 100): three blocks written first
            raise OSError("disk full (in the child only)")
        return real(cols, colour, lo, hi)

    copied = []
    real_copy = flat._copy_range
    monkeypatch.setattr(flat, "_in_block", failing_late_in_child)
    monkeypatch.setattr(flat, "_copy_range", lambda g, f, a, b: copied.append((a, b)) or real_copy(g, f, a, b))
    getattr(flat, writer)(tmp_path / "two", header, columns, colours)
    assert (tmp_path / "two").read_bytes() == (tmp_path / "one").read_bytes()
    assert copied and copied[-1][1] > 0  # some of the child's blocks had been appended before it failed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]
