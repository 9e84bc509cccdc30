"""Tests for msprobe_compare.load.tensor_files: where a mapped tensor's bytes are in its file (FileSpan)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load import tensor_files
from msprobe_compare.load.tensor_data import TensorData
from msprobe_compare.load.tensors import read_npy, read_pt
from tests.load.pt_files import tensor_pickle, write_pt


def _kind(exc_info: pytest.ExceptionInfo[TensorFileError]) -> str:
    return exc_info.value.kind


# ------------------------------------------------------------------------------------ file spans (pread)


def _span_bytes(tensor: TensorData) -> bytes:
    span = tensor.source
    assert span is not None
    with open(span.path, "rb") as f:
        f.seek(span.offset)
        return f.read(tensor.array.nbytes)


def test_file_span_names_the_mapped_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory-mapped C-contiguous tensor says where its bytes are (its storage offset counted); a view that
    is not contiguous, a file read whole, an empty tensor and a byte-swapped .npy do not."""
    monkeypatch.setattr(tensor_files, "READ_WHOLE_MAX", 0)
    base = np.arange(100, dtype=np.float32) * 1.5
    path = write_pt(tmp_path / "c.pt", tensor_pickle("FloatStorage", 100, 7, (3, 5), (5, 1)), {"0": base.tobytes()})
    tensor = read_pt(path, "c.pt")
    assert tensor.source is not None and tensor.source.path == str(path)
    assert (tensor.source.device, tensor.source.inode) == (os.stat(path).st_dev, os.stat(path).st_ino)
    assert _span_bytes(tensor) == base[7:22].tobytes() == tensor.array.tobytes()
    strided = write_pt(tmp_path / "s.pt", tensor_pickle("FloatStorage", 60, 5, (4, 3), (10, 2)),
                       {"0": base[:60].tobytes()})  # fmt: skip
    assert read_pt(strided, "s.pt").source is None
    empty = write_pt(tmp_path / "e.pt", tensor_pickle("FloatStorage", 0, 0, (0, 4), (4, 1)), {"0": b""})
    assert read_pt(empty, "e.pt").source is None
    npy = tmp_path / "x.npy"
    np.save(npy, base.reshape(4, 25))
    mapped = read_npy(npy, "x.npy")
    assert _span_bytes(mapped) == base.tobytes()
    np.save(npy, base.astype(">f4"))
    assert read_npy(npy, "x.npy").source is None
    np.save(npy, np.asfortranarray(base.reshape(4, 25)))
    assert read_npy(npy, "x.npy").source is None
    monkeypatch.setattr(tensor_files, "READ_WHOLE_MAX", 1 << 30)
    assert read_pt(path, "c.pt").source is None
    np.save(npy, base)
    assert read_npy(npy, "x.npy").source is None
