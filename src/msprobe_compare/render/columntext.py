"""Cell texts of whole columns at once: CSV fields, JSON values and xlsx cell XML of a block of rows.

Writers ask for the texts of one column over a block of rows and join the rows themselves, so the work per
cell stays in C:

- numbers: numtext.py writes a whole float64 array (orjson's digits in repr's layout, or repr);
- texts: the block is joined with NUL and searched once; clean texts pass through unchanged (CSV) or are
  wrapped all at once by a join and a split (JSON, XML). Only columns with special characters go cell by
  cell, and then each distinct string is formatted once.

The results are exactly what csv.writer (excel dialect, QUOTE_MINIMAL) with `celltext.neutralise`,
`celltext.json_value` (orjson, floats as repr) and `celltext.cell_xml` give for each value.
"""

from __future__ import annotations

import re
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np
import orjson

from msprobe_compare import floattext
from msprobe_compare.render.cellkind import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT
from msprobe_compare.render.celltext import (
    CSV_QUOTE,
    CSV_QUOTE_CHARS,
    FORMULA_START,
    JSON_CHARS,
    JSON_SPECIAL,
    MAX_CELL_CHARS,
    XML_CHARS,
    XML_SPECIAL,
    cell_xml,
    csv_field,
    json_value,
    utf16_units,
)
from msprobe_compare.render.column import Column
from msprobe_compare.render.numtext import INT_BULK_LIMIT, number_texts

_XML_TEXT = ('<c t="inlineStr"><is><t xml:space="preserve">', "</t></is></c>")
_XML_NUMBER = ("<c><v>", "</v></c>")


_MEMO_TYPES = (str, bool, int, type(None))  # equal values of one of these types have equal texts (not float: -0.0)


def _each(values: Sequence[Any], one: Callable[[Any], str], all_str: bool = False) -> list[str]:
    """`one` of every value, once per distinct value where equal values surely have equal texts."""
    if not all_str:
        kinds = list(map(type, values))
        distinct = set(kinds)
        all_str = distinct == {str}
    if all_str or (len(distinct) == 1 and next(iter(distinct)) in _MEMO_TYPES):
        memo = {v: one(v) for v in dict.fromkeys(values)}
        return list(map(memo.__getitem__, values))
    if distinct <= set(_MEMO_TYPES):  # mixed types: True == 1, so the key holds the type
        keys = list(zip(kinds, values))
        memo = {key: one(key[1]) for key in dict.fromkeys(keys)}
        return list(map(memo.__getitem__, keys))
    return [one(v) for v in values]


def _has_any(s: str, chars: str, pattern: re.Pattern[str]) -> bool:
    """Whether `s` holds one of `chars` (ASCII; `pattern` also covers the non-ASCII ones)."""
    if not s.isascii():
        return pattern.search(s) is not None
    return any(ch in s for ch in chars)  # one memchr-like scan each: far faster than a regex


def _joined(values: Sequence[Any]) -> str | None:
    """The values joined by NUL when all are strings and none holds a NUL, else None."""
    if not len(values):
        return None
    try:
        s = "\0".join(values)
    except TypeError:
        return None
    return s if s.count("\0") == len(values) - 1 else None


def _formula_start(s: str) -> bool:
    """Whether some text of the NUL-joined `s` starts with a FORMULA_START character (or may: NUL inside)."""
    return any(ch in s and (s.startswith(ch) or "\0" + ch in s) for ch in FORMULA_START)


def _object_array(items: list[Any]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _repetitive(values: Sequence[Any]) -> bool:
    """Whether a sample of `values` repeats a few objects (at most 1 distinct in 4), as coded columns do."""
    sample = values[:: max(1, len(values) // 256)]
    return len(set(map(id, sample))) * 4 <= len(sample)


Rows = slice | np.ndarray  # rows of a column: a range, or row indices


class _Format:
    """How one output format writes cells; `sep` goes between the cells of a row.

    An instance keeps what it works out once per column (texts of a coded column's table, codes of the other
    cells of a numeric column): use one for all the blocks of a write, and not beyond it.
    """

    sep = ","

    def one(self, value: Any) -> str:
        """The text of one cell value (the reference the column paths match)."""
        raise NotImplementedError

    def for_block(self) -> Any:
        """This format for the columns of one block: a memo of its own for their cells, the texts of the coded
        columns' tables shared with this one (tables that blocks share are formatted once)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__["_others"] = {}
        new.__dict__["_tables"] = self.__dict__.setdefault("_tables", {})
        return new

    def clean(self, joined: str, values: Sequence[str]) -> list[str] | None:
        """The texts of string cells joined by NUL, when none needs special treatment; else None."""
        raise NotImplementedError

    def number_wrap(self, kind: int) -> tuple[str, str]:
        """Text before and after the number of a cell of `kind` (KIND_FLOAT for floats and ints)."""
        raise NotImplementedError

    def strings(self, values: list[Any]) -> list[str]:
        """The texts of cell values, each distinct string formatted once, clean texts in bulk."""
        if not values:
            return []
        if not _repetitive(values):
            s = _joined(values)
            if s is not None:
                out = self.clean(s, values)
                return out if out is not None else _each(values, self.one, all_str=True)
        return _each(values, self.one)

    def column(self, col: Column | Sequence[Any], lo: int, hi: int) -> list[str]:
        """The texts of rows [lo, hi) of a column (a table.Column or a plain sequence of cell values)."""
        return self.cells(col, slice(lo, hi))

    def table_texts(self, col: Column) -> np.ndarray:
        """The texts of a coded column's table (an object array), made once per column."""
        memo = self.__dict__.setdefault("_tables", {})
        key = id(col.table)
        if key not in memo:
            memo[key] = (col.table, _object_array(self.strings(list(col.table or []))))  # keeps the table alive
        return memo[key][1]

    def cells(self, col: Column | Sequence[Any], rows: Rows) -> list[str]:
        """The texts of some rows of a column (a table.Column or a plain sequence of cell values)."""
        if isinstance(col, Column) and col.codes is not None:
            return self.table_texts(col)[col.codes[rows]].tolist()
        if not isinstance(col, Column) or col.kind is None:
            objects = col.objects if isinstance(col, Column) else col
            if isinstance(rows, slice):
                picked = objects[rows]
                return self.strings(picked if isinstance(picked, list) else list(picked))
            return self.strings([objects[i] for i in rows.tolist()])
        kind = col.kind[rows]
        if not len(kind):
            return []
        assert col.values is not None  # the numeric shape has both
        values = np.array(col.values[rows], dtype=np.float64)  # a copy: placeholders go in
        # the numbers of one kind (floats and ints, or percents) in bulk, the other cells afterwards
        if np.count_nonzero(kind == KIND_PERCENT) * 2 > len(kind):
            mode = KIND_PERCENT
            number = (kind == KIND_PERCENT) & ~np.signbit(values)  # "-x%" is text CSV neutralises
            ints = None
        else:
            mode = KIND_FLOAT
            ints = kind == KIND_INT
            with np.errstate(invalid="ignore"):
                big = ints & ~(np.abs(values) < INT_BULK_LIMIT)  # orjson writes these with an exponent
            # big ints and non-finite floats go with the other cells, each as its own value's text
            number = (kind <= KIND_INT) & ~big & np.isfinite(values)
            ints &= ~big
            values[ints & (values == 0)] = 0.0  # str(int(-0.0)) is "0"
            if not ints.any():
                ints = None
        rest = np.flatnonzero(~number)
        values[rest] = np.nan  # placeholders: orjson writes "null"
        text = number_texts(values, number, ints)
        before, after = self.number_wrap(mode)
        s = text.decode("ascii")
        if not len(rest):
            if before or after:
                return (before + s.replace(",", after + "\0" + before) + after).split("\0")
            return s.split(",")
        # the most common text of the other cells replaces its placeholders in bulk; the rest by index
        rest_rows = rows[rest] if not isinstance(rows, slice) else rest + (rows.start or 0)
        texts, codes = self._rest(col, rest_rows, kind[rest])
        common = int(np.bincount(codes).argmax())
        bulk = "\0" not in texts[common] if before or after else "," not in texts[common]
        if before or after:
            s = before + s.replace(",", after + "\0" + before) + after
            if bulk:
                s = s.replace(before + "null" + after, texts[common])
            out = s.split("\0")
        else:
            if bulk:
                s = s.replace("null", texts[common])
            out = s.split(",")
        patch = np.flatnonzero(codes != common) if bulk else np.arange(len(rest))
        for i, code in zip(rest[patch].tolist(), codes[patch].tolist()):
            out[i] = texts[code]
        return out

    def _rest(self, col: Column, rows: np.ndarray, kind: np.ndarray) -> tuple[list[str], np.ndarray]:
        """Texts of the cells left out of the bulk numbers (other values, numbers of the other kind): the
        distinct texts, and a code per cell into them."""
        codes_of, texts = self.other_codes(col, rows)
        codes = codes_of.astype(np.int64)
        numbers = np.flatnonzero(codes < 0)  # numbers of the other kind: each its own text, after the others
        if not len(numbers):
            return texts, codes
        assert col.values is not None  # the numeric shape has both
        values = col.values[rows[numbers]]
        cells = [int(x) if code == KIND_INT else f"{x!r}%" if code == KIND_PERCENT else x
                 for code, x in zip(kind[numbers].tolist(), values.tolist())]  # fmt: skip
        codes[numbers] = np.arange(len(texts), len(texts) + len(numbers))
        return texts + self.strings(cells), codes

    def other_codes(self, col: Column, rows: slice | np.ndarray = slice(None)) -> tuple[np.ndarray, list[str]]:
        """For `rows` of the column (a slice or row indices; default all): a code per KIND_OTHER cell into the
        texts of its distinct objects (-1 for the numbers). The texts are made once per column and format; a
        column coded already (`Column.others`) has its codes taken for the rows asked only, so a writer's block
        never holds codes for the whole column (each writing process would hold its own copy)."""
        memo = self.__dict__.setdefault("_others", {})
        key = id(col)
        if key not in memo and col.others is not None:  # coded already: the codes of its other cells, as they are
            memo[key] = (col, None, self.strings(col.others[1]))
        if key not in memo:
            assert col.kind is not None
            others = np.flatnonzero(col.kind == KIND_OTHER)
            picked = np.asarray(col.objects, dtype=object)[others]
            ids = np.fromiter(map(id, picked.tolist()), dtype=np.int64, count=len(others))
            _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
            codes = np.full(len(col.kind), -1, dtype=np.int32)
            codes[others] = inverse.reshape(-1)
            memo[key] = (col, codes, self.strings(picked[first].tolist()))  # keeps the column alive
        _, whole, texts = memo[key]
        if whole is not None:
            return whole[rows], texts
        assert col.kind is not None and col.others is not None
        return np.where(col.kind[rows] == KIND_OTHER, col.others[0][rows], -1).astype(np.int32), texts


class CsvFormat(_Format):
    """Fields as csv.writer (excel dialect) writes them, text neutralised against formulas."""

    def one(self, value: Any) -> str:
        return csv_field(value)

    def clean(self, joined: str, values: Sequence[str]) -> list[str] | None:
        if _has_any(joined, CSV_QUOTE_CHARS, CSV_QUOTE) or _formula_start(joined):
            return None
        return values if isinstance(values, list) else list(values)

    def number_wrap(self, kind: int) -> tuple[str, str]:
        return ("", "%") if kind == KIND_PERCENT else ("", "")


class JsonFormat(_Format):
    """`"key":value` members of a JSON object (values as `json_value` writes them), with `before` and `after`
    baked into every cell: a row is then its cells joined with nothing between."""

    sep = ""

    def __init__(self, key: str, before: str = "", after: str = "") -> None:
        self.prefix = before + orjson.dumps(key).decode("utf-8") + ":"
        self.suffix = after

    def one(self, value: Any) -> str:
        return self.prefix + json_value(value) + self.suffix

    def clean(self, joined: str, values: Sequence[str]) -> list[str] | None:
        if _has_any(joined, JSON_CHARS, JSON_SPECIAL):
            return None
        p, q = self.prefix + '"', '"' + self.suffix
        return (p + joined.replace("\0", q + "\0" + p) + q).split("\0")

    def number_wrap(self, kind: int) -> tuple[str, str]:
        if kind == KIND_PERCENT:
            return self.prefix + '"', '%"' + self.suffix
        return self.prefix, self.suffix


class XmlFormat(_Format):
    """Unstyled <c> elements of an xlsx sheet row."""

    sep = ""

    def one(self, value: Any) -> str:
        return cell_xml(value)

    def clean(self, joined: str, values: Sequence[str]) -> list[str] | None:
        if (
            "\0\0" in joined or joined[:1] == "\0" or joined[-1:] == "\0" or not joined  # an empty text
            or _has_any(joined, XML_CHARS, XML_SPECIAL)
            or (len(joined) * 2 > MAX_CELL_CHARS and max(map(len, values)) * 2 > MAX_CELL_CHARS
                and max(map(utf16_units, values)) > MAX_CELL_CHARS)  # fmt: skip
        ):  # fmt: skip
            return None
        return (_XML_TEXT[0] + joined.replace("\0", _XML_TEXT[1] + "\0" + _XML_TEXT[0]) + _XML_TEXT[1]).split("\0")

    def number_wrap(self, kind: int) -> tuple[str, str]:
        return _XML_NUMBER if kind == KIND_FLOAT else (_XML_TEXT[0], "%" + _XML_TEXT[1])


def row_items(
    formats: Sequence[_Format], columns: Sequence[Column | Sequence[Any]], lo: int, hi: int
) -> list[list[str]]:  # fmt: skip
    """Texts of rows [lo, hi) to be joined row by row with the formats' `sep`: a list per column, except that
    a run of adjacent coded columns gives one list (each item the row's cells of the run, joined)."""
    items: list[list[str]] = []
    run: list[int] = []

    def flush() -> None:
        if len(run) == 1:
            items.append(formats[run[0]].column(columns[run[0]], lo, hi))
        elif run:
            items.extend(_combined([formats[k] for k in run], [columns[k] for k in run], lo, hi))  # type: ignore[misc]
        run.clear()

    for k, col in enumerate(columns):
        if isinstance(col, Column) and col.codes is not None:
            run.append(k)
        else:
            flush()
            items.append(formats[k].column(col, lo, hi))
    flush()
    return items


COMBINED_CODES = 1 << 62  # the codes of combined columns stay below this


def _combined(formats: Sequence[_Format], cols: Sequence[Column], lo: int, hi: int) -> list[list[str]]:
    """The cells of adjacent coded columns joined row by row: one text per distinct combination of codes."""
    tables = [f.table_texts(c) for f, c in zip(formats, cols)]
    size = 1
    for k, t in enumerate(tables):
        if size * max(len(t), 1) >= COMBINED_CODES:  # too many combinations: two runs
            return _combined(formats[:k], cols[:k], lo, hi) + _combined(formats[k:], cols[k:], lo, hi)
        size *= max(len(t), 1)
    combo = cols[0].codes[lo:hi].astype(np.int64)  # type: ignore[index]
    for c, t in zip(cols[1:], tables[1:]):
        combo = combo * len(t) + c.codes[lo:hi]  # type: ignore[index]
    uniq, inverse = np.unique(combo, return_inverse=True)
    parts = []
    rest = uniq
    for t in reversed(tables):
        parts.append(t[rest % len(t)].tolist())
        rest = rest // len(t)
    parts.reverse()
    joined = list(map(formats[0].sep.join, zip(*parts)))
    return [_object_array(joined)[inverse.reshape(-1)].tolist()]


def numeric_spec(fmt: Any, col: Column, lo: int, hi: int, digits: bool) -> tuple[Any, ...]:
    """Rows [lo, hi) of a numeric column (one with both `kind` and `values`) as the C block writers (_csvrows
    csv_block and xml_block) take it: values, kinds, the codes and texts of its other cells, and orjson's text of the
    numbers when `digits` (_csvrows puts them in repr's layout; None: repr's own)."""
    assert col.values is not None and col.kind is not None, "a numeric column has values and kinds"
    codes, texts = fmt.other_codes(col, slice(lo, hi))
    values = np.ascontiguousarray(col.values[lo:hi], dtype=np.float64)
    kind = np.ascontiguousarray(col.kind[lo:hi], dtype=np.int8)
    numbers = floattext.orjson_array(values) if digits else None  # the other cells' tokens are skipped, unread
    return values, kind, codes, texts, numbers
