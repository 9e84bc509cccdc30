"""measure.tensor_io: chunks of any layout, the read-ahead of memory-mapped tensors, the two files of a pair opened for
the kernel's pread loop (only when still the files the tensors were read from)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from msprobe_compare.load import tensor_files, tensors
from msprobe_compare.load.tensor_data import BF16, TensorData
from msprobe_compare.measure import tensor_io
from msprobe_compare.measure.tensor_compare import compare_tensors


@pytest.mark.parametrize("cached", [True, False])
def test_read_ahead_on_large_memmaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool) -> None:
    """Memory-mapped tensors above one read-ahead window: windows found cached are skipped, the others are
    requested with madvise; the metrics are those of the in-memory arrays either way."""
    rng = np.random.default_rng(5)
    n = rng.standard_normal(3 * (tensor_io.ReadAhead.WINDOW // 4) + 1000).astype(np.float32)
    b = n * (1 + np.float32(2e-3) * rng.standard_normal(n.size).astype(np.float32))
    np.save(tmp_path / "n.npy", n)
    np.save(tmp_path / "b.npy", b)
    checked: list[bool] = []

    def page_cached(address: int, vector: bytearray) -> bool:
        checked.append(cached)
        return cached

    monkeypatch.setattr(tensor_io, "page_cached", page_cached)
    mapped = [TensorData(np.load(tmp_path / f, mmap_mode="r"), "float32") for f in ("n.npy", "b.npy")]
    ours = compare_tensors(*mapped)
    assert ours == compare_tensors(TensorData(n, "float32"), TensorData(b, "float32"))
    if tensor_io.mincore() is not None:
        assert len(checked) >= 2 * 3  # every window of both sides


def test_flat_range_and_chunks_of_any_layout() -> None:
    a = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    for view in (a, a.transpose(2, 0, 1), a[:, ::2, 1:], np.asfortranarray(a)):
        flat = np.ascontiguousarray(view).reshape(-1)
        for start, stop in ((0, flat.size), (1, 7), (4, 5), (3, flat.size - 2)):
            np.testing.assert_array_equal(tensor_io.flat_range(view, start, stop), flat[start:stop])
    bits = (np.array([1.5, -2.0, 0.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(tensor_io.chunk_of(TensorData(bits, BF16), bits, 0, 3), [1.5, -2.0, 0.0])
    reader = tensor_io.ChunkReader(TensorData(bits, BF16), bits, 2, "test bits")
    np.testing.assert_array_equal(reader.chunk(1, 3), [-2.0, 0.0])


def test_file_pair_opens_only_the_files_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_files, "READ_WHOLE_MAX", 0)
    paths = [tmp_path / "n.npy", tmp_path / "b.npy"]
    for path in paths:
        np.save(path, np.arange(1000, dtype=np.float32))
    spans = [tensors.read_npy(p, p.name).source for p in paths]
    assert spans[0] is not None and spans[1] is not None
    with tensor_io.file_pair(spans[0], spans[1]) as opened:
        assert opened is not None
        n_fd, b_fd, n_buf, b_buf = opened
        assert os.pread(n_fd, 4, spans[0].offset) == np.float32(0).tobytes()
        assert n_buf.nbytes == b_buf.nbytes == tensor_io.FILE_BUFFER_BYTES
    with pytest.raises(OSError):
        os.fstat(n_fd)  # closed on leaving
    replaced = paths[1].with_suffix(".new")
    shutil.copyfile(paths[1], replaced)
    os.replace(replaced, paths[1])  # another inode: not the file the tensor was read from
    with tensor_io.file_pair(spans[0], spans[1]) as opened:
        assert opened is None
