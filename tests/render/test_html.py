"""The HTML report without a browser: wiring, names, escaping, and the payload decoded in Python.

`decode_cells` re-implements the page's decoder (report_payload.js) so that every encoding path (dictionaries,
string buffers, delta and reference codes, sparse codes, float32 with exceptions, recomputed columns) is
checked against the table the other writers get, cell by cell.
"""

from __future__ import annotations

import base64
import math
import os
import re
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from conftest import DATA
from oracles import table_columns
from msprobe_compare.api import build_outcome
from msprobe_compare.config import Options, load_config
from msprobe_compare.log import Console
from msprobe_compare.model import CompareOutcome
from msprobe_compare.render import html, report_script, table

CASES = ["pytorch/mlp_bug_stat", "pytorch/mlp_bug_md5", "pytorch/mlp_bug_tensor", "pytorch/cnn_bug_stat"]
HOSTILE = [
    "</script><script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "quote \" ' ` & &amp; <!-- -->",
    "unicode é 中文 \u2028 \u2029 emoji 😀",
    "=cmd|' /C calc'!A0",
]


def outcome_of(case: str, **options: Any) -> CompareOutcome:
    """Build a fixture case's outcome in-process (stack info on, as `-s`)."""
    folder = DATA / case
    old = Path.cwd()
    os.chdir(folder)
    try:
        opts = Options(framework=case.split("/")[0], output_dir=Path(os.devnull).parent, stack_mode=True, **options)
        return build_outcome(load_config(Path("compare.json"), opts), Console())
    finally:
        os.chdir(old)


def hostile_outcome(case: str = "pytorch/mlp_bug_stat") -> CompareOutcome:
    """A real outcome whose first rows carry names that try to break out of the page."""
    o = outcome_of(case)
    names = list(o.npu.names)
    for k, text in enumerate(HOSTILE):
        names[k] = text
    return replace(o, npu=replace(o.npu, names=names))


def py_text(value: Any) -> str:
    """How the page shows a cell (Python's own text of the value)."""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
    return str(value)


def expected_cells(o: CompareOutcome) -> list[list[str]]:
    cols = table_columns(o, table.Style(text_booleans=False))
    return [[py_text(v) for v in col] for col in cols]


_TYPES = {"u1": np.uint8, "i1": np.int8, "u2": np.uint16, "i2": np.int16, "u4": np.uint32, "i4": np.int32,
          "f4": np.float32, "f8": np.float64}  # fmt: skip


def read_page(text: str) -> bytes:
    m = re.search(r'<script type="application/octet-stream" id="payload" data-encoding="(\w+)">([^<]*)</script>', text)
    assert m, "no payload element"
    data = base64.b64decode(m.group(2))
    return zlib.decompress(data) if m.group(1) == "zlib" else data


def decode(data: bytes) -> tuple[dict[str, Any], Any]:
    size = int.from_bytes(data[:4], "little")
    meta = orjson.loads(data[4 : 4 + size])
    base = 4 + size + (-(4 + size) % 8)

    def buf(ref: dict[str, Any]) -> np.ndarray:
        t = np.dtype(_TYPES[ref["t"]])
        assert (base + ref["o"]) % t.itemsize == 0, "buffer not aligned"
        return np.frombuffer(data, dtype=t, count=ref["n"], offset=base + ref["o"])

    return meta, buf


def _strings(d: dict[str, Any], buf: Any) -> list[str]:
    if "b" not in d:
        return list(d["s"])
    text = bytes(buf(d["b"])).decode("utf-8").encode("utf-16-le")
    ends = buf(d["e"]).tolist()
    starts = [0] + ends[:-1]
    return [text[2 * a : 2 * b].decode("utf-16-le", "surrogatepass") for a, b in zip(starts, ends)]


def _codes(ref: dict[str, Any], buf: Any) -> np.ndarray:
    if "a" in ref:
        return buf(ref["a"]).astype(np.int64)
    out = np.full(ref["n"], ref["fill"], dtype=np.int64)
    if "at" in ref:
        out[buf(ref["at"])] = buf(ref["v"])
    return out


def decode_cells(data: bytes) -> tuple[dict[str, Any], list[list[str]]]:
    """The page's decoder in Python: cell texts per column."""
    meta, buf = decode(data)
    dicts = [_strings(d, buf) for d in meta["dicts"]]
    codes: list[np.ndarray] = []
    for c in meta["columns"]:
        k = _codes(c["codes"], buf)
        if c.get("delta"):
            k = np.cumsum(k)
        elif "ref" in c:
            k = k + codes[c["ref"]]
        codes.append(k)
    nums: dict[int, np.ndarray] = {}

    def numbers(k: int) -> np.ndarray:
        if k not in nums:
            ref = meta["columns"][k]["num"]
            if "d" in ref:
                a, b = numbers(ref["a"]), numbers(ref["b"])
                with np.errstate(all="ignore"):
                    v = a - b if ref["d"] == "sub" else np.abs(a / b * 100)
            else:
                v = buf(ref["v"]).astype(np.float64)
            if "xi" in ref:
                v = v.copy()
                v[buf(ref["xi"])] = buf(ref["xv"])
            nums[k] = v
        return nums[k]

    out = []
    for k, c in enumerate(meta["columns"]):
        d = dicts[c["dict"]]
        col = []
        for i, code in enumerate(codes[k].tolist()):
            if code >= html.KIND_STR:
                col.append(d[code - html.KIND_STR])
            else:
                v = float(numbers(k)[i])
                suffix = "%" if code == table.KIND_PERCENT else ""
                col.append(str(int(v)) if code == table.KIND_INT else py_text(v) + suffix)
        out.append(col)
    return meta, out


@pytest.mark.parametrize("case", CASES)
def test_payload_decodes_to_the_table(case):
    o = outcome_of(case)
    meta, cells = decode_cells(html.payload(o, "t"))
    assert meta["n"] == len(o) and [c["name"] for c in meta["columns"]] == table.header(o)
    assert cells == expected_cells(o)
    rc = meta["rootcause"]
    assert rc is not None and len(rc["origins"]) == len(o.rootcause.origins)


def big_outcome(reps: int = 40) -> CompareOutcome:
    """The mlp_bug_stat outcome repeated: enough rows for string buffers, delta, reference and sparse codes;
    statistics nudged off float32, so numbers need exceptions or float64."""
    o = outcome_of("pytorch/mlp_bug_stat")
    idx = np.tile(np.arange(len(o)), reps)
    npu = o.npu
    names = [f"{n}.{k}" for k in range(reps) for n in npu.names]  # distinct: a string buffer, delta codes
    stats = npu.stats[idx] * (1 + 1e-9 * np.arange(len(idx)))[:, None]
    big_npu = replace(npu, names=names, dtype=[npu.dtype[i] for i in idx], shape=[npu.shape[i] for i in idx],
                      stats=stats, stat_kind=npu.stat_kind[idx], requires_grad=npu.requires_grad[idx],
                      md5=[npu.md5[i] for i in idx], entry_index=npu.entry_index[idx], state=npu.state[idx],
                      data_name=[npu.data_name[i] for i in idx],
                      raw={(k * len(o) + r, c): v for k in range(reps) for (r, c), v in npu.raw.items()})  # fmt: skip
    v = o.verdict
    verdict = type(v)(**{f: getattr(v, f)[idx] if isinstance(getattr(v, f), np.ndarray) else getattr(v, f)
                         for f in v.__dataclass_fields__})  # fmt: skip
    diffs = type(o.diffs)(**{f: getattr(o.diffs, f)[idx] for f in o.diffs.__dataclass_fields__})
    marks = type(o.marks)(reasons=o.marks.reasons[idx], colour=o.marks.colour[idx]) if o.marks is not None else None
    return replace(o, npu=big_npu, match=o.match[idx], verdict=verdict, diffs=diffs, marks=marks, show_stack=False,
                   fuzzy=None, advisor=None)  # fmt: skip


def test_big_table_encodings():
    big = big_outcome()
    meta, cells = decode_cells(html.payload(big, "t"))
    assert cells == expected_cells(big)
    kinds = {key for c in meta["columns"] for key in (*c["codes"], *c.get("num", {}), *c)}
    assert {"delta", "ref", "a", "fill", "d", "xi"} <= kinds
    assert "b" in meta["dicts"][meta["columns"][0]["dict"]]  # names travel as one buffer


def test_hostile_names_round_trip_and_never_reach_markup():
    o = hostile_outcome()
    text = html.page(html.payload(o, "t"), 'title </title><script>window.__pwned = 3</script> "q"')
    for bad in HOSTILE[:2]:
        assert bad not in text
    assert "window.__pwned = 1" not in text and "window.__pwned = 2" not in text  # names live in the base64 only
    assert text.count("</script>") == 2 and text.count("<script") == 2
    assert "<title>title &lt;/title&gt;&lt;script&gt;" in text
    _, cells = decode_cells(read_page(text))
    assert cells[0][: len(HOSTILE)] == HOSTILE


def test_page_is_self_contained():
    text = html.page(html.payload(outcome_of("pytorch/mlp_bug_stat"), "t"), "t")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "default-src 'none'" in text  # nothing may be fetched
    assert "@import" not in text and "url(" not in text


@pytest.mark.parametrize("compress", [True, False])
def test_compressed_and_plain_pages_carry_the_same_payload(compress):
    data = html.payload(outcome_of("pytorch/mlp_bug_stat"), "t")
    text = html.page(data, "t", compress=compress)
    assert f'data-encoding="{"zlib" if compress else "raw"}"' in text
    assert read_page(text) == data


def test_default_formats_write_the_report_beside_the_xlsx(run_cli):
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "-s")
    assert run.code == 0, run.out
    xlsx = run.one("compare_result_*.xlsx")
    report = run.one("compare_report_*.html")
    ts = xlsx.stem.split("_")[-1]
    assert report.name == f"compare_report_{ts}.html"
    assert f"The HTML report is saved in: {report}" in run.out
    assert oct(report.stat().st_mode & 0o777) == "0o640"
    meta, cells = decode_cells(read_page(report.read_text(encoding="utf-8")))
    assert meta["rootcause"]["origins"][0]["description"] in run.out


def test_html_only(run_cli):
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "--format", "html")
    assert run.code == 0 and not run.files("*.xlsx") and run.files("compare_report_*.html")
    assert "ends successfully" in run.out


def test_xlsx_only_writes_no_report(run_cli):
    run = run_cli(DATA / "pytorch/mlp_bug_stat", "pytorch", "--format", "xlsx")
    assert run.code == 0 and run.files("compare_result_*.xlsx") and not run.files("*.html")


def test_script_cannot_close_its_element():
    script = report_script.script()
    assert "</" not in script and "<!--" not in script


def test_tree_links_through_the_entry_table_equal_the_dict(monkeypatch):
    """The page's module tree (parent of each entry and of the modules that made no call) through the entry
    table equals the plain dict path, on every construct.json of the fixtures with their entries and on a crafted
    tree: a module that is its own parent, modules without calls (as children and as parents), no parent, an
    empty name; with a repeated entry name the dict path is taken."""
    from msprobe_compare.load.dumpjson import read_construct_json
    from msprobe_compare.load.rows import flatten
    from msprobe_compare.load.dumpjson import read_json

    def same(entries, tree):
        got, want = html._tree_links(entries, tree), html._tree_links(entries, tree, by_dict=True)
        assert got[0].tolist() == want[0].tolist() and got[1] == want[1]
        for name in [*entries, *want[1], "absent"]:
            assert got[2].get(name, -1) == want[2].get(name, -1)
        return got

    checked = 0
    for path in sorted(DATA.glob("pytorch/*/npu/step0/rank/construct.json"))[:8]:
        tree = read_construct_json(path)
        doc = read_json(path.parent / "dump.json")
        entries = flatten(path.parent / "dump.json", doc["data"]).entries
        same(entries, tree)
        checked += bool(tree)
    assert checked >= 3
    entries = ["Module.a.forward.0", "Functional.relu.0.forward", "Module.b.forward.0", "", "Tensor.add.0.forward"]
    tree = {"Module.a.forward.0": "Module.a.forward.0", "Functional.relu.0.forward": "Module.a.forward.0",
            "Module.b.forward.0": "Module.root.forward.0", "Module.x.forward.0": "Module.y.forward.0",
            "Module.z.forward.0": "Module.z.forward.0", "Tensor.add.0.forward": None, "": "Module.b.forward.0",
            "Torch.mul.0.forward": "Module.root.forward.0"}  # fmt: skip
    got = same(entries, tree)
    assert got[1] == ["Module.x.forward.0", "Torch.mul.0.forward", "Module.root.forward.0", "Module.y.forward.0"]
    assert got[0][0] == -1 and got[0][1] == 0 and got[0][3] == 2  # its own parent: none drawn
    assert isinstance(html._tree_links(entries + ["Module.a.forward.0"], tree)[2], dict)  # repeated: the dict
    same(entries + ["Module.a.forward.0"], tree)
