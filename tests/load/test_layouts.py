"""Every valid JSON layout of a dump.json gives the same rows on the native text path and on the Python paths.

The fixture dumps (the dumper's indent=1) are re-serialised compact (`json.dump`'s default separators and
`(",", ":")`), with indent 2 and 4, tabs, CRLF line ends, keys in another order and, generated, blanks wherever
JSON allows them; each is flattened with the native walker (Walker.walk reads every layout) and with
MSPROBE_NATIVE=0 (the separator split for indent layouts, the tokenizer for the others), and the row tables
must be identical, and equal to the original file's where the layout keeps the key order.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprobe_compare import native
from msprobe_compare.errors import InputError
from msprobe_compare.load import stream
from msprobe_compare.load.dumpjson import read_json
from msprobe_compare.load.rows import flatten

from .test_rowwalk import _assert_same, _spied_flatten
from .test_stream import tricky_doc

DATA = Path(__file__).parents[1] / "data"
# one dump per fixture case (the ranks of a case are alike), the dumper's layout
CASES = sorted({p.parent.parent.parent: p for p in sorted(DATA.rglob("dump.json"))}.values())

needs_native = pytest.mark.skipif(
    native.status()["_rowwalk"] is False and os.environ.get("MSPROBE_REQUIRE_NATIVE") != "1",
    reason="the _rowwalk extension is not built",
)


def _keys_reversed(node: Any, top: bool = True) -> Any:
    """Every object's keys in reverse order, but the entries of "data" (their order is the rows' order)."""
    if isinstance(node, dict):
        items = list(node.items())[::-1]
        return {k: (_keys_reversed(v, False) if not (top and k == "data") else
                    {name: _keys_reversed(body, False) for name, body in v.items()}) for k, v in items}  # fmt: skip
    if isinstance(node, list):
        return [_keys_reversed(v, False) for v in node]
    return node


LAYOUTS: dict[str, Callable[[Any], str]] = {
    "compact": lambda d: json.dumps(d),
    "compact_tight": lambda d: json.dumps(d, separators=(",", ":")),
    "indent1": lambda d: json.dumps(d, indent=1),
    "indent2": lambda d: json.dumps(d, indent=2),
    "indent4": lambda d: json.dumps(d, indent=4),
    "tabs": lambda d: json.dumps(d, indent="\t"),
    "crlf": lambda d: json.dumps(d, indent=1).replace("\n", "\r\n"),
    "keys_reversed": lambda d: json.dumps(_keys_reversed(d), indent=1),
    "keys_reversed_compact": lambda d: json.dumps(_keys_reversed(d), separators=(",", ":")),
}
SAME_ORDER = {"compact", "compact_tight", "indent1", "indent2", "indent4", "tabs", "crlf"}


def _table(path: Path, use_native: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The row table of a dump.json, or the (type, message) of its error."""
    monkeypatch.setenv("MSPROBE_NATIVE", "1" if use_native else "0")
    try:
        return flatten(path, stream.open_dump(path)[1])
    except InputError as exc:
        return type(exc), str(exc).replace(str(path), "PATH")


def _walked(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(entries the native text path read itself, entries it left to the object path) of a flatten."""
    _, walked, stops = _spied_flatten(path, monkeypatch)
    return len(walked), sum(stop != -1 for stop in stops)


@needs_native
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_fixture_dumps_in_every_layout_give_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          layout: str) -> None:  # fmt: skip
    assert len(CASES) > 20
    for k, original in enumerate(CASES):
        path = tmp_path / f"{k}.json"
        path.write_text(LAYOUTS[layout](read_json(original)), encoding="utf-8", newline="")
        ours = _table(path, True, monkeypatch)
        _assert_same(ours, _table(path, False, monkeypatch))
        if layout in SAME_ORDER:
            _assert_same(ours, _table(original, True, monkeypatch))


@needs_native
@pytest.mark.parametrize("layout", ["compact", "compact_tight", "indent2", "crlf", "keys_reversed_compact"])
def test_native_text_path_reads_every_layout_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    layout: str) -> None:  # fmt: skip
    """No layout falls back to the object or general path: the text path reads every entry of a real dump."""
    original = DATA / "pytorch" / "mlp_bug_stat" / "npu" / "step0" / "rank" / "dump.json"
    doc = read_json(original)
    path = tmp_path / "dump.json"
    path.write_text(LAYOUTS[layout](doc), encoding="utf-8", newline="")
    monkeypatch.setattr(stream, "WALK_BUFFER", 4096)  # entries cut by the buffer's end, read again with more
    assert _walked(path, monkeypatch) == (len(doc["data"]), 0)


# -- blanks anywhere JSON allows them ---------------------------------------------------------------------------
_BLANKS = st.text(alphabet=" \t\r\n", max_size=3)


def _spaced(node: Any, rng: random.Random, blank: Callable[[], str]) -> str:
    """JSON text of `node` with random blanks around every token."""
    if isinstance(node, dict):
        items = [f"{blank()}{json.dumps(k)}{blank()}:{_spaced(v, rng, blank)}" for k, v in node.items()]
        return f"{blank()}{{{','.join(items) if items else blank()}}}{blank()}"
    if isinstance(node, list):
        items = [_spaced(v, rng, blank) for v in node]
        return f"{blank()}[{','.join(items) if items else blank()}]{blank()}"
    return f"{blank()}{json.dumps(node)}{blank()}"


@needs_native
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES), seed=st.integers(0, 2**32 - 1), blanks=st.lists(_BLANKS, min_size=1, max_size=8),
       block=st.sampled_from([512, 1 << 16, 16 << 20]), skip=st.sampled_from([8, 100, 1 << 20]),
       cut=st.one_of(st.none(), st.floats(0.0, 1.0)))  # fmt: skip
def test_blanks_anywhere_give_the_same_rows_and_errors(tmp_path_factory: pytest.TempPathFactory,
                                                       monkeypatch: pytest.MonkeyPatch, case: Path, seed: int,
                                                       blanks: list[str], block: int, skip: int,
                                                       cut: float | None) -> None:  # fmt: skip
    """Random blanks between tokens (and, cut short at a random byte, invalid JSON: the same error either way), read
    in blocks of every size; the native skip over "data" in buffers of every size (strings cut, longer than it)."""
    rng = random.Random(seed)
    doc = read_json(case)
    text = _spaced(doc, rng, lambda: rng.choice(blanks))
    if cut is not None:
        text = text[: int(len(text) * cut)]
    path = tmp_path_factory.mktemp("dump") / "dump.json"
    path.write_text(text, encoding="utf-8", newline="")
    monkeypatch.setattr(stream, "BLOCK", block)
    monkeypatch.setattr(stream, "WALK_BUFFER", block)
    monkeypatch.setattr(stream, "SKIP_BUFFER", skip)
    ours = _table(path, True, monkeypatch)
    _assert_same(ours, _table(path, False, monkeypatch))
    if cut is None:
        _assert_same(ours, _table(case, True, monkeypatch))


@needs_native
def test_status_codes_match_the_native_module() -> None:
    fast = native.built("_rowwalk")  # built (needs_native), whatever MSPROBE_NATIVE says
    assert fast is not None
    assert (stream.WALK_END, stream.WALK_MORE) == (fast.WALK_END, fast.WALK_MORE) and fast.WALK_OBJECT == 2


@needs_native
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_odd_entries_in_every_layout_give_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        layout: str) -> None:  # fmt: skip
    """Names and strings that look like separators, escapes, non-ASCII, NaN/Infinity, huge ints: the entries the
    text path leaves to the object path, between plain ones, at every buffer size."""
    doc = tricky_doc()
    tensor = doc["data"]["Functional.linear.0.forward"]["output"][0]
    doc["data"] = {**{f"Functional.plain.{k}.forward": {"output": [tensor]} for k in range(30)}, **doc["data"],
                   "Functional.last.0.forward": {"input_args": [tensor]}}  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_text(LAYOUTS[layout](doc), encoding="utf-8", newline="")
    for block in (16, 256, 1 << 20):
        monkeypatch.setattr(stream, "WALK_BUFFER", block)
        _assert_same(_table(path, True, monkeypatch), _table(path, False, monkeypatch))


@needs_native
def test_a_wrong_guess_of_the_end_of_data_is_refused_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multi-line value after "data" larger than the tail window deceives the guess of where "data" ends: the
    text path refuses it with the general path's words, never misreads it."""
    monkeypatch.setattr(stream, "TAIL", 16)
    doc = {"task": "statistics", "data": {"a": {"output": [None]}, "b": {}},
           "extra": {f"k{i}": i for i in range(20)}}  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc, indent=1))
    ours = _table(path, True, monkeypatch)
    assert ours == _table(path, False, monkeypatch)
    assert ours[0] is InputError and "keys after 'data'" in ours[1]
