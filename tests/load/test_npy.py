"""Tests for msprobe_compare.load.npy: round trips, refusals, the header parser against numpy's own reader."""

from __future__ import annotations

import math
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load import npy
from msprobe_compare.load.tensors import load_tensor, read_npy


def _kind(exc_info: pytest.ExceptionInfo[TensorFileError]) -> str:
    return exc_info.value.kind


@pytest.mark.parametrize(
    "array",
    [
        np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
        np.array(2.5, dtype=np.float64),
        np.zeros((0, 5), dtype=np.float16),
        np.array([True, False, True]),
        np.arange(6, dtype=">i4"),
    ],
    ids=["float32", "fortran", "0d", "empty", "bool", "big_endian"],
)
def test_npy_round_trip(tmp_path: Path, array: np.ndarray) -> None:
    np.save(tmp_path / "a.npy", array)
    tensor = load_tensor(tmp_path, "a.npy")
    np.testing.assert_array_equal(tensor.array, array)
    assert tensor.array.dtype.isnative and tensor.dtype_name == array.dtype.name
    assert type(tensor.array) is np.ndarray and not tensor.array.flags.writeable


def test_npy_with_objects_is_unsafe(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(TensorFileError) as exc_info:
        load_tensor(tmp_path, "o.npy")
    assert _kind(exc_info) == "unsafe"


@pytest.mark.parametrize(
    "array", [np.ones(3, dtype=np.complex64), np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]), np.array(["ab"])]
)
def test_npy_unsupported_dtypes(tmp_path: Path, array: np.ndarray) -> None:
    np.save(tmp_path / "c.npy", array)
    with pytest.raises(TensorFileError) as exc_info:
        load_tensor(tmp_path, "c.npy")
    assert _kind(exc_info) == "unsupported"


def test_npy_truncated_or_garbage(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(100, dtype=np.float64))
    data = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-8])
    (tmp_path / "head.npy").write_bytes(data[:20])
    (tmp_path / "pickled.npy").write_bytes(pickle.dumps([1, 2]))
    for name, kind in [("cut.npy", "corrupt"), ("head.npy", "corrupt"), ("pickled.npy", "unsupported")]:
        with pytest.raises(TensorFileError) as exc_info:
            load_tensor(tmp_path, name)
        assert _kind(exc_info) == kind, name


def _npy_bytes(header: str, version: tuple[int, int] = (1, 0), data: bytes = b"") -> bytes:
    raw = header.encode("latin-1")
    length = struct.pack("<H" if version[0] == 1 else "<I", len(raw))
    return b"\x93NUMPY" + bytes(version) + length + raw + data


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
        np.array(7, dtype=np.uint8),
        np.zeros((0,), dtype="<f2"),
        np.arange(5, dtype=">f8"),
    ],
    ids=["c", "fortran", "0d", "empty", "big_endian"],
)
def test_npy_header_parsed_as_numpy_reads_it(tmp_path: Path, version: tuple[int, int], array: np.ndarray) -> None:
    """Our header parser agrees with numpy's own reader on every format version numpy writes."""
    path = tmp_path / "v.npy"
    with path.open("wb") as fp:
        np.lib.format.write_array(fp, array, version=version)
    with path.open("rb") as fp:
        assert np.lib.format.read_magic(fp) == version
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        expected = reader(fp)
        expected_offset = fp.tell()
    with path.open("rb") as fp:
        assert npy._npy_header(fp, "v.npy") == expected
        assert fp.tell() == expected_offset
    np.testing.assert_array_equal(read_npy(path, "v.npy").array, array)


@pytest.mark.parametrize(
    "header, shape, fortran",
    [
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", (2, 3), False),  # Python 2's numpy
        ('{"shape":(6,),"descr":"<f4","fortran_order":True}', (6,), True),  # keys in any order, no spaces
        ("{\n 'descr' : '<f4' ,\r\n 'fortran_order' : False , 'shape' : ( 3 , 2 ) }\n", (3, 2), False),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': ()}" + " " * 40 + "\n", (), False),
    ],
    ids=["py2_long", "compact", "whitespace", "0d_padded"],
)
def test_npy_header_layouts(tmp_path: Path, header: str, shape: tuple[int, ...], fortran: bool) -> None:
    count = math.prod(shape)
    (tmp_path / "h.npy").write_bytes(_npy_bytes(header, data=np.arange(count, dtype="<f4").tobytes()))
    tensor = read_npy(tmp_path / "h.npy", "h.npy")
    assert tensor.array.shape == shape and tensor.array.flags.f_contiguous == (fortran or count <= 1)
    np.testing.assert_array_equal(tensor.array.ravel(order="F" if fortran else "C"), np.arange(count))


@pytest.mark.parametrize(
    "header, kind",
    [
        ("{'descr': '<f4', 'fortran_order': False}", "corrupt"),  # a key missing
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "corrupt"),  # an extra key
        ("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "corrupt"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "corrupt"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", "corrupt"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': ((1,),)}", "corrupt"),
        ("{'descr': 'no such dtype', 'fortran_order': False, 'shape': (1,)}", "corrupt"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "corrupt"),
        ("{'descr': __import__('os').system('true'), 'fortran_order': False, 'shape': (1,)}", "corrupt"),
        ("['descr', '<f4']", "corrupt"),
        ("{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "corrupt"),
        ("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "unsupported"),
        ("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", "unsafe"),
        ("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", "unsupported"),
    ],
)
def test_npy_bad_headers(tmp_path: Path, header: str, kind: str) -> None:
    (tmp_path / "b.npy").write_bytes(_npy_bytes(header, data=b"\0" * 16))
    with pytest.raises(TensorFileError) as exc_info:
        read_npy(tmp_path / "b.npy", "b.npy")
    assert _kind(exc_info) == kind, str(exc_info.value)


def test_npy_header_length_and_version_bounds(tmp_path: Path) -> None:
    good = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"
    cases = {
        "long.npy": (_npy_bytes(good + " " * (70 * 1024), version=(2, 0), data=b"\0" * 4), "corrupt"),
        "short.npy": (_npy_bytes(good)[:-10], "corrupt"),  # the header is cut
        "v4.npy": (_npy_bytes(good, version=(4, 0)), "unsupported"),
        "v1_1.npy": (_npy_bytes(good, version=(1, 1)), "unsupported"),
        "nolen.npy": (b"\x93NUMPY\x02\x00\x10", "corrupt"),
        "v3_bad_utf8.npy": (_npy_bytes(good, version=(3, 0))[:-3] + b"\xff)}", "corrupt"),
    }
    for file_name, (content, kind) in cases.items():
        (tmp_path / file_name).write_bytes(content)
        with pytest.raises(TensorFileError) as exc_info:
            read_npy(tmp_path / file_name, file_name)
        assert _kind(exc_info) == kind, file_name


def test_npy_header_never_evaluated_as_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading an .npy calls neither ast.literal_eval nor numpy's header readers (which use it)."""
    import ast

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("header evaluated by ast/numpy")

    monkeypatch.setattr(ast, "literal_eval", refuse)
    monkeypatch.setattr(np.lib.format, "read_array_header_1_0", refuse)
    monkeypatch.setattr(np.lib.format, "read_array_header_2_0", refuse)
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(read_npy(tmp_path / "a.npy", "a.npy").array, np.arange(6).reshape(2, 3))
