"""Column-wise cell texts (render.columntext, render.celltext) against per-cell references: csv.writer with the formula rule,
json.dumps of each row's dict (floats as repr, whatever orjson's release), and the per-cell xlsx XML the writer
used before it went column-wise."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.render import celltext, columntext, flat, xlsx
from msprobe_compare.render.table import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT, Column

FORMULA = ("=", "+", "-", "@", "\t", "\r", "＝", "＋", "－", "＠")


# --- references, written per cell as the writers did before ------------------------------------------------


def ref_neutralise(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA) and value not in ("-inf", "-"):
        return "'" + value
    return value


def ref_csv(header: list[str], rows: list[list[Any]], colours: list[Colour]) -> bytes:
    out = io.StringIO(newline="")
    w = csv.writer(out)
    w.writerow(header + ["colour"])
    for cells, colour in zip(rows, colours):
        w.writerow([ref_neutralise(v) for v in cells] + [flat.COLOUR_TEXT[colour]])
    return out.getvalue().encode("utf-8")


def ref_jsonl(header: list[str], rows: list[list[Any]], colours: list[Colour]) -> bytes:
    """The json module's compact lines: its floats are float.__repr__, its escapes those of orjson."""

    def value(v: Any) -> Any:
        return repr(v) if isinstance(v, float) and not math.isfinite(v) else v

    def line(d: dict[str, Any]) -> bytes:
        return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

    keys = header + ["colour"]
    return b"".join(line(dict(zip(keys, [value(v) for v in cells] + [flat.COLOUR_TEXT[c]])))
                    for cells, c in zip(rows, colours))  # fmt: skip


_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def ref_cut(text: str) -> str:
    """Excel's cell limit, 32,767 UTF-16 code units, counted code point by code point; the cut is marked."""
    units = [2 if ord(ch) > 0xFFFF else 1 for ch in text]
    if sum(units) <= 32767:
        return text
    kept, budget = [], 32767 - len("...[cut]")
    for ch, n in zip(text, units):
        if budget < n:
            break
        kept.append(ch)
        budget -= n
    return "".join(kept) + "...[cut]"


def ref_cell_xml(value: Any, style: str = "") -> str:
    kind = type(value)
    if kind is str:
        if not value:
            return f"<c{style}/>"
        value = _BAD.sub("\ufffd", ref_cut(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
        return f'<c{style} t="inlineStr"><is><t xml:space="preserve">{value}</t></is></c>'
    if kind is float:
        return f"<c{style}><v>{value!r}</v></c>" if math.isfinite(value) else ref_cell_xml(repr(value), style)
    if kind is bool:
        return f'<c{style} t="b"><v>{int(value)}</v></c>'
    if kind is int:
        return f"<c{style}><v>{value}</v></c>"
    if value is None:
        return f"<c{style}/>"
    return ref_cell_xml(str(value), style)


def ref_sheet_rows(rows: list[list[Any]], colours: list[Colour]) -> str:
    style = {Colour.NONE: "", Colour.RED: ' s="1"', Colour.YELLOW: ' s="2"'}
    return "".join(f'<row r="{r + 2}">' + "".join(ref_cell_xml(v, style[c]) for v in cells) + "</row>"
                   for r, (cells, c) in enumerate(zip(rows, colours)))  # fmt: skip


def materialised(columns: Sequence[Column | list[Any]]) -> list[list[Any]]:
    """The rows of cell values, as per-cell writers take them (oracles.table_columns, row by row)."""
    lists = [c.cells() if isinstance(c, Column) else list(c) for c in columns]
    return [list(r) for r in zip(*lists)] if lists else []


def sheet_rows(path: Path) -> str:
    xml = zipfile.ZipFile(path).read("xl/worksheets/sheet1.xml").decode("utf-8")
    body = xml[xml.index("<sheetData>") + len("<sheetData>") : xml.index("</sheetData>")]
    return body[body.index("</row>") + len("</row>") :]  # without the header row


def write_all(tmp_path: Path, header: list[str], columns: list[Any], colours: list[Colour]) -> dict[str, bytes]:
    flat.write_csv(tmp_path / "t.csv", header, columns, colours)
    flat.write_jsonl(tmp_path / "t.jsonl", header, columns, colours)
    xlsx.write_xlsx_columns(tmp_path / "t.xlsx", header, columns, colours)
    return {"csv": (tmp_path / "t.csv").read_bytes(), "jsonl": (tmp_path / "t.jsonl").read_bytes(),
            "xml": sheet_rows(tmp_path / "t.xlsx").encode("utf-8")}  # fmt: skip


def check_against_references(tmp_path: Path, header: list[str], columns: list[Any], colours: list[Colour]) -> None:
    got = write_all(tmp_path, header, columns, colours)
    rows = materialised(columns)
    assert got["csv"] == ref_csv(header, rows, colours)
    assert got["jsonl"] == ref_jsonl(header, rows, colours)
    assert got["xml"].decode("utf-8") == ref_sheet_rows(rows, colours)


def numeric(kinds: list[int], values: list[float], others: list[Any] | None = None) -> Column:
    objects = np.empty(len(kinds), dtype=object)
    for k, v in enumerate(others or []):
        objects[k] = v
    return Column(objects, np.array(kinds, dtype=np.int8), np.array(values, dtype=np.float64))


# --- CSV: quoting and the formula rule -----------------------------------------------------------------------


def test_csv_quoting_of_commas_quotes_and_line_breaks(tmp_path):
    texts = ["plain", "a,b", 'say "hi"', "line\nbreak", "cr\rhere", "crlf\r\n", '"', ",", "tab\tinside", ""]
    flat.write_csv(tmp_path / "t.csv", ["x"], [texts], [Colour.NONE] * len(texts))
    data = (tmp_path / "t.csv").read_bytes()
    assert data == ref_csv(["x"], [[t] for t in texts], [Colour.NONE] * len(texts))
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as f:
        assert [r[0] for r in csv.reader(f)][1:] == texts  # the quoting reads back
    assert b'"a,b"' in data and b'"say ""hi"""' in data and b'"line\nbreak"' in data


def test_csv_formula_rule_per_column(tmp_path):
    texts = ["=1+1", "+x", "-y", "@z", "\tq", "\rw", "＝a", "＋b", "－c", "＠d", "-inf", "-", "a=b", "inf", "nan",
             "=,quoted"]  # fmt: skip
    flat.write_csv(tmp_path / "t.csv", ["x"], [texts], [Colour.NONE] * len(texts))
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as f:
        got = [r[0] for r in csv.reader(f)][1:]
    expected = ["'" + t if t.startswith(FORMULA) and t not in ("-inf", "-") else t for t in texts]
    assert got == expected
    assert got[10] == "-inf" and got[11] == "-" and got[0] == "'=1+1" and got[-1] == "'=,quoted"


def test_clean_text_columns_pass_through_and_dirty_ones_do_not(tmp_path):
    names = [f"Functional.linear.{i}.forward.input.0" for i in range(200)]
    dirty = names[:]
    dirty[137] = "-starts-with-minus"
    for col in (names, dirty):
        flat.write_csv(tmp_path / "t.csv", ["x"], [col], [Colour.NONE] * len(col))
        assert (tmp_path / "t.csv").read_bytes() == ref_csv(["x"], [[t] for t in col], [Colour.NONE] * len(col))


def test_numbers_are_never_neutralised(tmp_path):
    col = numeric([KIND_FLOAT, KIND_FLOAT, KIND_INT, KIND_FLOAT, KIND_OTHER, KIND_OTHER],
                  [-1.5, -1e-7, -42.0, -0.0, 0.0, 0.0], [None, None, None, None, "-inf", "-text"])  # fmt: skip
    flat.write_csv(tmp_path / "t.csv", ["x"], [col], [Colour.NONE] * 6)
    lines = (tmp_path / "t.csv").read_text().splitlines()[1:]
    assert lines == ["-1.5,", "-1e-07,", "-42,", "-0.0,", "-inf,", "'-text,"]


def test_negative_percent_text_is_neutralised(tmp_path):
    col = numeric([KIND_PERCENT, KIND_PERCENT, KIND_PERCENT], [0.5, -0.25, 1e-7])
    flat.write_csv(tmp_path / "t.csv", ["x"], [col], [Colour.NONE] * 3)
    assert (tmp_path / "t.csv").read_text().splitlines()[1:] == ["0.5%,", "'-0.25%,", "1e-07%,"]


# --- every writer against its per-cell reference -------------------------------------------------------------


def test_mixed_columns_match_the_references(tmp_path):
    big = 2**60
    f, i, o = KIND_FLOAT, KIND_INT, KIND_OTHER
    stats = numeric(
        [f, i, o, o, o, f, i, o, o, i],
        [1.25, 2.0**53, 0.0, 0.0, 0.0, 3e-6, -7.0, 0.0, 0.0, -0.0],
        [None, None, "Nan", True, big, None, None, "a,b", "inf\t", None],
    )  # fmt: skip
    percent = numeric([KIND_PERCENT] * 7 + [KIND_OTHER] * 3, [0.5, 1e-5, 1e20, np.inf, 0.0, 12.0, 3.3e-5, 0, 0, 0],
                      [None] * 7 + ["N/A", "Nan", None])  # fmt: skip
    mixed = ["=1", 2, 2.5, True, None, "x<y&z", "", "\x01bad", big, "é 中文"]
    coded = Column(codes=np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0], dtype=np.int32), table=["N/A", 'a,"b"', "line\n2"])
    coded2 = Column(codes=np.array([1, 1, 0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int32), table=[True, False])
    header = ["stats", "percent", "mixed", "coded", "coded2"]
    colours = [Colour.NONE, Colour.RED, Colour.YELLOW, Colour.NONE, Colour.NONE, Colour.RED, Colour.NONE,
               Colour.NONE, Colour.YELLOW, Colour.NONE]  # fmt: skip
    check_against_references(tmp_path, header, [stats, percent, mixed, coded, coded2], colours)


def test_ints_beyond_2_53(tmp_path):
    values = [2**53, 2**53 + 1, -(2**62), 2**63 - 1]
    col = numeric([KIND_OTHER] * 4, [0.0] * 4, values)  # table.py keeps such integers as Python ints
    small = numeric([KIND_INT] * 3, [2.0**53, -(2.0**53), 12345.0])
    check_against_references(tmp_path, ["big"], [col], [Colour.NONE] * 4)
    check_against_references(tmp_path, ["small"], [small], [Colour.NONE] * 3)
    flat.write_csv(tmp_path / "b.csv", ["big"], [col], [Colour.NONE] * 4)
    assert (tmp_path / "b.csv").read_text().splitlines()[1:] == [f"{v}," for v in values]


def test_non_finite_values(tmp_path):
    # a table column has its non-finite floats as the style's texts; a plain list may hold the floats
    col = numeric([KIND_OTHER] * 3 + [KIND_FLOAT], [np.nan, np.inf, -np.inf, 1.0], ["nan", "inf", "-inf"])
    floats = [math.nan, math.inf, -math.inf, 1.0]
    check_against_references(tmp_path, ["a", "b"], [col, floats], [Colour.NONE] * 4)
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert [orjson.loads(x)["b"] for x in lines] == ["nan", "inf", "-inf", 1.0]
    assert (tmp_path / "t.csv").read_text().splitlines()[1:] == ["nan,nan,", "inf,inf,", "-inf,-inf,", "1.0,1.0,"]


def test_text_escapes_for_json_and_xml(tmp_path):
    texts = ['quote " back \\ slash', "ctl \x00 \x07 \x1f", "tab\tnl\n", "amp & lt < gt >", "\ufffe\uffff",
             "é 中文 😀", "x" * 40000, ""]  # fmt: skip
    check_against_references(tmp_path, ["t"], [texts], [Colour.NONE] * len(texts))


@pytest.mark.parametrize("block", [1, 2, 3, 7])
def test_block_boundaries(tmp_path, monkeypatch, block):
    rng = np.random.default_rng(block)
    n = 23
    kinds = rng.choice([KIND_FLOAT, KIND_INT, KIND_OTHER], n, p=[0.7, 0.2, 0.1]).astype(np.int8)
    values = np.where(kinds == KIND_INT, rng.integers(-1000, 1000, n), rng.standard_normal(n) * 1e-5)
    others = ["None" if k == KIND_OTHER else None for k in kinds]
    col = numeric(kinds.tolist(), values.tolist(), others)
    names = [f"n{i},{'=' if i % 5 == 0 else ''}" for i in range(n)]
    coded = Column(codes=rng.integers(0, 3, n).astype(np.int32), table=["a", "b", "c"])
    colours = [Colour(c) for c in rng.integers(0, 3, n).tolist()]
    whole = write_all(tmp_path, ["v", "n", "c"], [col, names, coded], colours)
    monkeypatch.setattr(flat, "BLOCK_ROWS", block)
    monkeypatch.setattr(xlsx, "BLOCK_ROWS", block)
    (tmp_path / "b").mkdir(exist_ok=True)
    assert write_all(tmp_path / "b", ["v", "n", "c"], [col, names, coded], colours) == whole
    check_against_references(tmp_path / "b", ["v", "n", "c"], [col, names, coded], colours)


def test_empty_and_single_row(tmp_path):
    for n in (0, 1):
        col = numeric([KIND_FLOAT] * n, [1.5] * n)
        check_against_references(tmp_path, ["a", "b"], [col, ["x"] * n], [Colour.RED] * n)


def test_repeated_column_names_in_jsonl(tmp_path):
    # as a dict of the row: the first place, the last value; "colour" among the names too
    flat.write_jsonl(tmp_path / "t.jsonl", ["a", "b", "a", "colour"], [["1"], ["2"], ["3"], ["4"]], [Colour.RED])
    assert (tmp_path / "t.jsonl").read_bytes() == orjson.dumps({"a": "3", "b": "2", "colour": "red"}) + b"\n"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none(),
                          st.floats(allow_nan=False, allow_infinity=False)), min_size=1, max_size=30))  # fmt: skip
def test_plain_lists_property(tmp_path_factory, values):
    tmp = tmp_path_factory.mktemp("p")
    check_against_references(tmp, ["v"], [values], [Colour.NONE] * len(values))


def test_coded_columns_match_their_cells(tmp_path):
    rng = np.random.default_rng(3)
    n = 300
    tables = [["torch.float32", "torch.bfloat16"], ["[16, 32]", "[4]", "N/A"], [True, False], ["", "Warning"]]
    coded = [Column(codes=rng.integers(0, len(t), n).astype(np.int32), table=t) for t in tables]
    plain = [c.cells() for c in coded]
    a = write_all(tmp_path, ["a", "b", "c", "d"], coded, [Colour.NONE] * n)
    (tmp_path / "p").mkdir()
    assert write_all(tmp_path / "p", ["a", "b", "c", "d"], plain, [Colour.NONE] * n) == a


@pytest.mark.parametrize("texts", [["x", "None", "None", "N/A", "None", "a,b", "None"],
                                   ["a,b", "a,b", "q\0z", "a,b", "None"]])  # fmt: skip
def test_other_cells_among_numbers(tmp_path, texts):
    # the most common other text goes in at once, the others one by one (also when it holds "," or NUL)
    kinds = [KIND_OTHER if k % 2 else KIND_FLOAT for k in range(2 * len(texts))]
    others = [texts[k // 2] if k % 2 else None for k in range(2 * len(texts))]
    col = numeric(kinds, [0.5 * k for k in range(len(kinds))], others)
    check_against_references(tmp_path, ["v"], [col], [Colour.NONE] * len(kinds))


def test_plain_float_lists_keep_the_sign_of_zero(tmp_path):
    # 0.0 == -0.0: a per-value memo must not give one the other's text
    check_against_references(tmp_path, ["f"], [[0.0, -0.0, 0.0, -0.0, 1.5]], [Colour.NONE] * 5)
    check_against_references(tmp_path, ["f", "g"], [[-0.0, 0.0], [True, 1]], [Colour.NONE] * 2)


def test_big_ints_and_non_finite_floats_are_written_as_their_values() -> None:
    """Integers of 1e16 and more (orjson prints them with an exponent) and non-finite floats in a numeric
    column: every format gives the per-cell text (these were once cut to '1e+' or lost in JSON)."""
    from msprobe_compare.render.celltext import cell_xml, csv_field, json_value
    from msprobe_compare.render.columntext import CsvFormat, JsonFormat, XmlFormat
    from msprobe_compare.render.table import KIND_FLOAT, KIND_INT, KIND_OTHER, KIND_PERCENT

    values = np.array([1e17, -5.0, -0.0, 2.0**60, 1e16 - 2, -1e16, 9.5e18, np.nan, np.inf, -np.inf, 0.25, 3.0, -1.5])
    kind = np.array([KIND_INT] * 7 + [KIND_FLOAT] * 4 + [KIND_OTHER, KIND_PERCENT], dtype=np.int8)
    objects = np.empty(len(values), dtype=object)
    objects[11] = "N/A"
    col = Column(objects, kind, values)
    cells = col.cells()
    n = len(values)
    assert CsvFormat().column(col, 0, n) == [csv_field(v) for v in cells]
    assert CsvFormat().column(col, 0, n)[:4] == ["100000000000000000", "-5", "0", "1152921504606846976"]
    assert JsonFormat("k").column(col, 0, n) == ['"k":' + json_value(v) for v in cells]
    assert XmlFormat().column(col, 0, n) == [cell_xml(v) for v in cells]


@pytest.mark.parametrize("text", ["\U0001F600" * 20000, "a" + "\U0001F600" * 20000, "x" * 40000, "x" * 32767,
                                  "\U0001F600" * 16383 + "a", "é" * 32768])  # fmt: skip
def test_cells_are_cut_at_excel_limit_in_utf16_units(text):
    cut = celltext.cut_cell(text)
    units = len(cut.encode("utf-16-le")) // 2  # strict: a surrogate pair cut in two would not encode
    assert units <= 32767
    assert cut == ref_cut(text)
    if cut != text:
        assert cut.endswith(celltext.CUT_MARK) and text.startswith(cut[: -len(celltext.CUT_MARK)])
        assert units >= 32767 - len(celltext.CUT_MARK) - 1
    assert celltext.cell_xml(text) == ref_cell_xml(text)
    assert columntext.XmlFormat().cells([text, "b"], np.arange(2)) == [ref_cell_xml(text), ref_cell_xml("b")]


def test_cell_kinds_are_one_set() -> None:
    """The C row assembly and the report script use CellKind's codes; a differing copy is refused at import."""
    from msprobe_compare import native
    from msprobe_compare.render import cellkind, report_script

    fast = native.load("_csvrows")
    if fast is not None:
        cellkind.check_native(fast, "_csvrows")
    cellkind.check_script(report_script.script(), "report.js")
    with pytest.raises(ImportError, match="K_STR"):
        cellkind.check_script("const K_FLOAT = 0, K_INT = 1, K_PCT = 2, K_STR = 4;", "report.js")

    class Stale:
        KIND_FLOAT, KIND_INT, KIND_PERCENT, KIND_OTHER = 0, 1, 3, 2

    with pytest.raises(ImportError, match="KIND_PERCENT"):
        cellkind.check_native(Stale, "_csvrows")
