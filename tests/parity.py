"""Compare our xlsx with a reference CSV (header + rows + `__fill__` colour column).

Rules (as agreed for the project): same header; same rows in order; strings equal after trailing tabs
are stripped; numbers (also `x%`, `inf`, `Nan` texts) equal to 1e-9 relative; booleans equal to
their `True`/`False` texts; Err_message compared as a set of sentences; row colour equal.
Known deliberate deviations are applied by the caller through `expect_nan_red` (D3).
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any, Callable

import openpyxl

from msprobe_compare.render.summary_sheet import SHEET_NAME as SUMMARY_SHEET

NAN_INF_REASON = "maximum or minimum is nan, -inf, or inf"


def assert_same_bytes(got: bytes, want: bytes, what: str = "") -> None:
    """`assert got == want` for whole files, reporting the first difference only: pytest's diff of two large files
    that differ is computed in full on CI (CI=true turns its truncation off) and took difflib over 20 minutes for a
    5000-row CSV. This module is no test module, so pytest does not rewrite the assert below."""
    if got == want:
        return
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    lo, hi = max(0, at - 80), at + 80
    raise AssertionError(
        f"{what + ': ' if what else ''}{len(got)} and {len(want)} bytes, first difference at byte "
        f"{at}:\n  got  {got[lo:hi]!r}\n  want {want[lo:hi]!r}"
    )


def read_xlsx(path: Path) -> tuple[list[str], list[list[Any]], list[str]]:
    wb = openpyxl.load_workbook(path)
    header: list[str] | None = None
    body: list[list[Any]] = []
    fills: list[str] = []
    for ws in wb.worksheets:
        if ws.title == SUMMARY_SHEET:  # our answer beside the table (no sheet of the reference's)
            continue
        for i, row in enumerate(ws.iter_rows()):
            if i == 0:
                header = header or [str(c.value) for c in row if c.value is not None]
                continue
            body.append([c.value for c in row])
            kinds = set()
            for c in row:
                f = c.fill
                if f is not None and f.fill_type not in (None, "none"):
                    rgb = str(f.fgColor.rgb or "").upper()
                    kinds.add("red" if rgb.endswith("FF0000") else "yellow" if rgb.endswith("FFFF00") else rgb)
            fills.append("red" if "red" in kinds else "yellow" if "yellow" in kinds else "|".join(sorted(kinds)))
    assert header is not None, f"{path} has no header row"
    return header, [r[: len(header)] + [None] * (len(header) - len(r)) for r in body], fills


def read_csv(path: Path) -> tuple[list[str], list[list[str]], list[str]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    hdr = rows[0]
    assert hdr[-1] == "__fill__"
    return hdr[:-1], [r[:-1] for r in rows[1:]], [r[-1] for r in rows[1:]]


def text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    s = str(v).rstrip("\t")
    return s.capitalize() if s in ("TRUE", "FALSE") else s


def number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip().rstrip("\t").removesuffix("%")
    try:
        return float(s)
    except ValueError:
        return None


def sentences(v: Any) -> set[str]:
    parts = re.split(r"\n|(?<=\.)\s*(?=[A-Z\[ ])", text(v))
    return {p.strip() for p in parts if p.strip()}


def same(col: str, a: Any, b: Any) -> bool:
    if col == "Err_message":
        return sentences(a) == sentences(b)
    if text(a) == text(b):
        return True
    na, nb = number(a), number(b)
    if na is None or nb is None:
        return False
    if math.isnan(na) or math.isnan(nb):
        return math.isnan(na) and math.isnan(nb)
    if math.isinf(na) or math.isinf(nb):
        return na == nb
    return abs(na - nb) <= 1e-9 * max(abs(na), abs(nb)) + 1e-12


def mismatches(ours: Path, expected: Path, *, colours: bool = True, limit: int = 20,
               drop: Callable[[str], bool] | None = None,
               rewrite: Callable[[Any], Any] | None = None) -> list[str]:  # fmt: skip
    """Differences between our xlsx and the reference CSV; empty when they agree.

    Decision D3: a row whose NPU max/min is NaN must be red with the nan/inf reason even where the
    reference left it uncoloured. `drop`: our rows whose NPU Name it accepts are left out first (rows the
    reference does not have, by a listed deviation). `rewrite`: applied to each of our cells first.
    """
    oh, ob, of = read_xlsx(ours)
    if rewrite is not None:  # e.g. absolute paths in cells made relative, as the reference's CSV holds them
        ob = [[rewrite(v) for v in r] for r in ob]
    if drop is not None:
        kept = [k for k, r in enumerate(ob) if not drop(str(r[0]))]
        ob, of = [ob[k] for k in kept], [of[k] for k in kept]
    eh, eb, ef = read_csv(expected)
    errs: list[str] = []
    if oh != eh:
        errs.append(f"header differs:\n ours={oh}\n  exp={eh}")
        return errs
    if len(ob) != len(eb):
        errs.append(f"row count ours={len(ob)} expected={len(eb)}")
    col = {c: i for i, c in enumerate(eh)}
    for r, (ro, re_) in enumerate(zip(ob, eb)):
        name = re_[0]
        nan_stat = any(text(re_[col[c]]).lower() == "nan" for c in ("NPU max", "NPU min") if c in col)
        for c, i in col.items():
            a, b = ro[i], re_[i]
            if c == "Err_message" and nan_stat and colours:
                # red row: our message is the reference's base message plus red reasons only
                base = {x for x in sentences(b) if x[:1].isupper() or x.startswith("No ")}
                if NAN_INF_REASON not in sentences(a) or not base <= sentences(a):
                    errs.append(f"row {r + 2} [{name}] Err_message lacks the NaN reason (D3): {text(a)!r}")
                continue
            if not same(c, a, b):
                errs.append(f"row {r + 2} [{name}] col {c!r}: ours={text(a)[:120]!r} expected={text(b)[:120]!r}")
        if colours:
            want_fill = "red" if nan_stat else ef[r]
            if of[r] != want_fill:
                errs.append(f"row {r + 2} [{name}] fill ours={of[r]!r} expected={want_fill!r}")
        if len(errs) >= limit:
            break
    return errs


def advisor_head(path: Path) -> str:
    """The reference's three advisor entries (our file adds a labelled note and a root-cause section after them)."""
    text = path.read_text()
    for mark in ("\n\nNote: the three entries above", "\n\nRoot cause ("):
        head, sep, _ = text.partition(mark)
        if sep:
            return head + "\n"
    return text
