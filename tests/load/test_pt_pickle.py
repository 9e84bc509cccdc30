"""Tests for msprobe_compare.load.pt_pickle: data.pkl that would run code, unknown globals and malformed pickles refused."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.tensors import load_tensor, read_pt
from tests.load.pt_files import REAL_PT, os_system_pickles, p_global, p_int, p_str, p_tuple, replace_member, write_pt


def _kind(exc_info: pytest.ExceptionInfo[TensorFileError]) -> str:
    return exc_info.value.kind


# ----------------------------------------------------------------------------------- refusals: pickle


@pytest.mark.parametrize("variant", ["global_reduce", "posix_reduce", "inst", "stack_global", "builtins_eval"])
def test_pickle_calling_os_system_is_refused(tmp_path: Path, variant: str) -> None:
    marker = tmp_path / "pwned"
    pkl = os_system_pickles(marker)[variant]
    path = write_pt(tmp_path / "evil.pt", pkl, {})
    with pytest.raises(TensorFileError) as exc_info:
        load_tensor(tmp_path, "evil.pt")
    assert _kind(exc_info) == "unsafe"
    assert "is not allowed" in exc_info.value.detail
    assert not marker.exists()
    assert path.exists()


def test_real_pt_with_replaced_data_pkl_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = replace_member(REAL_PT, tmp_path / "evil.pt", "/data.pkl", os_system_pickles(marker)["global_reduce"])
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(evil, "evil.pt")
    assert _kind(exc_info) == "unsafe" and not marker.exists()


@pytest.mark.parametrize(
    ("module", "name", "kind"),
    [
        ("numpy.core.multiarray", "_reconstruct", "unsafe"),
        ("torch", "Tensor", "unsafe"),
        ("torch._tensor", "_rebuild_from_type_v2", "unsafe"),
        ("torch.serialization", "load", "unsafe"),
        ("collections", "defaultdict", "unsafe"),
        ("torch", "int_repr", "unsafe"),
        ("torch._utils", "_rebuild_qtensor", "unsupported"),
        ("torch._utils", "_rebuild_sparse_tensor", "unsupported"),
        ("torch", "ComplexFloatStorage", "unsupported"),
        ("torch", "float8_e4m3fn", "unsupported"),
        ("torch", "complex64", "unsupported"),
    ],
)
def test_unknown_globals_are_refused(tmp_path: Path, module: str, name: str, kind: str) -> None:
    pkl = b"\x80\x02" + p_global(module, name) + b")R."
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(write_pt(tmp_path / "t.pt", pkl, {}), "t.pt")
    assert _kind(exc_info) == kind
    if kind == "unsafe":
        assert f"{module}.{name}" in exc_info.value.detail


def test_build_on_a_stand_in_is_refused(tmp_path: Path) -> None:
    # BUILD a state onto the storage-type stand-in, trying to change what it reads as
    pkl = b"\x80\x02" + p_global("torch", "FloatStorage") + b"}" + p_str("dtype_name") + p_str("float64") + b"sb."
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(write_pt(tmp_path / "t.pt", pkl, {}), "t.pt")
    assert _kind(exc_info) == "corrupt"


@pytest.mark.parametrize(
    "pkl",
    [
        pickle.dumps({"a": 1}, protocol=2),
        pickle.dumps([1, 2, 3], protocol=2),
        b"\x80\x02" + p_global("collections", "OrderedDict") + b")R.",
    ],
)
def test_top_object_not_a_tensor_is_unsupported(tmp_path: Path, pkl: bytes) -> None:
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(write_pt(tmp_path / "t.pt", pkl, {}), "t.pt")
    assert _kind(exc_info) == "unsupported"


@pytest.mark.parametrize(
    "pkl",
    [
        b"\x80\x02" + p_global("torch._utils", "_rebuild_tensor_v2"),  # truncated
        b"garbage",
        b"\x80\x02" + p_global("torch._utils", "_rebuild_tensor_v2") + p_tuple(p_int(1)) + b"R.",  # bad arity
        b"\x80\x02" + p_tuple(p_str("storage"), p_str("FloatStorage"), p_str("0"), p_str("cpu"), p_int(1)) + b"Q.",
    ],
)
def test_malformed_pickle_is_corrupt(tmp_path: Path, pkl: bytes) -> None:
    with pytest.raises(TensorFileError) as exc_info:
        read_pt(write_pt(tmp_path / "t.pt", pkl, {}), "t.pt")
    assert _kind(exc_info) == "corrupt"
