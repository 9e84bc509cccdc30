"""Tests for msprobe_compare.load.pt: hand-made .pt archives, refusals of the archive, optional torch cross-checks."""

from __future__ import annotations

import pickle
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.tensor_data import BF16, TensorData
from msprobe_compare.load.tensors import load_tensor, read_pt
from tests.load.pt_files import REAL_PT, is_mapped, os_system_pickles, replace_member, tensor_pickle, write_pt


def _kind(exc_info: pytest.ExceptionInfo[TensorFileError]) -> str:
    return exc_info.value.kind


# ------------------------------------------------------------------------------ hand-made .pt archives


def test_crafted_non_contiguous_view_with_offset(tmp_path: Path, read_mode: str) -> None:
    base = np.arange(60, dtype=np.float32)
    # a (4, 3) view starting at item 5 with strides (10, 2)
    path = write_pt(tmp_path / "t.pt", tensor_pickle("FloatStorage", 60, 5, (4, 3), (10, 2)), {"0": base.tobytes()})
    tensor = read_pt(path, "t.pt")
    expected = np.lib.stride_tricks.as_strided(base[5:], shape=(4, 3), strides=(40, 8))
    np.testing.assert_array_equal(tensor.array, expected)
    assert tensor.dtype_name == "float32" and not tensor.array.flags.writeable
    assert is_mapped(tensor.array) == (read_mode == "mapped")


@pytest.mark.parametrize(
    ("storage", "dtype_name", "np_dtype"),
    [
        ("BoolStorage", "bool", np.bool_),
        ("ByteStorage", "uint8", np.uint8),
        ("CharStorage", "int8", np.int8),
        ("ShortStorage", "int16", np.int16),
        ("IntStorage", "int32", np.int32),
        ("LongStorage", "int64", np.int64),
        ("HalfStorage", "float16", np.float16),
        ("BFloat16Storage", BF16, np.uint16),
        ("FloatStorage", "float32", np.float32),
        ("DoubleStorage", "float64", np.float64),
    ],
)
def test_crafted_each_storage_dtype(tmp_path: Path, storage: str, dtype_name: str, np_dtype: type) -> None:
    values = (np.arange(12) % 2 if np_dtype is np.bool_ else np.arange(12) - 3).astype(np_dtype)
    path = write_pt(tmp_path / "t.pt", tensor_pickle(storage, 12, 0, (3, 4), (4, 1)), {"0": values.tobytes()})
    tensor = read_pt(path, "t.pt")
    assert tensor.dtype_name == dtype_name
    assert tensor.array.dtype == np.dtype(np_dtype)
    np.testing.assert_array_equal(tensor.array, values.reshape(3, 4))


def test_crafted_bf16_widens_exactly(tmp_path: Path) -> None:
    floats = np.array([1.0, -2.5, 0.15625, np.inf, np.nan, 3.0e38], dtype=np.float32)
    bits = (floats.view(np.uint32) >> 16).astype("<u2")
    path = write_pt(tmp_path / "t.pt", tensor_pickle("BFloat16Storage", 6, 0, (6,), (1,)), {"0": bits.tobytes()})
    tensor = read_pt(path, "t.pt")
    widened = tensor.to_float(tensor.array)
    np.testing.assert_array_equal(widened, (bits.astype(np.uint32) << 16).view(np.float32))


def test_crafted_zero_d_empty_expanded_and_parameter(tmp_path: Path) -> None:
    base = np.arange(10, dtype=np.float64)
    storages = {"0": base.tobytes()}
    scalar = read_pt(write_pt(tmp_path / "s.pt", tensor_pickle("DoubleStorage", 10, 7, (), ()), storages), "s.pt")
    assert scalar.shape == () and scalar.array == 7.0
    empty = read_pt(write_pt(tmp_path / "e.pt", tensor_pickle("DoubleStorage", 0, 0, (0, 3), (3, 1)), {"0": b""}), "e")
    assert empty.shape == (0, 3) and empty.size == 0 and empty.dtype_name == "float64"
    expanded_pkl = tensor_pickle("DoubleStorage", 10, 2, (4, 3), (0, 1))
    expanded = read_pt(write_pt(tmp_path / "x.pt", expanded_pkl, storages), "x")
    np.testing.assert_array_equal(expanded.array, np.tile(base[2:5], (4, 1)))
    param_pkl = tensor_pickle("DoubleStorage", 10, 0, (2, 5), (5, 1), parameter=True)
    param = read_pt(write_pt(tmp_path / "p.pt", param_pkl, storages), "p.pt")
    np.testing.assert_array_equal(param.array, base.reshape(2, 5))


def test_crafted_v3_untyped_storage_uint16(tmp_path: Path) -> None:
    values = np.arange(6, dtype="<u2") * 1000
    pkl = tensor_pickle("UntypedStorage", 12, 0, (2, 3), (1, 2), rebuild="_rebuild_tensor_v3", dtype="uint16")
    tensor = read_pt(write_pt(tmp_path / "t.pt", pkl, {"0": values.tobytes()}), "t.pt")
    assert tensor.dtype_name == "uint16"
    np.testing.assert_array_equal(tensor.array, values.reshape(3, 2).T)


def test_crafted_compressed_member_is_refused(tmp_path: Path) -> None:
    """torch.save never compresses; a deflated member could declare any size (a zip bomb), so it is refused."""
    base = np.arange(100, dtype=np.int32)
    pkl = tensor_pickle("IntStorage", 100, 10, (5, 4), (4, 1))
    path = write_pt(tmp_path / "t.pt", pkl, {"0": base.tobytes()}, compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(TensorFileError, match="compressed member") as info:
        read_pt(path, "t.pt")
    assert info.value.kind == "unsupported"


def test_archive_without_byteorder_is_little_endian(tmp_path: Path) -> None:
    base = np.arange(4, dtype=np.float32)
    pkl = tensor_pickle("FloatStorage", 4, 0, (4,), (1,))
    path = write_pt(tmp_path / "t.pt", pkl, {"0": base.tobytes()}, byteorder=None)
    np.testing.assert_array_equal(read_pt(path, "t.pt").array, base)


# ------------------------------------------------------------------------------- refusals: the archive


def test_truncated_zip_is_corrupt(tmp_path: Path) -> None:
    data = REAL_PT.read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(cut, "cut.pt")
    assert _kind(exc_info) == "corrupt"


@pytest.mark.parametrize(
    ("numel", "offset", "shape", "stride", "payload_items"),
    [
        (12, 0, (3, 4), (4, 1), 11),  # member shorter than the storage's numel
        (12, 0, (3, 5), (5, 1), 12),  # shape needs 15 items
        (12, 10, (3,), (1,), 12),  # offset + shape past the end
        (12, 0, (3, 4), (5, 1), 12),  # strides reach item 14
        (12, 12, (), (), 12),  # 0-d at the end
    ],
)
def test_storage_shorter_than_tensor_is_corrupt(
    tmp_path: Path, numel: int, offset: int, shape: tuple[int, ...], stride: tuple[int, ...], payload_items: int
) -> None:
    payload = np.zeros(payload_items, dtype=np.float32).tobytes()
    path = write_pt(tmp_path / "t.pt", tensor_pickle("FloatStorage", numel, offset, shape, stride), {"0": payload})
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(path, "t.pt")
    assert _kind(exc_info) == "corrupt"


def test_zero_stride_view_too_big_for_numpy_is_unsupported(tmp_path: Path) -> None:
    pkl = tensor_pickle("FloatStorage", 1, 0, (2**40, 2**40), (0, 0))
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(write_pt(tmp_path / "t.pt", pkl, {"0": bytes(4)}), "t.pt")
    assert _kind(exc_info) == "unsupported"


def test_real_pt_with_short_storage_is_corrupt(tmp_path: Path) -> None:
    short = replace_member(REAL_PT, tmp_path / "short.pt", "/data/0", b"\x00" * 8)
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(short, "short.pt")
    assert _kind(exc_info) == "corrupt"


def test_missing_storage_member_is_corrupt(tmp_path: Path) -> None:
    path = write_pt(tmp_path / "t.pt", tensor_pickle("FloatStorage", 4, 0, (4,), (1,), key="7"), {"0": bytes(16)})
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(path, "t.pt")
    assert _kind(exc_info) == "corrupt"


def test_missing_data_pkl_is_corrupt(tmp_path: Path) -> None:
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(write_pt(tmp_path / "t.pt", None, {"0": bytes(16)}), "t.pt")
    assert _kind(exc_info) == "corrupt"


def test_big_endian_archive_is_unsupported(tmp_path: Path) -> None:
    pkl = tensor_pickle("FloatStorage", 4, 0, (4,), (1,))
    path = write_pt(tmp_path / "t.pt", pkl, {"0": bytes(16)}, byteorder=b"big")
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(path, "t.pt")
    assert _kind(exc_info) == "unsupported"


@pytest.mark.parametrize(
    "content",
    [
        pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2),  # legacy torch magic
        b"not a tensor file at all",
    ],
)
def test_legacy_or_foreign_format_is_unsupported(tmp_path: Path, content: bytes) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "legacy.pt"
    path.write_bytes(content)
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(path, "legacy.pt")
    assert _kind(exc_info) == "unsupported"
    evil = tmp_path / "evil_legacy.pt"
    evil.write_bytes(os_system_pickles(marker)["global_reduce"])
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(evil, "evil_legacy.pt")
    assert _kind(exc_info) == "unsupported" and not marker.exists()


def test_empty_file_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "e.pt").write_bytes(b"")
    with pytest.raises(TensorFileError) as exc_info:
        load_tensor(tmp_path, "e.pt")
    assert _kind(exc_info) == "corrupt"


# ---------------------------------------------------------------------------- torch cross-checks


def _torch() -> Any:
    return pytest.importorskip("torch")


def _assert_same(tensor: TensorData, expected: Any) -> None:
    torch = _torch()
    assert tensor.shape == tuple(expected.shape)
    if expected.dtype == torch.bfloat16:
        assert tensor.dtype_name == BF16
        np.testing.assert_array_equal(tensor.to_float(tensor.array), expected.float().numpy())
    else:
        want = expected.numpy()
        assert tensor.dtype_name == want.dtype.name
        np.testing.assert_array_equal(tensor.array, want)


TORCH_DTYPES = [
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
    "uint16", "uint32", "uint64",
]  # fmt: skip


@pytest.mark.parametrize("dtype_name", TORCH_DTYPES)
def test_torch_saved_dtypes(tmp_path: Path, dtype_name: str) -> None:
    torch = _torch()
    dtype = getattr(torch, dtype_name)
    source = torch.arange(-20, 40).reshape(3, 4, 5)
    if dtype_name == "bool":
        tensor = source % 3 == 0
    elif dtype_name.startswith("uint"):
        tensor = (source + 20).to(dtype)
    elif dtype.is_floating_point:
        tensor = (source.double() * 0.37).to(dtype)
    else:
        tensor = source.to(dtype)
    views = {
        "full": tensor,
        "transposed": tensor.transpose(0, 2),
        "sliced": tensor[1:, ::2, 1:4],
        "offset_row": tensor[2, 1],
        "zero_d": tensor[1, 2, 3],
    }
    for label, view in views.items():
        torch.save(view, tmp_path / f"{label}.pt")
        loaded = load_tensor(tmp_path, f"{label}.pt")
        _assert_same(loaded, view)


def test_torch_saved_special_shapes_and_parameter(tmp_path: Path) -> None:
    torch = _torch()
    generator = torch.Generator().manual_seed(0)
    cases = {
        "scalar": torch.tensor(3.5),
        "empty": torch.empty(0, 3),
        "empty_slice": torch.arange(12.0).reshape(3, 4)[:, 2:2],
        "expanded": torch.arange(3.0).expand(4, 3),
        "channels_last": torch.randn(2, 3, 4, 5, generator=generator).to(memory_format=torch.channels_last),
        "parameter": torch.nn.Parameter(torch.randn(3, 4, generator=generator)),
        "grad_tensor": torch.randn(5, generator=generator, requires_grad=True),
    }
    for label, value in cases.items():
        torch.save(value, tmp_path / f"{label}.pt")
        _assert_same(load_tensor(tmp_path, f"{label}.pt"), value.detach())


@pytest.mark.parametrize("label", ["complex", "float8", "quantized", "sparse"])
def test_torch_saved_unsupported_kinds(tmp_path: Path, label: str) -> None:
    torch = _torch()
    if label == "complex":
        value = torch.ones(3, dtype=torch.complex64)
    elif label == "float8":
        value = torch.ones(3).to(torch.float8_e4m3fn)
    elif label == "quantized":
        with warnings.catch_warnings():  # quantized creation functions are deprecated
            warnings.simplefilter("ignore")
            value = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8)
    else:
        value = torch.eye(3).to_sparse()
    torch.save(value, tmp_path / "u.pt")
    with pytest.raises(TensorFileError) as exc_info:
        load_tensor(tmp_path, "u.pt")
    assert _kind(exc_info) == "unsupported"


def test_torch_saved_legacy_format_and_containers(tmp_path: Path) -> None:
    torch = _torch()
    torch.save(torch.ones(3), tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    torch.save({"w": torch.ones(3)}, tmp_path / "dict.pt")
    for name in ("legacy.pt", "dict.pt"):
        with pytest.raises(TensorFileError) as exc_info:
            load_tensor(tmp_path, name)
        assert _kind(exc_info) == "unsupported", name


def test_torch_big_tensor_loads_memory_mapped(tmp_path: Path) -> None:
    torch = _torch()
    value = torch.arange(25 * 1024 * 1024, dtype=torch.float32).reshape(-1, 1024)  # 100 MiB
    torch.save(value, tmp_path / "big.pt")
    last = value[-1, -1].item()
    del value
    start = time.perf_counter()
    tensor = load_tensor(tmp_path, "big.pt")
    elapsed = time.perf_counter() - start
    assert tensor.shape == (25 * 1024, 1024)
    assert is_mapped(tensor.array)
    assert tensor.array[-1, -1] == last
    print(f"\nload of a 100 MiB float32 .pt: {elapsed * 1000:.2f} ms", file=sys.stderr)
    assert elapsed < 0.5
