"""Cell mapping keys (spec §3.6, decision D13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_compare.errors import InputError
from msprobe_compare.pair.cell_mapping import UNMATCHABLE, _CellRenamer, _row_key, cell_mapping_keys, read_cell_mapping

from .helpers import call, table, tensor

DATA = {
    "Cell.backbone.fc2.Dense.forward.0": call(parameters={"weight": tensor(), "bias": tensor()}),
    "Cell.backbone.fc2.Dense.parameters_grad": {"weight": [tensor()]},
    "Cell.backbone.block.norm.LayerNorm.backward.0": {"input": [tensor()], "output": [tensor()]},
    "Functional.relu.0.forward": call(),
    "Cell.Net.forward.0": call(),
    "x.0.debug": {"a": tensor()},
}


def keys(mapping: dict[str, str] | None) -> dict[str, str]:
    t = table(DATA)
    return dict(zip(t.names, cell_mapping_keys(t, mapping)))


def test_bare_flag_turns_cells_into_modules():
    k = keys(None)
    assert k["Cell.backbone.fc2.Dense.forward.0.input.0"] == "Module.backbone.fc2.Dense.forward.0.input.0"
    assert k["Cell.backbone.fc2.Dense.parameters_grad.weight"] == "Module.backbone.fc2.Dense.parameters_grad.weight"
    assert k["Functional.relu.0.forward.output.0"] == "Functional.relu.0.forward.output.0"  # APIs keep their names
    assert k["x.0.debug.a"] is UNMATCHABLE  # neither a call nor parameters_grad


def test_full_path_keys():
    k = keys({"backbone.fc2.Dense": "backbone.fc2.Linear",
              "backbone.block.norm.LayerNorm": "backbone.block.ln.LayerNorm"})  # fmt: skip
    assert k["Cell.backbone.fc2.Dense.forward.0.parameters.bias"] == (
        "Module.backbone.fc2.Linear.forward.0.parameters.bias")  # fmt: skip
    assert k["Cell.backbone.fc2.Dense.parameters_grad.weight"] == "Module.backbone.fc2.Linear.parameters_grad.weight"
    assert k["Cell.backbone.block.norm.LayerNorm.backward.0.output.0"] == (
        "Module.backbone.block.ln.LayerNorm.backward.0.output.0")  # fmt: skip


def test_d13_tail_keys_match_at_segment_boundaries():
    k = keys({"fc2.Dense": "fc2.Linear", "norm.LayerNorm": "ln.LayerNorm", "c2.Dense": "WRONG"})
    assert k["Cell.backbone.fc2.Dense.forward.0.input.0"] == "Module.backbone.fc2.Linear.forward.0.input.0"
    assert k["Cell.backbone.block.norm.LayerNorm.backward.0.input.0"] == (
        "Module.backbone.block.ln.LayerNorm.backward.0.input.0")  # fmt: skip


def test_d13_exact_key_wins_then_longest_tail():
    k = keys({"Dense": "A", "fc2.Dense": "fc2.B", "backbone.fc2.Dense": "backbone.fc2.C"})
    assert k["Cell.backbone.fc2.Dense.forward.0.input.0"] == "Module.backbone.fc2.C.forward.0.input.0"
    k = keys({"Dense": "A", "fc2.Dense": "fc2.B"})
    assert k["Cell.backbone.fc2.Dense.forward.0.input.0"] == "Module.backbone.fc2.B.forward.0.input.0"


def test_entry_shortcut_agrees_with_row_by_row():
    data = dict(DATA)
    data["Functional.add.0.forward"] = {"input_kwargs": {"Cell_like": tensor()}, "output": [tensor()]}
    t = table(data)
    for mapping in (None, {"fc2.Dense": "fc2.Linear"}):
        renamer = _CellRenamer(mapping) if mapping else None
        assert cell_mapping_keys(t, mapping) == [_row_key(name, renamer) for name in t.names]


def test_read_cell_mapping(tmp_path: Path):
    good = tmp_path / "cm.yaml"
    good.write_text("a.Dense: a.Linear\n")
    assert read_cell_mapping(good) == {"a.Dense": "a.Linear"}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert read_cell_mapping(empty) == {}
    for text, message in (("- a\n- b\n", "must be a YAML mapping"), ("a: [1]\n", "must map a text to a text"),
                          ("a: : b\n", "not valid YAML")):  # fmt: skip
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(InputError, match=message) as err:
            read_cell_mapping(bad)
        assert str(bad) in err.value.message and "\n" not in err.value.message
