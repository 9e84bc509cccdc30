"""Write the result table as CSV or JSON Lines, a block of rows at a time.

CSV cells that a spreadsheet would run as a formula (text starting with = + - @ or a tab/CR) get a
leading apostrophe, the usual defence against CSV injection; `-inf` is left as it is; numbers are never
touched. Fields are quoted as csv.writer's excel dialect does (QUOTE_MINIMAL, CRLF line ends). Each JSON
line is one object, column name -> value, with the row colour under "colour", as orjson writes it.

Cells are formatted column by column (render.celltext) over BLOCK_ROWS rows, then the rows of the block
are joined and written at once: the bytes are the same as a csv.writer / orjson.dumps per row would give.
"""

from __future__ import annotations

import csv
import io
from itertools import chain
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.runtime import gc_paused
from msprobe_compare.render.celltext import (
    FORMULA_START, SAFE_TEXTS, CsvFormat, JsonFormat, neutralise, row_items,
)
from msprobe_compare.render.table import Column

__all__ = ["FORMULA_START", "SAFE_TEXTS", "COLOUR_TEXT", "neutralise", "write_csv", "write_jsonl"]

COLOUR_TEXT = {Colour.NONE: "", Colour.YELLOW: "yellow", Colour.RED: "red"}
BLOCK_ROWS = 65536  # rows formatted at a time: bounds the memory of the cell texts

Columns = Sequence["Column | Sequence[Any]"]


def _colour_column(colours: Sequence[Colour] | np.ndarray, n: int) -> Column:
    """The row colours as a coded column of their texts (KeyError for an unknown colour)."""
    codes = np.asarray(colours, dtype=np.int64) if len(colours) else np.zeros(0, dtype=np.int64)
    if len(codes) != n:
        raise ValueError(f"{len(codes)} colours for {n} rows")
    table = [COLOUR_TEXT[Colour(c)] for c in range(len(COLOUR_TEXT))]
    bad = (codes < 0) | (codes >= len(table))
    if bad.any():
        raise KeyError(int(codes[bad][0]))
    return Column(codes=codes.astype(np.int32), table=table)


def _n_rows(columns: Columns) -> int:
    sizes = {len(c) for c in columns}
    if len(sizes) > 1:
        raise ValueError(f"columns of different lengths: {sorted(sizes)}")
    return sizes.pop() if sizes else 0


def write_csv(path: Path, header: Sequence[str], columns: Columns, colours: Sequence[Colour] | np.ndarray) -> None:
    """The table (columns as table.Column or plain sequences of cell values) plus a "colour" column."""
    n = _n_rows(columns)
    cols = [*columns, _colour_column(colours, n)]
    head = io.StringIO(newline="")
    csv.writer(head).writerow(list(header) + ["colour"])
    formats = [CsvFormat()] * len(cols)
    with open(path, "wb") as f, gc_paused():
        f.write(head.getvalue().encode("utf-8"))
        for lo in range(0, n, BLOCK_ROWS):
            items = row_items(formats, cols, lo, min(lo + BLOCK_ROWS, n))
            f.write(("\r\n".join(map(",".join, zip(*items))) + "\r\n").encode("utf-8"))


def write_jsonl(path: Path, header: Sequence[str], columns: Columns, colours: Sequence[Colour] | np.ndarray) -> None:
    """One JSON object per row: column name -> value (as orjson writes it), then "colour"."""
    n = _n_rows(columns)
    if len(header) != len(columns):
        raise ValueError(f"{len(header)} column names for {len(columns)} columns")
    keys = list(header) + ["colour"]
    cols = [*columns, _colour_column(colours, n)]
    # as a dict of the row would have it: a repeated name keeps its first place and its last value
    last = {name: k for k, name in enumerate(keys)}
    order = [last[name] for name in dict.fromkeys(keys)]
    # the braces, commas and line end are baked into the cells: one join makes the lines of a block
    formats = [JsonFormat(keys[k], "{" if pos == 0 else ",", "}\n" if pos == len(order) - 1 else "")
               for pos, k in enumerate(order)]  # fmt: skip
    ordered = [cols[k] for k in order]
    with open(path, "wb") as f, gc_paused():
        for lo in range(0, n, BLOCK_ROWS):
            items = row_items(formats, ordered, lo, min(lo + BLOCK_ROWS, n))
            f.write("".join(chain.from_iterable(zip(*items))).encode("utf-8"))
