"""What a result cell holds, as one code: shared by the column builders (table.py), the cell texts (columntext.py),
the C row assembly (_csvrows.c) and the HTML payload (html.py, assets/report_codes.js); each copy is checked equal
to this one when its module is imported (the script's when it is first read, render/report_script.py)."""

from __future__ import annotations

import re
from enum import IntEnum


class CellKind(IntEnum):
    FLOAT = 0  # the number values[i], written as repr
    INT = 1  # the number values[i], an integer
    PERCENT = 2  # the number values[i], written f"{x!r}%"
    OTHER = 3  # anything else: the cell's own object (in the HTML payload: text codes start here)


KIND_FLOAT, KIND_INT, KIND_PERCENT, KIND_OTHER = (int(k) for k in CellKind)  # plain ints for the hot paths

_JS_NAMES = {"K_FLOAT": CellKind.FLOAT, "K_INT": CellKind.INT, "K_PCT": CellKind.PERCENT, "K_STR": CellKind.OTHER}


def check_native(module: object, name: str) -> None:
    """A C module's KIND_* constants must be these codes."""
    for kind in CellKind:
        got = getattr(module, f"KIND_{kind.name}", None)
        if got != int(kind):
            raise ImportError(f"{name}: KIND_{kind.name} is {got}, CellKind.{kind.name} is {int(kind)}")


def check_script(script: str, name: str) -> None:
    """The report script's `const K_FLOAT = 0, ...` line must give these codes."""
    line = next((line for line in script.splitlines() if "const K_FLOAT" in line), "")
    found = {k: int(v) for k, v in re.findall(r"\b(K_[A-Z]+) = (\d+)", line)}
    want = {name: int(kind) for name, kind in _JS_NAMES.items()}
    if found != want:
        raise ImportError(f"{name}: cell kinds {found} differ from CellKind {want}")
