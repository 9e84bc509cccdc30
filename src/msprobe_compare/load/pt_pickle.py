"""A torch.save archive's `data.pkl` unpickled without running pickle code: `_SafeUnpickler.find_class` hands out only
inert stand-ins for the few torch globals that describe a tensor, `persistent_load` turns storage records into
references to the archive's `data/<key>` members, and what a rebuild call made is a TensorRecord (a view on a
storage). Anything else is refused as "unsafe", "unsupported" or "corrupt".
"""

from __future__ import annotations

import io
import pickle
import re
from typing import Any

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.tensor_data import BF16
from msprobe_compare.load.tensor_files import MAX_DIMS, bounded, brief
from msprobe_compare.records import dataclass

__all__ = ["NUMPY_DTYPES", "TensorRecord", "unpickle"]

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
NUMPY_DTYPES: dict[str, np.dtype] = {
    name: np.dtype("<u2" if name == BF16 else name).newbyteorder("<") for name in _SUPPORTED_TORCH_DTYPES
}


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
class TensorRecord:
    """What a tensor rebuild call produced: a view on a storage."""

    __setstate__ = _refuse_state

    storage: _StorageRef
    dtype_name: str
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or len(value) > MAX_DIMS or not all(bounded(v) for v in value):
        raise _PickleRefused("corrupt", f"tensor {what} {brief(value)} is not a tuple of at most {MAX_DIMS} "
                                        "non-negative int64 values")  # fmt: skip
    return tuple(value)


def _tensor_record(storage: Any, offset: Any, size: Any, stride: Any, dtype_name: str | None) -> TensorRecord:
    if not isinstance(storage, _StorageRef):
        raise _PickleRefused("corrupt", "tensor storage is not a storage record")
    if dtype_name is None:
        dtype_name = storage.storage_type.dtype_name
        if dtype_name is None:
            raise _PickleRefused("unsupported", "tensor on an untyped storage without a dtype")
    if not bounded(offset):
        raise _PickleRefused("corrupt", f"storage offset {brief(offset)} is not a non-negative int64")
    shape = _int_tuple(size, "size")
    strides = _int_tuple(stride, "stride")
    if len(shape) != len(strides):
        raise _PickleRefused("corrupt", f"size {shape} and stride {strides} differ in length")
    return TensorRecord(storage, dtype_name, offset, shape, strides)


@dataclass(frozen=True, slots=True)
class _Rebuild:
    """Stand-in for one allowed torch._utils rebuild function; calling it only records arguments."""

    __setstate__ = _refuse_state

    which: str

    def __call__(self, *args: Any) -> TensorRecord:
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
        if not args or not isinstance(args[0], TensorRecord):
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
        if not isinstance(key, str) or not bounded(numel):
            raise _PickleRefused("corrupt", f"bad storage record {brief(pid)}")
        return _StorageRef(storage_type, key, numel)


def unpickle(data: bytes, name: str) -> TensorRecord:
    try:
        top = _SafeUnpickler(io.BytesIO(data)).load()
    except _PickleRefused as exc:
        raise TensorFileError(exc.kind, name, exc.detail) from None
    except Exception as exc:  # hostile input: any failure of the unpickler is a broken file
        raise TensorFileError("corrupt", name, f"bad data.pkl: {type(exc).__name__}: {exc}") from None
    if not isinstance(top, TensorRecord):
        raise TensorFileError("unsupported", name, f"data.pkl holds a {type(top).__name__}, not a tensor")
    return top
