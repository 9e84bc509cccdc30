"""Cell texts of whole columns at once: CSV fields, JSON values and xlsx cell XML.

Writers ask for the texts of one column over a block of rows and join the rows themselves, so the work per
cell stays in C:

- numbers: orjson writes the shortest round-trip digits of a whole float64 array in one call, the digits
  Python's repr chooses; where its layout differs from repr's (exponents, whose spelling depends on orjson's
  release, and 1e-5 <= |x| < 1e-4) the text is rewritten. Every format writes repr's text of a float. Both
  paths are checked once per process, when a block first has enough numbers to pay for the check
  (`ORJSON_DIGITS`, `floattext.worth`); if orjson ever disagrees, repr writes every number;
- texts: the block is joined with NUL and searched once; clean texts pass through unchanged (CSV) or are
  wrapped all at once by a join and a split (JSON, XML). Only columns with special characters go cell by
  cell, and then each distinct string is formatted once.

The results are exactly what csv.writer (excel dialect, QUOTE_MINIMAL) with `flat.neutralise`, `json_value`
(orjson, floats as repr) and `xlsx.cell_xml` give for each value.
"""

from __future__ import annotations

import re
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np
import orjson

from msprobe_compare import floattext
from msprobe_compare.render.cellkind import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT
from msprobe_compare.runtime import lazy_regex  # patterns compiled on first use (start-up speed)

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "＝", "＋", "－", "＠")
SAFE_TEXTS = frozenset({"-inf", "-"})
MAX_CELL_CHARS = 32767  # Excel's limit for one cell, in UTF-16 code units
CUT_MARK = "...[cut]"  # ends a text cut to fit a cell
INT_BULK_LIMIT = 1e16  # integers below this are written in bulk (orjson prints them as "D.0")

_CONTROL = "".join(map(chr, range(1, 32)))
_CSV_QUOTE_CHARS = ',"\r\n'  # characters that make csv.writer quote a field (excel dialect)
_CSV_QUOTE = lazy_regex(f"[{re.escape(_CSV_QUOTE_CHARS)}]")
_JSON_CHARS = '"\\' + _CONTROL  # what orjson escapes; it refuses surrogates
_JSON_SPECIAL = lazy_regex(f"[{re.escape(_JSON_CHARS)}\ud800-\udfff]")
_XML_CHARS = "&<>" + "".join(ch for ch in _CONTROL if ch not in "\t\n\r")
_XML_SPECIAL = lazy_regex(f"[{re.escape(_XML_CHARS)}\ufffe\uffff]")
_XML_BAD = lazy_regex("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_XML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_XML_TEXT = ('<c t="inlineStr"><is><t xml:space="preserve">', "</t></is></c>")
_XML_NUMBER = ("<c><v>", "</v></c>")


# --- numbers ---------------------------------------------------------------------------------------------


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
        verdict = globals()["ORJSON_DIGITS"] = floattext.agrees("celltext", _orjson_agrees)
    return verdict


def __getattr__(name: str) -> Any:
    if name == "ORJSON_DIGITS":
        return _orjson_digits()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _bulk(n: int) -> bool:
    """Whether n values go through orjson's digits (a small block takes repr's: the same texts, no check run)."""
    return floattext.worth("celltext", n) and _orjson_digits()


def number_texts(values: np.ndarray, numbers: np.ndarray | None = None, ints: np.ndarray | None = None) -> bytes:
    """The texts of a float64 array joined by commas: repr(float(x)), str(int(x)) where `ints` (integral values
    below 1e16), "null" outside `numbers` (default: all); from orjson's digits while ORJSON_DIGITS, else by repr."""
    return (_numbers_orjson if _bulk(len(values)) else _numbers_python)(values, numbers, ints)


def float_reprs(values: np.ndarray) -> list[str]:
    """repr(float(x)) of each element of a float array."""
    return (_float_reprs_orjson if _bulk(len(values)) else _float_reprs_python)(values)


# --- a column in compact form --------------------------------------------------------------------------


class Cells(list):
    """A column's cell values (a plain list to the writers) that also keeps them in numeric form.

    `kind` per cell: 0 a float, 1 an int, 2 a float written as f"{x!r}%", 3 anything else (the cell
    itself tells); `values` holds the number of kinds 0-2 (float64). The HTML report reads these.
    """

    kind: np.ndarray
    values: np.ndarray




class Column:
    """One column of the result table in compact form, in one of three shapes:

    - `objects` (a list) holds the cell values;
    - `codes` and `table`: cell i is table[codes[i]] (a column of few distinct values);
    - `kind`, `values` and `objects` (an object array): `kind[i]` KIND_FLOAT, KIND_INT and KIND_PERCENT
      mean the number `values[i]` (a float, an int, a float written f"{x!r}%"), KIND_OTHER the value
      `objects[i]`. Numbers never become Python objects unless `cells()` asks. The objects may be given as
      `others` instead: (a code per cell, the list of objects the codes index), the object array then made on
      first use (the writers read the codes).
    """

    __slots__ = ("_objects", "kind", "values", "codes", "table", "others")

    def __init__(
        self, objects: Any = None, kind: np.ndarray | None = None, values: np.ndarray | None = None, *,
        codes: np.ndarray | None = None, table: list[Any] | None = None,
        others: tuple[np.ndarray, list[Any]] | None = None,
    ) -> None:  # fmt: skip
        self._objects = objects
        self.kind = kind
        self.values = values
        self.codes = codes
        self.table = table
        self.others = others

    @property
    def objects(self) -> Any:
        """The cell values (an object array in the numeric shape); made from the codes when coded."""
        if self._objects is None and self.codes is not None:
            return object_array(self.table or [])[self.codes].tolist()
        if self._objects is None and self.others is not None:
            codes, objects = self.others
            self._objects = object_array(objects)[codes]
        return self._objects

    def __len__(self) -> int:
        if self.codes is not None:
            return len(self.codes)
        return len(self.kind) if self._objects is None and self.kind is not None else len(self._objects)

    def cells(self) -> list[Any]:
        """The cell values as a list: a `Cells` (numbers as float/int/str objects) when the column has kinds."""
        if self.kind is None:
            objects = self.objects
            return objects if isinstance(objects, list) else list(objects)
        kind, values = self.kind, self.values
        assert values is not None
        out = self.objects.copy()
        sel = kind == KIND_FLOAT
        out[sel] = values[sel].astype(object)
        sel = kind == KIND_INT
        ints = object_array([int(v) for v in values[sel].tolist()])  # exact, also beyond 64 bits
        out[sel] = ints
        sel = kind == KIND_PERCENT
        if sel.any():
            texts = np.empty(int(np.count_nonzero(sel)), dtype=object)
            texts[:] = [t + "%" for t in float_reprs(values[sel])]
            out[sel] = texts
        cells = Cells(out.tolist())
        cells.values, cells.kind = values, kind
        return cells


class TextRange(Sequence):
    """Rows [start, stop) of a list of cell values, without a copy: a block's column of a whole table's texts that a
    native writer reads in place (render.flat), so a forked writer touches none of the objects it shares."""

    __slots__ = ("items", "start", "stop")

    def __init__(self, items: list[Any], start: int, stop: int) -> None:
        self.items, self.start, self.stop = items, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, k: Any) -> Any:
        rows = range(self.start, self.stop)[k]
        if isinstance(rows, int):
            return self.items[rows]
        return self.items[rows.start : rows.stop] if rows.step == 1 else [self.items[i] for i in rows]


class TakenRows(Sequence):
    """Cell k is items[rows[k]], or `missing` where rows[k] is -1, without a copy: a column of the bench side's
    texts in NPU row order (the match) that a native writer reads in place, as a TextRange."""

    __slots__ = ("items", "rows", "missing")

    def __init__(self, items: list[Any], rows: np.ndarray, missing: Any) -> None:
        self.items, self.rows, self.missing = items, np.ascontiguousarray(rows, dtype=np.int64), missing

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return self._take(self.rows[k])
        r = int(self.rows[k])
        return self.missing if r < 0 else self.items[r]

    def __iter__(self) -> Any:
        return iter(self._take(self.rows))

    def _take(self, rows: np.ndarray) -> list[Any]:
        if not len(self.items):
            return [self.missing] * len(rows)
        table = np.empty(len(self.items) + 1, dtype=object)
        table[:-1] = self.items
        table[-1] = self.missing  # index -1 lands here
        return table[rows].tolist()


class ColumnBlocks:
    """A table's columns made on demand a range of rows at a time: `rows(lo, hi)` gives rows [lo, hi) of every
    column (as `Column`s or sequences of cell values), the same cells whatever the range. A writer given one builds
    only the rows it writes, in the process that writes them, and never holds the whole table."""

    __slots__ = ("n", "rows")

    def __init__(self, n: int, rows: Callable[[int, int], list[Any]]) -> None:
        self.n = n
        self.rows = rows

    def __len__(self) -> int:
        return self.n


def object_array(items: list[Any]) -> np.ndarray:
    """A 1-d object array of `items` (which may themselves be sequences)."""
    out = np.empty(len(items), dtype=object)
    for k, item in enumerate(items):
        out[k] = item
    return out



# --- one cell, any value: the reference behaviour the column paths must match ----------------------------


def neutralise(value: Any) -> Any:
    """Text a spreadsheet would run as a formula gets a leading apostrophe; `-inf` stays as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and value not in SAFE_TEXTS:
        return "'" + value
    return value


def csv_field(value: Any) -> str:
    """The field csv.writer (excel dialect) writes for `neutralise(value)`."""
    value = neutralise(value)
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if _CSV_QUOTE.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def json_value(value: Any) -> str:
    """The JSON text of a cell value: floats as repr writes them (as the json module does; orjson's layout of
    exponents depends on its release), non-finite ones as their repr text in quotes; the rest as orjson writes it."""
    if isinstance(value, float):
        text = float.__repr__(float(value))
        return text if value - value == 0 else f'"{text}"'
    return orjson.dumps(value).decode("utf-8")


def xml_escape(text: str) -> str:
    text = text.translate(_XML_ESCAPES)
    if _XML_BAD.search(text):
        text = _XML_BAD.sub("\ufffd", text)
    return text


def utf16_units(text: str) -> int:
    """The length of `text` in UTF-16 code units (as Excel counts): characters beyond U+FFFF count twice."""
    if len(text) * 2 <= MAX_CELL_CHARS:
        return len(text) * 2  # an upper bound is enough below the limit
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def cut_cell(text: str) -> str:
    """`text` if it fits a cell (MAX_CELL_CHARS UTF-16 code units), else its longest head that fits with CUT_MARK
    after it; never cut inside a surrogate pair."""
    if len(text) * 2 <= MAX_CELL_CHARS:
        return text
    units = text.encode("utf-16-le", "surrogatepass")
    if len(units) // 2 <= MAX_CELL_CHARS:
        return text
    keep = (MAX_CELL_CHARS - len(CUT_MARK)) * 2
    if 0xD8 <= units[keep - 1] <= 0xDB:  # the last unit kept is a high surrogate: its pair would be cut
        keep -= 2
    return units[:keep].decode("utf-16-le", "surrogatepass") + CUT_MARK


def cell_xml(value: Any, style: str = "") -> str:
    """One <c> element without a reference: cells follow each other, so empty ones are written too."""
    kind = type(value)
    if kind is str:
        if not value:
            return f"<c{style}/>"
        if len(value) * 2 > MAX_CELL_CHARS:
            value = cut_cell(value)
        if _XML_SPECIAL.search(value) or "\0" in value:
            value = xml_escape(value)
        return f'<c{style} t="inlineStr"><is><t xml:space="preserve">{value}</t></is></c>'
    if kind is float:
        if value - value == 0:  # finite
            return f"<c{style}><v>{value!r}</v></c>"
        return cell_xml(repr(value), style)  # renderers never pass these; keep the file valid regardless
    if kind is bool:
        return f'<c{style} t="b"><v>{int(value)}</v></c>'
    if kind is int:
        return f"<c{style}><v>{value}</v></c>"
    if value is None:
        return f"<c{style}/>"
    if isinstance(value, (int, float, str)):  # subclasses (numpy scalars, enums)
        return cell_xml(kind.__mro__[1](value) if not isinstance(value, bool) else bool(value), style)
    return cell_xml(str(value), style)


# --- whole columns -----------------------------------------------------------------------------------------


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
        if _has_any(joined, _CSV_QUOTE_CHARS, _CSV_QUOTE) or _formula_start(joined):
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
        if _has_any(joined, _JSON_CHARS, _JSON_SPECIAL):
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
            or _has_any(joined, _XML_CHARS, _XML_SPECIAL)
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
