"""Read one dumped tensor file into TensorData: `.pt` (torch.save zip archives) and `.npy`.

No torch import and no pickle code execution: `data.pkl` is unpickled by `_SafeUnpickler`, whose
`find_class` hands out only inert stand-ins for the few torch globals that describe a tensor, and whose
`persistent_load` turns storage records into references to the archive's `data/<key>` members. Storage
members written uncompressed (torch.save's default) are memory-mapped, not copied, except in files of at most
READ_WHOLE_MAX bytes, which are read with one read() and viewed in place; every array returned is read-only.
"""

from __future__ import annotations

import functools
import io
import math
import os
import pickle
import re
import stat
import struct
import zipfile
import zlib
from pathlib import Path, PureWindowsPath
from typing import Any, BinaryIO, Literal, NamedTuple
from collections.abc import Callable

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.tensor_data import BF16, FileSpan, TensorData
from msprobe_compare.records import dataclass

__all__ = ["load_tensor", "read_npy", "read_pt", "resolve_tensor_path"]

# torch storage class -> logical dtype name ("bfloat16" is stored as uint16 bit patterns).
_STORAGE_DTYPES: dict[str, str] = {
    "BoolStorage": "bool",
    "ByteStorage": "uint8",
    "CharStorage": "int8",
    "ShortStorage": "int16",
    "IntStorage": "int32",
    "LongStorage": "int64",
    "HalfStorage": "float16",
    "BFloat16Storage": BF16,
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
}
# torch storage classes that exist but hold dtypes we do not read.
_UNSUPPORTED_STORAGES: dict[str, str] = {
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4",
}
# torch dtype objects (pickled as GLOBAL 'torch <name>', used by _rebuild_tensor_v3) that we read.
_SUPPORTED_TORCH_DTYPES = frozenset(set(_STORAGE_DTYPES.values()) | {"uint16", "uint32", "uint64"})
# torch dtype names we recognise but do not read (gives "unsupported" instead of "unsafe").
_UNSUPPORTED_TORCH_DTYPE = re.compile(r"complex\d+|float[48]_e\w+|bits\w+|qu?int\d+(x\d+)?|u?int[1-7]")
# torch._utils rebuild functions for tensors we do not read (sparse, quantized, nested, meta, subclasses).
_UNSUPPORTED_REBUILDS = frozenset(
    {
        "_rebuild_qtensor",
        "_rebuild_sparse_tensor",
        "_rebuild_nested_tensor",
        "_rebuild_meta_tensor_no_storage",
        "_rebuild_wrapper_subclass",
        "_rebuild_device_tensor_from_numpy",
        "_rebuild_device_tensor_from_cpu_tensor",
    }
)
_NUMPY_DTYPES: dict[str, np.dtype] = {
    name: np.dtype("<u2" if name == BF16 else name).newbyteorder("<") for name in _SUPPORTED_TORCH_DTYPES
}
_MAX_PICKLE_BYTES = 16 << 20  # a tensor's data.pkl is a few hundred bytes
INT64_MAX = (1 << 63) - 1  # every size, offset, stride and count from a file is bounded by this before use
MAX_DIMS = 64  # torch's own limit on dimensions
# A view may show its stored items repeated (zero strides, overlapping windows) up to this many times over, or
# VIEW_FREE items whatever the storage; beyond that the work would be out of proportion to the stored data.
VIEW_REPEAT = 4
VIEW_FREE = 1 << 20
_ZIP_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zip local file header, 30 bytes
_ZIP_LOCAL_MAGIC = b"PK\x03\x04"
_ZIP_CENTRAL = struct.Struct("<4s6H3L5H2L")  # central directory file header, 46 bytes
_ZIP_CENTRAL_MAGIC = b"PK\x01\x02"
_ZIP_END = struct.Struct("<4s4H2LH")  # end of central directory record, 22 bytes
_ZIP_END_MAGIC = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator, 20 bytes
_ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory record, 56 bytes
_ZIP64_END_MAGIC = b"PK\x06\x06"
# Files up to this size are read whole (one read(), arrays viewing the bytes); bigger ones are memory-mapped.
# A small tensor then costs one system call instead of an mmap set-up and many small buffered reads.
READ_WHOLE_MAX = 1 << 20
_NPY_MAGIC = b"\x93NUMPY"
# An .npy header is a dict literal of a few dozen bytes; numpy itself refuses more than 10,000 without
# allow_pickle. Ours is read by _npy_header, never by ast.literal_eval.
_NPY_HEADER_MAX = 64 * 1024
_NPY_LENGTHS = {1: struct.Struct("<H"), 2: struct.Struct("<I"), 3: struct.Struct("<I")}
_NPY_TOKEN = re.compile(
    r"""[ \t\r\n]*(?:(?P<str>'[^'\\]*'|"[^"\\]*")|(?P<int>[0-9]+)L?|(?P<name>True|False)|(?P<punct>[{}()\[\],:])|(?P<end>$))"""
)


# ----------------------------------------------------------------------------------------------- paths


def resolve_tensor_path(tensor_dir: Path, data_name: str) -> Path:
    """The regular file `data_name` inside `tensor_dir` (a dump's `dump_tensor_data` folder).

    Refused as "unsafe": an absolute name, a name with `..`, backslashes or NUL, a symlinked folder or
    file on the way, a special file. "missing": the folder or file does not exist.
    """
    return Path(_resolve(tensor_dir, data_name))


@functools.lru_cache(maxsize=64)
def _folder_text(tensor_dir: Path | str) -> str:
    return str(Path(tensor_dir))


def _resolve(tensor_dir: Path | str, data_name: str) -> str:
    """resolve_tensor_path on plain strings (pathlib costs more than the lstat calls on small tensors)."""
    name = str(data_name)
    if not name or "\x00" in name or "\\" in name:
        raise TensorFileError("unsafe", name, "data_name is empty or contains NUL or a backslash")
    if name.startswith("/") or (":" in name and PureWindowsPath(name).anchor):
        raise TensorFileError("unsafe", name, "data_name is an absolute path")
    parts = [part for part in name.split("/") if part not in ("", ".")]  # PurePosixPath(name).parts
    if ".." in parts or not parts:
        raise TensorFileError("unsafe", name, "data_name escapes the tensor folder")

    current = _folder_text(tensor_dir)
    last = len(parts)
    for index in range(last + 1):
        if index:
            current = os.path.join(current, parts[index - 1])
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            raise TensorFileError("missing", name, f"{current} does not exist") from None
        except OSError as exc:
            raise TensorFileError("missing", name, f"cannot stat {current}: {exc.strerror}") from None
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            raise TensorFileError("unsafe", name, f"{current} is a symbolic link")
        if index < last and not stat.S_ISDIR(mode):
            raise TensorFileError("missing", name, f"{current} is not a folder")
        if index == last and not stat.S_ISREG(mode):
            if stat.S_ISDIR(mode):
                raise TensorFileError("missing", name, f"{current} is a folder, not a file")
            raise TensorFileError("unsafe", name, f"{current} is not a regular file")
    return current


def load_tensor(tensor_dir: Path, data_name: str) -> TensorData:
    """Resolve `data_name` safely inside `tensor_dir` and read it by its suffix (.pt or .npy)."""
    path = _resolve(tensor_dir, data_name)
    last = os.path.basename(path)
    dot = last.rfind(".")
    suffix = last[dot:].lower() if 0 < dot < len(last) - 1 else ""  # as Path.suffix
    if suffix == ".pt":
        return read_pt(path, data_name)
    if suffix == ".npy":
        return read_npy(path, data_name)
    raise TensorFileError("unsupported", data_name, f"unknown tensor file type {suffix or '(no suffix)'!r}")


def _open_regular(path: Path | str, name: str) -> BinaryIO:
    """Open `path` for reading without following a final symlink; it must be a regular file."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise TensorFileError("missing", name, f"{path} does not exist") from None
    except OSError as exc:
        if os.path.islink(path):
            raise TensorFileError("unsafe", name, f"{path} is a symbolic link") from None
        raise TensorFileError("missing", name, f"cannot open {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TensorFileError("unsafe", name, f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _readonly(array: np.ndarray) -> np.ndarray:
    array = array.view(np.ndarray)
    array.flags.writeable = False
    return array


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return _readonly(np.empty(shape, dtype=dtype))


# ------------------------------------------------------------------------------------------------ .npy


def read_npy(path: Path | str, name: str) -> TensorData:
    """A `.npy` file (no pickled objects): read whole when small (READ_WHOLE_MAX), else memory-mapped."""
    with _open_regular(path, name) as fp:
        file_size = os.fstat(fp.fileno()).st_size
        if fp.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise TensorFileError("unsupported", name, "not an .npy file")
        fp.seek(0)
        whole = fp.read() if file_size <= READ_WHOLE_MAX else None
        src: BinaryIO = io.BytesIO(whole) if whole is not None else fp
        shape, fortran, dtype = _npy_header(src, name)
        _check_npy_dtype(dtype, name)
        if len(shape) > MAX_DIMS or not all(_bounded(d) for d in shape):  # a tuple of ints (_npy_header)
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
            array = _empty(shape, dtype)
        elif whole is not None:
            array = np.frombuffer(whole, dtype=dtype, count=count, offset=offset).reshape(shape, order=order)
        else:
            try:
                array = np.memmap(fp, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)
            except (ValueError, OSError):  # e.g. a file system without mmap: read it instead
                fp.seek(offset)
                data = fp.read(nbytes)
                array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape, order=order)
        source = _file_span(array, path, fp.fileno())
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
        source = None
    return TensorData(_readonly(array), array.dtype.name, source)


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


# ------------------------------------------------------------------------------------------------- .pt


class _PickleRefused(Exception):
    """Raised inside the unpickler; carries the TensorFileError kind and detail out of pickle's hands."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def _refuse_state(self: object, state: object) -> None:
    """`__setstate__` of every stand-in: pickle's BUILD may not alter them."""
    raise _PickleRefused("corrupt", f"pickle tried to set the state of a {type(self).__name__}")


@dataclass(frozen=True, slots=True)
class _StorageType:
    """Stand-in for a torch storage class (torch.FloatStorage, ..., torch.UntypedStorage)."""

    __setstate__ = _refuse_state

    dtype_name: str | None  # None for UntypedStorage (bytes; the dtype comes from _rebuild_tensor_v3)


@dataclass(frozen=True, slots=True)
class _TorchDtype:
    """Stand-in for a torch dtype object such as torch.float32."""

    __setstate__ = _refuse_state

    dtype_name: str


@dataclass(frozen=True, slots=True)
class _StorageRef:
    """A storage record from data.pkl: archive member `data/<key>` holding `numel` items of its type."""

    __setstate__ = _refuse_state

    storage_type: _StorageType
    key: str
    numel: int


@dataclass(frozen=True, slots=True)
class _TensorRecord:
    """What a tensor rebuild call produced: a view on a storage."""

    __setstate__ = _refuse_state

    storage: _StorageRef
    dtype_name: str
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bounded(value: Any) -> bool:
    """A non-negative int that fits int64 (anything else from a file is refused before arithmetic or text)."""
    return _is_int(value) and 0 <= value <= INT64_MAX


def brief(value: Any, limit: int = 80) -> str:
    """A short text of an untrusted value: ints beyond int64 by their size only (their digits could be too many to
    print), containers and strings cut at `limit` characters."""
    if _is_int(value) and not -INT64_MAX <= value <= INT64_MAX:
        return f"<int of {value.bit_length()} bits>"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(brief(v, limit) for v in value[:8]) + (", ..." if len(value) > 8 else "")
        text = f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    elif isinstance(value, (str, bytes, int, float, type(None))):
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or len(value) > MAX_DIMS or not all(_bounded(v) for v in value):
        raise _PickleRefused("corrupt", f"tensor {what} {brief(value)} is not a tuple of at most {MAX_DIMS} "
                                        "non-negative int64 values")  # fmt: skip
    return tuple(value)


def _tensor_record(storage: Any, offset: Any, size: Any, stride: Any, dtype_name: str | None) -> _TensorRecord:
    if not isinstance(storage, _StorageRef):
        raise _PickleRefused("corrupt", "tensor storage is not a storage record")
    if dtype_name is None:
        dtype_name = storage.storage_type.dtype_name
        if dtype_name is None:
            raise _PickleRefused("unsupported", "tensor on an untyped storage without a dtype")
    if not _bounded(offset):
        raise _PickleRefused("corrupt", f"storage offset {brief(offset)} is not a non-negative int64")
    shape = _int_tuple(size, "size")
    strides = _int_tuple(stride, "stride")
    if len(shape) != len(strides):
        raise _PickleRefused("corrupt", f"size {shape} and stride {strides} differ in length")
    return _TensorRecord(storage, dtype_name, offset, shape, strides)


@dataclass(frozen=True, slots=True)
class _Rebuild:
    """Stand-in for one allowed torch._utils rebuild function; calling it only records arguments."""

    __setstate__ = _refuse_state

    which: str

    def __call__(self, *args: Any) -> _TensorRecord:
        if self.which in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            # (storage, storage_offset, size, stride[, requires_grad, backward_hooks[, metadata]])
            if len(args) not in (4, 6, 7):
                raise _PickleRefused("corrupt", f"{self.which} called with {len(args)} arguments")
            return _tensor_record(args[0], args[1], args[2], args[3], None)
        if self.which == "_rebuild_tensor_v3":
            # (storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
            if len(args) not in (7, 8) or not isinstance(args[6], _TorchDtype):
                raise _PickleRefused("corrupt", "_rebuild_tensor_v3 called with unexpected arguments")
            return _tensor_record(args[0], args[1], args[2], args[3], args[6].dtype_name)
        # _rebuild_parameter(data, requires_grad, hooks[, state]): a Parameter is its data tensor.
        if not args or not isinstance(args[0], _TensorRecord):
            raise _PickleRefused("corrupt", f"{self.which} without tensor data")
        return args[0]


@dataclass(frozen=True, slots=True)
class _OrderedDictStandIn:
    """Stand-in for collections.OrderedDict (backward hooks, metadata): builds a plain dict."""

    __setstate__ = _refuse_state

    def __call__(self, *args: Any) -> dict[Any, Any]:
        if len(args) > 1:
            raise _PickleRefused("corrupt", "OrderedDict called with more than one argument")
        return dict(*args)


_ALLOWED_REBUILDS = frozenset(
    {
        "_rebuild_tensor_v2",
        "_rebuild_tensor",
        "_rebuild_tensor_v3",
        "_rebuild_parameter",
        "_rebuild_parameter_with_state",
    }
)


class _SafeUnpickler(pickle.Unpickler):
    """Unpickler for torch's data.pkl that can only produce inert stand-ins, never call real code."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils":
            if name in _ALLOWED_REBUILDS:
                return _Rebuild(name)
            if name in _UNSUPPORTED_REBUILDS:
                raise _PickleRefused("unsupported", f"tensor kind {name} (sparse, quantized, nested or subclass)")
        elif module == "collections" and name == "OrderedDict":
            return _OrderedDictStandIn()
        elif module in ("torch", "torch.storage") and name == "UntypedStorage":
            return _StorageType(None)
        elif module == "torch":
            if name in _STORAGE_DTYPES:
                return _StorageType(_STORAGE_DTYPES[name])
            if name in _UNSUPPORTED_STORAGES:
                raise _PickleRefused("unsupported", f"dtype {_UNSUPPORTED_STORAGES[name]} ({name})")
            if name in _SUPPORTED_TORCH_DTYPES:
                return _TorchDtype(name)
            if _UNSUPPORTED_TORCH_DTYPE.fullmatch(name):
                raise _PickleRefused("unsupported", f"dtype {name}")
        raise _PickleRefused("unsafe", f"pickle global {module}.{name} is not allowed")

    def persistent_load(self, pid: Any) -> _StorageRef:
        if not isinstance(pid, tuple) or len(pid) != 5:
            raise _PickleRefused("corrupt", f"unexpected persistent id {brief(pid)}")
        typename, storage_type, key, _location, numel = pid
        if isinstance(typename, bytes):
            typename = typename.decode("ascii", "replace")
        if typename != "storage" or not isinstance(storage_type, _StorageType):
            raise _PickleRefused("corrupt", f"unexpected persistent id {brief(pid)}")
        if not isinstance(key, str) or not _bounded(numel):
            raise _PickleRefused("corrupt", f"bad storage record {brief(pid)}")
        return _StorageRef(storage_type, key, numel)


def read_pt(path: Path | str, name: str) -> TensorData:
    """A tensor (or Parameter) saved by torch.save in the zip format, read without torch.

    Files up to READ_WHOLE_MAX bytes are read with one read() and parsed in memory (`_InMemoryZip`), the array
    a read-only view on those bytes; anything unusual there, and every bigger file, goes through zipfile, with
    storage members memory-mapped."""
    with _open_regular(path, name) as fp:
        head = fp.read(4)
        if len(head) < 4:
            raise TensorFileError("corrupt", name, "file is empty or truncated")
        if head != _ZIP_LOCAL_MAGIC:
            if head[:1] == b"\x80":
                raise TensorFileError("unsupported", name, "legacy (non-zip) torch.save format")
            raise TensorFileError("unsupported", name, "not a torch.save zip archive")
        fp.seek(0)
        if os.fstat(fp.fileno()).st_size <= READ_WHOLE_MAX:
            try:
                zipped = _InMemoryZip(fp.read(), name)
                return _read_archive(zipped.members, zipped.read, zipped.items, name)
            except _Unusual:
                fp.seek(0)  # let zipfile judge it (and word the error, if any)
        try:
            with zipfile.ZipFile(fp) as archive:
                tensor = _read_archive(
                    _unique_members(archive.infolist(), name),
                    functools.partial(_read_member, archive, name=name),
                    functools.partial(_storage_items, archive, fp, name=name),
                    name,
                )
            source = _file_span(tensor.array, path, fp.fileno())
            return tensor if source is None else TensorData(tensor.array, tensor.dtype_name, source)
        except TensorFileError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, struct.error, OSError) as exc:
            raise TensorFileError("corrupt", name, f"bad zip archive: {exc}") from None


def _unique_members(infos: list[Any], name: str) -> dict[str, Any]:
    """Members by name; a name held twice is refused: readers disagree on which copy counts (torch takes the
    first, zipfile the last)."""
    members: dict[str, Any] = {}
    for info in infos:
        if info.filename in members:
            raise TensorFileError("corrupt", name, f"ambiguous archive: member {brief(info.filename)} appears twice")
        members[info.filename] = info
    return members


def _check_member(entry: Any, name: str) -> None:
    """Only what torch.save writes: members stored uncompressed, not encrypted."""
    if entry.flag_bits & 0x1:
        raise TensorFileError("unsupported", name, f"encrypted member {brief(entry.filename)}")
    if entry.compress_type != zipfile.ZIP_STORED:
        raise TensorFileError("unsupported", name, f"compressed member {brief(entry.filename)} (method "
                                                   f"{entry.compress_type}; torch.save never compresses)")  # fmt: skip
    if entry.compress_size != entry.file_size:
        raise TensorFileError("corrupt", name, f"ambiguous archive: stored member {brief(entry.filename)} has "
                                               "two different sizes")  # fmt: skip


def _read_archive(
    members: dict[str, Any],
    read: Callable[[Any, int], bytes],
    items: Callable[[Any, np.dtype, int, int], np.ndarray],
    name: str,
) -> TensorData:
    """The tensor of an archive: `members` maps names to entries (zipfile.ZipInfo or _Entry), `read(entry,
    limit)` returns a small member's bytes, `items(entry, dtype, start, stop)` a storage's items."""
    pickles = [m for m in members if m.endswith("/data.pkl") and m.count("/") == 1]
    if len(pickles) != 1:
        problem = "no data.pkl" if not pickles else "several data.pkl"
        raise TensorFileError("corrupt", name, f"{problem} in the archive")
    prefix = pickles[0][: -len("data.pkl")]
    for entry in members.values():
        _check_member(entry, name)

    byteorder = members.get(prefix + "byteorder")
    if byteorder is not None:
        order = read(byteorder, 16).strip()
        if order != b"little":
            raise TensorFileError("unsupported", name, f"byte order {order.decode('ascii', 'replace')!r}")

    record = _unpickle(read(members[pickles[0]], _MAX_PICKLE_BYTES), name)
    dtype = _NUMPY_DTYPES.get(record.dtype_name)
    if dtype is None:
        raise TensorFileError("unsupported", name, f"dtype {record.dtype_name}")
    storage = record.storage
    member = members.get(f"{prefix}data/{storage.key}")
    if member is None:
        raise TensorFileError("corrupt", name, f"storage data/{storage.key} is missing")
    # Storage numel counts items of its own type (bytes for UntypedStorage).
    storage_bytes = storage.numel * (1 if storage.storage_type.dtype_name is None else dtype.itemsize)
    if member.file_size < storage_bytes:
        raise TensorFileError("corrupt", name, f"storage holds {member.file_size} bytes, {storage_bytes} expected")
    available = storage_bytes // dtype.itemsize
    needed = _elements_needed(record)
    if needed > available:
        raise TensorFileError(
            "corrupt",
            name,
            f"storage of {available} items is too short for shape {brief(record.shape)}, "
            f"stride {brief(record.strides)}, offset {record.offset}",
        )
    count = math.prod(record.shape)
    if count > INT64_MAX:
        raise TensorFileError("unsupported", name, f"shape {brief(record.shape)} has more than 2**63 elements")
    if count > max(VIEW_REPEAT * needed, VIEW_FREE):
        raise TensorFileError("unsupported", name, f"view of shape {brief(record.shape)} shows {count} elements of "
                                                   f"{needed} stored (more than {VIEW_REPEAT} times over)")  # fmt: skip
    if needed == 0:
        return TensorData(_empty(record.shape, dtype), record.dtype_name)
    flat = items(member, dtype, record.offset, needed)
    try:
        return TensorData(_view(flat, record), record.dtype_name)
    except ValueError as exc:  # e.g. a zero-stride view too big for numpy
        raise TensorFileError("unsupported", name, f"cannot view shape {brief(record.shape)}: {exc}") from None


class _Unusual(Exception):
    """_InMemoryZip met something it does not handle itself: the file goes through zipfile instead."""


class _Entry(NamedTuple):
    """A central directory entry, with the zipfile.ZipInfo fields _read_archive uses (a tuple: cheap to make)."""

    filename: str
    file_size: int
    compress_size: int
    compress_type: int
    flag_bits: int
    header_offset: int
    crc: int


class _InMemoryZip:
    """A small torch.save archive held in memory, parsed without zipfile (whose Python-level parsing costs more
    than the rest of reading a small tensor). It only accepts the plain layout torch writes: one disk, no
    comment, no extra fields, stored (uncompressed) members, consistent zip64 end records. Anything else raises
    _Unusual before any result, so zipfile sees the same file and decides: both accept exactly the same archives
    here and find the same members, sizes and (checked by CRC) contents."""

    def __init__(self, data: bytes, name: str) -> None:
        self.data = data
        self.name = name
        self.members = self._central_directory()

    def _central_directory(self) -> dict[str, _Entry]:
        data = self.data
        end = len(data) - _ZIP_END.size
        if end < 0:
            raise _Unusual
        magic, disk, cd_disk, disk_entries, entries, cd_size, cd_offset, comment = _ZIP_END.unpack_from(data, end)
        if magic != _ZIP_END_MAGIC or comment or disk or cd_disk or disk_entries != entries:
            raise _Unusual
        cd_end = end
        locator = end - _ZIP64_LOCATOR.size
        if locator >= 0 and data[locator : locator + 4] == _ZIP64_LOCATOR_MAGIC:
            _, z_disk, z_offset, z_disks = _ZIP64_LOCATOR.unpack_from(data, locator)
            if z_disk or z_disks != 1 or z_offset + _ZIP64_END.size != locator:
                raise _Unusual
            z_magic, _, _, _, z_disk, z_cd_disk, z_disk_entries, z_entries, z_size, z_offset_cd = (
                _ZIP64_END.unpack_from(data, z_offset)
            )
            if (z_magic, z_disk, z_cd_disk, z_disk_entries, z_entries, z_size, z_offset_cd) != (
                _ZIP64_END_MAGIC, 0, 0, entries, entries, cd_size, cd_offset
            ):
                raise _Unusual
            cd_end = z_offset
        elif 0xFFFF in (disk_entries, entries) or 0xFFFFFFFF in (cd_size, cd_offset):
            raise _Unusual
        if cd_offset + cd_size != cd_end:  # data before the archive, or a bad directory
            raise _Unusual
        members: dict[str, _Entry] = {}
        pos = cd_offset
        for _ in range(entries):
            if pos + _ZIP_CENTRAL.size > cd_end:
                raise _Unusual
            (magic, _, _, flags, method, _, _, crc, compress_size, file_size, name_length, extra_length,
             comment_length, _, _, _, offset) = _ZIP_CENTRAL.unpack_from(data, pos)  # fmt: skip
            if magic != _ZIP_CENTRAL_MAGIC or extra_length or comment_length:
                raise _Unusual
            start = pos + _ZIP_CENTRAL.size
            try:
                filename = data[start : start + name_length].decode("utf-8" if flags & 0x800 else "cp437")
            except UnicodeDecodeError:
                raise _Unusual from None
            if "\x00" in filename or (os.sep != "/" and os.sep in filename):
                raise _Unusual
            if filename in members:
                raise TensorFileError("corrupt", self.name, f"ambiguous archive: member {brief(filename)} appears "
                                                            "twice")  # fmt: skip
            members[filename] = _Entry(filename, file_size, compress_size, method, flags, offset, crc)
            pos = start + name_length
        if pos != cd_end:
            raise _Unusual
        return members

    def _member_bytes(self, entry: _Entry) -> tuple[int, int]:
        """(start, stop) of a stored member's bytes, checked as zipfile checks them."""
        if entry.compress_type != zipfile.ZIP_STORED or entry.flag_bits & 0x61:  # encrypted or patched
            raise _Unusual
        if entry.compress_size != entry.file_size:
            raise _Unusual
        offset = entry.header_offset
        if offset + _ZIP_LOCAL_HEADER.size > len(self.data):
            raise _Unusual
        header = _ZIP_LOCAL_HEADER.unpack_from(self.data, offset)
        if header[0] != _ZIP_LOCAL_MAGIC:
            raise _Unusual
        name_length, extra_length = header[-2:]
        if header[4] != entry.compress_type:
            raise _Unusual
        name_start = offset + _ZIP_LOCAL_HEADER.size
        start = name_start + name_length + extra_length
        stop = start + entry.file_size
        if stop > len(self.data) or self.data[name_start : name_start + name_length] != entry.filename.encode(
            "utf-8" if entry.flag_bits & 0x800 else "cp437"
        ):
            raise _Unusual
        return start, stop

    def read(self, entry: _Entry, limit: int) -> bytes:
        if entry.file_size > limit:
            detail = f"{entry.filename} is {entry.file_size} bytes (limit {limit})"
            raise TensorFileError("unsupported", self.name, detail)
        start, stop = self._member_bytes(entry)
        member = self.data[start:stop]
        if zlib.crc32(member) != entry.crc:
            raise _Unusual
        return member

    def items(self, entry: _Entry, dtype: np.dtype, start: int, stop: int) -> np.ndarray:
        first, _ = self._member_bytes(entry)
        array = np.frombuffer(self.data, dtype=dtype, count=stop - start, offset=first + start * dtype.itemsize)
        return _readonly(array)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, *, name: str) -> bytes:
    if info.file_size > limit:
        raise TensorFileError("unsupported", name, f"{info.filename} is {info.file_size} bytes (limit {limit})")
    with archive.open(info) as member:
        return member.read(limit + 1)[:limit]


def _unpickle(data: bytes, name: str) -> _TensorRecord:
    try:
        top = _SafeUnpickler(io.BytesIO(data)).load()
    except _PickleRefused as exc:
        raise TensorFileError(exc.kind, name, exc.detail) from None
    except Exception as exc:  # hostile input: any failure of the unpickler is a broken file
        raise TensorFileError("corrupt", name, f"bad data.pkl: {type(exc).__name__}: {exc}") from None
    if not isinstance(top, _TensorRecord):
        raise TensorFileError("unsupported", name, f"data.pkl holds a {type(top).__name__}, not a tensor")
    return top


def _elements_needed(record: _TensorRecord) -> int:
    """Storage items a view needs from its offset on (0 for an empty tensor)."""
    if any(dim == 0 for dim in record.shape):
        return 0
    return record.offset + 1 + sum((dim - 1) * step for dim, step in zip(record.shape, record.strides, strict=True))


def _storage_items(
    archive: zipfile.ZipFile, fp: BinaryIO, info: zipfile.ZipInfo, dtype: np.dtype, start: int, stop: int, *,
    name: str,
) -> np.ndarray:
    """Items [start, stop) of a storage member, memory-mapped when the member is stored uncompressed."""
    count = stop - start
    if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1:
        data_offset = _member_data_offset(fp, info, name)
        try:
            mapped = np.memmap(fp, dtype=dtype, mode="r", offset=data_offset + start * dtype.itemsize, shape=(count,))
            return _readonly(mapped)
        except (ValueError, OSError):
            pass  # no mmap on this file system: read the bytes below
    with archive.open(info) as member:
        skip = start * dtype.itemsize
        while skip:  # ZipExtFile.seek exists but re-reads; skip in bounded chunks
            chunk = member.read(min(skip, 1 << 24))
            if not chunk:
                break
            skip -= len(chunk)
        data = member.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise TensorFileError("corrupt", name, f"storage {info.filename} is truncated")
    return _readonly(np.frombuffer(data, dtype=dtype, count=count))


def _file_span(array: np.ndarray, path: Path | str, fd: int) -> FileSpan | None:
    """Where the bytes of `array` are in the file open as `fd`, when it is a C-contiguous view of a memory map
    this module made (np.memmap, wrapped at once by _readonly: the first memmap on its base chain is the one
    np.memmap made, whose data starts at file offset `.offset`); None otherwise."""
    if array.size == 0 or not array.flags.c_contiguous:
        return None
    base: Any = array
    while isinstance(base, np.ndarray) and type(base) is not np.memmap:
        base = base.base
    if not isinstance(base, np.memmap) or not isinstance(base.offset, int):
        return None
    start = base.offset + (array.ctypes.data - base.ctypes.data)
    if start < base.offset or array.ctypes.data + array.nbytes > base.ctypes.data + base.nbytes:
        return None
    info = os.fstat(fd)
    return FileSpan(str(path), start, info.st_dev, info.st_ino)


def _member_data_offset(fp: BinaryIO, info: zipfile.ZipInfo, name: str) -> int:
    """File offset of an uncompressed member's bytes, from its local header, checked against the file size."""
    fp.seek(info.header_offset)
    header = fp.read(_ZIP_LOCAL_HEADER.size)
    if len(header) != _ZIP_LOCAL_HEADER.size or header[:4] != _ZIP_LOCAL_MAGIC:
        raise TensorFileError("corrupt", name, f"bad local header for {info.filename}")
    fields = _ZIP_LOCAL_HEADER.unpack(header)
    name_length, extra_length = fields[-2:]
    local_name = fp.read(name_length)
    if fields[4] != info.compress_type or local_name != info.orig_filename.encode("utf-8" if info.flag_bits & 0x800
                                                                                   else "cp437"):  # fmt: skip
        raise TensorFileError("corrupt", name, f"ambiguous archive: the local header of {brief(info.filename)} "
                                               "disagrees with the central directory")  # fmt: skip
    data_offset = int(info.header_offset + _ZIP_LOCAL_HEADER.size + name_length + extra_length)
    file_size = os.fstat(fp.fileno()).st_size
    if data_offset + info.file_size > file_size:
        raise TensorFileError("corrupt", name, f"{info.filename} runs past the end of the file")
    return data_offset


def _view(flat: np.ndarray, record: _TensorRecord) -> np.ndarray:
    """The tensor's view on `flat`, whose item 0 is the tensor's storage offset."""
    shape, strides = record.shape, record.strides
    contiguous = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        contiguous[axis] = contiguous[axis + 1] * shape[axis + 1]
    if all(step == want for dim, step, want in zip(shape, strides, contiguous, strict=True) if dim != 1):
        return _readonly(flat[: math.prod(shape)].reshape(shape))
    itemsize = flat.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        flat, shape=shape, strides=tuple(step * itemsize for step in strides), writeable=False
    )
    return _readonly(view)
