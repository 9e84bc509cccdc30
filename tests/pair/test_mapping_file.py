"""Writing the -lm data mapping: YAML that reads back exactly, never replacing a file."""

from __future__ import annotations

from pathlib import Path

import yaml

from msprobe_compare.api import _save_data_mapping
from msprobe_compare.log import Console
from msprobe_compare.pair.mapping_file import mapping_yaml


def test_mapping_yaml_reads_back_in_order():
    mapping = {"Cell.a.B.forward.0.input.0": "N/A", "x: y": "true", "yes": "No", "1.5": "~", "a#b": "é \"q\"\n",
               "null": "", "Functional.x.0.forward.input.-1": "Module.a/b"}  # fmt: skip
    text = mapping_yaml(mapping)
    assert text.startswith("Cell.a.B.forward.0.input.0: N/A\n")
    loaded = yaml.safe_load(text)
    assert loaded == mapping and list(loaded) == list(mapping)
    assert yaml.safe_load(mapping_yaml({})) == {}


def test_saved_data_mapping_never_replaces_a_file(tmp_path: Path):
    first = _save_data_mapping(tmp_path, {"a.b": "c.d"}, Console())
    second = _save_data_mapping(tmp_path, {"a.b": "e.f"}, Console())
    assert first != second and first.name.startswith("data_mapping_") and first.suffix == ".yaml"
    assert yaml.safe_load(first.read_text()) == {"a.b": "c.d"}
    assert yaml.safe_load(second.read_text()) == {"a.b": "e.f"}
