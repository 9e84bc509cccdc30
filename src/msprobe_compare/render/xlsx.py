"""Write the result table as .xlsx: the sheet XML is generated directly and streamed into the zip.

A general-purpose writer spends most of its time per cell; here the cells of a block of rows are made
column by column (render.columntext: numbers vectorised, clean texts wrapped in one pass), the block's XML is
one join, and a worker thread compresses one block while the next is built. Strings are inline strings
(t="inlineStr"), so a value such as "=cmd|..." is stored as text and never becomes a formula. Whole rows
are filled red or yellow. Above MAX_SHEET_ROWS data rows the table is split into sheets part_0, part_1, ...
of equal size, and stays coloured (decision D2).

Layout for people: each column is as wide as its longest text (rows sampled in a big sheet), capped, the stack
column narrow (its text stays whole in the cell, shown in the formula bar); the header row wraps at spaces and is
frozen with the name columns (up to the first metric column where those fit a screen); a sheet prints landscape at
80% (PRINT_SCALE), the header row and the name column repeated on every page, pages numbered. Rows of the root cause's origins
and suspects are marked by their font and frame (bold and solid, italic and dashed), their fill unchanged; a
given small sheet (the Summary) follows the table's sheets.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import field
from itertools import chain, repeat
from pathlib import Path
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from msprobe_compare import native
from msprobe_compare.judge.highlight import Colour
from msprobe_compare.records import dataclass
from msprobe_compare.runtime import gc_paused, reap, release_free_memory
from msprobe_compare.render.celltext import cell_xml, xml_escape
from msprobe_compare.render.column import TakenRows, TextRange
from msprobe_compare.render.columntext import XmlFormat, numeric_spec, row_items
from msprobe_compare.render.numtext import float_reprs
from msprobe_compare.render.files import scratch_path
from msprobe_compare.render.flat import C_ROWS, append_file, c_digits, split_point
from msprobe_compare.render.table import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT, STACK, Column

if TYPE_CHECKING:
    import zipfile
    from concurrent.futures import Future

MAX_SHEET_ROWS = 1_048_500
# style ids in styles.xml: 0 default, 1 red row, 2 yellow row, 3 header; 4-9 marked rows (MARKED_STYLE); 10-15 the
# cells of a given sheet (XF_*)
STYLE: dict[int, str] = {Colour.NONE: "", Colour.RED: ' s="1"', Colour.YELLOW: ' s="2"'}
# marked rows (render.findings.RowMark: 1 origin, 2 suspect): bold in a solid frame, italic in a dashed one; the
# colour's fill is kept (parity reads the fills)
MARKED_STYLE: dict[tuple[int, int], str] = {
    (mark, colour): f' s="{4 + 3 * (mark - 1) + k}"'
    for mark in (1, 2) for k, colour in enumerate((Colour.NONE, Colour.RED, Colour.YELLOW))
}  # fmt: skip
XF_HEADER, XF_TITLE, XF_WRAP, XF_SECTION, XF_NUMBER, XF_COUNT, XF_LABEL = 3, 10, 11, 12, 13, 14, 15  # TextSheet cells


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
_FILLED = ' applyFill="1"'
_STYLES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    '<numFmts count="1"><numFmt numFmtId="164" formatCode="0.0000E+00"/></numFmts>'
    '<fonts count="4"><font><sz val="11"/><name val="Calibri"/></font>'
    '<font><b/><sz val="11"/><name val="Calibri"/></font>'
    '<font><i/><sz val="11"/><name val="Calibri"/></font>'
    '<font><b/><sz val="14"/><name val="Calibri"/></font></fonts>'
    '<fills count="5"><fill><patternFill patternType="none"/></fill>'
    '<fill><patternFill patternType="gray125"/></fill>'
    '<fill><patternFill patternType="solid"><fgColor rgb="FFFF0000"/><bgColor indexed="64"/></patternFill></fill>'
    '<fill><patternFill patternType="solid"><fgColor rgb="FFFFFF00"/><bgColor indexed="64"/></patternFill></fill>'
    '<fill><patternFill patternType="solid"><fgColor rgb="FFD9D9D9"/><bgColor indexed="64"/></patternFill></fill>'
    "</fills>"
    '<borders count="3"><border><left/><right/><top/><bottom/><diagonal/></border>'
    '<border><left/><right/><top style="medium"><color rgb="FF000000"/></top>'
    '<bottom style="medium"><color rgb="FF000000"/></bottom><diagonal/></border>'
    '<border><left/><right/><top style="dashed"><color rgb="FF000000"/></top>'
    '<bottom style="dashed"><color rgb="FF000000"/></bottom><diagonal/></border></borders>'
    '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
    '<cellXfs count="16"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
    '<xf numFmtId="0" fontId="0" fillId="2" borderId="0" xfId="0" applyFill="1"/>'
    '<xf numFmtId="0" fontId="0" fillId="3" borderId="0" xfId="0" applyFill="1"/>'
    '<xf numFmtId="0" fontId="1" fillId="0" borderId="0" xfId="0" applyFont="1" applyAlignment="1">'
    '<alignment vertical="top" wrapText="1"/></xf>'
    # 4-6 origin rows (no fill, red, yellow), 7-9 suspect rows
    + "".join(
        f'<xf numFmtId="0" fontId="{font}" fillId="{fill}" borderId="{border}" xfId="0" applyFont="1" '
        f'applyBorder="1"{apply}/>'
        for font, border in ((1, 1), (2, 2))
        for fill, apply in ((0, ""), (2, _FILLED), (3, _FILLED))
    )
    # 10 title, 11 wrapped text, 12 section header (bold on grey, wrapped), 13 a number in 4 significant digits
    + '<xf numFmtId="0" fontId="3" fillId="0" borderId="0" xfId="0" applyFont="1"/>'
    '<xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0" applyAlignment="1">'
    '<alignment vertical="top" wrapText="1"/></xf>'
    '<xf numFmtId="0" fontId="1" fillId="4" borderId="0" xfId="0" applyFont="1" applyFill="1" applyAlignment="1">'
    '<alignment vertical="top" wrapText="1"/></xf>'
    '<xf numFmtId="164" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1" applyAlignment="1">'
    '<alignment horizontal="left" vertical="top"/></xf>'
    # 14 a count (thousands separated), 15 a label beside a value of several lines
    '<xf numFmtId="3" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1" applyAlignment="1">'
    '<alignment horizontal="left" vertical="top"/></xf>'
    '<xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0" applyAlignment="1"><alignment vertical="top"/></xf>'
    "</cellXfs>"
    '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>'
    "</styleSheet>"
)
_SHEET_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<dimension ref="A1:{last}"/>'
    '<sheetViews><sheetView workbookViewId="0"{selected}>{pane}</sheetView></sheetViews>'
    '<sheetFormatPr defaultRowHeight="15"/>{cols}<sheetData>'
)
# printed at a readable scale (not fitted to a page width: 27 columns on one page were microscopic), landscape,
# across then down (a band of rows' columns on consecutive pages), the header row and the name column repeated on
# every page (Print_Titles; the print area starts at the second column, so the first page does not hold the name
# column twice), gridlines, pages numbered
PRINT_SCALE = 80  # percent: 11-point text prints at 8.8 points
_PRINT = (
    '<printOptions gridLines="1"/>'
    '<pageMargins left="0.4" right="0.4" top="0.5" bottom="0.6" header="0.3" footer="0.3"/>'
    f'<pageSetup orientation="landscape" pageOrder="overThenDown" scale="{PRINT_SCALE}"/>'
    "<headerFooter><oddFooter>&amp;L&amp;F: &amp;A&amp;RPage &amp;P of &amp;N</oddFooter></headerFooter>"
)
_SHEET_TAIL = '</sheetData><autoFilter ref="A1:{last}"/>' + _PRINT + "</worksheet>"
FREEZE_MAX_WIDTH = 150.0  # characters: frozen columns wider than this leave too little of a screen to scroll


def column_letter(index: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA."""
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


escape = xml_escape


def sheet_sizes(n_rows: int, single_name: str) -> list[tuple[str, int]]:
    if n_rows < MAX_SHEET_ROWS:
        return [(single_name, n_rows)]
    parts = n_rows // MAX_SHEET_ROWS + 1
    base, extra = divmod(n_rows, parts)
    return [(f"part_{k}", base + (1 if k < extra else 0)) for k in range(parts)]


MAX_WIDTH = 60.0  # the widest a column is fitted to, in characters of the default font
NARROW = {STACK: 45.0}  # columns kept narrower: long texts that stay whole in the cell
NUMBER_CHARS = 12  # the most characters a number shows in the General format ("-1.23457E-05")
WIDTH_SAMPLE = 4096  # rows of a bigger sheet whose texts fit a column (all codes of a coded column count)
ROW_HEIGHT = 15.0  # points: one line of the default font


def _shown(value: Any) -> int:
    """The characters a cell value shows (a number at most NUMBER_CHARS)."""
    if isinstance(value, str):
        return len(value)
    if value is None:
        return 0
    if isinstance(value, bool):
        return 5
    if isinstance(value, (int, float)):
        return min(len(repr(value)), NUMBER_CHARS)
    return len(str(value))


def _longest(col: Column | Sequence[Any], lo: int, hi: int) -> int:
    """The longest text of rows [lo, hi) of a column: every distinct text of a coded column, else a bounded
    sample of rows."""
    if hi <= lo:
        return 0
    if isinstance(col, Column) and col.codes is not None:
        table = col.table or []
        used = np.flatnonzero(np.bincount(col.codes[lo:hi], minlength=len(table)))
        return max(_shown(table[k]) for k in used.tolist())
    rows = np.arange(lo, hi) if hi - lo <= WIDTH_SAMPLE else np.linspace(lo, hi - 1, WIDTH_SAMPLE).astype(np.int64)
    if isinstance(col, Column) and col.kind is not None:
        assert col.values is not None
        kind, values = col.kind[rows], col.values[rows]
        other = rows[kind == KIND_OTHER]
        if col.others is not None and col._objects is None:  # the sample's objects, not the whole object array
            codes, distinct = col.others
            shown = [_shown(distinct[c]) for c in codes[other].tolist()]
        else:
            shown = [_shown(x) for x in col.objects[other].tolist()]
        shown += [len(t) + 1 for t in float_reprs(values[kind == KIND_PERCENT])]  # texts f"{x!r}%"
        shown += [_shown(int(x)) for x in values[kind == KIND_INT].tolist()]
        shown += [min(len(t), NUMBER_CHARS) for t in float_reprs(values[kind == KIND_FLOAT])]  # as _shown(x)
        return max(shown, default=0)
    objects = col.objects if isinstance(col, Column) else col
    return max(map(_shown, map(objects.__getitem__, rows.tolist())))


def _header_lines(text: str, width: float) -> int:
    """Lines of a header text wrapped at spaces to `width` characters (bold: a tenth wider)."""
    lines, used = 1, 0.0
    for word in text.split(" "):
        need = len(word) * 1.1
        if used and used + 1.1 + need > width:
            lines, used = lines + 1, need
        else:
            used += (1.1 if used else 0.0) + need
    return lines


def _header_width(text: str) -> float:
    """The least width that wraps a header into two lines at most, beside its filter button."""
    width = max((len(w) for w in text.split(" ")), default=0) * 1.1
    while _header_lines(text, width) > 2:
        width += 1
    return width + 3


def column_widths(header: Sequence[str], columns: Sequence[Column | Sequence[Any]], lo: int, hi: int) -> list[float]:
    """Widths of the columns for rows [lo, hi): the longest text plus a margin, at most MAX_WIDTH (NARROW
    columns less), at least what the header needs in two lines."""
    return [round(max(_header_width(name), min(_longest(col, lo, hi) + 2, NARROW.get(name, MAX_WIDTH))), 1)
            for name, col in zip(header, columns)]  # fmt: skip


def _cols_xml(widths: Sequence[float]) -> str:
    return "<cols>" + "".join(f'<col min="{k}" max="{k}" width="{w}" customWidth="1"/>'
                              for k, w in enumerate(widths, start=1)) + "</cols>"  # fmt: skip


BLOCK_ROWS = 8192  # rows turned into XML at a time: bounds the memory of the blocks (~13 MB of XML each for 28 columns)
PENDING_BLOCKS = 2  # encoded blocks waiting for the compressing thread


class _BackgroundWriter:
    """Writes blocks to a zip member from one worker thread, in order, at most PENDING_BLOCKS behind.

    zipfile's write spends its time in crc32, zlib and the file write, which all release the GIL for large
    buffers: the sheet is compressed while the next block of XML is built.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        from concurrent.futures import ThreadPoolExecutor  # only when a sheet is written (start-up speed)

        self.raw = raw
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xlsx-deflate")
        self.pending: deque[Future[Any]] = deque()

    def write(self, data: bytes) -> None:
        while len(self.pending) >= PENDING_BLOCKS:
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(self.raw.write, data))

    def close(self) -> None:
        """Wait for every block (raising the first failure) and stop the thread."""
        try:
            while self.pending:
                self.pending.popleft().result()
        finally:
            for f in self.pending:
                f.cancel()
            self.pool.shutdown(wait=True)


_STYLES_BY_CODE = [STYLE[Colour(c)] for c in range(len(STYLE))]  # xml_block's styles, indexed by colour code


def _xml_spec(fmt: XmlFormat, col: Column | Sequence[Any], lo: int, hi: int, digits: bool) -> Any:
    """Rows [lo, hi) of a column in the form _csvrows.xml_block takes: numbers stay numbers, texts of a whole list
    are read in place (made into cells in C), the other cells' XML comes from `fmt` (each distinct value once)."""
    if isinstance(col, Column) and col.codes is not None:
        return np.ascontiguousarray(col.codes[lo:hi], dtype=np.int32), fmt.table_texts(col).tolist()
    objects = col._objects if isinstance(col, Column) else col
    if isinstance(col, Column) and col.kind is not None and col.values is not None:  # numeric: has both
        return numeric_spec(fmt, col, lo, hi, digits)
    if isinstance(objects, TextRange) and isinstance(objects.items, list):
        return objects.items, objects.start + lo, cell_xml
    if isinstance(objects, TakenRows) and isinstance(objects.items, list):
        return objects.items, objects.rows[lo:hi], cell_xml, objects.missing
    if isinstance(objects, list):
        return objects, lo, cell_xml
    return fmt.column(col, lo, hi)


def _c_sheet_block(
    fmt: XmlFormat, columns: Sequence[Column | Sequence[Any]], colours: np.ndarray, lo: int, hi: int, first_row: int,
    digits: bool,
) -> bytes:  # fmt: skip
    """_py_sheet_block's bytes, the rows assembled in C (`_csvrows.xml_block`; numbers from orjson's text when
    `digits`)."""
    specs = [_xml_spec(fmt, col, lo, hi, digits) for col in columns]
    return C_ROWS.xml_block(specs, hi - lo, first_row, np.ascontiguousarray(colours[lo:hi], dtype=np.int8),
                            _STYLES_BY_CODE)  # fmt: skip


def _py_sheet_block(
    fmt: XmlFormat, columns: Sequence[Column | Sequence[Any]], colours: np.ndarray, lo: int, hi: int, first_row: int,
    digits: bool,
) -> bytes:  # fmt: skip
    """`_sheet_rows` encoded (`digits` is the C twin's)."""
    return _sheet_rows(fmt, columns, colours, lo, hi, first_row).encode("utf-8")


sheet_block = native.twin("_csvrows", _c_sheet_block, _py_sheet_block)


def _sheet_rows(
    fmt: XmlFormat, columns: Sequence[Column | Sequence[Any]], colours: np.ndarray, lo: int, hi: int, first_row: int
) -> str:  # fmt: skip
    """The <row> elements of rows [lo, hi) (numbered from `first_row`), whole rows coloured."""
    cells = row_items([fmt] * len(columns), columns, lo, hi)  # fresh lists: patched in place below
    numbers = "\0".join(map(str, range(first_row, first_row + hi - lo)))
    starts = ('<row r="' + numbers.replace("\0", '">\0<row r="') + '">').split("\0")
    styled = colours[lo:hi]
    for k in np.flatnonzero(styled).tolist():
        style = STYLE[int(styled[k])]
        if style and cells:
            row = "".join(item[k] for item in cells).replace("<c", "<c" + style)
            for item in cells:
                item[k] = ""
            cells[0][k] = row
    # one join over all the pieces: no string per row in between
    return "".join(chain.from_iterable(zip(starts, *cells, repeat("</row>"))))


def frozen_columns(widths: Sequence[float], wanted: int) -> int:
    """How many columns to freeze beside the header: `wanted` (the columns before the first metric one) where they
    fit FREEZE_MAX_WIDTH, else the two name columns where those fit, else the first column."""
    if wanted <= 0:
        return 0
    for count in (wanted, 2):
        if count <= wanted and sum(widths[:count]) <= FREEZE_MAX_WIDTH:
            return count
    return 1


def _pane(freeze: int) -> str:
    """The frozen header row, and the first `freeze` columns beside it."""
    if freeze <= 0:
        return '<pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>'
    cell = f"{column_letter(freeze)}2"
    return (f'<pane xSplit="{freeze}" ySplit="1" topLeftCell="{cell}" activePane="bottomRight" state="frozen"/>'
            '<selection pane="topRight"/><selection pane="bottomLeft"/>'
            f'<selection pane="bottomRight" activeCell="{cell}" sqref="{cell}"/>')  # fmt: skip


def _marked(plain: Any, colours: np.ndarray, marks: np.ndarray | None, start: int, end: int) -> Any:
    """`plain` (lo, hi, fmt) -> the XML of rows [lo, hi), with the rows that `marks` marks in the style of their
    mark and colour: those few rows are made alone, uncoloured, and their cells restyled."""
    at = np.flatnonzero(marks[start:end]) + start if marks is not None else np.zeros(0, dtype=np.int64)
    if not len(at):
        return lambda lo, hi, fmt: plain(lo, hi, fmt, colours)
    bare = np.zeros_like(colours)
    assert marks is not None

    def block(lo: int, hi: int, fmt: XmlFormat) -> bytes:
        rows = at[np.searchsorted(at, lo) : np.searchsorted(at, hi)].tolist()
        if not rows:
            return plain(lo, hi, fmt, colours)
        parts, done = [], lo
        for r in rows:
            if r > done:
                parts.append(plain(done, r, fmt, colours))
            style = MARKED_STYLE[(int(marks[r]), Colour(int(colours[r])))].encode("ascii")
            parts.append(plain(r, r + 1, fmt, bare).replace(b"<c", b"<c" + style))
            done = r + 1
        if done < hi:
            parts.append(plain(done, hi, fmt, colours))
        return b"".join(parts)

    return block


def _write_sheet_columns(
    zf: zipfile.ZipFile, k: int, header: Sequence[str], columns: Sequence[Column | Sequence[Any]],
    colours: np.ndarray, start: int, size: int, selected: bool, marks: np.ndarray | None = None, freeze: int = 0,
) -> None:  # fmt: skip
    """One sheet from columns: rows [start, start + size) of every column, whole rows coloured (and styled by
    `marks`: render.findings.RowMark per row); the header and the first `freeze` columns (frozen_columns) frozen."""
    last_ref = f"{column_letter(len(header) - 1)}{size + 1}"
    widths = column_widths(header, columns, start, start + size)
    lines = max((_header_lines(text, w - 3) for text, w in zip(header, widths)), default=1)
    end = start + size
    with zf.open(f"xl/worksheets/sheet{k}.xml", "w", force_zip64=True) as raw:
        head = "".join(cell_xml(text, ' s="3"') for text in header)
        cols = _cols_xml(widths) if widths else ""
        first = f'<row r="1" ht="{lines * ROW_HEIGHT:g}" customHeight="1">{head}</row>'
        raw.write((_SHEET_HEAD.format(last=last_ref, selected=' tabSelected="1"' if selected else "", cols=cols,
                                      pane=_pane(frozen_columns(widths, freeze)))
                   + first).encode("utf-8"))  # fmt: skip
        tail = _SHEET_TAIL.format(last=last_ref).encode("utf-8")
        digits = c_digits(size)  # checked here, not again in a forked child

        def plain(lo: int, hi: int, fmt: XmlFormat, styled: np.ndarray) -> bytes:
            return sheet_block(fmt, columns, styled, lo, hi, lo - start + 2, digits)

        block = _marked(plain, colours, marks, start, end)
        half = split_point(size, PARALLEL_MIN_ROWS, BLOCK_ROWS) if _can_splice(raw, zf) else None
        split = start + half if half is not None else None
        mid = end if split is None else split
        child = _fork_half(zf, block, mid, end, tail) if split is not None else None
        try:
            _write_blocks(raw, block, start, mid)
            if child is not None:
                if _join_half(raw, zf, child):
                    return  # the child wrote the rest and the tail
                _write_blocks(raw, block, mid, end)  # it failed: the rest here, where an error shows its message
        finally:
            if child is not None:
                _drop_half(child)
        raw.write(tail)


def _write_blocks(raw: IO[bytes], block: Any, lo: int, hi: int) -> None:
    """The rows [lo, hi) a block at a time into the member, compressed by a thread while the next block is built."""
    out = _BackgroundWriter(raw)
    fmt = XmlFormat()  # one for all blocks: it keeps what it learnt of each column
    try:
        for a in range(lo, hi, BLOCK_ROWS):
            out.write(block(a, min(a + BLOCK_ROWS, hi), fmt))
    finally:
        out.close()


# --- the second half of a big sheet from a forked child ---------------------------------------------------
#
# The child builds and deflates rows [mid, end) and the sheet's tail into a part file (a raw deflate stream that
# ends the member), and reports their CRC-32 and length. This process deflates the head and rows [start, mid),
# ends its stream with a sync flush (byte-aligned, not final), then appends the child's stream: one valid deflate
# stream whose content is exactly the one-process content (the compressed bytes differ: two dictionaries). The
# member's CRC is combined from the two (crc32_combine), its sizes added. zipfile's writer keeps its counters in
# private fields (CPython 3.8 to 3.13): where they are missing one process writes the whole sheet.

PARALLEL_MIN_ROWS = 131072  # below this a second process costs more than it saves
_SPLICE_FIELDS = ("_compressor", "_crc", "_file_size", "_compress_size")


def _can_splice(raw: Any, zf: zipfile.ZipFile) -> bool:
    import zlib

    return (all(hasattr(raw, f) for f in _SPLICE_FIELDS) and raw._compressor is not None
            and hasattr(raw._compressor, "flush") and zf.fp is not None and hasattr(zf.fp, "fileno")
            and zf.filename is not None and hasattr(zlib, "Z_SYNC_FLUSH"))  # fmt: skip


def _fork_half(zf: zipfile.ZipFile, block: Any, mid: int, end: int, tail: bytes) -> list[Any]:
    """Fork the child writing rows [mid, end) and `tail`: [pid (0 once reaped), part file, read end of its report
    pipe]."""
    import zlib

    part = scratch_path(Path(str(zf.filename)))  # removed by the next run into the folder if this one is killed
    rd, wr = os.pipe()
    release_free_memory()  # free pages would be shared copy-on-write with the child
    pid = os.fork()
    if pid == 0:  # child: exit without cleanup handlers (the parent's buffered zip bytes are not flushed twice)
        status = 1
        try:
            os.close(rd)
            comp = zlib.compressobj(1, zlib.DEFLATED, -15)  # as zipfile's writer at compresslevel=1
            crc = length = 0
            fmt = XmlFormat()
            with open(part, "wb") as g:
                for a in range(mid, end, BLOCK_ROWS):
                    data = block(a, min(a + BLOCK_ROWS, end), fmt)
                    crc, length = zlib.crc32(data, crc), length + len(data)
                    g.write(comp.compress(data))
                crc, length = zlib.crc32(tail, crc), length + len(tail)
                g.write(comp.compress(tail) + comp.flush())
            os.write(wr, f"{crc} {length}\n".encode("ascii"))
            status = 0
        finally:
            os._exit(status)
    os.close(wr)
    return [pid, part, rd]


def _join_half(raw: Any, zf: zipfile.ZipFile, child: list[Any]) -> bool:
    """Append the child's stream to the member (True), or False when the child failed (the member's stream
    stays open: this process can go on writing it)."""
    import zlib

    pid, part, rd = child
    fp = zf.fp
    assert fp is not None  # _can_splice checked it
    flushed = raw._compressor.flush(zlib.Z_SYNC_FLUSH)
    ok = reap(pid) == 0
    child[0] = 0
    report = os.read(rd, 64).split() if ok else []
    raw._compress_size += len(flushed)
    fp.write(flushed)
    if not ok or len(report) != 2:
        return False
    crc, length = (int(x) for x in report)
    with open(part, "rb") as g:
        size = os.fstat(g.fileno()).st_size
        append_file(fp, g)
    fp.seek(0, os.SEEK_END)  # the buffered file's position after the kernel's copy
    raw._crc = crc32_combine(raw._crc, crc, length)
    raw._file_size += length
    raw._compress_size += size
    raw._compressor = _Ended()
    return True


def _drop_half(child: list[Any]) -> None:
    pid, part, rd = child
    if pid:
        reap(pid, kill=True)
    os.close(rd)
    part.unlink(missing_ok=True)


class _Ended:
    """A compressor whose stream another process has ended: nothing left to flush."""

    def flush(self, *_: Any) -> bytes:
        return b""


def _gf2_times(mat: list[int], vec: int) -> int:
    total, i = 0, 0
    while vec:
        if vec & 1:
            total ^= mat[i]
        vec >>= 1
        i += 1
    return total


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, row) for row in mat]


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from crc1 = crc32(A), crc2 = crc32(B) and len(B) (zlib's crc32_combine: crc1 advanced
    over len2 zero bytes by squaring the one-bit shift operator over GF(2))."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # the operator for one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four zero bits
    while True:
        even = _gf2_square(odd)
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def _codes(colours: Sequence[Colour] | np.ndarray, n: int) -> np.ndarray:
    codes = np.asarray(colours, dtype=np.int8) if len(colours) else np.zeros(0, dtype=np.int8)
    if len(codes) < n:
        raise ValueError(f"{len(codes)} colours for {n} rows")
    return codes


@dataclass(frozen=True)
class TextSheet:
    """A small sheet of given cells after the table's sheets (the Summary): `rows` of (value, XF id) cells (None:
    an empty cell), `widths` per column, `links` (row, column, location) to places in the table sheets (0-based row
    and column of this sheet; location such as "'Sheet'!A12")."""

    name: str
    rows: list[list[tuple[Any, int]]]
    widths: list[float]
    links: list[tuple[int, int, str]] = field(default_factory=list)


def _write_text_sheet(zf: zipfile.ZipFile, k: int, sheet: TextSheet) -> None:
    """A TextSheet as sheet k: cells as given, wrapped cells' rows as high as their lines, printed like the table."""
    width = max((len(r) for r in sheet.rows), default=1)
    last = f"{column_letter(max(width, 1) - 1)}{max(len(sheet.rows), 1)}"
    body = []
    for r, row in enumerate(sheet.rows, start=1):
        lines = 1
        for c, (value, xf) in enumerate(row):
            if xf in (XF_WRAP, XF_SECTION) and isinstance(value, str) and c < len(sheet.widths):
                lines = max(lines, _wrapped_lines(value, sheet.widths[c]))
        height = f' ht="{min(lines, 15) * ROW_HEIGHT:g}" customHeight="1"' if lines > 1 else ""
        body.append(f'<row r="{r}"{height}>' + "".join(cell_xml(v, f' s="{xf}"' if xf else "") for v, xf in row)
                    + "</row>")  # fmt: skip
    links = "".join(f'<hyperlink ref="{column_letter(c)}{r + 1}" location="{escape(to)}"/>' for r, c, to in sheet.links)
    xml = (_SHEET_HEAD.format(last=last, selected="", cols=_cols_xml(sheet.widths) if sheet.widths else "",
                              pane="") + "".join(body) + "</sheetData>"
           + (f"<hyperlinks>{links}</hyperlinks>" if links else "") + _PRINT + "</worksheet>")  # fmt: skip
    zf.writestr(f"xl/worksheets/sheet{k}.xml", xml)


def _wrapped_lines(text: str, width: float) -> int:
    """Lines of `text` wrapped at spaces in a column `width` characters wide (an estimate, as a spreadsheet wraps)."""
    per_line = max(int(width) - 1, 1)
    return sum(max(1, -(-len(part) // per_line)) for part in text.split("\n"))


def write_xlsx_columns(
    path: Path, header: list[str], columns: Sequence[Column | Sequence[Any]], colours: Sequence[Colour] | np.ndarray,
    sheet_name: str = "Sheet", *, marks: np.ndarray | None = None, freeze: int = 0, extra: TextSheet | None = None,
) -> None:  # fmt: skip
    """The result table given column by column, split into sheets part_0, part_1, ... when long; `marks`: a
    render.findings.RowMark per row (None: none); `freeze`: the columns before the first metric column (frozen
    beside the header where they fit, `frozen_columns`); `extra`: a sheet after the table's."""
    n_rows = len(columns[0]) if columns else 0
    codes = _codes(colours, n_rows)
    sheets = sheet_sizes(n_rows, sheet_name)
    import zipfile  # only when a workbook is written (start-up speed)

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf, gc_paused():
        start = 0
        for k, (_, size) in enumerate(sheets, start=1):
            _write_sheet_columns(zf, k, header, columns, codes, start, size, selected=k == 1, marks=marks,
                                 freeze=freeze)  # fmt: skip
            start += size
        if extra is not None:
            _write_text_sheet(zf, len(sheets) + 1, extra)
        _write_workbook_parts(zf, [(name, header, size) for name, size in sheets], [extra] if extra else [])


def table_location(sheet_name: str, n_rows: int, row: int, column: int = 0) -> str:
    """Where table row `row` (0-based, the header not counted) lies in a workbook of `n_rows` rows written by
    write_xlsx_columns: "'Sheet'!A12", in its part sheet when the table is split."""
    at = row
    for name, size in sheet_sizes(n_rows, sheet_name):
        if at < size:
            return f"'{name}'!{column_letter(column)}{at + 2}"
        at -= size
    raise IndexError(f"row {row} of {n_rows}")


def write_workbook(path: Path, sheets: list[tuple[str, Sequence[str], Sequence[Sequence[Any]]]]) -> None:
    """Several uncoloured sheets given as (name, header, columns)."""
    import zipfile  # only when a workbook is written (start-up speed)

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for k, (_, header, columns) in enumerate(sheets, start=1):
            size = len(columns[0]) if columns else 0
            _write_sheet_columns(zf, k, header, columns, np.zeros(size, dtype=np.int8), 0, size, selected=k == 1)
        _write_workbook_parts(zf, [(name, header, len(cols[0]) if cols else 0) for name, header, cols in sheets])


def _print_names(k: int, name: str, width: int, size: int) -> str:
    """Sheet k's print area and titles: the header row, and with two columns or more the first column, repeated on
    every page (the area then starts at the second column: the first is printed as the title)."""
    titled = width > 1
    area = f"'{name}'!${'B' if titled else 'A'}$1:${column_letter(width - 1)}${size + 1}"
    titles = f"'{name}'!$A:$A,'{name}'!$1:$1" if titled else f"'{name}'!$1:$1"
    return (f'<definedName name="_xlnm.Print_Area" localSheetId="{k}">{area}</definedName>'
            f'<definedName name="_xlnm.Print_Titles" localSheetId="{k}">{titles}</definedName>')  # fmt: skip


def _write_workbook_parts(zf: zipfile.ZipFile, sheets: list[tuple[str, Sequence[str], int]],
                          extra: Sequence[TextSheet] = ()) -> None:  # fmt: skip
    """Everything of the package but the sheet XML: content types, relations, workbook (the tables' filter, print
    area and print titles: header row and first column), styles."""
    names = [name for name, _, _ in sheets] + [x.name for x in extra]
    n = len(names)
    zf.writestr("[Content_Types].xml", _CONTENT_TYPES.format(
        sheets="".join(_SHEET_TYPE.format(k=k) for k in range(1, n + 1))))  # fmt: skip
    zf.writestr("_rels/.rels", _ROOT_RELS)
    zf.writestr(
        "xl/workbook.xml",
        _WORKBOOK.format(
            sheets="".join(
                f'<sheet name="{escape(name)}" sheetId="{k}" r:id="rId{k}"/>' for k, name in enumerate(names, start=1)
            ),
            names="".join(
                f'<definedName name="_xlnm._FilterDatabase" localSheetId="{k}" hidden="1">'
                f"'{escape(name)}'!$A$1:${column_letter(len(header) - 1)}${size + 1}</definedName>"
                for k, (name, header, size) in enumerate(sheets)
            )
            + "".join(
                _print_names(k, escape(name), len(header), size) for k, (name, header, size) in enumerate(sheets)
            ),
        ),
    )
    zf.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS.format(
        rels="".join(_SHEET_REL.format(k=k) for k in range(1, n + 1))))  # fmt: skip
    zf.writestr("xl/styles.xml", _STYLES)
