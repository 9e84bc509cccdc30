"""Reading the bench side in a forked child gives the same tables and the same errors as reading in turn."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from msprobe_compare.errors import InputError
from msprobe_compare.load import rows, sides
from msprobe_compare.load.rows import flatten
from msprobe_compare.load.stream import open_dump
from tests.load.test_stream import DUMPS, same_tables

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


@pytest.fixture(autouse=True)
def always_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sides, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(sides.os, "cpu_count", lambda: 2)


def read_pair(npu: Path, bench: Path, parallel: bool):
    return sides.flatten_sides(npu, open_dump(npu)[1], {}, bench, open_dump(bench)[1], parallel=parallel)


@pytest.mark.parametrize("npu", DUMPS[:6], ids=lambda p: str(p.parent.relative_to(p.parents[3])))
def test_forked_read_equals_sequential(npu: Path) -> None:
    bench = DUMPS[-1]
    a_npu, a_bench = read_pair(npu, bench, parallel=True)
    same_tables(a_npu, flatten(npu, open_dump(npu)[1]))
    same_tables(a_bench, flatten(bench, open_dump(bench)[1]))


def test_absent_marker_survives_pickling() -> None:
    """Rows cross the pipe pickled; `_Cells` tell raw from absent cells by identity."""
    assert pickle.loads(pickle.dumps(rows._ABSENT)) is rows._ABSENT


def _broken(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name / "dump.json"
    path.parent.mkdir()
    path.write_text(text)
    return path


GOOD = (
    '{"task": "statistics", "level": "L1", "framework": "pytorch", "data": {"Functional.relu.0.forward": '
    '{"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, '
    '"Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false}]}}}'
)
BAD_ENTRY = GOOD.replace('"requires_grad": false', '"requires_grad": "yes"')


def test_bench_error_comes_back_from_the_child(tmp_path: Path) -> None:
    npu, bench = _broken(tmp_path, "npu", GOOD), _broken(tmp_path, "bench", BAD_ENTRY)
    with pytest.raises(InputError) as forked:
        read_pair(npu, bench, parallel=True)
    with pytest.raises(InputError) as sequential:
        read_pair(npu, bench, parallel=False)
    assert forked.value.message == sequential.value.message
    assert str(bench) in forked.value.message and "requires_grad" in forked.value.message


def test_npu_error_wins_and_the_child_is_reaped(tmp_path: Path) -> None:
    npu, bench = _broken(tmp_path, "npu", BAD_ENTRY), _broken(tmp_path, "bench", BAD_ENTRY)
    with pytest.raises(InputError) as err:
        read_pair(npu, bench, parallel=True)
    assert str(npu) in err.value.message
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left behind


def test_small_files_are_read_in_turn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sides, "PARALLEL_MIN_BYTES", 1 << 40)
    monkeypatch.setattr(sides.os, "fork", lambda: pytest.fail("forked for a small pair"))
    npu = _broken(tmp_path, "npu", GOOD)
    a, b = read_pair(npu, npu, parallel=True)
    assert a.names == b.names == ["Functional.relu.0.forward.input.0"]


@pytest.mark.parametrize("use_native", ["1", "0"])
@pytest.mark.parametrize("path", DUMPS, ids=lambda p: str(p.parent.relative_to(p.parents[3])))
def test_pack_round_trip_on_every_fixture(path: Path, use_native: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MSPROBE_NATIVE", use_native)
    table = flatten(path, open_dump(path)[1])
    back = sides.unpack(pickle.loads(pickle.dumps(sides.pack(table))))
    same_tables(back, table)
    assert back.md5 == table.md5 and back.data_name == table.data_name and back.stacks == table.stacks


@pytest.mark.parametrize("odd", ["nul", "empty", "surrogate", "none_md5", "no_rows"])
def test_pack_round_trip_on_odd_texts(tmp_path: Path, odd: str) -> None:
    """Texts with NUL go by plain pickle; empty texts, lone surrogates and Nones come back as they were."""
    import json

    names = {"nul": "a\u0000b.0.forward", "empty": "", "surrogate": "x\ud800.0.forward", "none_md5": "f.0.forward",
             "no_rows": "g.0.forward"}  # fmt: skip
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "Max": 1.0, "Min": 1.0, "Mean": 1.0,
            "Norm": 1.0, "md5": None if odd == "none_md5" else "ab\u0000c" if odd == "nul" else "00ff00ff"}  # fmt: skip
    body = {} if odd == "no_rows" else {"output": [leaf, {"type": "int", "value": 3}]}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "data": {names[odd]: body, "h.0.forward": body}}, indent=1))
    table = flatten(path, open_dump(path)[1])
    packed = sides.pack(table)
    assert isinstance(packed, rows.RowTable) == (odd == "nul")
    back = sides.unpack(pickle.loads(pickle.dumps(packed)))
    same_tables(back, table)
    assert back.md5 == table.md5 and back.entries == table.entries


@pytest.mark.parametrize("parallel", [True, False])
def test_meanwhile_runs_once_after_the_npu_side(parallel: bool) -> None:
    npu, bench = DUMPS[0], DUMPS[-1]
    calls: list[int] = []
    a_npu, a_bench = sides.flatten_sides(npu, open_dump(npu)[1], {}, bench, open_dump(bench)[1], parallel=parallel,
                                         meanwhile=lambda: calls.append(os.getpid()))  # fmt: skip
    assert calls == [os.getpid()]
    same_tables(a_bench, flatten(bench, open_dump(bench)[1]))


@pytest.mark.parametrize("route", ["region", "overflow", "no_region"])
def test_every_route_back_gives_the_same_tables(route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's rows come back as parts through the shared region, or through the pipe from the first part that
    does not fit in it (here: none fits) or when there is no region: the same tables each way."""
    npu, bench = DUMPS[0], DUMPS[-1]
    if route == "overflow":
        monkeypatch.setattr(sides, "SHARED_SLACK", 16 - bench.stat().st_size)  # a 16-byte region
    if route == "no_region":
        monkeypatch.setattr(sides, "_shared_region", lambda path: None)
    read: list[str] = []
    load = sides.child_load

    def spy(file, what):
        got = load(file, what)
        read.append(f"{type(file).__name__}:{got[0] if isinstance(got, tuple) else got}")
        return got

    monkeypatch.setattr(sides, "child_load", spy)
    a_npu, a_bench = read_pair(npu, bench, parallel=True)
    same_tables(a_npu, flatten(npu, open_dump(npu)[1]))
    sequential = flatten(bench, open_dump(bench)[1])
    same_tables(a_bench, sequential)
    assert a_bench.md5 == sequential.md5 and a_bench.data_name == sequential.data_name
    parts = ["entries", "names", "md5", "dtype", "shape", "data_name", "rest"]
    via = "mmap" if route == "region" else "BufferedReader"
    assert read == ["BufferedReader:ok", *(f"{via}:{p}" for p in parts), "BufferedReader:None"]


def test_a_child_that_dies_midway_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts stop before the end (the child was killed): a one-line error naming the bench file."""
    npu, bench = DUMPS[0], DUMPS[-1]
    real = sides.pack_parts

    def dying(table, consume=True):
        parts = real(table, consume)
        yield next(parts)
        os._exit(0)

    monkeypatch.setattr(sides, "pack_parts", dying)
    monkeypatch.setattr(sides, "_shared_region", lambda path: None)
    with pytest.raises(InputError, match="the reading process ended unexpectedly") as err:
        read_pair(npu, bench, parallel=True)
    assert str(bench) in err.value.message


def test_a_table_with_nul_texts_comes_back_whole_from_the_child(tmp_path: Path) -> None:
    """A text holding NUL cannot be NUL-joined: the table crosses as one plain part, equal to a sequential read."""
    path = _broken(tmp_path, "nul", GOOD.replace("Functional.relu.0.forward", "Functional.re\\u0000lu.0.forward"))
    a_npu, a_bench = read_pair(path, path, parallel=True)
    assert a_bench.names == ["Functional.re\x00lu.0.forward.input.0"]
    same_tables(a_bench, flatten(path, open_dump(path)[1]))
