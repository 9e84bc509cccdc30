"""Read a `.npy` file into TensorData: the header parsed by a small tokenizer (never evaluated as Python), the
data read whole when small, else memory-mapped; no pickled objects."""

from __future__ import annotations

import io
import math
import os
import re
import struct
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load import tensor_files
from msprobe_compare.load.tensor_data import TensorData
from msprobe_compare.load.tensor_files import MAX_DIMS, bounded, brief, empty_array, file_span, open_regular, readonly

__all__ = ["read_npy"]

_NPY_MAGIC = b"\x93NUMPY"
# An .npy header is a dict literal of a few dozen bytes; numpy itself refuses more than 10,000 without
# allow_pickle. Ours is read by _npy_header, never by ast.literal_eval.
_NPY_HEADER_MAX = 64 * 1024
_NPY_LENGTHS = {1: struct.Struct("<H"), 2: struct.Struct("<I"), 3: struct.Struct("<I")}
_NPY_TOKEN = re.compile(
    r"""[ \t\r\n]*(?:(?P<str>'[^'\\]*'|"[^"\\]*")|(?P<int>[0-9]+)L?|(?P<name>True|False)|(?P<punct>[{}()\[\],:])|(?P<end>$))"""
)


def read_npy(path: Path | str, name: str) -> TensorData:
    """A `.npy` file (no pickled objects): read whole when small (READ_WHOLE_MAX), else memory-mapped."""
    with open_regular(path, name) as fp:
        file_size = os.fstat(fp.fileno()).st_size
        if fp.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise TensorFileError("unsupported", name, "not an .npy file")
        fp.seek(0)
        whole = fp.read() if file_size <= tensor_files.READ_WHOLE_MAX else None
        src: BinaryIO = io.BytesIO(whole) if whole is not None else fp
        shape, fortran, dtype = _npy_header(src, name)
        _check_npy_dtype(dtype, name)
        if len(shape) > MAX_DIMS or not all(bounded(d) for d in shape):  # a tuple of ints (_npy_header)
            raise TensorFileError("corrupt", name, f"npy shape {brief(shape)} is not at most {MAX_DIMS} int64 sizes")
        offset = src.tell()
        if whole is not None:
            file_size = len(whole)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if offset + nbytes > file_size:
            raise TensorFileError(
                "corrupt", name, f"npy data is {file_size - offset} bytes, shape {brief(shape)} needs more"
            )
        order: Literal["C", "F"] = "F" if fortran else "C"
        if count == 0:
            array = empty_array(shape, dtype)
        elif whole is not None:
            array = np.frombuffer(whole, dtype=dtype, count=count, offset=offset).reshape(shape, order=order)
        else:
            try:
                array = np.memmap(fp, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)
            except (ValueError, OSError):  # e.g. a file system without mmap: read it instead
                fp.seek(offset)
                data = fp.read(nbytes)
                array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape, order=order)
        source = file_span(array, path, fp.fileno())
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
        source = None
    return TensorData(readonly(array), array.dtype.name, source)


def _npy_header(src: BinaryIO, name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) from the header after the magic; `src` is left at the data.

    Versions 1-3. The header is parsed by a small tokenizer that accepts exactly the dict literal numpy
    writes (string keys; string, bool, int and int-tuple values; Python 2's `2L`), never evaluated as Python:
    ast.literal_eval is not safe to call from several threads with finalizers running (CPython raised
    "AST constructor recursion depth mismatch" there) and would accept far more than a header needs.
    """
    magic = src.read(len(_NPY_MAGIC) + 2)
    if len(magic) < len(_NPY_MAGIC) + 2:
        raise TensorFileError("corrupt", name, "bad npy header: the file ends inside the magic string")
    major, minor = magic[-2], magic[-1]
    length_format = _NPY_LENGTHS.get(major)
    if length_format is None or minor != 0:
        raise TensorFileError("unsupported", name, f"npy format version {major}.{minor}")
    raw_length = src.read(length_format.size)
    if len(raw_length) < length_format.size:
        raise TensorFileError("corrupt", name, "bad npy header: the file ends inside the header length")
    (length,) = length_format.unpack(raw_length)
    if length > _NPY_HEADER_MAX:
        raise TensorFileError("corrupt", name, f"bad npy header: {length} bytes, more than {_NPY_HEADER_MAX}")
    raw = src.read(length)
    if len(raw) < length:
        raise TensorFileError("corrupt", name, f"bad npy header: the file ends {length - len(raw)} bytes early")
    try:
        text = raw.decode("utf-8" if major == 3 else "latin-1")
    except UnicodeDecodeError:
        raise TensorFileError("corrupt", name, "bad npy header: not UTF-8") from None
    fields = _npy_dict(text, name)
    if fields.get("descr") is list:
        raise TensorFileError("unsupported", name, "structured npy dtype")
    if set(fields) != {"descr", "fortran_order", "shape"}:
        raise TensorFileError("corrupt", name, f"bad npy header: keys {sorted(fields)}")
    descr, fortran, shape = fields["descr"], fields["fortran_order"], fields["shape"]
    if not isinstance(descr, str) or not isinstance(fortran, bool) or not isinstance(shape, tuple):
        raise TensorFileError("corrupt", name, f"bad npy header: {brief(text.strip())}")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        raise TensorFileError("corrupt", name, f"bad npy header: descr {brief(descr)}") from None
    return shape, fortran, dtype


def _npy_dict(text: str, name: str) -> dict[str, Any]:
    """The header's dict: string keys; values str, bool, int, a tuple of ints, or `list` for a list."""

    def bad(what: str) -> TensorFileError:
        return TensorFileError("corrupt", name, f"bad npy header: {what} in {brief(text.strip())}")

    pos = 0

    def token() -> tuple[str, str]:
        nonlocal pos
        match = _NPY_TOKEN.match(text, pos)
        if match is None:
            raise bad(f"unexpected text at {pos}")
        pos = match.end()
        kind = match.lastgroup or "end"
        return kind, match.group(kind)

    def value(kind: str, text_: str) -> Any:
        if kind == "str":
            return text_[1:-1]
        if kind == "int":
            return int(text_)
        if kind == "name":
            return text_ == "True"
        if text_ == "(":
            items: list[int] = []
            while True:
                kind, text_ = token()
                if text_ == ")":
                    return tuple(items)
                if kind != "int":
                    raise bad("a shape that is not a tuple of integers")
                items.append(int(text_))
                kind, text_ = token()
                if text_ == ")":
                    return tuple(items)
                if text_ != ",":
                    raise bad("a shape that is not a tuple of integers")
        if text_ == "[":
            return list  # a structured dtype's field list: refused by the caller, not parsed
        raise bad(f"unexpected {text_!r}")

    if token() != ("punct", "{"):
        raise bad("no dict")
    fields: dict[str, Any] = {}
    while True:
        kind, key = token()
        if key == "}":
            break
        if kind != "str":
            raise bad("a key that is not a string")
        if token() != ("punct", ":"):
            raise bad("no ':' after a key")
        fields[key[1:-1]] = value(*token())
        if fields[key[1:-1]] is list:
            return fields  # the rest of a field list is not read
        kind, sep = token()
        if sep == "}":
            break
        if sep != ",":
            raise bad("no ',' between items")
    if token()[0] != "end":
        raise bad("text after the dict")
    return fields


def _check_npy_dtype(dtype: np.dtype, name: str) -> None:
    if dtype.hasobject:
        raise TensorFileError("unsafe", name, "npy holds Python objects (pickle)")
    if dtype.fields is not None or dtype.subdtype is not None:
        raise TensorFileError("unsupported", name, f"structured npy dtype {dtype}")
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TensorFileError("unsupported", name, f"npy dtype {dtype.name}")
