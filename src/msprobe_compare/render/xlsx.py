"""Write the result table as .xlsx with xlsxwriter (streamed rows, whole-row colour fills).

Every string is written with write_string, so a value such as "=cmd|..." is stored as text and
never becomes a formula. Above MAX_SHEET_ROWS data rows the table is split into sheets part_0,
part_1, ... of equal size, and stays coloured (decision D2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import xlsxwriter

from msprobe_compare.judge.highlight import Colour

MAX_SHEET_ROWS = 1_048_500
FILL = {Colour.RED: "#FF0000", Colour.YELLOW: "#FFFF00"}


def sheet_sizes(n_rows: int, single_name: str) -> list[tuple[str, int]]:
    if n_rows < MAX_SHEET_ROWS:
        return [(single_name, n_rows)]
    parts = n_rows // MAX_SHEET_ROWS + 1
    base, extra = divmod(n_rows, parts)
    return [(f"part_{k}", base + (1 if k < extra else 0)) for k in range(parts)]


def write_xlsx(
    path: Path,
    header: list[str],
    rows: Iterable[tuple[list[Any], Colour]],
    n_rows: int,
    sheet_name: str = "Sheet",
) -> None:
    wb = xlsxwriter.Workbook(
        str(path),
        {"constant_memory": True, "strings_to_numbers": False, "strings_to_formulas": False, "strings_to_urls": False},
    )
    head_fmt = wb.add_format({"bold": True})
    fmts = {c: wb.add_format({"bg_color": rgb, "pattern": 1}) for c, rgb in FILL.items()}
    it = iter(rows)
    width = len(header)
    for name, size in sheet_sizes(n_rows, sheet_name):
        ws = wb.add_worksheet(name)
        ws.freeze_panes(1, 0)
        for c, text in enumerate(header):
            ws.write_string(0, c, text, head_fmt)
        for r in range(1, size + 1):
            cells, colour = next(it)
            fmt = fmts.get(colour)
            for c, value in enumerate(cells):
                if isinstance(value, str):
                    if value:
                        ws.write_string(r, c, value[:32767], fmt)
                    elif fmt is not None:
                        ws.write_blank(r, c, None, fmt)
                elif isinstance(value, bool):
                    ws.write_boolean(r, c, value, fmt)
                elif value is None:
                    if fmt is not None:
                        ws.write_blank(r, c, None, fmt)
                else:
                    ws.write_number(r, c, value, fmt)
        ws.autofilter(0, 0, size, width - 1)
    wb.close()
