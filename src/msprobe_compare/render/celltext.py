"""The text of one cell, any value, in each output format: a CSV field (csv.writer's excel dialect, neutralised
against formulas), a JSON value (floats as repr) and an xlsx cell's XML (cut at Excel's limit). These are the
reference that the column paths (columntext.py, _csvrows.c) match byte for byte; the character sets that decide
whether a text needs more than passing through are here too.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from msprobe_compare.runtime import lazy_regex  # patterns compiled on first use (start-up speed)

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "＝", "＋", "－", "＠")
SAFE_TEXTS = frozenset({"-inf", "-"})
MAX_CELL_CHARS = 32767  # Excel's limit for one cell, in UTF-16 code units
CUT_MARK = "...[cut]"  # ends a text cut to fit a cell


_CONTROL = "".join(map(chr, range(1, 32)))
CSV_QUOTE_CHARS = ',"\r\n'  # characters that make csv.writer quote a field (excel dialect)
CSV_QUOTE = lazy_regex(f"[{re.escape(CSV_QUOTE_CHARS)}]")
JSON_CHARS = '"\\' + _CONTROL  # what orjson escapes; it refuses surrogates
JSON_SPECIAL = lazy_regex(f"[{re.escape(JSON_CHARS)}\ud800-\udfff]")
XML_CHARS = "&<>" + "".join(ch for ch in _CONTROL if ch not in "\t\n\r")
XML_SPECIAL = lazy_regex(f"[{re.escape(XML_CHARS)}\ufffe\uffff]")
_XML_BAD = lazy_regex("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_XML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def neutralise(value: Any) -> Any:
    """Text a spreadsheet would run as a formula gets a leading apostrophe; `-inf` stays as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and value not in SAFE_TEXTS:
        return "'" + value
    return value


def csv_field(value: Any) -> str:
    """The field csv.writer (excel dialect) writes for `neutralise(value)`."""
    value = neutralise(value)
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if CSV_QUOTE.search(text):
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
        if XML_SPECIAL.search(value) or "\0" in value:
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
