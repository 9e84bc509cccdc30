"""Write the result table as CSV or JSON Lines, streamed row by row.

CSV cells that a spreadsheet would run as a formula (text starting with = + - @ or a tab/CR) get a
leading apostrophe, the usual defence against CSV injection; `-inf` is left as it is. Each JSON line
is one object, column name -> value, with the row colour under "colour".
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

import orjson

from msprobe_compare.judge.highlight import Colour

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "＝", "＋", "－", "＠")
SAFE_TEXTS = frozenset({"-inf", "-"})
COLOUR_TEXT = {Colour.NONE: "", Colour.YELLOW: "yellow", Colour.RED: "red"}


def neutralise(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_START) and value not in SAFE_TEXTS:
        return "'" + value
    return value


def write_csv(path: Path, header: Sequence[str], rows: Iterable[tuple[Sequence[Any], Colour]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(list(header) + ["colour"])
        for cells, colour in rows:
            out.writerow([neutralise(v) for v in cells] + [COLOUR_TEXT[colour]])


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def write_jsonl(path: Path, header: Sequence[str], rows: Iterable[tuple[Sequence[Any], Colour]]) -> None:
    keys = list(header) + ["colour"]
    with open(path, "wb") as f:
        for cells, colour in rows:
            record = dict(zip(keys, [_json_value(v) for v in cells] + [COLOUR_TEXT[colour]]))
            f.write(orjson.dumps(record) + b"\n")
