"""Hostile inputs, third round (issue 33): what sanitizers and fuzzing found in the C extensions, kept as tests with
their minimised inputs.

- Linear time whatever the names: an entry with 64,000 member names of one length, first and last byte (the row
  walk's repeated-name check, F1) and 64,000 entries whose names collide in the name join's former fixed hash (F2)
  compare within 3x of the same sizes with ordinary names.
- No undefined behaviour and no misuse path: an empty first name (F3), Walker and NameIndex made without
  `__init__`, initialised twice, in reference cycles, re-entered from a callback (F4), xml_block with a callable
  that changes its lists (F5).
- Values beyond range: an integer statistic beyond the float range (P1), one of 2**63 (P2), and JSON bytes that are
  not UTF-8, an encoded surrogate (P3): clean outcomes, the same on the native and the Python path; kernel dump
  file names that are not UTF-8 are refused too.
- Differential harnesses: large objects with and without repeated names, and a small dump truncated at every byte
  and mutated byte by byte, read by both paths.

`.ci/sanitize` runs this file, with the native-path, differential and fuzz tests, under AddressSanitizer and
UndefinedBehaviorSanitizer (there MSPROBE_HOSTILE_N makes the timed inputs smaller)."""

from __future__ import annotations

import csv
import gc
import json
import os
import random
import shutil
import sys
import time
import weakref
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import DATA
from test_hostile import NATIVE, Outcome, assert_refused, compare, write_config

from msprobe_compare.errors import CompareError
from msprobe_compare.load import rows
from msprobe_compare.load.rows import flatten
from msprobe_compare.load.stream import open_dump
from tests.native_helpers import native_module

COUNT = int(os.environ.get("MSPROBE_HOSTILE_N", "64000"))  # members or entries of the timed inputs
RATIO = 3.0  # the most a hostile input may take over an ordinary one of the same size
CASE = DATA / "pytorch" / "mlp_bug_stat"
LEAF = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
        "Norm": 1.0, "requires_grad": False}  # fmt: skip
HEADER = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None}


def _dump_pair(root: Path, data: dict[str, Any]) -> Path:
    """compare.json for two equal dumps (indent 1, as the dumper writes) holding `data`; returns its folder."""
    text = json.dumps({**HEADER, "data": data}, indent=1)
    for side in ("npu", "bench"):
        (root / side).mkdir(parents=True, exist_ok=True)
        (root / side / "dump.json").write_text(text)
    config = {"npu_path": str(root / "npu/dump.json"), "bench_path": str(root / "bench/dump.json")}
    (root / "compare.json").write_text(json.dumps(config))
    return root


def _timed_compare(case: Path) -> Outcome:
    """A native csv compare of `case` that must succeed."""
    run = compare(case, "--format", "csv", "-c", out=case / "out", timeout=120)
    assert run.code == 0 and not run.errors, run.out + run.err
    assert "Traceback" not in run.out + run.err
    return run


def _best_of(runs: int, call: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


# -- F1: the repeated-name check of a large object ---------------------------------------------------------------------
def test_one_entry_with_many_members_of_one_shape_is_linear(tmp_path):
    """64,000 member names of one length, first and last byte (one bit of the 64-bit filter: every name was compared
    with every earlier member, 61 s) against the same rows in a list."""
    names = [f"k{i:06d}k" for i in range(COUNT)]
    hostile = _dump_pair(
        tmp_path / "hostile", {"Functional.big.0.forward": {"input_kwargs": dict.fromkeys(names, LEAF)}}
    )
    plain = _dump_pair(tmp_path / "plain", {"Functional.big.0.forward": {"input_args": [LEAF] * COUNT}})
    slow, fast = _timed_compare(hostile), _timed_compare(plain)
    assert slow.seconds < RATIO * fast.seconds, (slow.seconds, fast.seconds)


def _large_object_dump(path: Path, names: list[str]) -> None:
    members = ", ".join(f'"{name}": {json.dumps(dict(LEAF, Max=float(i)))}' for i, name in enumerate(names))
    data = f'{{"Functional.big.0.forward": {{"input_kwargs": {{{members}}}}}, "Functional.relu.0.forward": {{}}}}'
    path.write_text(json.dumps(HEADER)[:-1] + f', "data": {data}}}')


def _read(path: Path, native: bool) -> tuple[str, Any]:
    """The rows of a dump.json on one path (comparable), or its error message."""
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
    stats = [["nan" if x != x else x for x in row] for row in table.stats.tolist()]
    return "rows", (table.entries, table.names, table.dtype, table.shape, stats, table.stat_kind.tolist(),
                    sorted((k, repr(table.raw[k])) for k in table.raw), table.md5, table.data_name)  # fmt: skip


REPEATS = [None, (0, 1), (3, 15), (5, 16), (16, 17), (20, 39), (2, 299)]  # (first, again) member positions


@pytest.mark.parametrize("size, repeat", [(size, r) for size in (15, 16, 17, 40, 300) for r in REPEATS
                                          if r is None or r[1] < size])  # fmt: skip
def test_large_objects_read_alike_on_both_paths(tmp_path, size, repeat):
    """Member names around the set's threshold (16), one of them repeated (JSON's last-wins, on the Python path) or
    none: the same rows both ways."""
    names = [f"k{i:03d}k" for i in range(size)]
    if repeat is not None:
        names[repeat[1]] = names[repeat[0]]
    path = tmp_path / "dump.json"
    _large_object_dump(path, names)
    native_module("_rowwalk")
    native, python = _read(path, True), _read(path, False)
    assert native == python
    assert native[0] == "rows" and len(native[1][1]) == len(set(names))


# -- F2: the name join's hash ------------------------------------------------------------------------------------
_K, _M1, _M2, _MASK = 0x9E3779B97F4A7C15, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 2**64 - 1
_FORBIDDEN = np.zeros(256, dtype=bool)
_FORBIDDEN[[0x00, 0x22, 0x2E, 0x5C, 0x7F]] = True  # NUL, '"', '.', '\\', DEL: none in a generated name
_FORBIDDEN[0x80:] = True  # ASCII only


def _old_state(prefix: bytes, length: int) -> int:
    """The former hash_bytes's state after `prefix` (a multiple of 8 bytes) of a text of `length` bytes."""
    h = _K ^ length
    for i in range(0, len(prefix), 8):
        h = ((h ^ int.from_bytes(prefix[i : i + 8], "little")) * _M1) & _MASK
        h ^= h >> 32
    return h


def _old_hash(text: bytes) -> int:
    """The former `_join.c` (now `_sharednames.c`) hash_bytes (unseeded, invertible)."""
    n = len(text) - len(text) % 8
    h = _old_state(text[:n], len(text))
    h = ((h ^ int.from_bytes(text[n:], "little")) * _M2) & _MASK
    return h ^ (h >> 29)


def _colliding(count: int, prefix: bytes, length: int, seed: int = 0) -> list[bytes]:
    """`count` distinct texts prefix + 16 ASCII bytes whose former hash state is one value (any text of `length`
    bytes that goes on alike after them has one hash): the second 8-byte word undoes the first one's step."""
    rng = np.random.default_rng(seed)
    h0, m1, s32 = np.uint64(_old_state(prefix, length)), np.uint64(_M1), np.uint64(32)
    high, low7 = np.uint64(0x8080808080808080), np.uint64(0x7F7F7F7F7F7F7F7F)
    target = np.uint64(0x243F6A8885A308D3)  # any: the state before the second word's step
    found: list[np.ndarray] = []
    total = 0
    while total < count:
        w1 = rng.integers(0, 2**64, size=1 << 22, dtype=np.uint64) & low7
        x = (h0 ^ w1) * m1
        w2 = target ^ x ^ (x >> s32)
        keep = (w2 & high) == 0
        pairs = np.stack([w1[keep], w2[keep]], axis=1)
        pairs = pairs[~_FORBIDDEN[pairs.view(np.uint8).reshape(len(pairs), 16)].any(axis=1)]
        found.append(pairs)
        total += len(pairs)
    chosen = np.unique(np.concatenate(found), axis=0)[:count]
    assert len(chosen) == count
    return [prefix + bytes(r) for r in chosen.view(np.uint8).reshape(count, 16)]


def _ordinary(count: int, prefix: bytes, seed: int = 1) -> list[bytes]:
    """`count` distinct texts prefix + 16 random bytes of the alphabet `_colliding` uses."""
    rnd = random.Random(seed)
    alphabet = bytes(b for b in range(256) if not _FORBIDDEN[b])
    texts = {prefix + bytes(rnd.choice(alphabet) for _ in range(16)) for _ in range(count + 64)}
    return sorted(texts)[:count]


def test_the_generated_names_collide_in_the_former_hash():
    tail = b".0.forward"
    texts = [t + tail for t in _colliding(64, b"Functional.aaaaa", 16 + 16 + len(tail))]
    assert len(set(texts)) == 64 and len({_old_hash(t) for t in texts}) == 1


def test_entries_colliding_in_the_former_hash_compare_in_linear_time(tmp_path):
    """64,000 entries whose row names had one 64-bit hash (the table compared each with all before it: 45 s) against
    as many ordinary ones; the names have control characters (JSON escapes), so both take the same reading path."""
    prefix, tail = b"Functional.aaaaa", b".0.forward"
    row_length = len(prefix) + 16 + len(tail + b".output.0")
    hostile = [t.decode() + tail.decode() for t in _colliding(COUNT, prefix, row_length)]
    assert len({_old_hash(f"{name}.output.0".encode()) for name in hostile[:100]}) == 1
    plain = [t.decode() + tail.decode() for t in _ordinary(COUNT, prefix)]
    slow = _timed_compare(_dump_pair(tmp_path / "hostile", {name: {"output": [LEAF]} for name in hostile}))
    fast = _timed_compare(_dump_pair(tmp_path / "plain", {name: {"output": [LEAF]} for name in plain}))
    assert slow.seconds < RATIO * fast.seconds, (slow.seconds, fast.seconds)


def _join_timing(join: Any, what: str, texts: list[bytes], tail: bytes) -> float:
    """The best of three runs of one join function of `_sharednames` over texts + tail, checked against a dict."""
    names = [t.decode() + tail.decode() for t in texts]
    keys = list(reversed(names))  # out of order: every key looked up
    out = np.empty(len(keys), dtype=np.int64)
    if what == "stem_counts":
        seconds = _best_of(3, lambda: join.stem_counts(names))
        assert join.stem_counts(names) == {t.decode(): 1 for t in texts}
        return seconds
    if what == "first_index":
        seconds = _best_of(3, lambda: join.first_index(names, keys, out))
    else:
        seconds = _best_of(3, lambda: join.NameIndex(names).find(keys, out))
    assert (out == np.arange(len(names))[::-1]).all()
    return seconds


@pytest.mark.parametrize("what, tail, hashed", [
    ("first_index", b".0.forward.output.0", 19), ("NameIndex", b".0.forward", 10),
    ("stem_counts", b".0.forward", 0),  # the stem: the entry up to its call index
])  # fmt: skip
def test_join_functions_stay_linear_on_colliding_names(what, tail, hashed):
    """first_index, NameIndex and stem_counts over 64,000 texts of one former hash (at the length each hashes) take
    at most 3x the time of ordinary texts, and give a dict's answers."""
    join = native_module("_sharednames")
    prefix = b"Functional.aaaaa"
    hostile = _join_timing(join, what, _colliding(COUNT, prefix, len(prefix) + 16 + hashed), tail)
    plain = _join_timing(join, what, _ordinary(COUNT, prefix), tail)
    assert hostile < RATIO * plain, (hostile, plain)


# -- F3: a buffer never used ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    '{"": {"input_args": [{"type": "str", "value": ""}]}, "a.0.forward": {}}',
    '{"Functional.x.0.forward": {"input_args": [{"type": "str", "value": ""}], "": null}}',
    '{"": {"": {"": {"type": "torch.Tensor", "dtype": "", "shape": [], "Max": 1, "Min": 0, "Mean": 0, "Norm": 0}}}}',
], ids=["empty-entry-name", "empty-leaf", "empty-keys"])  # fmt: skip
def test_empty_names_and_texts_first(tmp_path, text):
    """Empty texts where a buffer is still unused (memcpy to NULL, which a -fno-sanitize-recover build aborts on)."""
    native_module("_rowwalk")
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(HEADER)[:-1] + f', "data": {text}}}')
    native, python = _read(path, True), _read(path, False)
    assert native == python


# -- F4: Walker and NameIndex misused ------------------------------------------------------------------------------
def _walker_args(cells: Any = rows._Cells) -> tuple[Any, ...]:
    return ([], [], [], [], [], [], array("i"), array("b"), array("d"), array("b"), array("b"), {}, {}, 1000, cells,
            rows._ABSENT)  # fmt: skip


ENTRY = ("Functional.x.0.forward", {"input_args": [dict(LEAF, Max=True)]})  # a raw cell: _Cells is called


def test_walker_without_init_raises():
    walker_type = native_module("_rowwalk").Walker
    w = walker_type.__new__(walker_type)
    for call in (lambda: w.walk(b'{"a": {}}', 0, True), lambda: w.entry(*ENTRY), w.flush):
        with pytest.raises(ValueError, match="not initialised"):
            call()
    assert w.has_md5 is False


def test_walker_init_twice_drops_the_first_references():
    walker_type = native_module("_rowwalk").Walker
    first = _walker_args()
    w = walker_type(*first)
    before = [sys.getrefcount(x) for x in first[:13]]
    assert w.entry(*ENTRY) is True
    w.__init__(*_walker_args())
    assert [sys.getrefcount(x) for x in first[:13]] == [n - 1 for n in before]
    assert w.entry(*ENTRY) is True
    w.flush()


def test_walker_re_entered_from_a_callback_raises():
    walker_type = native_module("_rowwalk").Walker
    calls: list[str] = []

    def cells(values: tuple[Any, ...]) -> Any:  # rows._Cells, re-entering the walker that calls it
        calls.append("cells")
        for again in (lambda: w.__init__(*_walker_args()), lambda: w.entry(*ENTRY), w.flush):
            with pytest.raises(RuntimeError, match="in use"):
                again()
        return rows._Cells(values)

    args = _walker_args(cells)
    w = walker_type(*args)
    assert w.entry(*ENTRY) is True and calls == ["cells"]
    assert args[0] == ["Functional.x.0.forward.input.0"]

    class Frombytes(array):  # a Python frombytes re-entering flush
        def frombytes(self, data: Any) -> None:
            with pytest.raises(RuntimeError, match="in use"):
                w.flush()
            super().frombytes(data)

    args = list(_walker_args())
    args[6] = Frombytes("i")
    w = walker_type(*args)
    assert w.entry(*ENTRY) is True
    w.flush()
    assert list(args[6]) == [0]


class _Token:
    """Something a weak reference can follow into a reference cycle."""


def test_walker_and_name_index_cycles_are_collected():
    walker_type, index_type = native_module("_rowwalk").Walker, native_module("_sharednames").NameIndex
    args = _walker_args()
    w = walker_type(*args)
    token = _Token()
    args[12]["w"] = w  # strings -> walker -> strings
    args[12]["t"] = token
    probe = weakref.ref(token)
    del w, args, token
    gc.collect()
    assert probe() is None

    names = ["a", "b"]
    index = index_type(names)
    token = _Token()
    names.append(index)
    names.append(token)
    probe = weakref.ref(token)
    with pytest.raises(RuntimeError, match="changed"):
        index.get("a")
    del index, names, token
    gc.collect()
    assert probe() is None


def test_name_index_without_init_or_twice():
    index_type = native_module("_sharednames").NameIndex
    index = index_type.__new__(index_type)
    with pytest.raises(ValueError, match="not initialised"):
        index.get("a")
    assert len(index) == 0
    first = ["a", "b", "a"]
    index.__init__(first)
    refs = sys.getrefcount(first)
    index.__init__(["c"])
    assert sys.getrefcount(first) == refs - 1
    assert (index.get("c"), index.get("a"), len(index), index.repeated) == (0, -1, 1, 0)


# -- F5: a callable that changes xml_block's lists --------------------------------------------------------------------
def test_xml_block_callable_that_shrinks_its_list():
    fast = native_module("_csvrows")
    values: list[Any] = [1, 2, 3, 4]  # not texts: each goes through the callable

    def one(value: Any) -> str:
        values.clear()  # the rows after this one are gone
        return f"<c><v>{value}</v></c>"

    with pytest.raises(RuntimeError, match="changed during the call"):
        fast.xml_block([(values, 0, one)], 4, 1, np.zeros(4, dtype=np.int8), [""])


def test_xml_block_callable_that_drops_the_columns_and_styles():
    fast = native_module("_csvrows")
    values: list[Any] = [1, 2]
    columns: list[Any] = []
    styles = ["", ' s="1"']

    def one(value: Any) -> str:
        columns.clear()
        styles.clear()
        values[:] = [object(), object()]  # the value passed in loses the list's reference
        return f"<c><v>{value}</v></c>"

    columns.append((values, 0, one))
    out = fast.xml_block(columns, 1, 7, np.ones(1, dtype=np.int8), styles)
    assert out == b'<row r="7"><c s="1"><v>1</v></c></row>'


# -- P1-P3: values beyond range, bytes that are not text ---------------------------------------------------------------
@pytest.fixture
def fixture_case(tmp_path) -> Path:
    dst = tmp_path / "case"
    shutil.copytree(CASE, dst, ignore=shutil.ignore_patterns("expected"))
    write_config(dst)
    return dst


def _npu_dump(case: Path) -> Path:
    return case / "npu/step0/rank/dump.json"


def _replace_once(path: Path, old: bytes, new: bytes) -> None:
    raw = path.read_bytes()
    assert old in raw
    path.write_bytes(raw.replace(old, new, 1))


def _csv_rows(run: Outcome) -> list[dict[str, str]]:
    [name] = [n for n in run.results() if n.endswith(".csv")]
    with open(run.out_dir / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _both_paths(case: Path) -> list[dict[str, str]]:
    """The csv rows of a complete compare, the same on the native and the Python path."""
    runs = [compare(case, "--format", "csv,xlsx,html", native=native, out=case / f"out_{native}")
            for native in (True, False)]  # fmt: skip
    for run in runs:
        assert run.code == 0 and not run.errors, run.out + run.err
        assert "Traceback" not in run.out + run.err and "RuntimeWarning" not in run.out + run.err, run.err
    tables = [_csv_rows(run) for run in runs]
    assert tables[0] == tables[1]
    return tables[0]


def test_integer_statistic_beyond_the_float_range_is_infinite(fixture_case):
    _replace_once(_npu_dump(fixture_case), b'"Max": 2.8754656314849854', b'"Max": 1' + b"0" * 400)
    _replace_once(_npu_dump(fixture_case), b'"Min": -3.5251355171203613', b'"Min": -2' + b"0" * 330)
    row = _both_paths(fixture_case)[0]
    assert (row["NPU max"], row["NPU min"]) == ("inf", "-inf"), row


def test_integer_statistic_of_2_63_and_more_keeps_its_sign(fixture_case):
    """2**63 was cast to int64 (-9223372036854775808, with a numpy warning); an integer beyond 2**53 is written as
    the integer its float64 holds (2**64 - 1 as 2**64)."""
    _replace_once(_npu_dump(fixture_case), b'"Max": 2.8754656314849854', b'"Max": 9223372036854775808')
    _replace_once(_npu_dump(fixture_case), b'"Min": -3.5251355171203613', b'"Min": -9223372036854775808')
    _replace_once(_npu_dump(fixture_case), b'"Mean": 0.05431373044848442', b'"Mean": 18446744073709551615')
    row = _both_paths(fixture_case)[0]
    written = (row["NPU max"], row["NPU min"], row["NPU mean"])
    assert written == ("9223372036854775808", "-9223372036854775808", "18446744073709551616"), row


@NATIVE
@pytest.mark.parametrize("compact", [False, True], ids=["indent", "compact"])
@pytest.mark.parametrize("bad", [b"\xed\xa0\x80", b"\xff"], ids=["surrogate", "ff"])
def test_name_bytes_that_are_not_utf8_are_refused(fixture_case, native, compact, bad):
    path = _npu_dump(fixture_case)
    if compact:
        path.write_text(json.dumps(json.loads(path.read_text())))
    raw = path.read_bytes()
    at = raw.index(b'"Functional.linear.0.forward"') + 14
    path.write_bytes(raw[:at] + bad + raw[at:])
    assert_refused(compare(fixture_case, native=native), "dump.json", "is not valid utf-8",
                   f"byte 0x{bad[0]:02x} at offset {at}")  # fmt: skip


@NATIVE
def test_stack_json_bytes_that_are_not_utf8_are_refused(fixture_case, native):
    path = fixture_case / "npu/step0/rank/stack.json"
    raw = path.read_bytes()
    at = raw.index(b'"', 1) + 1
    path.write_bytes(raw[:at] + b"\xed\xa0\x80" + raw[at:])
    assert_refused(compare(fixture_case, "-s", native=native), "stack.json", f"byte 0xed at offset {at}")


@pytest.mark.parametrize("kind", ["npy", "common"])
def test_kernel_file_names_that_are_not_utf8_are_refused(tmp_path, kind):
    """MindSpore graph-mode dumps name rows after their files: a name os.listdir can only give with lone
    surrogates is refused naming its folder (it ended in an internal error when written)."""
    case = tmp_path / kind
    shutil.copytree(DATA / "ms_kernel" / kind, case, ignore=shutil.ignore_patterns("expected"))
    path = sorted((case / "npu").rglob("*.npy"))[0]
    bad = os.fsencode(path.name).replace(b".", b"\xed\xa0\x80.", 1)
    os.rename(os.fsencode(path), os.path.join(os.fsencode(path.parent), bad))
    assert_refused(compare(case, framework="mindspore"), str(path.parent), "is not valid UTF-8", repr(bad))


def test_an_escaped_lone_surrogate_still_reads_as_the_replacement_character(fixture_case):
    _replace_once(_npu_dump(fixture_case), b'"Functional.linear.0.forward"', b'"Functional.li\\ud800near.0.forward"')
    run = compare(fixture_case, "--format", "csv", out=fixture_case / "out")
    assert run.code == 0 and not run.errors, run.out + run.err
    assert any(r["NPU Name"].startswith("Functional.li\ufffdnear") for r in _csv_rows(run))


# -- differential harnesses: truncation at every byte, byte mutations ------------------------------------------------
SMALL = {
    "Functional.linear.0.forward": {
        "input_args": [dict(LEAF, Max=2.5e-7, shape=[16, 32]), {"type": "int", "value": 3}],
        "input_kwargs": {"bias": None, "": {"type": "str", "value": ""}},
        "output": [dict(LEAF, Min=-1, md5="0123abcd")],
    },
    "Module.fc.Linear.forward.0": {"input_args": [{"type": "torch.Size", "value": [2, 3]}], "output": [LEAF]},
}


def _small_dump(indent: int | None) -> bytes:
    return json.dumps({**HEADER, "data": SMALL}, indent=indent).encode()


@pytest.mark.parametrize("indent", [1, None], ids=["indent", "compact"])
def test_truncated_at_every_byte_reads_alike(tmp_path, indent):
    native_module("_rowwalk")
    raw = _small_dump(indent)
    path = tmp_path / "dump.json"
    step = max(1, len(raw) // 400)
    for cut in range(0, len(raw), step):
        path.write_bytes(raw[:cut])
        assert _read(path, True) == _read(path, False), cut


HOSTILE_BYTES = [b"\x00", b"\xed\xa0\x80", b"\xff", b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"-", b"9" * 30,
                 b"1e400", b"NaN", b"\\u0000", b"\\ud800", b" ", b"\xc3\xa9"]  # fmt: skip


@pytest.mark.parametrize("indent", [1, None], ids=["indent", "compact"])
def test_byte_mutations_read_alike(tmp_path, indent):
    native_module("_rowwalk")
    raw = _small_dump(indent)
    path = tmp_path / "dump.json"
    rnd = random.Random(33)
    for k in range(300):
        at = rnd.randrange(len(raw))
        piece = rnd.choice(HOSTILE_BYTES)
        mutated = raw[:at] + piece + raw[at + (rnd.random() < 0.5) :]
        path.write_bytes(mutated)
        native, python = _read(path, True), _read(path, False)
        assert native == python, (k, at, piece)
