"""The HTML report in a real browser: Debian's headless Chromium, driven over the DevTools protocol.

Chromium missing: the tests skip locally and fail in CI (CI=true), where .ci/run installs it.
Screenshots go to tests/artifacts/ (or $MSPROBE_ARTIFACTS); their paths are printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chromium import Browser, artifacts_dir, find_chromium
from conftest import DATA
from msprobe_compare.render import html
from render.test_html import CASES, HOSTILE, big_outcome, expected_cells, hostile_outcome, outcome_of

CASE = DATA / "pytorch/mlp_bug_stat"
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parents[2]


def _require_browser() -> None:
    missing = []
    if find_chromium() is None:
        missing.append("chromium (apt-get install chromium)")
    try:
        import websocket  # noqa: F401
    except ImportError:
        missing.append("websocket-client (pip install -e '.[test]')")
    if missing:
        message = "browser tests need " + " and ".join(missing)
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def browser():
    _require_browser()
    with Browser(width=1400, height=1400) as b:
        yield b


def _open(b: Browser, path: Path) -> None:
    b.console.clear()
    b.exceptions.clear()
    b.open(path)
    b.wait_for("window.__reportComplete || window.__reportError")
    assert b.eval("window.__reportError || null") is None


def _clean(b: Browser) -> None:
    b.drain(0.2)
    assert b.problems() == []


def _type_filter(b: Browser, text: str) -> None:
    b.eval(f"""(() => {{ const f = document.getElementById('filter'); f.focus(); f.value = {json.dumps(text)};
        f.dispatchEvent(new Event('input', {{bubbles: true}})); }})()""")
    want = "rows" if not text else "showing"
    b.wait_for(f"document.getElementById('row-count').textContent.includes({json.dumps(want)}) && "
               f"document.getElementById('grid').dataset.filterText === {json.dumps(text)}")  # fmt: skip


def _mouse(b: Browser, kind: str, x: float, y: float, clicks: int = 1) -> None:
    b.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", buttons=1 if kind != "mouseReleased" else 0,
           clickCount=clicks)  # fmt: skip


def _rendered(b: Browser) -> list[list[str | None]]:
    """The rendered rows' cell texts by table column (None: a column not shown)."""
    return b.eval("""(() => { const shown = window.__report.shownColumns(), n = window.__report.columns.length;
        return Array.from(document.querySelectorAll('#tbl tbody tr:not([hidden])')).map((tr) => {
            const row = new Array(n).fill(null);
            Array.from(tr.cells).slice(1).forEach((td, j) => { row[shown[j]] = td.textContent; });
            return row; }); })()""")


def test_report_of_a_fixture_case(browser, run_cli):
    run = run_cli(CASE, "pytorch", "-s", "--format", "xlsx,html,jsonl")
    assert run.code == 0, run.out
    report = run.one("compare_report_*.html")
    rows = [json.loads(line) for line in run.one("compare_result_*.jsonl").read_text().splitlines()]
    _open(browser, report)
    b = browser

    # the origin, prominent in the summary
    origin = b.eval("document.getElementById('origin-main').innerText")
    assert "after Module.fc2.Linear.forward.0's output, before Functional.relu.1.forward's input" in origin
    assert "boundary" in origin and "forward" in origin and "Functional.relu.1.forward.input.0" in origin
    assert b.eval("document.getElementById('counts').innerText").replace("\n", " ").count(f"{len(rows)} rows") == 1

    # every row is in the table, only the visible ones are in the DOM
    assert b.eval("window.__report.matching()") == len(rows)
    shown = _rendered(b)
    assert 0 < len(shown) <= len(rows)
    assert [r[0] for r in shown] == [r["NPU Name"] for r in rows[: len(shown)]]

    # filter by name
    _type_filter(b, "relu")
    want = [r for r in rows if "relu" in r["NPU Name"].lower()]
    assert b.eval("window.__report.matching()") == len(want) > 0
    assert b.eval("document.getElementById('grid').dataset.matching") == str(len(want))
    shown = _rendered(b)
    assert [r[0] for r in shown] == [r["NPU Name"] for r in want[: len(shown)]]
    assert f"showing {len(want)} of {len(rows)} rows" in b.eval("document.getElementById('row-count').textContent")
    _type_filter(b, "relu no-such-name")
    assert b.eval("window.__report.matching()") == 0 and _rendered(b) == []

    # filter by state: the origin call's rows only
    _type_filter(b, "")
    b.eval("""(() => { const s = document.getElementById('state-filter'); s.value = '1';
        s.dispatchEvent(new Event('change', {bubbles: true})); })()""")
    names = [r[0] for r in _rendered(b)]
    assert names and all(n.startswith("Functional.relu.1.forward.") for n in names)
    b.eval("""(() => { const s = document.getElementById('state-filter'); s.value = '';
        s.dispatchEvent(new Event('change', {bubbles: true})); })()""")

    # sort by a numeric column, both ways
    col = b.eval("window.__report.columns.indexOf('Max diff')")
    b.eval(f"document.querySelector('#tbl th[data-col=\"{col}\"]').click()")
    b.wait_for("document.querySelector('#tbl th.sorted') !== null")
    values = [float(r[col]) for r in _rendered(b) if r[col] not in ("N/A", "Nan", "None")]
    assert values == sorted(values) and len(values) > 3

    # a click on a row shows all its cells; the tree shows the origin
    b.eval("document.querySelector('#tbl tbody tr').click()")
    assert "NPU Name" in b.eval("document.getElementById('detail').innerText")
    assert b.eval("document.querySelector('#tree .lbl.st-origin').textContent") == "Functional.relu.1.forward"

    # the plot: a click on the origin's point selects its call, a drag zooms, a double click shows all
    b.eval("document.getElementById('plot').scrollIntoView({block: 'center'})")
    rect = b.eval("(() => { const r = document.getElementById('plot').getBoundingClientRect(); "
                  "return [r.left, r.top, r.width, r.height]; })()")  # fmt: skip
    pos = b.eval("window.__report.plotX(8)")  # Functional.relu.1.forward is call 8
    y = rect[1] + rect[3] / 2
    _mouse(b, "mousePressed", rect[0] + pos, y)
    _mouse(b, "mouseReleased", rect[0] + pos, y)
    b.wait_for("!document.getElementById('call-chip').hidden")
    assert b.eval("document.getElementById('call-chip-text').textContent") == "call Functional.relu.1.forward"
    names = [r[0] for r in _rendered(b)]
    assert names and all(n.startswith("Functional.relu.1.forward.") for n in names)
    _mouse(b, "mousePressed", rect[0] + rect[2] * 0.3, y)
    _mouse(b, "mouseMoved", rect[0] + rect[2] * 0.6, y)
    _mouse(b, "mouseReleased", rect[0] + rect[2] * 0.6, y)
    lo, hi = b.eval("window.__report.plotRange()")
    assert 0 < lo < hi < 33
    _mouse(b, "mousePressed", rect[0] + rect[2] / 2, y, clicks=2)
    _mouse(b, "mouseReleased", rect[0] + rect[2] / 2, y, clicks=2)
    assert b.eval("window.__report.plotRange()") == [0, 33]
    b.eval("document.getElementById('call-chip-clear').click()")
    assert b.eval("window.__report.matching()") == len(rows)

    shot = b.screenshot(artifacts_dir() / "html_report_mlp_bug_stat.png")
    print(f"screenshot: {shot}")
    _clean(b)


@pytest.mark.parametrize("compress", [True, False])
def test_every_cell_as_python_writes_it(browser, tmp_path, compress):
    for case in CASES:
        o = outcome_of(case)
        path = tmp_path / f"{case.replace('/', '_')}.html"
        html.write_html(path, o, case, compress=compress)
        _open(browser, path)
        assert _all_cells(browser) == expected_cells(o), case
        _clean(browser)


def _all_cells(b: Browser) -> list[list[str]]:
    return b.eval("""(() => { const r = window.__report;
        return r.columns.map((_, c) => Array.from({length: r.rows}, (_, i) => r.cell(i, c))); })()""")


def test_every_cell_of_a_big_table(browser, tmp_path):
    """String buffers, delta/reference/sparse codes, exceptions and recomputed columns, read back by the page."""
    o = big_outcome()
    path = tmp_path / "big.html"
    html.write_html(path, o, "big")
    _open(browser, path)
    assert _all_cells(browser) == expected_cells(o)
    col = browser.eval("window.__report.columns.indexOf('MaxRelativeErr')")
    browser.eval(f"document.querySelector('#tbl th[data-col=\"{col}\"]').click()")
    browser.wait_for(f"document.getElementById('grid').dataset.sort === '{col}:1'")
    shown = [r[col] for r in _rendered(browser)]
    values = [float(x.rstrip("%")) for x in shown if x.endswith("%")]
    assert values == sorted(values) and len(values) == len(shown)
    _type_filter(browser, "relu .3")
    assert browser.eval("window.__report.matching()") == sum(
        1 for n in o.npu.names if "relu" in n.lower() and ".3" in n.lower()
    )
    _clean(browser)


def test_without_root_cause_or_colours(browser, tmp_path):
    from dataclasses import replace

    o = replace(outcome_of("pytorch/mlp_bug_md5"), analysis=None, marks=None, advisor=None)
    path = tmp_path / "bare.html"
    html.write_html(path, o, "bare")
    _open(browser, path)
    assert browser.eval("window.__report.matching()") == len(o)
    assert browser.eval("document.getElementById('plot-card').hidden && document.getElementById('tree-card').hidden")
    _clean(browser)


def test_hostile_names_stay_text(browser, tmp_path):
    path = tmp_path / "hostile.html"
    html.write_html(path, hostile_outcome(), "x </title><script>window.__pwned = 3</script>")
    _open(browser, path)
    b = browser
    assert b.eval("typeof window.__pwned") == "undefined"
    assert b.eval("document.querySelectorAll('img').length") == 0
    assert b.eval("document.title") == "x </title><script>window.__pwned = 3</script>"
    first = [r[0] for r in _rendered(b)][: len(HOSTILE)]
    assert first == HOSTILE
    _type_filter(b, "</script>")
    assert b.eval("window.__report.matching()") == 1
    _clean(b)


@pytest.mark.skipif(os.environ.get("MSPROBE_SLOW_TESTS") != "1", reason="set MSPROBE_SLOW_TESTS=1 (generates 1M rows)")
def test_million_rows_interactive_in_five_seconds():
    """bench/bench_html.py on ~1,000,000 rows: the page must show its first rows within 5 s."""
    _require_browser()
    cmd = [sys.executable, str(ROOT / "bench/bench_html.py"), "--runs", "1", "--compress", "auto"]
    if os.environ.get("MSPROBE_BENCH_DATA"):  # an existing gen_stats.py folder; else one is generated
        cmd += ["--data", os.environ["MSPROBE_BENCH_DATA"]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.returncode == 0


def test_nothing_compared_is_not_green(browser, run_cli, tmp_path):
    """No row paired (a bench dump of another framework): the summary says so, in amber, never 'agrees'."""
    bench = next((DATA / "mindspore/L0_statistics/dump_data_2.7.0").glob("step0/rank*/dump.json"))
    case = tmp_path / "case"
    case.mkdir()
    (case / "compare.json").write_text(json.dumps({"npu_path": str(CASE / "npu/step0/rank/dump.json"),
                                                   "bench_path": str(bench)}))  # fmt: skip
    run = run_cli(case, "pytorch")
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    card = b.eval("document.querySelector('#origin-main .origin-card').className")
    assert "nothing" in card and "none" not in card.split()
    text = b.eval("document.getElementById('origin-main').innerText")
    assert "Nothing compared: none of the 103 NPU rows has a bench counterpart" in text and "agrees" not in text
    assert "have no bench counterpart" in b.eval("document.getElementById('unmatched-warning').innerText")
    colour = b.eval("getComputedStyle(document.querySelector('#origin-main .origin-card')).borderLeftColor")
    assert colour == "rgb(183, 121, 31)"  # amber, not the green of agreement
    _clean(b)


def test_suspect_and_noise_floor(browser, run_cli, tmp_path):
    """A compare under precision noise (issue #13): no origin, one suspect card with its evidence and what to dump;
    the calls in noise and suspect colours; the plot draws the floor without errors."""
    import tarfile

    with tarfile.open(DATA / "noise/noise_stat.tar.xz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("./tfm_splitk_scale1p01_L0_stat/") or
                   m.name.startswith("tfm_splitk_scale1p01_L0_stat/")]  # fmt: skip
        tar.extractall(tmp_path, members=members)
    run = run_cli(tmp_path / "tfm_splitk_scale1p01_L0_stat", "pytorch")
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    cards = b.eval("Array.from(document.querySelectorAll('#origin-main .origin-card')).map((c) => c.className)")
    assert cards[0].split()[-1] == "partial" and "suspect" in cards[1]  # amber: not agreement
    text = b.eval("document.getElementById('origin-main').innerText")
    assert "no origin the precision can support" in text.lower()
    assert "Functional.linear.3.forward" in text and "noise floor 0.00559" in text and "precision: high" in text
    assert b.eval("document.querySelectorAll('#tree .lbl.st-suspect').length") >= 1
    assert b.eval("document.querySelectorAll('#tree .lbl.st-noise').length") >= 1
    b.eval("document.getElementById('plot').scrollIntoView({block: 'center'})")
    shot = b.screenshot(artifacts_dir() / "html_report_noise_suspect.png")
    print(f"screenshot: {shot}")
    _clean(b)


def test_runs_of_different_code_show_their_module_alignment(browser, run_cli, tmp_path):
    """An HF run against a vLLM-style one (issue #30): the report lists the two trees' modules side by side, merged
    parts and the calls left, and the unmatched note says what the one-sided rows are."""
    from conftest import extract_archive

    cases = extract_archive(DATA / "impl/impl_cases.tar.xz", tmp_path / "impl")
    run = run_cli(cases / "impl_hf_vs_vllm_bf16_none", "pytorch")
    assert run.code == 0
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    title = b.eval("document.getElementById('alignment-title').textContent")
    assert title.startswith("Module alignment (runs of different code): 31 pairs, 6 merged")
    rows = b.eval("""Array.from(document.querySelectorAll('#alignment-body tr')).slice(1)
        .map((tr) => Array.from(tr.cells).map((td) => td.textContent))""")
    assert [
        "model.layers.0.self_attn.q_proj;\nmodel.layers.0.self_attn.k_proj;\nmodel.layers.0.self_attn.v_proj",
        "model.layers.0.self_attn.qkv_proj",
        "parameters",
        "input.0 \u2192 input.0, output.0 \u2192 output.0",
    ] in rows
    assert ["\u2014", "model.layers.0.self_attn.attn", "bench only", ""] in rows
    assert "the runs execute different code" in b.eval("document.getElementById('unmatched-warning').innerText")
    _clean(b)


def _align_rows(b: Browser, side: str, cls: str = "") -> list[dict[str, str]]:
    """The drawn rows of one side's alignment tree (`cls`: only those with that class): module, label and text."""
    return b.eval(f"""Array.from(document.querySelectorAll('.align-side[data-side={side}] .an{cls}'))
        .filter((r) => r.offsetParent !== null)
        .map((r) => ({{name: r.dataset.name, label: r.querySelector('.lbl').textContent, text: r.textContent,
                      cls: r.className}}))""")  # fmt: skip


def _align_hover(b: Browser, side: str, name: str) -> None:
    b.eval(f"""document.querySelector('.align-side[data-side={side}] .an[data-name="{name}"] .lbl')
        .dispatchEvent(new MouseEvent('mouseover', {{bubbles: true}}))""")  # fmt: skip


def _align_click(b: Browser, side: str, name: str, part: str = ".lbl") -> None:
    """A click on a module's label (or its fold toggle, `.tog`) in one side's alignment tree."""
    b.eval(f"""document.querySelector('.align-side[data-side={side}] .an[data-name="{name}"] {part}').click()""")


def _open_alignment(b: Browser) -> None:
    assert b.eval("document.getElementById('align-trees').children.length") == 0  # drawn only when opened
    b.eval("document.getElementById('alignment').open = true")
    b.wait_for("document.querySelectorAll('#align-trees .align-side').length === 2")


def test_runs_of_different_code_show_both_module_trees_side_by_side(browser, run_cli, tmp_path):
    """HF against vLLM with a bug in layer 1 (issue #30 item 6): opening the alignment draws the npu tree left and
    the bench tree right; hovering a merged part lights all its parts and the fused counterpart, with how they were
    paired; modules without a counterpart are marked; the origin's module and its counterpart are marked."""
    from conftest import extract_archive

    cases = extract_archive(DATA / "impl/impl_cases.tar.xz", tmp_path / "impl")
    run = run_cli(cases / "impl_hf_vs_vllm_bf16_scale_L1", "pytorch")
    assert run.code == 0, run.out
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    _open_alignment(b)
    heads = b.eval("Array.from(document.querySelectorAll('.align-head')).map((h) => h.textContent)")
    assert heads == ["npu tree: 44 module calls, 4 without a counterpart",
                     "bench tree: 40 module calls, 9 without a counterpart"]  # fmt: skip
    sides = b.eval("Array.from(document.querySelectorAll('.align-side')).map((s) => [s.dataset.side, "
                   "s.getBoundingClientRect().left, s.getBoundingClientRect().top])")  # fmt: skip
    assert [s[0] for s in sides] == ["npu", "bench"] and sides[0][1] < sides[1][1] and sides[0][2] == sides[1][2]
    npu, bench = _align_rows(b, "npu"), _align_rows(b, "bench")
    q = "model.layers.0.self_attn.q_proj"
    parts = [q, "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj"]
    fused = "model.layers.0.self_attn.qkv_proj"
    labels = {r["name"]: r["label"] for r in npu}
    assert [labels[n] for n in parts] == ["q_proj", "k_proj", "v_proj"]  # nested under self_attn, short names
    assert {r["name"]: r["label"] for r in bench}[fused] == "qkv_proj"
    assert "parameters" in next(r["text"] for r in npu if r["name"] == q)
    assert "merged 1/3" in next(r["text"] for r in npu if r["name"] == q)

    # a merged part lights all its parts and its counterpart; so does the counterpart
    for side, name in (("npu", q), ("bench", fused)):
        _align_hover(b, side, name)
        assert sorted(r["name"] for r in _align_rows(b, "npu", ".hl")) == sorted(parts)
        assert [r["name"] for r in _align_rows(b, "bench", ".hl")] == [fused]

    # no counterpart: dimmed and said
    for side, name in (("npu", "model.rotary_emb"), ("bench", "model.layers.0.self_attn.attn")):
        row = next(r for r in _align_rows(b, side) if r["name"] == name)
        assert "unpaired" in row["cls"] and "no counterpart" in row["text"], row
        _align_hover(b, side, name)
        assert _align_rows(b, "npu", ".hl") == [] and _align_rows(b, "bench", ".hl") == []
    assert b.eval("""parseFloat(getComputedStyle(document.querySelector(
        '.an[data-name="model.rotary_emb"] .lbl')).opacity)""") < 1  # fmt: skip

    # the root cause's module, and its counterpart
    down = "model.layers.1.mlp.down_proj"
    assert "origin" in next(r["text"] for r in _align_rows(b, "npu", ".marked") if r["name"] == down)
    assert "origin's counterpart" in next(r["text"] for r in _align_rows(b, "bench", ".marked") if r["name"] == down)

    # folded away: a click on a module unfolds and lights its counterpart, and says how they pair
    b.eval("document.getElementById('align-collapse').click()")
    assert fused not in [r["name"] for r in _align_rows(b, "bench")]
    assert b.eval("""document.querySelector('.align-side[data-side=npu] .an[data-name="model.layers"] .dot.inner')
        .title""") == "holds the origin"  # a folded row says it holds the origin  # fmt: skip
    for name in ("model.layers", "model.layers.0", "model.layers.0.self_attn"):  # unfolded on the npu side only
        _align_click(b, "npu", name, ".tog")
    assert q in [r["name"] for r in _align_rows(b, "npu")] and fused not in [r["name"] for r in _align_rows(b, "bench")]
    _align_click(b, "npu", q)
    assert [r["name"] for r in _align_rows(b, "bench", ".hl")] == [fused]
    info = b.eval("document.getElementById('align-info').textContent")
    assert "paired by parameters (merged: 3 npu to 1 bench)" in info and "input.0 \u2192 input.0" in info, info
    shot = b.screenshot(artifacts_dir() / "html_report_alignment_trees.png")
    print(f"screenshot: {shot}")
    _clean(b)


def test_a_wrapper_is_folded_into_the_call_it_wraps(browser, run_cli, tmp_path):
    """HF against Megatron: Megatron's `embedding` wraps `word_embeddings` alone (the same boundary): one row,
    lit with HF's `embed_tokens`; the trees nest differently named paths (`decoder.layers.N`)."""
    from conftest import extract_archive

    cases = extract_archive(DATA / "impl/impl_cases.tar.xz", tmp_path / "impl")
    run = run_cli(cases / "impl_hf_vs_megatron_bf16_none", "pytorch")
    assert run.code == 0, run.out
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    _open_alignment(b)
    bench = {r["name"]: r for r in _align_rows(b, "bench")}
    assert bench["embedding"]["label"] == "embedding \u203a word_embeddings"
    assert "embedding.word_embeddings" not in bench
    assert bench["decoder.layers.0.self_attention.linear_qkv"]["label"] == "linear_qkv"
    _align_hover(b, "npu", "model.embed_tokens")
    assert [r["name"] for r in _align_rows(b, "bench", ".hl")] == ["embedding"]
    _clean(b)


def test_alignment_trees_of_600_modules_a_side_open_folded(browser, tmp_path):
    """~600 module calls a side (64 layers of HF against Megatron-style names): opening draws a few hundred rows,
    layers folded, at once; a click on a folded layer's module unfolds its counterpart."""
    from dataclasses import replace

    kinds = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
             "self_attn", "mlp.gate_proj", "mlp.up_proj", "mlp")  # fmt: skip
    hf = [f"model.layers.{i}.{m}" for i in range(64) for m in kinds]
    pairs = []
    for i in range(64):
        at, mg = f"model.layers.{i}", f"decoder.layers.{i}"
        pairs += [{"npu": f"{at}.input_layernorm", "bench": f"{mg}.input_layernorm", "how": "parameters", "slots": {}},
                  {"npu": f"{at}.self_attn.q_proj;{at}.self_attn.k_proj;{at}.self_attn.v_proj",
                   "bench": f"{mg}.self_attention.linear_qkv", "how": "parameters", "slots": {}},
                  {"npu": f"{at}.self_attn.o_proj", "bench": f"{mg}.self_attention.linear_proj", "how": "parameters",
                   "slots": {}},
                  {"npu": f"{at}.self_attn", "bench": f"{mg}.self_attention", "how": "tree", "slots": {}},
                  {"npu": f"{at}.mlp.gate_proj;{at}.mlp.up_proj", "bench": f"{mg}.mlp.linear_fc1", "how": "parameters",
                   "slots": {}},
                  {"npu": f"{at}.mlp", "bench": f"{mg}.mlp", "how": "tree", "slots": {}}]  # fmt: skip
    alignment = {"pairs": pairs, "unpaired": {"npu": [], "bench": [f"decoder.layers.{i}.core" for i in range(64)]},
                 "same_as": {"npu": {}, "bench": {}}}  # fmt: skip
    assert len(hf) == 576
    path = tmp_path / "aligned.html"
    html.write_html(path, replace(outcome_of("pytorch/mlp_bug_stat"), alignment=alignment), "aligned")
    b = browser
    _open(b, path)
    _open_alignment(b)
    assert b.eval("window.__reportTimings.alignTrees") < 1000
    shown = _align_rows(b, "npu")
    assert 10 <= len(shown) <= 220 and "model.layers.63.self_attn.q_proj" not in [r["name"] for r in shown]
    for name in ("decoder.layers.63", "decoder.layers.63.self_attention"):
        _align_click(b, "bench", name, ".tog")
    _align_click(b, "bench", "decoder.layers.63.self_attention.linear_qkv")
    lit = sorted(r["name"] for r in _align_rows(b, "npu", ".hl"))
    assert lit == [f"model.layers.63.self_attn.{p}_proj" for p in "kqv"]
    core = next(r for r in _align_rows(b, "bench") if r["name"] == "decoder.layers.63.core")
    assert "no counterpart" in core["text"]
    _clean(b)


def _rect(b: Browser, selector: str) -> dict[str, float]:
    return b.eval(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect(); "
                  "return {left: r.left, top: r.top, bottom: r.bottom, right: r.right}; })()")  # fmt: skip


def test_table_as_a_tool(browser, run_cli):
    """Issue #31: the name column and the header stay in view, an opened row's detail is brought into view,
    numbers show 6 significant digits at most (the full value in the title), stacks read as frames with the
    user's own frame first, in the table, the detail and the origin card."""
    run = run_cli(CASE, "pytorch", "-s")
    assert run.code == 0, run.out
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    grid = _rect(b, "#grid")
    b.eval("document.getElementById('grid').scrollIntoView({block: 'start'})")
    b.eval("(() => { const g = document.getElementById('grid'); g.scrollLeft = 100000; g.scrollTop = 200;"
           " g.dispatchEvent(new Event('scroll')); })()")  # fmt: skip
    b.wait_for("document.getElementById('grid').scrollLeft > 0")
    grid = _rect(b, "#grid")
    name = _rect(b, "#tbl tbody tr:not([hidden]) td.name")
    head = _rect(b, "#tbl th.name")
    assert abs(name["left"] - (grid["left"] + 1 + 6)) <= 1.5, (name, grid)  # sticky beside the 6 px state column
    assert abs(head["top"] - (grid["top"] + 1)) <= 1.5 and abs(head["left"] - name["left"]) <= 1
    x, y = name["left"] + 20, name["top"] + 5
    assert b.eval(f"document.elementFromPoint({x}, {y}).closest('td.name') !== null")  # on top of the other cells

    # numbers: at most 6 significant digits shown, the full value as Python writes it in the title
    col = b.eval("window.__report.columns.indexOf('NPU max')")
    full = b.eval(f"Array.from({{length: 40}}, (_, i) => window.__report.cell(i, {col}))")
    shown = b.eval(f"Array.from({{length: 40}}, (_, i) => window.__report.shown(i, {col}))")
    assert any(len(f) > 12 for f in full), full
    for f, s in zip(full, shown):
        try:
            value = float(f)
        except ValueError:
            assert s == f
            continue
        digits = s.split("e")[0].lstrip("-").replace(".", "").lstrip("0").rstrip("0")
        assert len(digits) <= 6 and abs(float(s) - value) <= abs(value) * 1e-5, (f, s)
    b.eval("(() => { const g = document.getElementById('grid'); g.scrollLeft = 0; g.scrollTop = 0;"
           " g.dispatchEvent(new Event('scroll')); })()")  # fmt: skip
    b.wait_for("document.getElementById('grid').dataset.first === '0'")
    td = b.eval(f"(() => {{ const j = window.__report.shownColumns().indexOf({col});"
                f" const td = document.querySelector('#tbl tbody tr').cells[j + 1];"
                " return [td.textContent, td.title]; })()")  # fmt: skip
    assert td == [shown[0], full[0] if full[0] != shown[0] else ""]

    # the stack cell shows the user's own innermost frame; the detail lists frames, the user's first
    stack = b.eval("window.__report.columns.indexOf('NPU_Stack_Info')")
    assert b.eval(f"window.__report.shown(0, {stack})") == "/home/user/train/make.py:104 forward (+8)"  # 9 frames

    # a click on a row brings its detail into view
    b.eval("window.scrollTo(0, 0)")
    b.eval("document.getElementById('grid').scrollIntoView({block: 'start'})")
    b.eval("document.querySelector('#tbl tbody tr').click()")
    detail = _rect(b, "#detail")
    assert 0 <= detail["top"] < b.eval("window.innerHeight"), detail
    frames = b.eval("Array.from(document.querySelectorAll('#detail .frames li')).map((li) => [li.className, "
                    "li.querySelector('.where').textContent, (li.querySelector('code') || {}).textContent])")  # fmt: skip
    assert frames[0] == ["user", "/home/user/train/make.py:104 forward", "h = self.act1(self.fc1(x))"], frames
    assert frames[-1][0] == "lib" and "site-packages" in frames[-1][1]
    kinds = [f[0] for f in frames]
    assert kinds == sorted(kinds, key=lambda k: k != "user")  # user frames, then library frames

    # the origin card shows the origin's stack as frames too
    where = b.eval("Array.from(document.querySelectorAll('#origin-main .frames li .where')).map((x) => x.textContent)")
    assert where and where[0].startswith("/home/user/train/make.py:") and "site-packages" not in where[0]
    _clean(b)


def test_report_says_what_was_compared(browser, run_cli):
    """Issue #31: the page's title names the two dump folders; its head lists the dumps (task, level, framework),
    the data compared in plain words, this tool's version and the command line."""
    from msprobe_compare import __version__

    run = run_cli(CASE, "pytorch")
    assert run.code == 0, run.out
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    title = b.eval("document.title")
    assert title.startswith("msprobe-compare: ") and title.endswith("npu/step0/rank vs " + title.split(" vs ")[1])
    assert title.split(" vs ")[1].endswith("bench/step0/rank"), title
    assert b.eval("document.getElementById('title').textContent") == title
    facts = b.eval("""Object.fromEntries(Array.from(document.querySelectorAll('#compared dt'))
        .map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))""")
    assert facts["NPU dump"].endswith("npu/step0/rank/dump.json (statistics, mix (modules and APIs), pytorch)"), facts
    assert facts["bench dump"].endswith("bench/step0/rank/dump.json (statistics, mix (modules and APIs), pytorch)")
    assert facts["framework"] == "pytorch" and facts["dump level"] == "mix (modules and APIs)"
    assert facts["data compared"].startswith("statistics") and facts["tool"] == f"msprobe-compare {__version__}"
    assert facts["command"]
    assert "mode summary" not in b.eval("document.querySelector('header.top').innerText")
    _clean(b)


def test_real_data_mode_in_plain_words(browser, tmp_path):
    o = outcome_of("pytorch/mlp_bug_tensor")
    path = tmp_path / "tensor.html"
    html.write_html(path, o, "tensor")
    _open(browser, path)
    counts = browser.eval("document.getElementById('counts').innerText")
    assert "real data (tensors)" in counts and "all" not in counts.split()
    assert browser.eval("document.getElementById('compared').hidden")  # no facts given: nothing invented
    _clean(browser)


def test_plot_in_execution_order_and_advisor_points_up(browser, run_cli):
    """Issue #31: a module's parameter gradients stand on the plot after its backward call (where they are
    computed), not at its forward, left of the origin; the advisor block points up to the root cause above it."""
    run = run_cli(CASE, "pytorch")
    assert run.code == 0, run.out
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    names = b.eval("window.__report.calls()")
    at = {n: k for k, n in enumerate(names)}
    px = {n: b.eval(f"window.__report.plotX({k})") for n, k in at.items()}
    origin = px["Functional.relu.1.forward"]
    for module in ("Module.fc1.Linear", "Module.fc2.Linear", "Module.head.Linear"):
        grad, back = px[f"{module}.parameters_grad"], px[f"{module}.backward.0"]
        assert grad > back > origin, module
        later = [n for n in names if px[n] > back and n != f"{module}.parameters_grad"]
        assert all(px[n] > grad for n in later if at[n] > at[f"{module}.backward.0"])
    forward = [px[n] for n in names if n.endswith(".forward") or ".forward." in n]
    assert forward == sorted(forward)  # the other calls keep their order
    assert sorted(px.values()) == sorted(set(px.values()))  # one place each
    text = b.eval("document.getElementById('advisor-text').textContent")
    assert "see Root cause above" in text and "below" not in text
    assert b.eval("document.getElementById('origin-main').compareDocumentPosition("
                  "document.getElementById('advisor')) & Node.DOCUMENT_POSITION_FOLLOWING")  # fmt: skip
    _clean(b)


@pytest.mark.parametrize("case", ["pytorch/mlp_bug_stat", "pytorch/mlp_bug_md5", "pytorch/mlp_bug_tensor"])
def test_compact_columns_with_the_rest_on_demand(browser, tmp_path, case):
    """Issue #31: each mode opens on the name, its key metrics, the verdict and its message; the "columns" control
    shows every column, a single one, or the compact set again; the row detail always lists every column."""
    o = outcome_of(case)
    path = tmp_path / "cols.html"
    html.write_html(path, o, case)
    _open(browser, path)
    b = browser
    columns = b.eval("window.__report.columns")
    heads = lambda: b.eval("Array.from(document.querySelectorAll('#tbl th')).slice(1).map((th) => th.textContent)")  # noqa: E731
    want = {"pytorch/mlp_bug_stat": ["NPU Name", "NPU Dtype", "NPU Tensor Shape", "Max diff", "MaxRelativeErr",
                                     "NormRelativeErr", "NPU max", "Bench max", "Result", "Err_message", "NPU_Stack_Info"],
            "pytorch/mlp_bug_md5": ["NPU Name", "NPU Dtype", "NPU Tensor Shape", "NPU MD5", "BENCH MD5", "Result",
                                    "NPU_Stack_Info"],
            "pytorch/mlp_bug_tensor": ["NPU Name", "NPU Dtype", "NPU Tensor Shape", "Cosine", "MaxAbsErr",
                                       "MaxRelativeErr", "One Thousandth Err Ratio", "Accuracy Reached or Not",
                                       "Err_message", "NPU_Stack_Info"]}[case]  # fmt: skip
    assert heads() == want and len(columns) > len(want) + 5
    assert len(_rendered(b)[0]) == len(columns) and [c for c in _rendered(b)[0] if c is not None]
    assert f"({len(want)} of {len(columns)})" in b.eval("document.getElementById('columns-title').textContent")
    compact = b.eval("document.getElementById('tbl').getBoundingClientRect().width")
    if "Cosine" in want:
        cosine = columns.index("Cosine")
        assert "cosine similarity" in b.eval(f"document.querySelector('#tbl th[data-col=\"{cosine}\"]').title")
    b.eval("document.getElementById('columns').open = true")
    b.eval("document.getElementById('columns-all').click()")
    assert heads() == columns
    assert b.eval("window.__report.shownColumns().length") == len(columns)
    full = b.eval("document.getElementById('tbl').getBoundingClientRect().width")
    assert compact * 1.5 < full
    rows = _rendered(b)
    assert rows[0] == [b.eval(f"window.__report.shown(0, {c})") for c in range(len(columns))]
    b.eval("document.getElementById('columns-compact').click()")
    assert heads() == want
    extra = columns.index("Bench Name")
    b.eval(f"""(() => {{ const x = document.querySelector('#columns-list input[value="{extra}"]'); x.checked = true;
        x.dispatchEvent(new Event('change', {{bubbles: true}})); }})()""")
    assert heads() == [c for c in columns if c in want or c == "Bench Name"]
    assert _rendered(b)[0][extra] == b.eval(f"window.__report.shown(0, {extra})")
    b.eval("document.querySelector('#tbl tbody tr').click()")
    assert b.eval("document.querySelectorAll('#detail dt').length") == len(columns)
    _clean(b)


@pytest.mark.parametrize("given_columns", [False, True])
def test_large_table_keeps_the_rows_that_matter(browser, tmp_path, monkeypatch, given_columns):
    """Issue #31: past a row limit the page holds the rows of origin and suspect calls, the red, yellow and
    unmatched rows and an even sample, each cell as the table writes it, and says so, naming the full table's files;
    built a block at a time when the caller has no columns, taken from its columns otherwise."""
    import numpy as np

    from msprobe_compare.render import table

    from dataclasses import replace

    o = big_outcome()
    colour = np.zeros(len(o), dtype=np.int8)
    colour[7::13] = 2  # 317 red rows
    colour[3::5] = 1  # 824 yellow rows
    o = replace(o, marks=type(o.marks)(reasons=o.marks.reasons, colour=colour))
    monkeypatch.setattr(html, "ROW_LIMIT", 1000)
    monkeypatch.setattr(html, "SAMPLE_ROWS", 200)
    monkeypatch.setattr(html, "BLOCK_ROWS", 512)
    rows = html.kept_rows(o)
    assert rows is not None and 800 < len(rows) <= 1000 and list(rows) == sorted(set(rows.tolist()))
    kept = set(rows.tolist())
    origin = [i for i in range(len(o)) if o.npu.names[i].startswith("Functional.relu.1.forward.")]
    red, yellow = np.flatnonzero(colour == 2), np.flatnonzero(colour == 1)
    assert origin and set(origin) <= kept and set(red.tolist()) <= kept  # all of these fit
    assert 0 < len(kept & set(yellow.tolist())) < len(yellow)  # yellow thinned to the room left
    path = tmp_path / "large.html"
    columns = table.column_data(o, table.Style(text_booleans=False)) if given_columns else None
    html.write_html(path, o, "large", columns=columns, tables=["out/compare_result_1.xlsx"])
    _open(browser, path)
    b = browser
    full = expected_cells(o)
    assert _all_cells(b) == [[col[i] for i in rows.tolist()] for col in full]
    note = b.eval("document.getElementById('partial-note').innerText")
    assert f"holds {len(rows):,} of the table's {len(o):,} rows" in note and "out/compare_result_1.xlsx" in note
    assert f"(of {len(o):,} in the table)" in b.eval("document.getElementById('row-count').textContent")
    assert f"{len(o):,} rows" in b.eval("document.getElementById('counts').innerText")  # the counts: the whole table
    b.eval("document.querySelector('#tbl tbody tr').click()")
    assert b.eval("document.querySelector('#detail .head b').textContent") == f"Row {rows[0] + 1}"
    _clean(b)


def test_small_table_is_whole(browser, tmp_path):
    o = outcome_of("pytorch/mlp_bug_stat")
    assert html.kept_rows(o) is None
    path = tmp_path / "whole.html"
    html.write_html(path, o, "whole")
    _open(browser, path)
    assert browser.eval("document.getElementById('partial-note').hidden")
    _clean(browser)


def test_module_tree_shows_whole_names(browser, run_cli):
    """Issue #31: at 1400 px the module tree wraps long names inside its card instead of clipping them."""
    run = run_cli(CASE, "pytorch")
    _open(browser, run.one("compare_report_*.html"))
    b = browser
    b.eval("document.getElementById('tree-origins').click()")
    fit = b.eval("""(() => { const tree = document.getElementById('tree'), right = tree.getBoundingClientRect().right;
        const labels = Array.from(tree.querySelectorAll('.tn'));
        return [tree.scrollWidth <= tree.clientWidth, labels.length,
                labels.every((tn) => Array.from(tn.children).every((c) => c.getBoundingClientRect().right <= right + 0.5))]; })()""")
    assert fit == [True, fit[1], True] and fit[1] > 10
    assert "Module.head.Linear.parameters_grad" in b.eval("document.getElementById('tree').innerText").replace("\n", "")
    _clean(b)
