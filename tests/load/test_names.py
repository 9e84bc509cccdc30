"""load/names.py: entry names parsed once into fields (issue #32 item 3), checked on every dumper's shapes and on
the entries of the test dumps against the rules the stages applied by hand before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from msprobe_compare.load.names import (
    API_PREFIXES,
    COMMUNICATION_PREFIXES,
    Direction,
    Kind,
    api_call_pattern,
    is_layout_call,
    is_sum_reduction,
    parse_entry,
    slot_key,
)
from msprobe_compare.load.rows import is_param_grad, phase_of

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("text,kind,prefix,stem,direction,counter,first", [
    ("Functional.linear.3.forward", Kind.API, "Functional", "Functional.linear", Direction.FORWARD, "3", True),
    ("Tensor.__add__.0.backward", Kind.API, "Tensor", "Tensor.__add__", Direction.BACKWARD, "0", True),
    ("Distributed.all_reduce.2.forward", Kind.API, "Distributed", "Distributed.all_reduce", Direction.FORWARD, "2",
     True),
    ("Module.x.o_proj.Linear.forward.0", Kind.MODULE, "Module", "Module.x.o_proj.Linear", Direction.FORWARD, "0",
     False),
    ("Cell.net.Dense.backward.1", Kind.MODULE, "Cell", "Cell.net.Dense", Direction.BACKWARD, "1", False),
    ("Module.fc.Linear.parameters_grad", Kind.MODULE, "Module", "Module.fc.Linear", Direction.PARAMETERS_GRAD, "",
     False),
    ("Module.fc.Linear.parameters_grad.2", Kind.MODULE, "Module", "Module.fc.Linear", Direction.PARAMETERS_GRAD, "2",
     False),
    ("Module.fc.Linear.forward", Kind.MODULE, "Module", "Module.fc.Linear", Direction.FORWARD, "", False),
    ("Functional.linear.3.debug", Kind.OTHER, "Functional", "Functional.linear.3.debug", Direction.NONE, "", False),
    ("Custom.thing.0.forward", Kind.OTHER, "Custom", "Custom.thing", Direction.FORWARD, "0", True),
    ("forward", Kind.OTHER, "forward", "forward", Direction.NONE, "", False),
    ("", Kind.OTHER, "", "", Direction.NONE, "", False),
])  # fmt: skip
def test_fields(text, kind, prefix, stem, direction, counter, first) -> None:
    n = parse_entry(text)
    assert (n.text, n.kind, n.prefix, n.stem, n.direction, n.counter, n.counter_first) == (
        text,
        kind,
        prefix,
        stem,
        direction,
        counter,
        first,
    )


def test_module_path_class_and_other_calls() -> None:
    n = parse_entry("Module.x.o_proj.Linear.forward.0")
    assert (n.module_path, n.module_class, n.op) == ("x.o_proj", "Linear", "x.o_proj.Linear")
    assert n.call(Direction.BACKWARD) == "Module.x.o_proj.Linear.backward.0"
    assert n.call(Direction.FORWARD, "7") == "Module.x.o_proj.Linear.forward.7"
    api = parse_entry("Functional.linear.3.forward")
    assert (api.op, api.module_path, api.module_class) == ("linear", "", "")
    assert api.call(Direction.BACKWARD) == "Functional.linear.3.backward"
    assert api.call(Direction.FORWARD, "4") == "Functional.linear.4.forward"
    assert parse_entry("Module.fc.Linear.forward").call(Direction.BACKWARD) == "Module.fc.Linear.backward"
    assert slot_key("Functional.linear.3.forward.input.0", "Functional.linear.3.forward") == "input.0"
    assert slot_key("Module.fc.Linear.parameters_grad.weight", "Module.fc.Linear.parameters_grad") == "weight"
    assert slot_key("other", "Functional.linear.3.forward") == ""


def test_communication_calls() -> None:
    assert is_layout_call("Distributed.all_reduce.0.forward") and is_sum_reduction("Distributed.all_reduce.0.forward")
    gather = "Distributed.all_gather.1.forward"
    assert is_layout_call(gather) and not is_sum_reduction(gather)
    assert not is_layout_call("Functional.linear.0.forward") and not is_sum_reduction("Tensor.add_.0.forward")


ODD = ["Tensor.foo.bar.0.forward", "Tensor.foo.Bar.0.forward", "Tensor..0.forward", "Tensor.x.١.forward",
       "Tensor.x.².forward", "Mint.distributed.all_reduce.0.forward", "Functional.linear.3.forward.x", "Module.",
       "Module.forward.0", ".forward", "x.forward", "3.forward", "a.parameters_grad.١",
       "Module.a.B.forward.٣"]  # fmt: skip


def _entries() -> list[str]:
    """Every entry name of the test dumps (plain dump.json files) and the odd names above."""
    names: set[str] = set(ODD)
    for path in sorted(DATA.rglob("dump.json"))[:200]:
        try:
            names |= set(json.loads(path.read_text(encoding="utf-8")).get("data", {}))
        except (ValueError, UnicodeDecodeError):
            continue
    return sorted(names)


def test_the_parse_agrees_with_the_rules_it_replaced() -> None:
    """The former hand parses, applied to real and odd names, give what the fields give."""
    entries = _entries()
    assert len(entries) > 500
    strict = api_call_pattern(API_PREFIXES)
    keyed = api_call_pattern(tuple(p for p in API_PREFIXES if p not in COMMUNICATION_PREFIXES))
    for e in entries:
        n = parse_entry(e)
        m = strict.match(e)
        assert n.simple_api == (m is not None), e  # pair/stages.py's counters
        if m:
            assert (n.stem, n.counter, n.direction.name.lower()) == (m.group(1), m.group(2), m.group(3)), e
        assert (keyed.match(e) is not None) == (n.simple_api and n.prefix not in COMMUNICATION_PREFIXES), e
        assert n.module_named == e.startswith(("Module.", "Cell.")), e
        ends_forward = n.direction is Direction.FORWARD and (n.counter_first or not n.counter)
        assert ends_forward == e.endswith(".forward"), e  # pair/layout_rules.py's backward of a forward call
        if ends_forward:
            assert n.call(Direction.BACKWARD) == e[: -len("forward")] + "backward", e
        if is_param_grad(e):
            assert n.direction is Direction.PARAMETERS_GRAD and phase_of(e) == "parameters_grad", e
        if n.kind is not Kind.OTHER:
            assert phase_of(e) == n.direction.name.lower(), e
        assert re.fullmatch(r"[^.]*", n.prefix) and (n.stem == e or e.startswith(n.stem + ".")), e


def test_a_table_parses_its_names_once() -> None:
    from msprobe_compare.load.rows import flatten

    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
            "Norm": 1.0, "requires_grad": False}  # fmt: skip
    table = flatten(None, [("Functional.linear.0.forward", {"input_args": [leaf, leaf], "output": [leaf]}),
                           ("Module.fc.Linear.parameters_grad", {"weight": leaf})])  # fmt: skip
    assert [(n.kind, n.direction) for n in table.entry_names] == [
        (Kind.API, Direction.FORWARD),
        (Kind.MODULE, Direction.PARAMETERS_GRAD),
    ]
    assert table.entry_names is table.entry_names  # kept
    assert table.slot_keys == ["input.0", "input.1", "output.0", "weight"]
    assert flatten(None, [("Functional.linear.0.forward", {"output": [leaf]})]).slot_keys == ["output.0"]
