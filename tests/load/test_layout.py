"""load/layout.py on small folder trees: what a path stands for, rank folders, their pairing, mix dumps."""

from __future__ import annotations

from pathlib import Path

import pytest

from msprobe_compare.errors import InputError
from msprobe_compare.load.layout import find_ranks, first_dump, mix_steps, pair_ranks, rank_dump, resolve_input


def _ranks(step: Path, *names: str, file: str = "dump.json") -> Path:
    for name in names:
        (step / name).mkdir(parents=True)
        (step / name / file).write_text("{}")
    return step


def test_resolve_input(tmp_path):
    step = _ranks(tmp_path / "npu" / "step0", "rank0", "rank1")
    assert resolve_input(step / "rank0") == step / "rank0" / "dump.json"  # a rank folder is its dump.json
    assert resolve_input(step) == step  # a step folder is itself
    assert resolve_input(step / "rank0" / "dump.json") == step / "rank0" / "dump.json"
    with pytest.raises(InputError, match=r"holds step folders \(step0\), not rank folders; choose a step folder"):
        resolve_input(tmp_path / "npu")
    (tmp_path / "rank5").mkdir()
    with pytest.raises(InputError, match="is a rank folder without dump.json"):
        resolve_input(tmp_path / "rank5")


def test_rank_dump_prefers_dump_json_then_debug_json(tmp_path):
    _ranks(tmp_path, "rank0", file="debug.json")
    assert rank_dump(tmp_path / "rank0").name == "debug.json"
    (tmp_path / "rank0" / "dump.json").write_text("{}")
    assert rank_dump(tmp_path / "rank0").name == "dump.json"
    assert rank_dump(tmp_path / "missing").name == "dump.json"  # the name to report as missing


def test_find_ranks_and_their_order(tmp_path):
    step = _ranks(tmp_path, "rank10", "rank2", "rank", "proc77")
    ranks = find_ranks(step)
    assert set(ranks) == {10, 2, None, "proc77"} and ranks[None].suffix == "_rank" and ranks[10].suffix == "_rank10"
    assert first_dump(step) == step / "rank" / "dump.json"  # the plain rank folder sorts first, proc<PID> last
    (step / "notes.txt").write_text("")
    with pytest.raises(InputError, match="contains 'notes.txt'; a step folder must hold only rank folders"):
        find_ranks(step)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no rank folders"):
        find_ranks(tmp_path / "empty")


def test_pair_ranks_by_number_and_proc_folders_by_order(tmp_path):
    npu, bench = _ranks(tmp_path / "n", "rank0", "rank1", "rank3"), _ranks(tmp_path / "b", "rank1", "rank0", "rank2")
    p = pair_ranks(npu, bench)
    assert [(a.name, b.name) for a, b in p.pairs] == [("rank0", "rank0"), ("rank1", "rank1")]
    assert [r.name for r in p.npu_only] == ["rank3"] and [r.name for r in p.bench_only] == ["rank2"]
    assert not p.by_order
    npu, bench = _ranks(tmp_path / "pn", "proc9", "proc100"), _ranks(tmp_path / "pb", "proc5", "proc4")
    p = pair_ranks(npu, bench)
    assert p.by_order and [(a.name, b.name) for a, b in p.pairs] == [("proc9", "proc4"), ("proc100", "proc5")]
    _ranks(tmp_path / "pb", "proc6")
    with pytest.raises(InputError, match="cannot pair the process folders"):
        pair_ranks(npu, bench)


def test_mix_steps(tmp_path):
    assert mix_steps(tmp_path, tmp_path) is None  # not a mix dump
    for side, steps in (("n", ("0", "1")), ("b", ("1", "2"))):
        for kind in ("graph", "pynative"):
            for s in steps:
                (tmp_path / side / kind / s).mkdir(parents=True)
    got = mix_steps(tmp_path / "n", tmp_path / "b")
    assert got == [Path("graph/1"), Path("pynative/1")]  # only steps both sides hold
