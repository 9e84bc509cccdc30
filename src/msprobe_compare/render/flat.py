"""Write the result table as CSV or JSON Lines, a block of rows at a time.

CSV cells that a spreadsheet would run as a formula (text starting with = + - @ or a tab/CR) get a
leading apostrophe, the usual defence against CSV injection; `-inf` is left as it is; numbers are never
touched. Fields are quoted as csv.writer's excel dialect does (QUOTE_MINIMAL, CRLF line ends). Each JSON
line is one object, column name -> value, with the row colour under "colour": texts as orjson writes them,
floats as repr writes them (as the json module does; orjson's exponents depend on its release).

Cells are formatted column by column (render.columntext) over BLOCK_ROWS rows, then the rows of the block
are joined and written at once: the bytes are the same as a csv.writer / celltext.json_value per row would give.

Large tables are written by two processes (POSIX, two or more cores, no other threads running): a child forked
for the purpose formats the second half of the rows into a part file while this process writes the first half;
the part is appended (in the kernel, copy_file_range) as the child reports its blocks written, so that the copy
overlaps the child's work once this process has written its half, and then removed. Given a column.ColumnBlocks, each process
builds the columns of its own blocks only, after the fork. The bytes are the same as one process
writes. If the child fails for any reason, this process writes the second half itself, so an error surfaces with
its own message.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from types import ModuleType

import numpy as np

from msprobe_compare import floattext, native
from msprobe_compare.render import numtext
from msprobe_compare.render.cellkind import check_native
from msprobe_compare.render.files import scratch_path
from msprobe_compare.judge.highlight import Colour
from msprobe_compare.runtime import can_fork, gc_paused, reap, release_free_memory
from msprobe_compare.render.celltext import FORMULA_START, SAFE_TEXTS, neutralise
from msprobe_compare.render.columntext import CsvFormat, JsonFormat, row_items
from msprobe_compare.render.cellkind import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT
from msprobe_compare.render.column import Column, ColumnBlocks, TakenRows, TextRange
from msprobe_compare.render.columntext import numeric_spec

__all__ = ["FORMULA_START", "SAFE_TEXTS", "COLOUR_TEXT", "neutralise", "write_csv", "write_jsonl"]

COLOUR_TEXT = {Colour.NONE: "", Colour.YELLOW: "yellow", Colour.RED: "red"}
BLOCK_ROWS = 8192  # rows formatted at a time: bounds the memory of a block's columns and texts (~10 MB)
PARALLEL_MIN_ROWS = 262144  # below this a second process costs more than it saves

Columns = Sequence["Column | Sequence[Any]"]  # or a ColumnBlocks: the columns built a block of rows at a time

C_ROWS: Any = native.built("_csvrows")  # render's C module (flat.py, xlsx.py)
if C_ROWS is not None:  # its cell kinds must be ours
    check_native(C_ROWS, "_csvrows")


def c_digits(n: int) -> bool:
    """Whether the C twins of this run write numbers from orjson's text (`orjson_digits`; False on the Python
    paths, which never do): decided once per table, before a child is forked."""
    return C_ROWS is not None and native.enabled() and orjson_digits(C_ROWS, n)


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


def _n_rows(columns: Columns | ColumnBlocks) -> int:
    if isinstance(columns, ColumnBlocks):
        return len(columns)
    sizes = {len(c) for c in columns}
    if len(sizes) > 1:
        raise ValueError(f"columns of different lengths: {sorted(sizes)}")
    return sizes.pop() if sizes else 0


def _in_block(columns: Columns | ColumnBlocks, colour: Column | None, lo: int, hi: int) -> tuple[list[Any], int, int]:
    """The columns holding rows [lo, hi) (then the colour column, if any) and where those rows are in them: built
    for the block from a ColumnBlocks, else the whole columns."""
    if not isinstance(columns, ColumnBlocks):
        return [*columns, colour] if colour is not None else list(columns), lo, hi
    cols = list(columns.rows(lo, hi))
    if colour is not None:
        assert colour.codes is not None
        cols.append(Column(codes=colour.codes[lo:hi], table=colour.table))
    return cols, 0, hi - lo


def write_csv(path: Path, header: Sequence[str], columns: Columns | ColumnBlocks,
              colours: Sequence[Colour] | np.ndarray | None) -> None:  # fmt: skip
    """The table (columns as table.Column or plain sequences of cell values, or a ColumnBlocks making them a
    block at a time) plus a "colour" column (none when `colours` is None)."""
    n = _n_rows(columns)
    colour = _colour_column(colours, n) if colours is not None else None
    head = io.StringIO(newline="")
    csv.writer(head).writerow(list(header) + (["colour"] if colours is not None else []))
    shared = CsvFormat()  # it keeps what it learns of each column: for the whole columns of all blocks
    digits = c_digits(n)  # checked here, not again in a forked child

    def block(lo: int, hi: int) -> bytes:
        cols, a, b = _in_block(columns, colour, lo, hi)
        fmt = shared.for_block() if isinstance(columns, ColumnBlocks) else shared  # a block's own columns: its own memo
        return csv_block(fmt, cols, a, b, digits)

    _write_rows(path, n, head.getvalue().encode("utf-8"), block)


def _py_csv_block(fmt: CsvFormat, cols: list[Any], lo: int, hi: int, digits: bool) -> bytes:
    """Rows [lo, hi) of the columns as CSV lines (`digits` is the C twin's)."""
    items = row_items([fmt] * len(cols), cols, lo, hi)
    return ("\r\n".join(map(",".join, zip(*items))) + "\r\n").encode("utf-8")


def _c_csv_block(fmt: CsvFormat, cols: list[Any], lo: int, hi: int, digits: bool) -> bytes:
    """_py_csv_block's bytes assembled in C from column specs (`_csvrows.csv_block`; numbers from orjson's text
    when `digits`)."""
    return C_ROWS.csv_block([_csv_spec(fmt, col, lo, hi, digits) for col in cols], hi - lo)


csv_block = native.twin("_csvrows", _c_csv_block, _py_csv_block)


def _csv_spec(fmt: CsvFormat | JsonFormat, col: Column | Sequence[Any], lo: int, hi: int, digits: bool) -> Any:
    """Rows [lo, hi) of a column in the form _csvrows.csv_block takes: numbers stay numbers, texts come from `fmt`
    (each distinct value formatted once per column); orjson's text of the numbers with them if `digits`."""
    if isinstance(col, Column) and col.codes is not None:
        return np.ascontiguousarray(col.codes[lo:hi], dtype=np.int32), fmt.table_texts(col).tolist()
    texts = col._objects if isinstance(col, Column) else None
    if isinstance(texts, TextRange) and isinstance(fmt, CsvFormat) and type(texts.items) is list:
        return texts.items, texts.start + lo, None  # fields made in C from the whole list's texts, read in place
    if isinstance(texts, TakenRows) and isinstance(fmt, CsvFormat) and type(texts.items) is list:
        return texts.items, texts.rows[lo:hi], None, texts.missing  # the same, through the rows of the match
    if isinstance(col, Column) and col.kind is not None and col.values is not None:  # numeric: has both
        return numeric_spec(fmt, col, lo, hi, digits)
    return fmt.column(col, lo, hi)


def orjson_digits(fast: ModuleType, n: int | None = None) -> bool:
    """Whether `fast.csv_block` gets orjson's text of the numbers: when numtext's orjson paths are in use and the
    module's rewriting of that text gives, on floattext.hard_doubles() in every kind of cell and both formats,
    the bytes of its exact path (Python's repr of each value). Checked once per process, and not for a table of
    `n` rows too small to pay for the check (`floattext.worth`; its own path writes the same bytes)."""
    if n is not None and not floattext.worth("_csvrows", n):
        return False
    return numtext.ORJSON_DIGITS and floattext.agrees("_csvrows", lambda: _orjson_digits_agree(fast))


def _orjson_digits_agree(fast: ModuleType) -> bool:
    values = np.array(floattext.hard_doubles())
    n = len(values)
    kind = np.array([KIND_FLOAT, KIND_PERCENT, KIND_INT, KIND_OTHER], dtype=np.int8)[np.arange(n) % 4]
    kind[(kind == KIND_INT) & ~(np.isfinite(values) & (values == np.trunc(values)))] = KIND_FLOAT  # as table has ints
    codes = np.zeros(n, dtype=np.int32)
    text = floattext.orjson_array(np.where(kind == KIND_OTHER, np.nan, values))
    for json, extra in ((False, ()), (True, ('{"k":', "}\n"))):
        if fast.csv_block([(values, kind, codes, ["x"], text, *extra)], n, json) != fast.csv_block(
            [(values, kind, codes, ["x"], None, *extra)], n, json
        ):
            return False
    return True


def _json_spec(fmt: JsonFormat, col: Column | Sequence[Any], lo: int, hi: int, digits: bool) -> Any:
    """`_csv_spec` for JSON lines: numbers also carry the member's text before and after them."""
    spec = _csv_spec(fmt, col, lo, hi, digits)
    return (*spec, fmt.prefix, fmt.suffix) if isinstance(spec, tuple) and len(spec) == 5 else spec


def write_jsonl(path: Path, header: Sequence[str], columns: Columns | ColumnBlocks,
                colours: Sequence[Colour] | np.ndarray) -> None:  # fmt: skip
    """One JSON object per row: column name -> value (as celltext.json_value writes it), then "colour"."""
    n = _n_rows(columns)
    if not isinstance(columns, ColumnBlocks) and len(header) != len(columns):
        raise ValueError(f"{len(header)} column names for {len(columns)} columns")
    keys = list(header) + ["colour"]
    colour = _colour_column(colours, n)
    # as a dict of the row would have it: a repeated name keeps its first place and its last value
    last = {name: k for k, name in enumerate(keys)}
    order = [last[name] for name in dict.fromkeys(keys)]

    def json_formats() -> list[JsonFormat]:
        # the braces, commas and line end are baked into the cells: one join makes the lines of a block
        return [JsonFormat(keys[k], "{" if pos == 0 else ",", "}\n" if pos == len(order) - 1 else "")
                for pos, k in enumerate(order)]  # fmt: skip

    shared = json_formats()  # for the whole columns of all blocks (they keep what they learn of each column)
    digits = c_digits(n)

    def block(lo: int, hi: int) -> bytes:
        cols, a, b = _in_block(columns, colour, lo, hi)
        if len(cols) != len(keys):
            raise ValueError(f"{len(header)} column names for {len(cols) - 1} columns")
        formats = [f.for_block() for f in shared] if isinstance(columns, ColumnBlocks) else shared
        return jsonl_block(formats, [cols[k] for k in order], a, b, digits)

    _write_rows(path, n, b"", block)


def _py_jsonl_block(formats: list[JsonFormat], cols: list[Any], lo: int, hi: int, digits: bool) -> bytes:
    """Rows [lo, hi) of the columns (in member order, each with its format) as JSON lines (`digits`: the C twin's)."""
    items = row_items(formats, cols, lo, hi)
    return "".join(chain.from_iterable(zip(*items))).encode("utf-8")


def _c_jsonl_block(formats: list[JsonFormat], cols: list[Any], lo: int, hi: int, digits: bool) -> bytes:
    """_py_jsonl_block's bytes assembled in C (`_csvrows.csv_block` with the members' texts)."""
    return C_ROWS.csv_block([_json_spec(f, col, lo, hi, digits) for f, col in zip(formats, cols)], hi - lo, True)


jsonl_block = native.twin("_csvrows", _c_jsonl_block, _py_jsonl_block)


def _write_rows(path: Path, n: int, head: bytes, block: Callable[[int, int], bytes]) -> None:
    """`head`, then `block(lo, hi)` over rows [0, n) in BLOCK_ROWS steps; the second half of the rows formatted by
    a forked child when worthwhile (see the module docstring)."""
    mid = split_point(n, PARALLEL_MIN_ROWS, BLOCK_ROWS)
    with open(path, "wb") as f, gc_paused():
        f.write(head)
        if mid is None:
            _blocks(f, block, 0, n)
            return
        part = scratch_path(path)  # removed by the next run into the folder if this one is killed
        release_free_memory()  # free pages would be shared copy-on-write with the child
        pid = 0
        done, told = os.pipe()  # the child tells how many bytes of the part are written, after each block
        try:
            with open(part, "wb+") as g:
                pid = os.fork()
                if pid == 0:  # child: the second half into the part file; exit without cleanup handlers
                    status = 1
                    try:
                        os.close(done)
                        _child_blocks(g, told, block, mid, n)
                        status = 0
                    finally:
                        os._exit(status)
                os.close(told)
                told = -1
                _blocks(f, block, 0, mid)
                f.flush()
                base = f.tell()
                copied = _append_progress(g, f, done)  # the child's blocks as they come: while it still writes
                ok = reap(pid) == 0
                pid = 0
                if ok:
                    _copy_range(g, f, copied, os.fstat(g.fileno()).st_size)
                else:  # the child failed: write the rest here, where an error shows with its message
                    f.seek(base)
                    f.truncate()
                    _blocks(f, block, mid, n)
        finally:
            os.close(done)
            if told >= 0:
                os.close(told)
            if pid:
                reap(pid, kill=True)
            part.unlink(missing_ok=True)


def _child_blocks(g: Any, told: int, block: Callable[[int, int], bytes], lo: int, hi: int) -> None:
    """A forked writer's rows [lo, hi) into `g`, the bytes written so far sent through the pipe `told` after each
    block (8 bytes, little-endian: one atomic write)."""
    size = 0
    for start in range(lo, hi, BLOCK_ROWS):
        data = block(start, min(start + BLOCK_ROWS, hi))
        g.write(data)
        g.flush()
        size += len(data)
        os.write(told, size.to_bytes(8, "little"))
    os.close(told)


def _append_progress(g: Any, f: Any, done: int) -> int:
    """Append to `f` the bytes of `g` that a forked writer reports written through the pipe `done`, until it closes
    the pipe; how many were appended."""
    copied = 0
    pending = b""
    while True:
        chunk = os.read(done, 4096)
        if not chunk:
            return copied
        pending += chunk
        whole = len(pending) // 8 * 8
        if whole:
            upto = int.from_bytes(pending[whole - 8 : whole], "little")
            pending = pending[whole:]
            _copy_range(g, f, copied, upto)
            copied = max(copied, upto)


def _copy_range(g: Any, f: Any, start: int, stop: int) -> None:
    """Append bytes [start, stop) of file `g` to `f` at its file position (in the kernel where it can)."""
    copy = getattr(os, "copy_file_range", None)
    at = start
    if copy is not None:
        try:
            while at < stop:
                step = copy(g.fileno(), f.fileno(), stop - at, at)
                if step == 0:
                    break
                at += step
        except OSError:
            pass
    while at < stop:
        data = os.pread(g.fileno(), min(stop - at, 1 << 20), at)
        if not data:
            raise OSError(f"{g.name}: {stop - at} bytes missing")
        view = memoryview(data)
        while view:
            view = view[os.write(f.fileno(), view) :]  # f is flushed: its position is the file's
        at += len(data)


def split_point(n: int, min_rows: int, block_rows: int) -> int | None:
    """Where a forked child's rows start when a writer splits `n` rows into two halves (a whole number of blocks
    in the first), or None for one process: fewer than `min_rows` rows, or no fork possible here."""
    if n < min_rows or not can_fork():
        return None
    return (n // 2 // block_rows) * block_rows or None


def _blocks(f: Any, block: Callable[[int, int], bytes], lo: int, hi: int) -> None:
    for start in range(lo, hi, BLOCK_ROWS):
        f.write(block(start, min(start + BLOCK_ROWS, hi)))


def append_file(f: Any, g: Any) -> None:
    """Append the whole of file `g` to `f` (in the kernel where it can)."""
    f.flush()
    _copy_range(g, f, 0, os.fstat(g.fileno()).st_size)
