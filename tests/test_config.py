"""config.py: compare.json read into a CompareConfig (spec §1.3), and the pair of paths checked once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from msprobe_compare.config import Options, load_config, make_config
from msprobe_compare.errors import InputError

OPTS = Options(framework="pytorch")


def _dumps(root: Path) -> tuple[Path, Path]:
    for side in ("npu", "bench"):
        (root / side / "rank0").mkdir(parents=True)
        (root / side / "rank0" / "dump.json").write_text("{}")
    return root / "npu" / "rank0", root / "bench" / "rank0"


def _compare_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_relative_paths_are_read_against_the_working_directory(tmp_path, monkeypatch):
    _dumps(tmp_path)
    monkeypatch.chdir(tmp_path)
    cfg_file = _compare_json(tmp_path / "c.json", {"npu_path": "npu/rank0", "bench_path": "bench/rank0/dump.json",
                                                  "stack_path": "npu/rank0/stack.json"})  # fmt: skip
    cfg = load_config(cfg_file, OPTS)
    assert cfg.npu_path == tmp_path / "npu/rank0/dump.json" and cfg.bench_path == tmp_path / "bench/rank0/dump.json"
    assert cfg.stack_path == tmp_path / "npu/rank0/stack.json" and cfg.print_compare_log is True  # absent: on
    assert cfg.input_path == cfg_file and not cfg.is_directory_compare


@pytest.mark.parametrize(
    "doc,message",
    [
        ([1, 2], "must be a JSON object with npu_path and bench_path"),
        ({"bench_path": "b"}, "'npu_path' is missing"),
        ({"npu_path": "", "bench_path": "b"}, "'npu_path' is missing"),
        ({"npu_path": 3, "bench_path": "b"}, "'npu_path' must be a path string, got int"),
        ({"npu_path": "npu/rank0", "bench_path": "bench/rank0", "stack_path": 1}, "'stack_path' must be a path"),
        ({"npu_path": "npu/rank0", "bench_path": "bench/rank0", "is_print_compare_log": "yes"},
         "'is_print_compare_log' must be true or false"),
        ({"npu_path": "npu/rank0", "bench_path": "bench/rank0", "npu_parallel": "tp=0"}, "npu_parallel"),
    ],
)
def test_bad_compare_json_names_the_file(tmp_path, monkeypatch, doc, message):
    _dumps(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=message) as info:
        load_config(_compare_json(tmp_path / "c.json", doc), OPTS)
    assert info.value.path is not None and Path(info.value.path).name == "c.json"


def test_layouts_from_compare_json_yield_to_the_options(tmp_path, monkeypatch):
    _dumps(tmp_path)
    monkeypatch.chdir(tmp_path)
    doc = {"npu_path": "npu/rank0", "bench_path": "bench/rank0", "npu_parallel": "tp=2", "bench_parallel": {"dp": 2}}
    cfg = load_config(_compare_json(tmp_path / "c.json", doc), OPTS)
    assert cfg.options.npu_layout.tp == 2 and cfg.options.bench_layout.dp == 2
    given = Options(framework="pytorch", npu_layout="pp=2")
    assert load_config(tmp_path / "c.json", given).options.npu_layout.pp == 2  # the command line wins


def test_make_config_checks_the_pair(tmp_path):
    npu, bench = _dumps(tmp_path)
    with pytest.raises(InputError, match="npu_path does not exist"):
        make_config(tmp_path / "nowhere", bench, OPTS)
    (tmp_path / "step").mkdir()
    (tmp_path / "step" / "rank0").mkdir()
    with pytest.raises(InputError, match="must be of the same type"):
        make_config(npu, tmp_path / "step", OPTS)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "debug.json").write_text("{}")
    with pytest.raises(InputError, match="must both be dump.json files or both debug.json files"):
        make_config(npu, tmp_path / "d" / "debug.json", OPTS)
    assert make_config(tmp_path / "npu", tmp_path / "bench", OPTS).is_directory_compare  # two step folders
