"""Fuzzing dump.json structure and leaf values (issue 15): the native reading path and the Python one
(MSPROBE_NATIVE=0) give the same rows or the same error, and no error but the project's own (CompareError)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprobe_compare.errors import CompareError
from msprobe_compare.load.rows import flatten
from msprobe_compare.load.stream import open_dump

KEYS = ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "requires_grad", "md5", "data_name", "value",
        "class_type", "tensor", "group_ranks", "x"]  # fmt: skip
FIELDS = ["input_args", "input_kwargs", "input", "output", "parameters", "x"]
TEXTS = st.one_of(
    st.sampled_from(["torch.float32", "torch.Size", "int", "slice", "ellipsis", "torch.ProcessGroup", "float", "-1",
                     "a.pt", "", "N/A", "\ud800", "\\", "\"", "é", "\U0001F600", "\x00", "NaN", "abc", "x.y"]),
    st.text(max_size=8), st.text(alphabet="abcdefgh._0123456789", max_size=10),
)  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), TEXTS,
)  # fmt: skip


def _mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any], odds: int = 12) -> st.SearchStrategy[Any]:
    """`good`, with one chance in `odds` of `bad` (a broken document anywhere ends the read, so keep them rare)."""
    return st.integers(0, odds - 1).flatmap(lambda k: bad if k == 0 else good)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    """Mostly leaves as the dumper writes them (tensors, scalars), with any key changed, dropped or added."""
    number = _mostly(st.floats(allow_nan=True, allow_infinity=True), st.one_of(st.integers(-(2**70), 2**70),
                                                                               st.none(), SCALARS), 4)  # fmt: skip
    tensor = st.fixed_dictionaries({
        "type": st.sampled_from(["torch.Tensor", "mindspore.Tensor"]),
        "dtype": _mostly(st.sampled_from(["torch.float32", "torch.bfloat16", "Float16"]), SCALARS),
        "shape": _mostly(st.lists(st.integers(0, 64), max_size=3), st.one_of(st.lists(st.integers(-1, 2**70),
                                                                                      max_size=3), SCALARS)),
        "Max": number, "Min": number, "Mean": number, "Norm": number,
        "requires_grad": _mostly(st.booleans(), SCALARS),
    }, optional={"md5": _mostly(st.text("0123456789abcdef", min_size=8, max_size=8), SCALARS),
                 "data_name": TEXTS})  # fmt: skip
    scalar = st.fixed_dictionaries({"type": st.sampled_from(["int", "float", "bool", "str", "slice", "torch.Size",
                                                             "ellipsis", "torch.ProcessGroup", "torch.dtype"]),
                                    "value": st.one_of(SCALARS, st.lists(SCALARS, max_size=3))},
                                   optional={"group_ranks": st.lists(SCALARS, max_size=2)})  # fmt: skip
    junk = st.dictionaries(st.sampled_from(KEYS), st.one_of(SCALARS, st.lists(SCALARS, max_size=4)), max_size=8)
    return _mostly(st.one_of(tensor, scalar), junk)


LEAVES = _leaf()
VALUES = st.recursive(st.one_of(SCALARS, LEAVES), lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.sampled_from(KEYS), TEXTS), inner, max_size=4)),
    max_leaves=12)  # fmt: skip
ARGS = _mostly(st.lists(LEAVES, max_size=4), st.one_of(st.lists(st.lists(LEAVES, max_size=2), max_size=2),
               st.dictionaries(TEXTS, LEAVES, max_size=2), st.lists(VALUES, max_size=3), VALUES), 5)  # fmt: skip
BODIES = _mostly(st.dictionaries(st.sampled_from(FIELDS[:5]), ARGS, min_size=1, max_size=3),
                 st.one_of(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=3), SCALARS))  # fmt: skip
NAMES = st.one_of(st.sampled_from(["Functional.linear.0.forward", "Functional.relu.1.backward",
                                   "Module.fc.Linear.backward.0", "Tensor.add.1.debug", "Module.fc.parameters_grad",
                                   "x.parameters_grad", "a\ud800.0.forward"]),
                  TEXTS)  # fmt: skip


@st.composite
def dump_texts(draw: Any) -> bytes:
    entries = draw(st.lists(st.tuples(NAMES, BODIES), max_size=4))
    header = {"task": draw(_mostly(st.just("statistics"), st.sampled_from(["tensor", "", 3]), 6)), "level": "L1",
              "framework": "pytorch", "dump_data_dir": None}  # fmt: skip
    indent = draw(st.sampled_from([1, 2, None, "\t"]))
    data = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in entries) + "}"  # repeats kept
    if indent is not None and entries:
        pad = " " * indent if isinstance(indent, int) else indent
        data = "{\n" + ",\n".join(pad * 2 + f"{json.dumps(k)}: {json.dumps(v, indent=indent)}" for k, v in entries) \
            + "\n" + pad + "}"  # fmt: skip
        head = ",\n".join(pad + f"{json.dumps(k)}: {json.dumps(v)}" for k, v in header.items())
        text = "{\n" + head + ",\n" + pad + '"data": ' + data + "\n}"
    else:
        text = json.dumps(header)[:-1] + ', "data": ' + data + "}"
    for key in draw(st.lists(st.sampled_from(['"Max": ', '"dtype": ', '"type": ', '"input_args": ']), max_size=2)):
        at = text.find(key)  # a key repeated inside an entry: JSON's last-wins on every path
        if at >= 0:
            text = text[:at] + key + draw(st.sampled_from(["1.5, ", "null, ", '"x", ', "[], "])) + text[at:]
    raw = text.encode("utf-8", "surrogatepass")
    cut = draw(_mostly(st.none(), st.sampled_from(["truncate", "byte"]), 6))
    if cut == "truncate" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif cut == "byte" and raw:
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    return raw


def _read(path: Path, native: bool) -> tuple[str, Any]:
    old = os.environ.get("MSPROBE_NATIVE")
    os.environ["MSPROBE_NATIVE"] = "1" if native else "0"
    try:
        _, entries = open_dump(path)
        table = flatten(path, entries)
    except CompareError as exc:
        return "error", exc.message
    finally:
        if old is None:
            os.environ.pop("MSPROBE_NATIVE", None)
        else:
            os.environ["MSPROBE_NATIVE"] = old
    return "rows", _comparable(table)


def _same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _comparable(table: Any) -> dict[str, Any]:
    return {
        "entries": table.entries, "names": table.names, "entry_index": table.entry_index.tolist(),
        "state": table.state.tolist(), "dtype": table.dtype, "shape": table.shape,
        "stats": [["nan" if math.isnan(x) else x for x in row] for row in table.stats.tolist()],
        "stat_kind": table.stat_kind.tolist(), "raw": sorted((k, repr(table.raw[k])) for k in table.raw),
        "requires_grad": table.requires_grad.tolist(), "md5": table.md5, "data_name": table.data_name,
        "has_md5": table.has_md5,
    }  # fmt: skip


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=int(os.environ.get("MSPROBE_FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(dump_texts())
def test_native_and_python_paths_agree(raw):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dump.json"
        path.write_bytes(raw)
        native = _read(path, True)  # anything but a CompareError fails the test here
        python = _read(path, False)
    assert native == python


def _depth_by_hand(text: bytes) -> int:
    depth = deepest = 0
    inside = escaped = False
    for c in text:
        if inside:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                inside = False
        elif c == 0x22:
            inside = True
        elif c in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif c in (0x5D, 0x7D):
            depth -= 1
    return deepest


JSON_VALUES = st.recursive(st.one_of(st.none(), st.integers(), st.text(alphabet='ab[]{}"\\\\é', max_size=6)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(alphabet='k[]{}"\\\\', max_size=4), inner,
                                                                   max_size=3)), max_leaves=20)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_json_depth_skips_brackets_in_strings(value, ascii_only):
    from msprobe_compare.load.dumpjson import json_depth

    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    assert json_depth(text) == _depth_by_hand(text)
