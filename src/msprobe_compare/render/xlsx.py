"""Write the result table as .xlsx: the sheet XML is generated directly and streamed into the zip.

A general-purpose writer spends most of its time per cell; here each row becomes one string, so a
million-row table takes seconds. Strings are inline strings (t="inlineStr"), so a value such as
"=cmd|..." is stored as text and never becomes a formula. Whole rows are filled red or yellow. Above
MAX_SHEET_ROWS data rows the table is split into sheets part_0, part_1, ... of equal size, and stays
coloured (decision D2).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any, Sequence

from msprobe_compare.judge.highlight import Colour

MAX_SHEET_ROWS = 1_048_500
MAX_CELL_CHARS = 32767
# style ids in styles.xml: 0 default, 1 red row, 2 yellow row, 3 header
STYLE = {Colour.NONE: "", Colour.RED: ' s="1"', Colour.YELLOW: ' s="2"'}

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/styles.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>'
    "{sheets}</Types>"
)
_SHEET_TYPE = (
    '<Override PartName="/xl/worksheets/sheet{k}.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
)
_ROOT_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="xl/workbook.xml"/></Relationships>'
)
_WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    "<sheets>{sheets}</sheets><definedNames>{names}</definedNames></workbook>"
)
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '{rels}<Relationship Id="rIdStyles" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" '
    'Target="styles.xml"/></Relationships>'
)
_SHEET_REL = (
    '<Relationship Id="rId{k}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
    'Target="worksheets/sheet{k}.xml"/>'
)
_STYLES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    '<fonts count="2"><font><sz val="11"/><name val="Calibri"/></font>'
    '<font><b/><sz val="11"/><name val="Calibri"/></font></fonts>'
    '<fills count="4"><fill><patternFill patternType="none"/></fill>'
    '<fill><patternFill patternType="gray125"/></fill>'
    '<fill><patternFill patternType="solid"><fgColor rgb="FFFF0000"/><bgColor indexed="64"/></patternFill></fill>'
    '<fill><patternFill patternType="solid"><fgColor rgb="FFFFFF00"/><bgColor indexed="64"/></patternFill></fill>'
    "</fills>"
    '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
    '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
    '<cellXfs count="4"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
    '<xf numFmtId="0" fontId="0" fillId="2" borderId="0" xfId="0" applyFill="1"/>'
    '<xf numFmtId="0" fontId="0" fillId="3" borderId="0" xfId="0" applyFill="1"/>'
    '<xf numFmtId="0" fontId="1" fillId="0" borderId="0" xfId="0" applyFont="1"/></cellXfs>'
    '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>'
    "</styleSheet>"
)
_SHEET_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<dimension ref="A1:{last}"/>'
    '<sheetViews><sheetView workbookViewId="0"{selected}>'
    '<pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>'
    "</sheetView></sheetViews>"
    '<sheetFormatPr defaultRowHeight="15"/><sheetData>'
)


def column_letter(index: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA."""
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


def escape(text: str) -> str:
    text = text.translate(_ESCAPES)
    if _XML_BAD.search(text):
        text = _XML_BAD.sub("\ufffd", text)
    return text


def sheet_sizes(n_rows: int, single_name: str) -> list[tuple[str, int]]:
    if n_rows < MAX_SHEET_ROWS:
        return [(single_name, n_rows)]
    parts = n_rows // MAX_SHEET_ROWS + 1
    base, extra = divmod(n_rows, parts)
    return [(f"part_{k}", base + (1 if k < extra else 0)) for k in range(parts)]


_NEEDS_ESCAPE = re.compile("[&<>\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _cell(value: Any, style: str) -> str:
    """One <c> element without a reference: cells follow each other, so empty ones are written too."""
    kind = type(value)
    if kind is str:
        if not value:
            return f"<c{style}/>"
        if len(value) > MAX_CELL_CHARS:
            value = value[:MAX_CELL_CHARS]
        if _NEEDS_ESCAPE.search(value):
            value = escape(value)
        return f'<c{style} t="inlineStr"><is><t xml:space="preserve">{value}</t></is></c>'
    if kind is float:
        if value - value == 0:  # finite
            return f"<c{style}><v>{value!r}</v></c>"
        return _cell(repr(value), style)  # renderers never pass these; keep the file valid regardless
    if kind is bool:
        return f'<c{style} t="b"><v>{int(value)}</v></c>'
    if kind is int:
        return f"<c{style}><v>{value}</v></c>"
    if value is None:
        return f"<c{style}/>"
    if isinstance(value, (int, float, str)):  # subclasses (numpy scalars, enums)
        return _cell(kind.__mro__[1](value) if not isinstance(value, bool) else bool(value), style)
    return _cell(str(value), style)


BLOCK_ROWS = 32768  # rows turned into XML at a time: bounds the memory of the fragments


def _column_xml(values: Sequence[Any]) -> list[str]:
    """XML of one column's cells (unstyled), with the common types handled inline."""
    out: list[str] = []
    append = out.append
    search = _NEEDS_ESCAPE.search
    for v in values:
        kind = type(v)
        if kind is str:
            if not v:
                append("<c/>")
                continue
            if len(v) > MAX_CELL_CHARS:
                v = v[:MAX_CELL_CHARS]
            if search(v):
                v = escape(v)
            append(f'<c t="inlineStr"><is><t xml:space="preserve">{v}</t></is></c>')
        elif kind is float and v - v == 0:
            append(f"<c><v>{v!r}</v></c>")
        elif kind is int:
            append(f"<c><v>{v}</v></c>")
        else:
            append(_cell(v, ""))
    return out


def _write_sheet_columns(
    zf: zipfile.ZipFile, k: int, header: Sequence[str], columns: Sequence[Sequence[Any]],
    colours: Sequence[Colour], start: int, size: int, selected: bool,
) -> None:  # fmt: skip
    """One sheet from columns: rows [start, start + size) of every column, whole rows coloured."""
    last_ref = f"{column_letter(len(header) - 1)}{size + 1}"
    with zf.open(f"xl/worksheets/sheet{k}.xml", "w", force_zip64=True) as raw:
        head = "".join(_cell(text, ' s="3"') for text in header)
        raw.write((_SHEET_HEAD.format(last=last_ref, selected=' tabSelected="1"' if selected else "")
                   + f'<row r="1">{head}</row>').encode("utf-8"))  # fmt: skip
        for lo in range(start, start + size, BLOCK_ROWS):
            hi = min(lo + BLOCK_ROWS, start + size)
            parts = [_column_xml(col[lo:hi]) for col in columns]
            buf = []
            for offset, cells in enumerate(zip(*parts)):
                row = "".join(cells)
                style = STYLE[colours[lo + offset]]
                if style:
                    row = row.replace("<c", "<c" + style)
                buf.append(f'<row r="{lo - start + offset + 2}">{row}</row>')
            raw.write("".join(buf).encode("utf-8"))
        raw.write(f'</sheetData><autoFilter ref="A1:{last_ref}"/></worksheet>'.encode("utf-8"))


def write_xlsx_columns(
    path: Path, header: list[str], columns: Sequence[Sequence[Any]], colours: Sequence[Colour], sheet_name: str = "Sheet"
) -> None:
    """The result table given column by column, split into sheets part_0, part_1, ... when long."""
    n_rows = len(columns[0]) if columns else 0
    sheets = sheet_sizes(n_rows, sheet_name)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        start = 0
        for k, (_, size) in enumerate(sheets, start=1):
            _write_sheet_columns(zf, k, header, columns, colours, start, size, selected=k == 1)
            start += size
        _write_workbook_parts(zf, [(name, header, size) for name, size in sheets])


def write_workbook(
    path: Path, sheets: list[tuple[str, Sequence[str], Sequence[Sequence[Any]]]]
) -> None:
    """Several uncoloured sheets given as (name, header, columns)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for k, (_, header, columns) in enumerate(sheets, start=1):
            size = len(columns[0]) if columns else 0
            _write_sheet_columns(zf, k, header, columns, [Colour.NONE] * size, 0, size, selected=k == 1)
        _write_workbook_parts(zf, [(name, header, len(cols[0]) if cols else 0) for name, header, cols in sheets])


def _write_workbook_parts(zf: zipfile.ZipFile, sheets: list[tuple[str, Sequence[str], int]]) -> None:
    """Everything of the package but the sheet XML: content types, relations, workbook, styles."""
    n = len(sheets)
    zf.writestr("[Content_Types].xml", _CONTENT_TYPES.format(
        sheets="".join(_SHEET_TYPE.format(k=k) for k in range(1, n + 1))))  # fmt: skip
    zf.writestr("_rels/.rels", _ROOT_RELS)
    zf.writestr("xl/workbook.xml", _WORKBOOK.format(
        sheets="".join(f'<sheet name="{escape(name)}" sheetId="{k}" r:id="rId{k}"/>'
                       for k, (name, _, _) in enumerate(sheets, start=1)),
        names="".join(f'<definedName name="_xlnm._FilterDatabase" localSheetId="{k}" hidden="1">'
                      f"'{escape(name)}'!$A$1:${column_letter(len(header) - 1)}${size + 1}</definedName>"
                      for k, (name, header, size) in enumerate(sheets))))  # fmt: skip
    zf.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS.format(
        rels="".join(_SHEET_REL.format(k=k) for k in range(1, n + 1))))  # fmt: skip
    zf.writestr("xl/styles.xml", _STYLES)
