"""The aligner's C twins (`_sharednames.module_scan`, `rows_alike`, `keyed_rows`) against their Python twins: on
every side of the impl archive's real dumps (HF, vLLM, FSDP, Megatron, fused kernels), and on hand-made names that
are not what the dumper writes (no dots, texts beyond ASCII, counters that are not small ASCII numbers, a name given
twice, a tree with a cycle, lone surrogates)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, extract_archive
from msprobe_compare.load.dumpjson import read_construct_json, read_json
from msprobe_compare.load.rows import RowTable, flatten
from msprobe_compare.pair import align, aligned
from tests.native_helpers import native_module


def _same_scan(got, want) -> bool:
    parents = (got[1] is None and want[1] is None) or (
        got[1] is not None and want[1] is not None and got[1].tolist() == want[1].tolist()
    )
    return got[0] == want[0] and parents and got[2].tolist() == want[2].tolist() and got[2].dtype == np.uint8


@pytest.fixture(scope="module")
def sides(tmp_path_factory) -> list[tuple[RowTable, dict | None]]:
    root = extract_archive(DATA / "impl" / "impl_cases.tar.xz", tmp_path_factory.mktemp("impl_native"))
    out = []
    for case in sorted(p.parent for p in root.rglob("TRUTH.json"))[:8]:
        cfg = json.loads((case / "compare.json").read_text())
        for side in ("npu", "bench"):
            path = (case / cfg[f"{side}_path"]).resolve()
            tree = path.parent / "construct.json"
            out.append((flatten(path, read_json(path)["data"]), read_construct_json(tree) if tree.exists() else None))
    return out


def test_module_scan_twins_agree_on_real_dumps(sides) -> None:
    native_module("_sharednames")
    calls = 0
    import random

    rng = random.Random(5)
    for table, tree in sides:
        others = []
        if tree:  # the tree's items in other orders than the dump's (the C twin walks them beside the entries)
            items = list(tree.items())
            shuffled = items[:]
            rng.shuffle(shuffled)
            extra = [(f"Tensor.extra.{i}.forward", None) for i in range(300)]
            late = items[len(items) // 3 :] + items[: len(items) // 3]
            others = [dict(items[::-1]), dict(shuffled), dict(extra + items), dict(late), dict(items[::2] + extra)]
        for t in (tree, None, *others):
            args = (table.entries, table.names, table.entry_bounds, align.MODULES, t)
            got, want = align._c_module_scan(*args), align._py_module_scan(*args)
            assert _same_scan(got, want)
            calls += len(got[0])
            layouts: dict[tuple[str, ...], int] = {}  # one number per key sequence, numbered as first met
            assert all(layouts.setdefault(tuple(c[6]), len(layouts)) == c[9] for c in got[0])
    assert calls > 500


def _table(entries: dict[str, list[str]]) -> RowTable:
    data = {e: {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0,
                                "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": False}] * len(keys)}
            for e, keys in entries.items()}  # fmt: skip
    t = flatten(Path("dump.json"), data)
    names = list(t.names)
    for e, keys in entries.items():  # the rows renamed as asked: any text after the entry's name
        i = t.entries.index(e)
        for r, k in zip(range(int(t.entry_bounds[i]), int(t.entry_bounds[i + 1])), keys):
            names[r] = k
    t.names[:] = names
    return t


HOSTILE = {
    "Module.a.Linear.forward.0": ["Module.a.Linear.forward.0.input.0", "Module.a.Linear.forward.0.input.0",
                                  "Module.a.Linear.forward.0.parameters.weight"],
    "Module.a.Linear.backward.0": ["Module.a.Linear.backward.0.input.0"],
    "Module.a.Linear.parameters_grad": ["Module.a.Linear.parameters_grad.weight"],
    "Module.a.weight.parameters_grad": ["Module.a.weight.parameters_grad.weight"],
    "Module.parameters_grad": ["x"],
    "Module.é.Çlass.forward.0": ["Module.é.Çlass.forward.0.input.é", "short"],
    "Module.b.C.forward.²": ["Module.b.C.forward.².input.0"],
    "Module.b.C.forward.1234567890123456789": ["y"],
    "Module.b.C.forward.123456789012345678": ["Module.b.C.forward.123456789012345678.output.0"],
    "Module.C.forward.0": ["z"],
    "Module": ["Module.input"],
    "Module.x.Y.sideways.0": ["w"],
    "Cell.net.Dense.forward.3": ["Cell.net.Dense.forward.3.output.0"],
    "Functional.linear.0.forward": ["Functional.linear.0.forward.input.0"],
}  # fmt: skip


def test_module_scan_twins_agree_on_names_the_dumper_does_not_write() -> None:
    native_module("_sharednames")
    t = _table(HOSTILE)
    trees = [None, {"Functional.linear.0.forward": "Module.a.Linear.forward.0",
                    "Module.a.Linear.forward.0": "Cell.net.Dense.forward.3",
                    "Cell.net.Dense.forward.3": "Module.a.Linear.forward.0",  # a cycle
                    "Module.é.Çlass.forward.0": "", "Module.b.C.forward.123456789012345678": None}]  # fmt: skip
    for tree in trees:
        args = (t.entries, t.names, t.entry_bounds, align.MODULES, tree)
        got, want = align._c_module_scan(*args), align._py_module_scan(*args)
        assert _same_scan(got, want)
    found = {c[1]: c for c in align._py_module_scan(t.entries, t.names, t.entry_bounds, align.MODULES, trees[1])[0]}
    assert set(found) == {"a", "é", "b", "net"} and found["a"][6] == {
        "input.0": int(t.entry_bounds[0]),
        "parameters.weight": int(t.entry_bounds[0]) + 2,
    }
    _, up, flags = align._c_module_scan(t.entries, t.names, t.entry_bounds, align.MODULES, trees[1])
    linear = t.entries.index("Functional.linear.0.forward")
    assert up[linear] == 0 and flags[linear] == align.API_FORWARD and flags[0] == align.MODULE
    assert up[t.entries.index("Module.é.Çlass.forward.0")] == -1  # an empty parent is none
    assert (
        found["a"][7] == 1 and found["a"][8] == 2 and found["a"][3] == 0 and found["a"][4] == 3 and found["net"][4] == 0
    )
    surrogate = _table({"Module.a.L.forward.0": ["Module.a.L.forward.0.input.\udc80"]})
    args = (surrogate.entries, surrogate.names, surrogate.entry_bounds, align.MODULES, None)
    assert _same_scan(align._c_module_scan(*args), align._py_module_scan(*args))


def test_rows_alike_and_keyed_rows_twins_agree() -> None:
    native_module("_sharednames")
    a = _table({"A.0.forward": ["A.0.forward.input.0", "A.0.forward.output.0"], "B.0.forward": ["B.0.forward.é"],
                "C.0.forward": ["C.0.forward.x", "C.0.forward.x"], "D": ["zz"]})  # fmt: skip
    b = _table({"X.0.forward": ["X.0.forward.input.0", "X.0.forward.output.0"], "B.0.forward": ["B.0.forward.é"],
                "Y.1.forward": ["Y.1.forward.output.0", "Y.1.forward.input.0"], "D": ["q"]})  # fmt: skip
    b.shape[1] = "[3]"
    e_n = np.array([0, 1, 0, 2, 3, 1], dtype=np.int64)
    e_b = np.array([0, 1, 2, 2, 3, 0], dtype=np.int64)
    got, want = aligned._c_rows_alike(a, b, e_n, e_b), aligned._py_rows_alike(a, b, e_n, e_b)
    assert got.tolist() == want.tolist() == [1, 2, 0, 0, 2, 0]  # "D"'s one row is cut to "" on both sides
    keys = ["input.0", "output.0", "é", "x", "", "nothing", "x"]
    want_e = np.array([0, 0, 1, 2, 3, 0, 0], dtype=np.int64)
    got = aligned._c_keyed_rows(a.names, a.entry_bounds, a.entries, want_e, keys)
    assert got.tolist() == aligned._py_keyed_rows(a.names, a.entry_bounds, a.entries, want_e, keys).tolist()
    assert got.tolist() == [0, 1, 2, 3, 5, -1, -1]
    with pytest.raises(ValueError):
        aligned._c_keyed_rows(a.names, a.entry_bounds, a.entries, np.array([9], dtype=np.int64), ["x"])


def test_the_c_twins_keep_no_reference_and_refuse_bad_bounds() -> None:
    """Many calls, some ending in an error (bounds beyond the names, a name that is not a text), leave the inputs'
    reference counts and the traced memory as they were."""
    import sys
    import tracemalloc

    shared = native_module("_sharednames")
    t = _table(HOSTILE)
    tree = {"Functional.linear.0.forward": "Module.a.Linear.forward.0"}
    bad = np.array(t.entry_bounds, dtype=np.int64)
    assert t.entries[0] == "Module.a.Linear.forward.0"
    bad[1] = len(t.names) + 5  # the first entry's rows beyond the names
    broken = list(t.names)
    broken[0] = 1  # type: ignore[call-overload]

    def calls() -> int:
        refused = 0
        shared.module_scan(t.entries, t.names, np.asarray(t.entry_bounds, dtype=np.int64), align.MODULES, tree)
        for names, bounds in ((t.names, bad), (broken, np.asarray(t.entry_bounds, dtype=np.int64))):
            try:
                shared.module_scan(t.entries, names, bounds, align.MODULES, tree)
            except (ValueError, TypeError):
                refused += 1
        try:
            shared.keyed_rows(t.names, bad, t.entries, np.array([0], dtype=np.int64), ["x"])
        except ValueError:
            refused += 1
        index.find_at(t.entries, np.arange(len(t.entries), dtype=np.int64), 7, "backward", out)
        try:
            index.find_at(t.entries, np.array([len(t.entries)], dtype=np.int64), 7, "backward", out[:1])
        except IndexError:
            refused += 1
        return refused

    index = shared.NameIndex(t.entries)
    out = np.empty(len(t.entries), dtype=np.int64)
    assert calls() == 4
    before = [sys.getrefcount(x) for x in (t.entries, t.names, tree, *t.entries[:3], *t.names[:3])]
    tracemalloc.start()
    for _ in range(50):
        calls()
    start = tracemalloc.get_traced_memory()[0]
    for _ in range(300):
        calls()
    grown = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    assert [sys.getrefcount(x) for x in (t.entries, t.names, tree, *t.entries[:3], *t.names[:3])] == before
    assert grown < 20_000, grown


def test_find_at_gives_finds_answer_on_both_indexes(sides, monkeypatch) -> None:
    """Names.find_at (C: NameIndex.find_at, no key text made) against find of the texts made in Python, and the
    Python index: on real entries (each forward's backward, each entry itself) and on texts whose cut part is
    beyond ASCII, shorter than the cut, empty, or without a UTF-8 form."""
    from msprobe_compare.pair.calls import Names

    native_module("_sharednames")
    table = sides[0][0]
    texts = list(table.entries) + ["é.forward", "x.forwé", "ab", "", "\udc80.forward", "ab.backward", "b"]
    names = list(table.entries) + ["ab.backward", "b", "backward", "é.backward"]
    at = np.arange(len(texts), dtype=np.int64)
    c_names = Names(names)
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    py_names = Names(names)
    monkeypatch.setenv("MSPROBE_NATIVE", "1")
    assert not hasattr(py_names._index, "find_at") and hasattr(c_names._index, "find_at")
    for cut, tail in ((7, "backward"), (0, ""), (1, "d"), (9, ""), (3, "é")):
        want = c_names.find([t[: max(len(t) - cut, 0)] + tail for t in texts])
        assert c_names.find_at(texts, at, cut, tail).tolist() == want.tolist()
        assert py_names.find_at(texts, at, cut, tail).tolist() == want.tolist()
    backward = c_names.find_at(texts, at, 7, "backward")
    assert backward[texts.index("é.forward")] == names.index("é.backward") and backward[
        texts.index("ab")
    ] == names.index("backward")
    assert (backward[: len(table.entries)] >= 0).sum() > 100
    with pytest.raises(IndexError):
        c_names.find_at(texts, np.array([len(texts)], dtype=np.int64))
