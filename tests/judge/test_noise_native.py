"""The root cause's row passes in C (`_noise.c`) against their numpy twins: the same bytes on the same inputs.

stat_measures (noise.py), the per-call maxima (`rootcause._PerEntry.max`) and the call directions
(`rows.phase_codes`); then the whole analysis of real noise cases with the native modules on and off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from msprobe_compare.judge import noise
from msprobe_compare.pair import calls as pairing
from msprobe_compare.judge.calls import _PerEntry
from msprobe_compare.load.rows import name_flags, phase_codes
from msprobe_compare.load.rows import flatten
from native_helpers import native_module
from pathlib import Path

DTYPES = ("torch.float32", "torch.bfloat16", "torch.float16", "torch.float64", "torch.int64", "torch.bool")


def _side(rng: np.random.Generator, rows: int):
    """One call per row, each output with random statistics of a random dtype; NaN, Inf, null, integer and
    boolean statistics, zeros, subnormal and huge values among them."""
    pool = [0.0, -0.0, 1, 0, -3, 2.5, math.nan, math.inf, -math.inf, None, True, 5e-324, 1e-310, 1e308, 65504.0]

    def stat() -> object:
        if rng.random() < 0.3:
            return pool[rng.integers(len(pool))]
        return float(rng.standard_normal() * 10.0 ** rng.integers(-12, 12))

    data = {}
    for r in range(rows):
        leaf = {"type": "torch.Tensor", "dtype": DTYPES[rng.integers(len(DTYPES))],
                "shape": [int(x) for x in rng.integers(0, 5, rng.integers(0, 3))],
                "Max": stat(), "Min": stat(), "Mean": stat(), "Norm": stat()}  # fmt: skip
        data[f"Torch.add.{r}.forward"] = {"input_args": [leaf], "output": [dict(leaf, Norm=stat())]}
    return flatten(Path("dump.json"), data)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture()
def fast():
    module = native_module("_noise")
    assert noise._native() is module  # its codes are ours: it is taken
    return module


def _pair(rng: np.random.Generator, npu_rows: int, bench_rows: int):
    """Two random sides (`_side`) whose first 200 bench rows are, statistic by statistic, half of them near
    neighbours of the NPU rows: the Norm and Mean differences of real compares are small."""
    npu, bench = _side(rng, npu_rows), _side(rng, bench_rows)
    bench.stats[:200] = np.where(rng.random((200, 4)) < 0.5, npu.stats[:200] * (1 + 1e-3 * rng.random((200, 4))),
                                 bench.stats[:200])  # fmt: skip
    return npu, bench


def test_stat_measures_equal_numpy(fast, monkeypatch):
    rng = np.random.default_rng(5)
    npu, bench = _pair(rng, 400, 300)
    match = rng.integers(-1, len(bench), len(npu))
    match[:150] = np.arange(150)
    for b, m in ((bench, match), (_side(rng, 0), np.full(len(npu), -1))):  # and no bench rows at all
        got = noise.stat_measures(npu, b, m)
        monkeypatch.setenv("MSPROBE_NATIVE", "0")
        want = noise.stat_measures(npu, b, m)
        monkeypatch.delenv("MSPROBE_NATIVE")
        for name in ("diff", "quant", "unit", "nonfinite", "nonfinite_any"):
            assert _same(getattr(got, name), getattr(want, name)), name
        assert np.isfinite(got.diff).any() == (b is bench)


def test_stat_measures_cover_every_branch(fast, monkeypatch):
    """The random tables above reach each kind of row the C code tells apart."""
    rng = np.random.default_rng(5)
    npu, bench = _side(rng, 400), _side(rng, 300)
    match = rng.integers(-1, len(bench), len(npu))
    m = noise.stat_measures(npu, bench, match)
    hit = match >= 0
    assert (np.isnan(m.diff[:, 0]) & ~hit).any()  # unpaired
    assert (np.isinf(m.diff[:, 0]) & m.nonfinite).any()  # NaN/Inf on one side
    assert (np.isnan(m.diff[:, 0]) & hit & ~m.nonfinite).any()  # not comparable (null, bool, NaN on both)
    assert (np.isfinite(m.diff[:, 0]) & (m.quant[:, 0] > 0)).any() and (m.quant[:, 0] == 0).any()


def test_per_call_maxima_equal_numpy(fast, monkeypatch):
    rng = np.random.default_rng(3)
    ei = np.sort(rng.integers(0, 500, 5000))
    red = _PerEntry(ei, 520)  # calls without rows too
    values = np.where(rng.random((5000, 3)) < 0.2, np.nan, rng.standard_normal((5000, 3)))
    values[::7] = -0.0
    mask = rng.random(5000) < 0.6
    for fill in (-np.inf, 0.0):
        for v in (values, values[:, 1].copy(), np.asfortranarray(values)):
            got = red.max(mask, v, fill)
            monkeypatch.setenv("MSPROBE_NATIVE", "0")
            want = red.max(mask, v, fill)
            monkeypatch.delenv("MSPROBE_NATIVE")
            assert _same(got, want) and not np.signbit(got[got == 0]).any()  # a zero maximum is +0


def test_phase_codes_equal_python(fast, monkeypatch):
    names = ["Functional.linear.0.forward", "Functional.linear.0.backward", "Module.a.Linear.forward.0",
             "Module.a.Linear.backward.0", "Module.a.Linear.parameters_grad", "Module.a.weight.parameters_grad.2",
             "Tensor.backward.0.forward", "Tensor.backward.1.backward", "Module.backwardé.Linear.forward.0",
             "Module.é.Linear.backward.0", "Functional.backward_hook.3.forward", "backward", "", ".backward",
             "Module.parameters_grad.Linear.backward.1", "Torch.ß.0.backward"]  # fmt: skip
    got, flags = phase_codes(names), name_flags(names)
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    again = list(names)  # another list: the flags are kept for the last list only
    want, want_flags = phase_codes(again), name_flags(again)
    assert _same(got, want) and all(_same(a, b) for a, b in zip(flags, want_flags))
    assert flags[3].tolist() == ["_." in n for n in names] and name_flags(again) is want_flags
    assert got.tolist() == [0, 1, 0, 1, 2, 2, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1]


def test_running_floor_equals_numpy(fast, monkeypatch):
    from msprobe_compare.judge.floors import running_floor

    rng = np.random.default_rng(9)
    for calls, k in ((1, 3), (700, 3), (300, 1)):
        vals = rng.choice([0.0, 1e-6, 1e-3, 0.5, 2.0, np.inf, -np.inf, np.nan], (2, calls, k))
        vals = np.where(rng.random((2, calls, k)) < 0.5, vals, rng.random((2, calls, k)))
        order = rng.permutation(calls)
        got = running_floor(vals[0], vals[1], order)
        monkeypatch.setenv("MSPROBE_NATIVE", "0")
        want = running_floor(vals[0], vals[1], order)
        monkeypatch.delenv("MSPROBE_NATIVE")
        assert all(_same(a, b) for a, b in zip(got, want))
    assert (got[1] >= 0).any() and (got[1] == -1).any()


def test_names_index_equals_the_dict(monkeypatch):
    """`pairing.Names` over `_sharednames.NameIndex` and over a dict: the same first positions, absences and repeats."""
    join = native_module("_sharednames")
    names = ["Functional.linear.0.forward", "Tensor.add.0.forward", "Module.é.Linear.forward.0", "ß", "",
             "Tensor.add.0.forward", "Functional.linear.1.forward", "x" * 300]  # fmt: skip
    keys = names[::-1] + ["absent", "Functional.linear.0.forwar", "\\ud800", "\ud800", "é"]
    got = pairing.Names(names)
    assert isinstance(got._index, join.NameIndex)  # the C table
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    want = pairing.Names(names)
    assert isinstance(want._index, pairing._PyNameIndex)  # the dict
    assert _same(got.find(keys), want.find(keys))
    assert got.find(keys).tolist()[:8] == [7, 6, 1, 4, 3, 2, 1, 0]  # a repeated name: its first place
    assert got.repeated == want.repeated == 1
    for k in keys + [None, 3]:  # not texts: none of the names
        assert got.get(k) == want.get(k) and (k in got) == (k in want)
    assert got.find([]).tolist() == []


def test_names_index_refuses_a_changed_list():
    join = native_module("_sharednames")
    names = ["a", "b"]
    index = join.NameIndex(names)
    names.append("c")
    with pytest.raises(RuntimeError, match="changed"):
        index.get("a")
    with pytest.raises(UnicodeEncodeError):  # a name without a UTF-8 form: Names takes its dict
        join.NameIndex(["\ud800"])
    assert pairing.Names(["\ud800", "a"]).find(["a", "\ud800"]).tolist() == [1, 0]


@pytest.mark.parametrize("low_dtype", ["torch.float16", "torch.bfloat16"])
def test_statistic_bits_equal_numpy(fast, monkeypatch, low_dtype):
    """stat_bits' test of which finer rows carry statistics of the low format, in C and by numpy."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(4 * 600) * 10.0 ** rng.integers(-9, 4, 4 * 600)  # within float16's range
    as_low = x.astype(np.float16).astype(np.float64) if low_dtype == "torch.float16" else (
        (x.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64))  # fmt: skip
    vals = np.where(rng.random(x.size) < 0.7, as_low, x).reshape(-1, 4)
    vals[::9] = [1.0, 1.0, 1.0, 8.0]  # constant tensors: short fractions, no evidence
    vals[1::11, 0] = 65504.0 * 2  # beyond float16's range
    vals[2::13, 1] = 2.0**-20  # a float16 subnormal
    vals[3::13, 1] = 2.0**-20 + 2.0**-30  # not one
    data = {}
    for r, row in enumerate(vals.tolist()):
        dtype = low_dtype if r % 10 == 0 else ("torch.float32" if r % 3 else "torch.float64")
        data[f"Torch.mul.{r}.forward"] = {"input_args": [], "output": [
            {"type": "torch.Tensor", "dtype": dtype, "shape": [4], "Max": row[0], "Min": row[1], "Mean": row[2],
             "Norm": None if r % 17 == 5 else row[3]}]}  # fmt: skip
    got = noise.stat_bits(flatten(Path("dump.json"), data))
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    want = noise.stat_bits(flatten(Path("dump.json"), data))
    assert _same(got, want)
    low = 10 if low_dtype == "torch.float16" else 7
    assert (got == low).sum() > 60 and ((got > low) & (np.arange(len(got)) % 10 != 0)).any()  # some, not all


def test_margins_equal_numpy(fast, monkeypatch):
    from msprobe_compare.judge.floors import margins

    rng = np.random.default_rng(4)
    for calls, k in ((500, 3), (200, 1)):
        pick = [0.0, 1e-7, 1e-4, 3e-3, 0.2, 5.0, np.inf, -np.inf, np.nan]
        d = [np.where(rng.random((calls, k)) < 0.4, rng.choice(pick, (calls, k)), rng.random((calls, k)) * 1e-3)
             for _ in range(2)]  # fmt: skip
        prior, q_in, q_all = (np.where(rng.random((calls, k)) < 0.3, 0.0, rng.random((calls, k)) * 1e-3)
                              for _ in range(3))  # fmt: skip
        ufl = np.where(rng.random(calls) < 0.2, 0.0, 5e-5)
        weight = np.array([1.0, 1.0, 2.0])[:k]
        got = margins(d[0], d[1], prior, q_in, q_all, ufl, weight)
        monkeypatch.setenv("MSPROBE_NATIVE", "0")
        want = margins(d[0], d[1], prior, q_in, q_all, ufl, weight)
        monkeypatch.delenv("MSPROBE_NATIVE")
        assert all(_same(a, b) for a, b in zip(got, want))
    assert (got[2] > 0).any() and (got[4] >= 0).all()


def test_children_equal_python(fast, monkeypatch):
    tree = {"Module.a.forward.0": None, "Functional.relu.0.forward": "Module.a.forward.0",
            "Module.b.forward.0": "Module.a.forward.0", "Tensor.add.0.forward": "Module.b.forward.0",
            "Torch.cat.0.forward": None, "Module.é.forward.0": "Module.b.forward.0"}  # fmt: skip
    for modules in ({None}, {"Module.b.forward.0", "absent"}, set(), frozenset({"Module.a.forward.0", None})):
        got = pairing.children(tree, modules)
        monkeypatch.setenv("MSPROBE_NATIVE", "0")
        assert got == pairing.children(tree, modules)
        monkeypatch.delenv("MSPROBE_NATIVE")
    assert pairing.children(tree, {"Module.b.forward.0"}) == [("Tensor.add.0.forward", "Module.b.forward.0"),
                                                             ("Module.é.forward.0", "Module.b.forward.0")]  # fmt: skip
    with pytest.raises(TypeError):
        native_module("_sharednames").children(tree, ["not a set"])


@pytest.mark.parametrize("native", ["1", "0"])
def test_sides_positions_equal_first_positions(native, monkeypatch):
    """Each entry's first position on the other side, with names repeated on either side or on both."""
    from types import SimpleNamespace

    monkeypatch.setenv("MSPROBE_NATIVE", native)
    cases = [(["a", "b", "c"], ["c", "x", "a"]), (["a", "b", "a", "y"], ["a", "b"]), (["a", "b"], ["b", "b", "z"]),
             (["q", "q"], ["q", "q"]), (["a"], ["b"]), (["a", "y", "y", "b", "z"], ["b", "w", "a"]), ([], ["a"]),
             (["a", "b"], [])]  # fmt: skip
    through = 0
    for n, b in cases:
        sides = pairing._Sides(SimpleNamespace(entries=n), SimpleNamespace(entries=b))
        assert sides.bench_of_npu.tolist() == [b.index(x) if x in b else -1 for x in n]
        assert sides.npu_of_bench.tolist() == [n.index(x) if x in n else -1 for x in b]
        assert sides.same() == (set(n) == set(b)) and sides.only_npu() == set(n) - set(b)
        assert [x in sides.npu for x in ("a", "q", "none")] == [x in n for x in ("a", "q", "none")]
        # the NPU side's Names, read through the bench side's where names occur once: as its own table
        keys = n[::-1] + b + ["none", "", "y"]
        own = pairing.Names(n)
        through += type(sides.npu) is not pairing.Names
        assert sides.npu.find(keys).tolist() == own.find(keys).tolist() == [n.index(x) if x in n else -1 for x in keys]
        assert sides.npu.repeated == own.repeated and [sides.npu.get(k) for k in keys + [None]] == [
            own.get(k) for k in keys + [None]]  # fmt: skip
    assert through == 5  # every case whose bench names and shared names occur once


def test_call_keys_equal_the_patterns(fast, monkeypatch):
    names = ["Functional.linear.12.forward", "Module.a.Linear.forward.0", "Module.a.Linear.backward.17",
             "Tensor.add.3.backward", ".5.forward", "5.forward", "a..3.forward", "a.x3.forward", "a.3.forwardx",
             "a.forward.", "a.forward.x1", "a.٣.forward", "a.².forward", "Module.b.forward.٣٤", "forward", "",
             "a.1.2.forward", "a.forward.1.forward.2", "Module.é.forward.0", "x.backward.3.forward", "a.3.Forward",
             "Module.a.parameters_grad", "a.0.backward.1"]  # fmt: skip
    got = pairing.call_keys(names)
    assert got == [native_module("_sharednames").call_keys([n])[0] for n in names]
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    assert got == pairing.call_keys(names)  # the regex passes over the joined names
    assert got[:4] == ["Functional.linear..forward", "Module.a.Linear.forward.", "Module.a.Linear.backward.",
                       "Tensor.add..backward"]  # fmt: skip
    assert native_module("_sharednames").call_keys(["a.1.forward", "b\nc"]) is None  # a line break: the per-name rule


def _calls_twin(npu, bench, match, flags, red):
    """rootcause.analyse's numpy sequence for what `noise.stat_calls` returns, from the same row flags."""
    tensor_row, art = (flags & noise.ROW_TENSOR) != 0, (flags & noise.ROW_ARTIFACT) != 0
    is_in, is_out = (flags & noise.ROW_INPUT) != 0, (flags & noise.ROW_OUTPUT) != 0
    m = noise.stat_measures(npu, bench, match)
    diff = m.diff
    diff[~tensor_row] = np.nan
    differs = noise._any_cols(diff > 0)
    artifact = art & differs
    diff[artifact] = np.nan
    differs &= ~artifact
    tin, tout = is_in & tensor_row, is_out & tensor_row
    quant = m.quant
    quant[np.isnan(diff)] = np.nan
    measured = ~noise._all_cols(np.isnan(diff))
    bits = red.any_of(tin & m.nonfinite & ~artifact, tout & m.nonfinite, tin & m.nonfinite_any & ~artifact, measured,
                      tin & differs, tout & differs, tout & measured)  # fmt: skip
    packed = sum(b.astype(np.uint8) << np.uint8(k) for k, b in enumerate(bits)).astype(np.uint8)
    return noise.CallMeasures(diff, m.nonfinite, red.max(tin, diff), red.max(tout, diff), red.max(tin, quant, 0.0),
                              red.max(tensor_row, quant, 0.0), red.max(tensor_row & (match >= 0), m.unit, 0.0),
                              packed)  # fmt: skip


@pytest.mark.parametrize("gaps", [False, True])
def test_stat_calls_equal_the_numpy_sequence(fast, gaps):
    """The one-pass measures and per-call reductions against stat_measures, the masks and `_PerEntry`: random
    statistics, tensor and non-tensor rows, inputs, outputs, rows of neither, in-place artefacts, unpaired rows;
    with `gaps`, calls without rows (their fills)."""
    rng = np.random.default_rng(11)
    npu, bench = _pair(rng, 300, 250)
    match = rng.integers(-1, len(bench), len(npu))
    match[:300] = np.arange(300)  # rows 250-299 point past the bench rows: both take them as unpaired
    n = len(npu)
    flags = np.where(rng.random(n) < 0.8, noise.ROW_TENSOR, 0).astype(np.uint8)
    flags |= rng.choice(np.array([noise.ROW_INPUT, noise.ROW_OUTPUT, 0], dtype=np.uint8), n, p=[0.5, 0.4, 0.1])
    flags |= np.where(rng.random(n) < 0.1, noise.ROW_ARTIFACT, 0).astype(np.uint8)
    ei = npu.entry_index * 2 if gaps else npu.entry_index  # odd calls: no rows
    n_calls = int(ei[-1]) + 3 if gaps else len(npu.entries)
    red = _PerEntry(ei, n_calls)
    assert red.in_order and red.every != gaps
    got = noise.stat_calls(npu, bench, match, flags, red.seg, None if red.every else red.seg_entry, n_calls)
    want = _calls_twin(npu, bench, match, flags, red)
    for name in ("diff", "nonfinite", "in_d", "out_d", "q_in", "q_all", "unit", "flags"):
        assert _same(getattr(got, name), getattr(want, name)), name
    for bit in range(len(noise.CALL_FLAGS)):  # every flag both set and clear somewhere
        assert 0 < np.count_nonzero(got.flags & (1 << bit)) < n_calls, noise.CALL_FLAGS[bit]
    assert np.isfinite(got.in_d).any() and np.isneginf(got.out_d).any() and (got.q_all > 0).any()


def test_raw_args_are_the_raw_cells_of_column_0():
    """`pairing.raw_args`: per row the raw value of the first statistic column, as `RawCells[(row, 0)]` gives it,
    None for rows without one (numeric statistics, or a raw value in another column only)."""
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
            "Norm": 1.2}  # fmt: skip
    data = {"Functional.softmax.0.forward": {"input_args": [leaf, {"type": "int", "value": 1}],
                                             "input_kwargs": {"dim": {"type": "str", "value": "mean"},
                                                              "inplace": {"type": "bool", "value": False}},
                                             "output": [dict(leaf, Max=True, Min=False)]},
            "Functional.relu.0.forward": {"input_args": [dict(leaf, Mean=True)], "output": [leaf]}}  # fmt: skip
    table = flatten(Path("dump.json"), data)
    got = pairing.raw_args(table)
    want = [table.raw[(r, 0)] if (r, 0) in table.raw else None for r in range(len(table))]
    assert got.tolist() == want and pairing.raw_args(table).tolist() == want  # read anew: RawArgs keeps it per analysis
    assert "mean" in want and False in want and sum(v is not None for v in want) >= 3
    assert any((r, 2) in table.raw and want[r] is None for r in range(len(table)))  # raw in another column only


def _tree_twin(raw: bytes, base: dict):
    """read_construct_json's tree of `raw` and its tree_diff from `base`: what pairing.tree_beside must give."""
    import tempfile

    from msprobe_compare.load.dumpjson import read_construct_json

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "construct.json"
        path.write_bytes(raw)
        tree = read_construct_json(path)
    return tree, pairing.tree_diff(base, tree)


def _trees_equal(got, want) -> bool:
    """The same items (the order of a tree read beside is base's, then the changed names'), the same diff."""
    return got[0] == want[0] and got[1] == want[1]


def test_tree_beside_equals_the_full_read_on_every_fixture_pair(fast):
    """Each construct.json pair of tests/data read beside the NPU tree: the bench tree and the diff as the full
    read and tree_diff give them, and every parent the two trees share is one object."""
    import json

    from msprobe_compare.load.dumpjson import read_construct_json

    data = Path(__file__).resolve().parents[1] / "data"
    pairs = 0
    for npu in sorted(data.rglob("npu*/**/construct.json")):
        bench = Path(str(npu).replace("/npu", "/bench", 1))
        if not bench.is_file():
            continue
        base = read_construct_json(npu)
        got = pairing.tree_beside(bench.read_bytes(), base)
        want = _tree_twin(bench.read_bytes(), base)
        if got is None:  # outside the plain subset (a micro-step list, ...): the full read takes it
            assert b"[" in bench.read_bytes() or "megatron_micro_step_number" in json.loads(bench.read_bytes())
            continue
        pairs += 1
        assert _trees_equal(got, want), bench
        assert all(got[0][k] is base[k] for k in got[0] if k in base and got[0][k] == base[k])
    assert pairs >= 5


def test_tree_beside_takes_the_plain_subset_only(fast):
    """Extra, missing, moved and reordered names, null parents, other layouts and texts beyond ASCII give the
    full read's answer; escapes, lists, other values, a name given twice, bad UTF-8 and bad JSON give None (the
    full read's business, which also reports the bad ones)."""
    import json

    base = {"Module.a.forward.0": None, "Functional.linear.0.forward": "Module.a.forward.0",
            "Functional.relu.0.forward": "Module.a.forward.0", "Module.b.forward.0": "Module.a.forward.0",
            "Tensor.add.0.forward": "Module.b.forward.0", "Module.é.forward.0": None}  # fmt: skip

    def variant(items, indent=1):
        return json.dumps(dict(items), indent=indent, ensure_ascii=False).encode()

    items = list(base.items())
    extra = items[:2] + [("Tensor.to.0.forward", "Module.a.forward.0")] + items[2:]
    cases = [variant(items), variant(items[:1] + items[2:]), variant(extra), variant(items[::-1]),
             variant([(k, "Module.b.forward.0" if k.startswith("Functional.relu") else v) for k, v in items]),
             variant([(k, None) for k, _ in items]), variant(items, indent=None), variant(items, indent=4),
             b"{}", b" { } \n",
             variant([(f"Tensor.add.{i}.forward", "Module.a.forward.0") for i in range(200)] + items)]  # fmt: skip
    for raw in cases:
        got = pairing.tree_beside(raw, base)
        assert got is not None and _trees_equal(got, _tree_twin(raw, base)), raw
    for raw in (b'{"a\\u00e9": null}', b'{"a": ["Module.a.forward.0"]}', b'{"a": 1}', b'{"a": true}',
                b'{"a": "\xff"}', b'{"a": null', b'{"a": null} x', b'{"a" null}', b'{"a": null,}', b"[]", b"",
                b'{"megatron_micro_step_number": null}', b'{"a": "b\tc"}',
                b'{"Module.a.forward.0": null, "Module.a.forward.0": "x"}'):  # fmt: skip
        assert pairing.tree_beside(raw, base) is None, raw


def test_tree_beside_with_every_name_moved_gives_the_diff_when_read(fast):
    """A tree of different code (every module renamed: each name's parent moved, more than tree_beside checks at
    once): the same tree and diff as the full read, the moved names made when first read, in base's order; and a
    tree with one name moved among many keeps its one name."""
    import json

    base = {f"Module.layers.{i}.forward.0": None for i in range(100)}
    base.update({f"Functional.linear.{i}.forward": f"Module.layers.{i}.forward.0" for i in range(100)})
    renamed = {k.replace("Module.", "Module.model."): v.replace("Module.", "Module.model.") if v else v
               for k, v in base.items()}  # fmt: skip
    one = dict(base, **{"Functional.linear.7.forward": "Module.layers.8.forward.0"})
    for tree in (renamed, one):
        raw = json.dumps(tree).encode()
        got, want = pairing.tree_beside(raw, base), _tree_twin(raw, base)
        assert got is not None and _trees_equal(got, want)
        assert not got[1].equal and got[1].moved == want[1].moved
    assert pairing.tree_beside(json.dumps(one).encode(), base)[1].moved == ("Functional.linear.7.forward",)
    assert len(pairing.tree_beside(json.dumps(renamed).encode(), base)[1].moved) == 100
