"""Columns built a range of rows at a time (table.column_data(lo, hi), table.column_blocks) give the cells and the
csv/jsonl bytes of the whole columns, also when a block boundary cuts through a call's rows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from msprobe_compare.model import CompareOutcome
from msprobe_compare.render import flat, table
from msprobe_compare.render.celltext import csv_field
from tests.native_helpers import native_module
from tests.render.test_html import CASES, HOSTILE, hostile_outcome, outcome_of

_OUTCOMES: dict[str, CompareOutcome] = {}


def _outcome(case: str) -> CompareOutcome:
    if case not in _OUTCOMES:
        _OUTCOMES[case] = hostile_outcome() if case == "hostile" else outcome_of(case)
    return _OUTCOMES[case]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("coloured", [False, True])
@pytest.mark.parametrize("step", [1, 3, 7])
def test_ranges_give_the_cells_of_the_whole_table(case: str, coloured: bool, step: int) -> None:
    o = _outcome(case)
    style = table.Style(text_booleans=coloured)
    whole = [c.cells() for c in table.column_data(o, style)]
    n = len(o)
    assert n > 2 * step and len(whole) == len(table.header(o))
    got: list[list[object]] = [[] for _ in whole]
    for lo in range(0, n, step):
        for cells, col in zip(got, table.column_data(o, style, lo, min(lo + step, n))):
            cells.extend(col.cells())
    for name, a, b in zip(table.header(o), got, whole):
        assert [(type(x), repr(x)) for x in a] == [(type(x), repr(x)) for x in b], name
    if o.show_stack:  # the stack text stays on the first row of each call, wherever a block starts
        k = table.header(o).index(table.STACK)
        with_stack = [e for e in set(o.npu.entry_index.tolist()) if o.npu.stacks.get(o.npu.entries[e]) is not None]
        assert sum(x != table.NA for x in got[k]) == len(with_stack) > 1


def test_a_range_outside_the_table_is_refused() -> None:
    o = _outcome(CASES[0])
    with pytest.raises(ValueError, match="rows"):
        table.column_data(o, table.Style(text_booleans=False), 2, len(o) + 1)


@pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork, 2 cores")
@pytest.mark.parametrize("case", [*CASES, "hostile"])
@pytest.mark.parametrize("writer", ["write_csv", "write_jsonl"])
def test_blocks_write_the_bytes_of_whole_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str,
                                                 writer: str) -> None:  # fmt: skip
    o = _outcome(case)
    style = table.Style(text_booleans=False)
    header, colours = table.header(o), table.colour_codes(o)
    monkeypatch.setattr(flat, "PARALLEL_MIN_ROWS", 1 << 60)
    getattr(flat, writer)(tmp_path / "whole", header, table.column_data(o, style), colours)
    monkeypatch.setattr(flat, "BLOCK_ROWS", 5)
    monkeypatch.setattr(flat, "PARALLEL_MIN_ROWS", 20)
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    built: list[tuple[int, int]] = []
    blocks = table.column_blocks(o, style)
    rows = blocks.rows
    blocks.rows = lambda lo, hi: built.append((lo, hi)) or rows(lo, hi)
    getattr(flat, writer)(tmp_path / "blocks", header, blocks, colours)
    assert forks == [1] and len(o) >= 20
    # this process built only its own blocks; the child the rest
    assert built and all(hi - lo <= 5 for lo, hi in built) and built[-1][1] < len(o)
    assert (tmp_path / "blocks").read_bytes() == (tmp_path / "whole").read_bytes()


def test_native_fields_are_csv_writers_fields() -> None:
    """The fields _csvrows makes from a list read in place: neutralised and quoted as flat.neutralise + csv.writer."""
    import csv
    import io

    fast = native_module("_csvrows")
    texts = [*HOSTILE, "", "-inf", "-", "-1", "+x", "@a", "\tq", "\rq", "＝x", "＋", "－a", "＠", "a,b", 'a"b', '"',
             "x\r\ny", '=a,"b"', "\x00=a", "plain", "-inf,"]  # fmt: skip
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    for t in texts:
        writer.writerow([flat.neutralise(t), "x"])
    assert fast.csv_block([(texts, 0, None), ["x"] * len(texts)], len(texts)) == buf.getvalue().encode("utf-8")
    assert fast.csv_block([(texts, 2, None)], 3) == "".join(csv_field(t) + "\r\n" for t in texts[2:5]).encode()
    with pytest.raises(ValueError, match="field column"):
        fast.csv_block([(texts, len(texts) - 1, None)], 2)


def test_native_fields_through_rows_are_the_taken_texts() -> None:
    """(list, rows, None, missing): the field of list[rows[i]], `missing` where -1, as the bench names are read."""
    import numpy as np

    from msprobe_compare.render.column import TakenRows

    fast = native_module("_csvrows")
    texts = [*HOSTILE, "=x", "a,b"]
    rows = np.array([3, -1, 0, len(texts) - 1, -1, 1, len(texts) - 2], dtype=np.int64)
    taken = TakenRows(texts, rows, "N/A")
    want = [texts[r] if r >= 0 else "N/A" for r in rows.tolist()]
    assert list(taken) == want and taken[2:5] == want[2:5] and taken[1] == "N/A" and len(taken) == len(rows)
    got = fast.csv_block([(texts, rows, None, "N/A")], len(rows))
    assert got == "".join(csv_field(t) + "\r\n" for t in want).encode("utf-8")
    with pytest.raises(IndexError):
        fast.csv_block([(texts, np.array([len(texts)], dtype=np.int64), None, "N/A")], 1)
    with pytest.raises(ValueError, match="int64"):
        fast.csv_block([(texts, rows.astype(np.int32), None, "N/A")], len(rows))
    assert list(TakenRows([], np.array([-1, -1]), "N/A")) == ["N/A", "N/A"]
