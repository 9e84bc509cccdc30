"""Tests for msprobe_compare.load.zipread: the in-memory reader finds what zipfile finds in torch.save archives, and
hands anything it does not handle itself to zipfile (Unusual) rather than reading it differently."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load import zipread

DATA = Path(__file__).resolve().parents[1] / "data"
REAL_PT = sorted((DATA / "pytorch/mlp_lowprec_tensor/npu/step0/rank/dump_tensor_data").glob("*.pt"))


@pytest.mark.parametrize("path", REAL_PT[:6], ids=lambda p: p.name)
def test_in_memory_reader_agrees_with_zipfile_on_real_archives(path: Path) -> None:
    data = path.read_bytes()
    memory = zipread.InMemoryZip(data, path.name)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = zipread.unique_members(archive.infolist(), path.name)
        assert list(memory.members) == list(members)
        for name, info in members.items():
            entry = memory.members[name]
            assert (entry.file_size, entry.compress_size, entry.crc) == (info.file_size, info.compress_size, info.CRC)
            zipread.check_member(entry, path.name)
            limit = info.file_size + 1
            assert memory.read(entry, limit) == zipread.read_member(archive, info, limit, name=path.name)
            items = memory.items(entry, np.dtype(np.uint8), 0, info.file_size)
            assert items.tobytes() == archive.read(info) and not items.flags.writeable


def test_unusual_archives_go_to_zipfile() -> None:
    """A comment, data before the archive or a deflated member: the in-memory reader declines (Unusual)."""
    plain = io.BytesIO()
    with zipfile.ZipFile(plain, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("t/data.pkl", b"x" * 10)
    data = plain.getvalue()
    zipread.InMemoryZip(data, "t.pt")  # accepted
    commented = io.BytesIO()
    with zipfile.ZipFile(commented, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("t/data.pkl", b"x" * 10)
        archive.comment = b"hello"
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("t/data.pkl", b"x" * 100)
    for odd in (commented.getvalue(), b"junk" + data, data[:-1]):
        with pytest.raises(zipread.Unusual):
            zipread.InMemoryZip(odd, "t.pt")
    memory = zipread.InMemoryZip(deflated.getvalue(), "t.pt")
    with pytest.raises(zipread.Unusual):
        memory.read(memory.members["t/data.pkl"], 1 << 10)


def test_member_over_the_limit_and_twice_named_members_are_refused() -> None:
    plain = io.BytesIO()
    with zipfile.ZipFile(plain, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("t/data.pkl", b"x" * 100)
    memory = zipread.InMemoryZip(plain.getvalue(), "t.pt")
    with pytest.raises(TensorFileError, match="limit 10"):
        memory.read(memory.members["t/data.pkl"], 10)
    info = zipfile.ZipInfo("t/data.pkl")
    with pytest.raises(TensorFileError, match="appears twice"):
        zipread.unique_members([info, info], "t.pt")
