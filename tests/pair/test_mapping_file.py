"""Writing the -lm data mapping: YAML that reads back exactly, never replacing a file."""

from __future__ import annotations

import errno
from pathlib import Path

import yaml

from conftest import DATA
from msprobe_compare.pair.mapping_file import mapping_yaml


def test_mapping_yaml_reads_back_in_order():
    mapping = {"Cell.a.B.forward.0.input.0": "N/A", "x: y": "true", "yes": "No", "1.5": "~", "a#b": "é \"q\"\n",
               "null": "", "Functional.x.0.forward.input.-1": "Module.a/b"}  # fmt: skip
    text = mapping_yaml(mapping)
    assert text.startswith("Cell.a.B.forward.0.input.0: N/A\n")
    loaded = yaml.safe_load(text)
    assert loaded == mapping and list(loaded) == list(mapping)
    assert yaml.safe_load(mapping_yaml({})) == {}


def test_lm_mapping_is_published_with_the_result_set(run_cli, tmp_path: Path, monkeypatch):
    """-lm: data_mapping_{ts}.yaml shares the result files' stamp, never replaces a file, and a run that fails
    later publishes it no more than the rest (all or nothing)."""
    from msprobe_compare.render import report

    folder = DATA / "cross" / "L0_statistics"
    out = tmp_path / "out"
    out.mkdir()
    first = run_cli(folder, "mindspore", "-s", "-lm", out_dir=out)
    assert first.code == 0, first.out
    stamp = first.one("compare_result_*.xlsx").stem.rsplit("_", 1)[1]
    mapping = first.one("data_mapping_*.yaml")
    assert mapping.name == f"data_mapping_{stamp}.yaml" and yaml.safe_load(mapping.read_text())
    assert f"The data mapping is saved in: {mapping}" in first.out
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "write_advisor", no_space)  # fails after the mapping was written
    failed = run_cli(folder, "mindspore", "-s", "-lm", out_dir=out)
    assert failed.code == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing new, nothing replaced
    monkeypatch.undo()
    again = run_cli(folder, "mindspore", "-s", "-lm", out_dir=out)
    assert again.code == 0 and len(again.files("data_mapping_*.yaml")) == 2
