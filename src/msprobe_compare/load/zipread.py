"""The zip archives torch.save writes, read for pt.py: a small file parsed in memory without zipfile (InMemoryZip),
anything it does not handle raising Unusual so that zipfile judges the same bytes; for zipfile's archives, the members
by name (a name held twice refused), a small member's bytes and a storage member's items, memory-mapped when stored.
Only what torch.save writes is accepted: one disk, stored (uncompressed) members, not encrypted.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from msprobe_compare.errors import TensorFileError
from msprobe_compare.load.tensor_files import brief, readonly

__all__ = ["ZIP_LOCAL_MAGIC", "Entry", "InMemoryZip", "Unusual", "check_member", "read_member", "storage_items",
           "unique_members"]  # fmt: skip

_ZIP_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zip local file header, 30 bytes
ZIP_LOCAL_MAGIC = b"PK\x03\x04"
_ZIP_CENTRAL = struct.Struct("<4s6H3L5H2L")  # central directory file header, 46 bytes
_ZIP_CENTRAL_MAGIC = b"PK\x01\x02"
_ZIP_END = struct.Struct("<4s4H2LH")  # end of central directory record, 22 bytes
_ZIP_END_MAGIC = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator, 20 bytes
_ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory record, 56 bytes
_ZIP64_END_MAGIC = b"PK\x06\x06"


def unique_members(infos: list[Any], name: str) -> dict[str, Any]:
    """Members by name; a name held twice is refused: readers disagree on which copy counts (torch takes the
    first, zipfile the last)."""
    members: dict[str, Any] = {}
    for info in infos:
        if info.filename in members:
            raise TensorFileError("corrupt", name, f"ambiguous archive: member {brief(info.filename)} appears twice")
        members[info.filename] = info
    return members


def check_member(entry: Any, name: str) -> None:
    """Only what torch.save writes: members stored uncompressed, not encrypted."""
    if entry.flag_bits & 0x1:
        raise TensorFileError("unsupported", name, f"encrypted member {brief(entry.filename)}")
    if entry.compress_type != zipfile.ZIP_STORED:
        raise TensorFileError("unsupported", name, f"compressed member {brief(entry.filename)} (method "
                                                   f"{entry.compress_type}; torch.save never compresses)")  # fmt: skip
    if entry.compress_size != entry.file_size:
        raise TensorFileError("corrupt", name, f"ambiguous archive: stored member {brief(entry.filename)} has "
                                               "two different sizes")  # fmt: skip


class Unusual(Exception):
    """InMemoryZip met something it does not handle itself: the file goes through zipfile instead."""


class Entry(NamedTuple):
    """A central directory entry, with the zipfile.ZipInfo fields pt._read_archive uses (a tuple: cheap to make)."""

    filename: str
    file_size: int
    compress_size: int
    compress_type: int
    flag_bits: int
    header_offset: int
    crc: int


class InMemoryZip:
    """A small torch.save archive held in memory, parsed without zipfile (whose Python-level parsing costs more
    than the rest of reading a small tensor). It only accepts the plain layout torch writes: one disk, no
    comment, no extra fields, stored (uncompressed) members, consistent zip64 end records. Anything else raises
    Unusual before any result, so zipfile sees the same file and decides: both accept exactly the same archives
    here and find the same members, sizes and (checked by CRC) contents."""

    def __init__(self, data: bytes, name: str) -> None:
        self.data = data
        self.name = name
        self.members = self._central_directory()

    def _central_directory(self) -> dict[str, Entry]:
        data = self.data
        end = len(data) - _ZIP_END.size
        if end < 0:
            raise Unusual
        magic, disk, cd_disk, disk_entries, entries, cd_size, cd_offset, comment = _ZIP_END.unpack_from(data, end)
        if magic != _ZIP_END_MAGIC or comment or disk or cd_disk or disk_entries != entries:
            raise Unusual
        cd_end = end
        locator = end - _ZIP64_LOCATOR.size
        if locator >= 0 and data[locator : locator + 4] == _ZIP64_LOCATOR_MAGIC:
            _, z_disk, z_offset, z_disks = _ZIP64_LOCATOR.unpack_from(data, locator)
            if z_disk or z_disks != 1 or z_offset + _ZIP64_END.size != locator:
                raise Unusual
            z_magic, _, _, _, z_disk, z_cd_disk, z_disk_entries, z_entries, z_size, z_offset_cd = (
                _ZIP64_END.unpack_from(data, z_offset)
            )
            if (z_magic, z_disk, z_cd_disk, z_disk_entries, z_entries, z_size, z_offset_cd) != (
                _ZIP64_END_MAGIC,
                0,
                0,
                entries,
                entries,
                cd_size,
                cd_offset,
            ):
                raise Unusual
            cd_end = z_offset
        elif 0xFFFF in (disk_entries, entries) or 0xFFFFFFFF in (cd_size, cd_offset):
            raise Unusual
        if cd_offset + cd_size != cd_end:  # data before the archive, or a bad directory
            raise Unusual
        members: dict[str, Entry] = {}
        pos = cd_offset
        for _ in range(entries):
            if pos + _ZIP_CENTRAL.size > cd_end:
                raise Unusual
            (magic, _, _, flags, method, _, _, crc, compress_size, file_size, name_length, extra_length,
             comment_length, _, _, _, offset) = _ZIP_CENTRAL.unpack_from(data, pos)  # fmt: skip
            if magic != _ZIP_CENTRAL_MAGIC or extra_length or comment_length:
                raise Unusual
            start = pos + _ZIP_CENTRAL.size
            try:
                filename = data[start : start + name_length].decode("utf-8" if flags & 0x800 else "cp437")
            except UnicodeDecodeError:
                raise Unusual from None
            if "\x00" in filename or (os.sep != "/" and os.sep in filename):
                raise Unusual
            if filename in members:
                raise TensorFileError("corrupt", self.name, f"ambiguous archive: member {brief(filename)} appears "
                                                            "twice")  # fmt: skip
            members[filename] = Entry(filename, file_size, compress_size, method, flags, offset, crc)
            pos = start + name_length
        if pos != cd_end:
            raise Unusual
        return members

    def _member_bytes(self, entry: Entry) -> tuple[int, int]:
        """(start, stop) of a stored member's bytes, checked as zipfile checks them."""
        if entry.compress_type != zipfile.ZIP_STORED or entry.flag_bits & 0x61:  # encrypted or patched
            raise Unusual
        if entry.compress_size != entry.file_size:
            raise Unusual
        offset = entry.header_offset
        if offset + _ZIP_LOCAL_HEADER.size > len(self.data):
            raise Unusual
        header = _ZIP_LOCAL_HEADER.unpack_from(self.data, offset)
        if header[0] != ZIP_LOCAL_MAGIC:
            raise Unusual
        name_length, extra_length = header[-2:]
        if header[4] != entry.compress_type:
            raise Unusual
        name_start = offset + _ZIP_LOCAL_HEADER.size
        start = name_start + name_length + extra_length
        stop = start + entry.file_size
        if stop > len(self.data) or self.data[name_start : name_start + name_length] != entry.filename.encode(
            "utf-8" if entry.flag_bits & 0x800 else "cp437"
        ):
            raise Unusual
        return start, stop

    def read(self, entry: Entry, limit: int) -> bytes:
        if entry.file_size > limit:
            detail = f"{entry.filename} is {entry.file_size} bytes (limit {limit})"
            raise TensorFileError("unsupported", self.name, detail)
        start, stop = self._member_bytes(entry)
        member = self.data[start:stop]
        if zlib.crc32(member) != entry.crc:
            raise Unusual
        return member

    def items(self, entry: Entry, dtype: np.dtype, start: int, stop: int) -> np.ndarray:
        first, _ = self._member_bytes(entry)
        array = np.frombuffer(self.data, dtype=dtype, count=stop - start, offset=first + start * dtype.itemsize)
        return readonly(array)


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, *, name: str) -> bytes:
    if info.file_size > limit:
        raise TensorFileError("unsupported", name, f"{info.filename} is {info.file_size} bytes (limit {limit})")
    with archive.open(info) as member:
        return member.read(limit + 1)[:limit]


def storage_items(
    archive: zipfile.ZipFile,
    fp: BinaryIO,
    info: zipfile.ZipInfo,
    dtype: np.dtype,
    start: int,
    stop: int,
    *,
    name: str,
) -> np.ndarray:
    """Items [start, stop) of a storage member, memory-mapped when the member is stored uncompressed."""
    count = stop - start
    if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1:
        data_offset = _member_data_offset(fp, info, name)
        try:
            mapped = np.memmap(fp, dtype=dtype, mode="r", offset=data_offset + start * dtype.itemsize, shape=(count,))
            return readonly(mapped)
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
    return readonly(np.frombuffer(data, dtype=dtype, count=count))


def _member_data_offset(fp: BinaryIO, info: zipfile.ZipInfo, name: str) -> int:
    """File offset of an uncompressed member's bytes, from its local header, checked against the file size."""
    fp.seek(info.header_offset)
    header = fp.read(_ZIP_LOCAL_HEADER.size)
    if len(header) != _ZIP_LOCAL_HEADER.size or header[:4] != ZIP_LOCAL_MAGIC:
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
