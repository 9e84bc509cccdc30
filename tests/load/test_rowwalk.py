"""The native row walk (_rowwalk.c) gives exactly the Python walk's tables and errors.

Every fixture dump.json and hypothesis-generated entries (tensor leaves with every kind of statistic, scalars,
torch.Size, process groups, src/dst, data_name, md5, P2POp, nested containers, parameters_grad and debug entries,
invalid values) are flattened both ways. Entries the native walk does not handle fall back to the Python walk,
so the two must agree everywhere, errors included.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprobe_compare import native
from tests.native_helpers import examples
from msprobe_compare.errors import InputError
from msprobe_compare.load import rows, stream
from msprobe_compare.load.rows import RowTable, _Builder, flatten

DATA = Path(__file__).parents[1] / "data"
DUMPS = sorted(DATA.rglob("dump.json"))

needs_native = pytest.mark.skipif(
    native.status()["_rowwalk"] is False and os.environ.get("MSPROBE_REQUIRE_NATIVE") != "1",
    reason="the _rowwalk extension is not built",
)


def test_native_module_is_built_where_required() -> None:
    if os.environ.get("MSPROBE_REQUIRE_NATIVE") == "1":
        assert native.status()["_rowwalk"], "MSPROBE_REQUIRE_NATIVE=1 but msprobe_compare._rowwalk is not importable"


def _flatten(entries: list[tuple[str, Any]], use_native: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The table, or the (type, message) of the error, with the native walk on or off."""
    monkeypatch.setenv("MSPROBE_NATIVE", "1" if use_native else "0")
    builder = _Builder(Path("dump.json"))
    assert (builder._walker is not None) == use_native
    try:
        for op, body in entries:
            builder.entry(op, body)
    except (InputError, OverflowError) as exc:
        return type(exc), str(exc)
    return builder.build({})


def _assert_same(a: Any, b: Any) -> None:
    if not isinstance(a, RowTable) or not isinstance(b, RowTable):
        assert a == b
        return
    for name in ("entries", "names", "dtype", "shape", "md5", "data_name", "has_md5"):
        assert getattr(a, name) == getattr(b, name), name
    for name in ("entry_index", "state", "requires_grad", "stat_kind"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert np.array_equal(a.stats, b.stats) and np.array_equal(np.signbit(a.stats), np.signbit(b.stats))
    assert list(a.raw) == list(b.raw)
    assert all(_same_value(a.raw[k], b.raw[k]) for k in a.raw)
    assert [type(v) for v in a.raw._rows.values()] == [type(v) for v in b.raw._rows.values()]


def _same_value(x: Any, y: Any) -> bool:
    return type(x) is type(y) and (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)))


@needs_native
@pytest.mark.parametrize("path", DUMPS, ids=[str(p.relative_to(DATA)) for p in DUMPS])
def test_fixture_tables_are_identical(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, entries = stream.open_dump(path)
    items = list(entries)
    _assert_same(_flatten(items, True, monkeypatch), _flatten(items, False, monkeypatch))


# -- generated entries ------------------------------------------------------------------------------------------
_numbers = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70), st.booleans(),
    st.sampled_from([0.0, -0.0, 1e-310, 2**53 + 1]),
)  # fmt: skip
_bad = st.sampled_from(["text", [1], {"a": 1}])


@st.composite
def _tensor(draw: st.DrawFn) -> dict[str, Any]:
    leaf: dict[str, Any] = {"type": "torch.Tensor", "dtype": draw(st.sampled_from(["torch.float32", "torch.bool"]))}
    shape = draw(st.one_of(st.none(), st.lists(st.integers(-5, 2**40), max_size=4),
                           st.lists(st.one_of(st.floats(allow_nan=True), st.booleans(), st.integers()), max_size=3)))  # fmt: skip
    if draw(st.booleans()):
        leaf["shape"] = shape
    for key in ("Max", "Min", "Mean", "Norm"):
        if draw(st.integers(0, 9)):
            leaf[key] = draw(_numbers if draw(st.integers(0, 30)) else _bad)
    if draw(st.booleans()):
        leaf["requires_grad"] = draw(st.one_of(st.booleans(), st.none(), st.just(1)))
    if draw(st.integers(0, 4)) == 0:
        leaf["md5"] = draw(st.one_of(st.just("0123abcd"), st.just("0x02d2129382b6952c"), st.just(""), st.just(7),
                                     st.just(2.5), st.just(True), st.none()))  # fmt: skip
    if draw(st.integers(0, 4)) == 0:
        leaf["data_name"] = draw(st.sampled_from(["-1", "", "Functional.x.0.forward.output.0.pt", "plain", 3]))
    if draw(st.integers(0, 30)) == 0:
        leaf["dtype"] = draw(st.sampled_from([5, None]))
    return leaf


@st.composite
def _scalar(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["int", "float", "bool", "str", "NoneType", "torch.Size", "slice", "ellipsis",
                                 "torch.ProcessGroup", "torch.dtype"]))  # fmt: skip
    leaf: dict[str, Any] = {"type": kind}
    if draw(st.integers(0, 5)):
        leaf["value"] = draw(st.one_of(st.none(), st.integers(-(2**70), 2**70), st.floats(), st.booleans(),
                                       st.text(max_size=5), st.lists(st.integers(0, 9), max_size=3),
                                       st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)))  # fmt: skip
    if kind == "torch.ProcessGroup" and draw(st.booleans()):
        leaf["group_ranks"] = draw(st.lists(st.integers(0, 7), max_size=4))
    if draw(st.integers(0, 4)) == 0:
        leaf["md5"] = draw(st.one_of(st.just("feedbeef"), st.just(""), st.none()))
    if draw(st.integers(0, 6)) == 0:
        leaf["data_name"] = "Functional.y.0.forward.input.1.npy"
    return leaf


_p2p = st.builds(lambda t: {"class_type": "torch.distributed.P2POp", "tensor": t, "op": "isend"}, _tensor())
_leaf = st.one_of(_tensor(), _scalar(), _p2p, st.none())
_node = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "src", "dst", "group_src", "ключ"]), inner, max_size=3),
    ),
    max_leaves=12,
)
_body = st.fixed_dictionaries(
    {},
    optional={
        "input_args": st.lists(_node, max_size=4),
        "input_kwargs": st.dictionaries(st.sampled_from(["dim", "src", "dst", "group", "x"]), _node, max_size=3),
        "output": st.one_of(st.lists(_node, max_size=3), _node),
        "parameters": st.dictionaries(st.sampled_from(["weight", "bias"]), _tensor(), max_size=2),
        "input": _node,
        "is_recompute": st.booleans(),
    },
)
_op = st.sampled_from(["Functional.linear.{}.forward", "Tensor.add.{}.backward", "Module.m.Linear.forward.{}",
                       "Module.m.Linear.parameters_grad", "Module.m.Linear.parameters_grad.{}",
                       "Module.parameters_grad.m.{}", "Distributed.send.{}.forward", "Tensor.x.{}.debug"])  # fmt: skip


@st.composite
def _entries(draw: st.DrawFn) -> list[tuple[str, Any]]:
    out = []
    for k in range(draw(st.integers(1, 6))):
        op = draw(_op).format(k)
        if rows.is_param_grad(op) or draw(st.integers(0, 9)) == 0:  # 26.x names them `parameters_grad.<n>`
            body: Any = draw(st.dictionaries(st.sampled_from(["weight", "bias"]), st.lists(_leaf, max_size=2),
                                             max_size=2))  # fmt: skip
        elif draw(st.integers(0, 40)) == 0:
            body = draw(st.sampled_from([[1], "x", None, 3]))
        else:
            body = draw(_body)
        out.append((op, body))
    return out


@needs_native
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=_entries())
def test_generated_entries_give_identical_tables_and_errors(entries: list, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_same(_flatten(entries, True, monkeypatch), _flatten(entries, False, monkeypatch))


@needs_native
def test_fallback_entry_between_native_ones_keeps_row_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slice leaf (Python walk) between native entries: rows and numeric columns stay in entry order."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
              "Norm": 1.2, "requires_grad": True}  # fmt: skip
    entries = [
        ("Functional.a.0.forward", {"input_args": [tensor], "output": [tensor]}),
        ("Functional.b.0.forward", {"input_args": [tensor, {"type": "slice", "value": [1, 2, None]}]}),
        ("Functional.c.0.forward", {"input_args": [{**tensor, "Max": True}], "output": [None]}),
    ]
    table = _flatten(entries, True, monkeypatch)
    _assert_same(table, _flatten(entries, False, monkeypatch))
    assert list(table.entry_index) == [0, 0, 1, 1, 2, 2]
    assert table.names[3] == "Functional.b.0.forward.input.1" and table.dtype[3] == "slice"
    assert table.raw[(4, 0)] is True and (4, 1) not in table.raw


@needs_native
def test_flatten_uses_the_native_walk_and_agrees_on_a_generated_dump(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Streamed from a file as the pipeline does: same table either way."""
    import json
    import random

    rng = random.Random(3)
    data = {}
    for k in range(300):
        leaf = {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [rng.randint(1, 9), 4],
                "Max": rng.random(), "Min": -rng.random(), "Mean": rng.random() - 0.5, "Norm": rng.random() * 9,
                "requires_grad": bool(k % 2)}  # fmt: skip
        data[f"Functional.op{k % 7}.{k}.forward"] = {
            "input_args": [leaf, {"type": "int", "value": k}], "input_kwargs": {"dim": {"type": "int", "value": -1}},
            "output": [leaf]}  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                "dump_data_dir": None, "data": data}, indent=1))  # fmt: skip
    tables = []
    for flag in ("1", "0"):
        monkeypatch.setenv("MSPROBE_NATIVE", flag)
        _, entries = stream.open_dump(path)
        tables.append(flatten(path, entries))
    _assert_same(*tables)
    assert len(tables[0]) == 1200


# -- the text path: rows read straight from dump.json bytes (Walker.walk) -----------------------------------------
def _file_table(path: Path, use_native: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MSPROBE_NATIVE", "1" if use_native else "0")
    try:
        return flatten(path, stream.open_dump(path)[1])
    except (InputError, OverflowError) as exc:
        return type(exc), str(exc)


def _write_dump(path: Path, entries: list[tuple[str, Any]], ascii_only: bool = True) -> None:
    import json

    doc = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None,
           "data": {}}  # fmt: skip
    text = json.dumps(doc, indent=1)
    members = [
        f" {json.dumps(op, ensure_ascii=ascii_only)}: "
        + json.dumps(body, indent=1, ensure_ascii=ascii_only).replace("\n", "\n  ")
        for op, body in entries
    ]  # fmt: skip  (written by hand: names may repeat)
    body = "{\n " + ",\n ".join(members) + "\n }" if members else "{}"
    path.write_text(text.replace('"data": {}', '"data": ' + body))


@needs_native
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=_entries(), ascii_only=st.booleans(), batch=st.sampled_from([1, 200, 1 << 20]),
       repeat=st.integers(0, 8))  # fmt: skip
def test_text_path_gives_identical_tables_and_errors(tmp_path_factory: pytest.TempPathFactory,
                                                     monkeypatch: pytest.MonkeyPatch, entries: list, ascii_only: bool,
                                                     batch: int, repeat: int) -> None:  # fmt: skip
    if repeat == 0 and len(entries) > 1:
        entries = [*entries, entries[0]]  # a repeated name, refused either way
    monkeypatch.setattr(stream, "BATCH", batch)
    monkeypatch.setattr(stream, "WALK_BUFFER", batch)  # the native text path's buffer, at the same sizes
    path = tmp_path_factory.mktemp("dump") / "dump.json"
    _write_dump(path, entries, ascii_only)
    _assert_same(_file_table(path, True, monkeypatch), _file_table(path, False, monkeypatch))


_FLOAT_TEXTS = ["1.5", "-0.0", "0.0", "1e-7", "1E+22", "1e23", "0.000123456789012345678", "123456789012345.6",
                "9007199254740993.0", "2.2250738585072011e-308", "4.9e-324", "1e-400", "1e400", "-1e400",
                "0.30000000000000004", "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791.0",
                "1.00000000000000011102230246251565404236316680908203125", "7.1e-10", "123.456e-5", "NaN", "Infinity",
                "-Infinity", "0e0", "5e-0", "0.1", "0.7", "1.7976931348623157e308", "2.225073858507201e-308"]  # fmt: skip


@needs_native
def test_text_path_reads_numbers_as_the_json_parsers_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    rng = random.Random(7)
    texts = _FLOAT_TEXTS + [repr(rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30)) for _ in range(2000)]
    texts += [f"{rng.randint(0, 10**15)}.{rng.randint(0, 10**6):06d}e{rng.randint(-25, 25)}" for _ in range(500)]
    texts += [str(rng.randint(-(10**18), 10**18)) for _ in range(200)] + ["-0", "0", str(2**63 - 1), str(-(2**63))]
    # 16 to 19 significant digits (the long double path): float32 values as repr writes them, doubles to 16, 17 and
    # 19 digits, and decimals exactly halfway between two doubles (2**53 + 1 and its multiples: strtod decides)
    texts += [repr(float(np.float32(rng.uniform(-1, 1) * 10.0 ** rng.randint(-20, 20)))) for _ in range(1500)]
    texts += [f"%.{d}g" % (rng.uniform(-1, 1) * 10.0 ** rng.randint(-28, 28)) for d in (16, 17, 19) for _ in range(500)]
    texts += [f"{sign}{(2**53 + 1) * 2**k}{tail}" for k in range(11) for sign in ("", "-") for tail in (".0", "")]
    texts += [f"{(2**53 + 1) * 2**k}e-{j}" for k in range(4) for j in (1, 5, 18, 27)]
    texts += ["9007199254740993.0000", "0.9007199254740993", "1.8446744073709551615e19", "9.999999999999999999e27"]
    lines = []
    for k in range(0, len(texts), 4):
        cells = (texts[k : k + 4] + ["null"] * 4)[:4]
        lines.append(f'  "Functional.f.{k}.forward": {{\n   "output": [\n    {{\n     "type": "torch.Tensor",\n'
                     f'     "dtype": "torch.float32",\n     "shape": [2],\n     "Max": {cells[0]},\n'
                     f'     "Min": {cells[1]},\n     "Mean": {cells[2]},\n     "Norm": {cells[3]}\n    }}\n   ]\n  }}')  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_text('{\n "task": "statistics",\n "data": {\n' + ",\n".join(lines) + "\n }\n}")
    native_table = _file_table(path, True, monkeypatch)
    _assert_same(native_table, _file_table(path, False, monkeypatch))
    assert len(native_table) == len(lines)


def _spied_flatten(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RowTable, list[str], list[int]]:
    """flatten() with the native walker, and what its text path did: the entries it read, and for each call
    whether it stopped at an entry it leaves to the object path."""
    monkeypatch.setenv("MSPROBE_NATIVE", "1")
    entries = stream.open_dump(path)[1]
    walked: list[str] = []
    stops: list[int] = []
    real_use = entries.use_walker

    class Spy:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def walk(self, *args: Any) -> Any:
            names, at, status, extent = self.inner.walk(*args)
            walked.extend(names)
            stops.append(at if status == 2 else -1)  # _rowwalk.WALK_OBJECT
            return names, at, status, extent

    entries.use_walker = lambda walker: real_use(Spy(walker))  # type: ignore[method-assign]
    return flatten(path, entries), walked, stops


@needs_native
@pytest.mark.parametrize("batch", [300, 1 << 20])
def test_text_path_is_taken_and_leaves_only_odd_entries_to_the_object_path(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          batch: int) -> None:  # fmt: skip
    """Plain entries are read from the text; an entry with a leaf the text path leaves to Python (a slice) or
    a number it does not take (an int beyond 64 bits in a shape) goes the object path alone, in order."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
              "Norm": 1.2, "requires_grad": True}  # fmt: skip
    entries = [(f"Functional.a.{k}.forward", {"input_args": [tensor, {"type": "int", "value": k}],
                                              "output": [tensor]}) for k in range(40)]  # fmt: skip
    entries[25] = ("Functional.s.0.forward", {"input_args": [{"type": "slice", "value": [1, 2, None]}]})
    entries[31] = ("Functional.b.0.forward", {"output": [{**tensor, "shape": [2**70]}]})
    path = tmp_path / "dump.json"
    _write_dump(path, entries)
    monkeypatch.setattr(stream, "BATCH", batch)
    monkeypatch.setattr(stream, "WALK_BUFFER", batch)  # the text path reads WALK_BUFFER bytes at a time
    table, walked, stops = _spied_flatten(path, monkeypatch)
    assert len(walked) == 38 and "Functional.s.0.forward" not in walked and "Functional.b.0.forward" not in walked
    assert sum(s >= 0 for s in stops) == 2
    _assert_same(table, _file_table(path, False, monkeypatch))
    assert table.entries[25] == "Functional.s.0.forward" and table.dtype[table.names.index(
        "Functional.s.0.forward.input.0")] == "slice"  # fmt: skip


@needs_native
def test_text_path_scalar_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each scalar rule of the walk, read from the text: src/dst and process groups (their text is the md5 unless
    a non-empty md5 is given), torch.Size, bool/str/float/int/None values, data_name, md5 given or computed."""
    kwargs = {
        "src": {"type": "int", "value": 3, "md5": ""},
        "dst": {"type": "int", "value": 4, "md5": "given"},
        "group_src": {"type": "str", "value": "a"},
        "group_dst": {"type": "NoneType", "value": None},
        "group": {"type": "torch.ProcessGroup", "group_ranks": [0, 1], "md5": ""},
        "group2": {"type": "torch.ProcessGroup"},
        "size": {"type": "torch.Size", "value": [2, 3]},
        "size0": {"type": "torch.Size", "value": None, "md5": ""},
        "flag": {"type": "bool", "value": True},
        "text": {"type": "str", "value": "x y", "md5": ""},
        "ratio": {"type": "float", "value": 0.5},
        "nan": {"type": "float", "value": float("nan")},
        "big": {"type": "float", "value": 1e300},
        "count": {"type": "int", "value": -7},
        "none": {"type": "NoneType"},
        "named": {"type": "int", "value": 1, "data_name": "Distributed.send.0.forward.input.named.npy"},
    }
    entries = [("Distributed.send.0.forward", {"input_kwargs": kwargs, "output": [None]})]
    path = tmp_path / "dump.json"
    _write_dump(path, entries)
    table, walked, _ = _spied_flatten(path, monkeypatch)
    assert walked == ["Distributed.send.0.forward"]  # read from the text, not handed back
    _assert_same(table, _file_table(path, False, monkeypatch))
    md5 = dict(zip(table.names, table.md5))
    assert md5["Distributed.send.0.forward.input.src"] == "3" and md5["Distributed.send.0.forward.input.dst"] == "given"
    assert (
        md5["Distributed.send.0.forward.input.group"] == "[0, 1]" and md5["Distributed.send.0.forward.input.text"] == ""
    )


@needs_native
@pytest.mark.parametrize("order", [["a", "é", "c", "a"], ["é", "a", "c", "é"], ["é", "a", "b", "a"], ["a", "é", "b", "é"],
                                   ["a", "b", "c", "b", "a"], ["é", "a", "b", "c", "a", "é"]])  # fmt: skip
def test_repeated_name_across_walked_and_parsed_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        order: list[str]) -> None:  # fmt: skip
    """A non-ASCII name takes the object path, the others the native walk; a repeat is named, as the first one in
    file order, whichever path read either occurrence."""
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
            "Norm": 1.0, "requires_grad": False}  # fmt: skip
    path = tmp_path / "dump.json"
    _write_dump(path, [(f"Functional.{n}.0.forward", {"output": [leaf]}) for n in order], ascii_only=False)
    native_result = _file_table(path, True, monkeypatch)
    assert native_result == _file_table(path, False, monkeypatch)
    first = next(n for i, n in enumerate(order) if n in order[:i])
    assert native_result == (
        InputError,
        f"{path}: entry 'Functional.{first}.0.forward' appears more than once in 'data'",
    )


@needs_native
@pytest.mark.parametrize("members", [
    '"Max": 1.0, "Min": 0.5, "Max": 2.0',  # a repeated statistic: the object path keeps the last, as json does
    '"dtype": "torch.float32", "dtype": "torch.int8"',
    '"Mx": 1.0, "MaxX": 3.0, "Max": 2.0',  # same first and last bytes, other lengths: no repeat
    '"": 1, "": 2',
    '"Max": 1.0, "Norm": 2.0, "Mean": 3.0, "Min": 4.0, "Max": 5.0',
])  # fmt: skip
def test_text_path_refuses_repeated_member_names_as_the_object_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    members: str) -> None:  # fmt: skip
    """A member name repeated inside a leaf sends the entry to the object path: the same table either way."""
    leaf = '{"type": "torch.Tensor", "shape": [2], "dtype": "torch.float32", "requires_grad": false, ' + members + "}"
    path = tmp_path / "dump.json"
    path.write_text(
        '{"task": "statistics", "data": {"Functional.f.0.forward": {"output": [' + leaf + "]}, "
        '"Functional.g.0.forward": {"output": [' + leaf.replace('"requires_grad": false, ', "") + "]}}}"
    )
    native_table = _file_table(path, True, monkeypatch)
    _assert_same(native_table, _file_table(path, False, monkeypatch))
    assert not isinstance(native_table, tuple) and len(native_table) == 2
