"""Hand-made torch.save archives for the tensor reader tests: a minimal pickle protocol 2 writer for data.pkl
files (torch-like and hostile ones) and a zip laid out as torch.save lays it out; the real dump fixtures."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data"
PT_LOWPREC = DATA / "pytorch/mlp_lowprec_tensor/npu/step0/rank"
REAL_PT = PT_LOWPREC / "dump_tensor_data/Functional.linear.0.forward.input.0.pt"


# Minimal pickle protocol 2 writer, enough to craft torch-like (and hostile) data.pkl files without torch.
def p_global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def p_str(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def p_int(value: int) -> bytes:
    return b"\x8a\x08" + struct.pack("<q", value)  # LONG1 with 8 bytes


def p_tuple(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def tensor_pickle(
    storage_type: str,
    numel: int,
    offset: int,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    *,
    key: str = "0",
    rebuild: str = "_rebuild_tensor_v2",
    dtype: str | None = None,
    parameter: bool = False,
) -> bytes:
    """data.pkl as torch writes it for one tensor (v2: typed storage; v3: UntypedStorage plus a dtype)."""
    hooks = p_global("collections", "OrderedDict") + b")R"  # backward hooks: OrderedDict()
    storage_record = p_tuple(p_str("storage"), p_global("torch", storage_type), p_str(key), p_str("cpu"), p_int(numel))
    args = [
        storage_record + b"Q",  # BINPERSID
        p_int(offset),
        p_tuple(*map(p_int, shape)),
        p_tuple(*map(p_int, stride)),
        b"\x89",  # requires_grad False
        hooks,
    ]
    if dtype is not None:
        args.append(p_global("torch", dtype))
    body = p_global("torch._utils", rebuild) + b"(" + b"".join(args) + b"tR"
    if parameter:
        body = p_global("torch._utils", "_rebuild_parameter") + b"(" + body + b"\x88" + hooks + b"tR"
    return b"\x80\x02" + body + b"."


def write_pt(
    path: Path,
    pkl: bytes | None,
    storages: dict[str, bytes] | None = None,
    *,
    byteorder: bytes | None = b"little",
    compression: int = zipfile.ZIP_STORED,
    prefix: str = "archive",
) -> Path:
    """A zip laid out like torch.save's: <prefix>/data.pkl, <prefix>/data/<key>, byteorder, version."""
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        if pkl is not None:
            archive.writestr(f"{prefix}/data.pkl", pkl)
        if byteorder is not None:
            archive.writestr(f"{prefix}/byteorder", byteorder)
        for key, data in (storages or {}).items():
            archive.writestr(f"{prefix}/data/{key}", data)
        archive.writestr(f"{prefix}/version", b"3\n")
    return path


def replace_member(src: Path, dst: Path, suffix: str, data: bytes) -> Path:
    """Copy of the archive `src` with the member ending in `suffix` replaced by `data`."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        for info in old.infolist():
            new.writestr(info, data if info.filename.endswith(suffix) else old.read(info))
    return dst


def base_chain(array: np.ndarray) -> list[type]:
    chain: list[type] = []
    node: Any = array
    while node is not None:
        chain.append(type(node))
        node = getattr(node, "base", None)
    return chain


def is_mapped(array: np.ndarray) -> bool:
    import mmap

    return any(issubclass(kind, (np.memmap, mmap.mmap)) for kind in base_chain(array))


def os_system_pickles(marker: Path) -> dict[str, bytes]:
    """data.pkl variants that would run a shell command touching `marker` if unpickled by pickle itself."""
    command = p_str(f"touch {marker}")
    return {
        "global_reduce": b"\x80\x02" + p_global("os", "system") + p_tuple(command) + b"R.",
        "posix_reduce": b"\x80\x02" + p_global("posix", "system") + p_tuple(command) + b"R.",
        "inst": b"(" + command + b"ios\nsystem\n.",
        "stack_global": b"\x80\x04" + p_str("os") + p_str("system") + b"\x93" + p_tuple(command) + b"R.",
        "builtins_eval": b"\x80\x02"
        + p_global("builtins", "eval")
        + p_tuple(p_str(f"__import__('os').system('touch {marker}')"))
        + b"R.",
    }
