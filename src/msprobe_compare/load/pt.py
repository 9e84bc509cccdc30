"""Read a tensor saved by torch.save (a `.pt` zip archive) into TensorData, without torch and without running
pickle code: `data.pkl` becomes a TensorRecord (pt_pickle.py), the storage member's items are viewed in place
(zipread.py: small files parsed in memory, bigger ones through zipfile with the storage memory-mapped). Every array
returned is read-only.
"""

from __future__ import annotations

import functools
import math
import os
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load import tensor_files
from msprobe_compare.load.pt_pickle import NUMPY_DTYPES, TensorRecord, unpickle
from msprobe_compare.load.tensor_data import TensorData
from msprobe_compare.load.tensor_files import INT64_MAX, brief, empty_array, file_span, open_regular, readonly
from msprobe_compare.load.zipread import (
    ZIP_LOCAL_MAGIC,
    InMemoryZip,
    Unusual,
    check_member,
    read_member,
    storage_items,
    unique_members,
)

__all__ = ["read_pt"]

_MAX_PICKLE_BYTES = 16 << 20  # a tensor's data.pkl is a few hundred bytes


# A view may show its stored items repeated (zero strides, overlapping windows) up to this many times over, or
# VIEW_FREE items whatever the storage; beyond that the work would be out of proportion to the stored data.
VIEW_REPEAT = 4
VIEW_FREE = 1 << 20


def read_pt(path: Path | str, name: str) -> TensorData:
    """A tensor (or Parameter) saved by torch.save in the zip format, read without torch.

    Files up to READ_WHOLE_MAX bytes are read with one read() and parsed in memory (`InMemoryZip`), the array
    a read-only view on those bytes; anything unusual there, and every bigger file, goes through zipfile, with
    storage members memory-mapped."""
    with open_regular(path, name) as fp:
        head = fp.read(4)
        if len(head) < 4:
            raise TensorFileError("corrupt", name, "file is empty or truncated")
        if head != ZIP_LOCAL_MAGIC:
            if head[:1] == b"\x80":
                raise TensorFileError("unsupported", name, "legacy (non-zip) torch.save format")
            raise TensorFileError("unsupported", name, "not a torch.save zip archive")
        fp.seek(0)
        if os.fstat(fp.fileno()).st_size <= tensor_files.READ_WHOLE_MAX:
            try:
                zipped = InMemoryZip(fp.read(), name)
                return _read_archive(zipped.members, zipped.read, zipped.items, name)
            except Unusual:
                fp.seek(0)  # let zipfile judge it (and word the error, if any)
        try:
            with zipfile.ZipFile(fp) as archive:
                tensor = _read_archive(
                    unique_members(archive.infolist(), name),
                    functools.partial(read_member, archive, name=name),
                    functools.partial(storage_items, archive, fp, name=name),
                    name,
                )
            source = file_span(tensor.array, path, fp.fileno())
            return tensor if source is None else TensorData(tensor.array, tensor.dtype_name, source)
        except TensorFileError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, struct.error, OSError) as exc:
            raise TensorFileError("corrupt", name, f"bad zip archive: {exc}") from None


def _read_archive(
    members: dict[str, Any],
    read: Callable[[Any, int], bytes],
    items: Callable[[Any, np.dtype, int, int], np.ndarray],
    name: str,
) -> TensorData:
    """The tensor of an archive: `members` maps names to entries (zipfile.ZipInfo or zipread's Entry), `read(entry,
    limit)` returns a small member's bytes, `items(entry, dtype, start, stop)` a storage's items."""
    pickles = [m for m in members if m.endswith("/data.pkl") and m.count("/") == 1]
    if len(pickles) != 1:
        problem = "no data.pkl" if not pickles else "several data.pkl"
        raise TensorFileError("corrupt", name, f"{problem} in the archive")
    prefix = pickles[0][: -len("data.pkl")]
    for entry in members.values():
        check_member(entry, name)

    byteorder = members.get(prefix + "byteorder")
    if byteorder is not None:
        order = read(byteorder, 16).strip()
        if order != b"little":
            raise TensorFileError("unsupported", name, f"byte order {order.decode('ascii', 'replace')!r}")

    record = unpickle(read(members[pickles[0]], _MAX_PICKLE_BYTES), name)
    dtype = NUMPY_DTYPES.get(record.dtype_name)
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
        return TensorData(empty_array(record.shape, dtype), record.dtype_name)
    flat = items(member, dtype, record.offset, needed)
    try:
        return TensorData(_view(flat, record), record.dtype_name)
    except ValueError as exc:  # e.g. a zero-stride view too big for numpy
        raise TensorFileError("unsupported", name, f"cannot view shape {brief(record.shape)}: {exc}") from None


def _elements_needed(record: TensorRecord) -> int:
    """Storage items a view needs from its offset on (0 for an empty tensor)."""
    if any(dim == 0 for dim in record.shape):
        return 0
    return record.offset + 1 + sum((dim - 1) * step for dim, step in zip(record.shape, record.strides, strict=True))


def _view(flat: np.ndarray, record: TensorRecord) -> np.ndarray:
    """The tensor's view on `flat`, whose item 0 is the tensor's storage offset."""
    shape, strides = record.shape, record.strides
    contiguous = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        contiguous[axis] = contiguous[axis + 1] * shape[axis + 1]
    if all(step == want for dim, step, want in zip(shape, strides, contiguous, strict=True) if dim != 1):
        return readonly(flat[: math.prod(shape)].reshape(shape))
    itemsize = flat.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        flat, shape=shape, strides=tuple(step * itemsize for step in strides), writeable=False
    )
    return readonly(view)
