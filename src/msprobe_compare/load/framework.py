"""The framework of a dump: its `framework` key, else the tensor `type` strings in the file, as the reference does.

Older dumpers (before 2025) wrote no `framework` key; MSAdapter dumps say `"framework": "mindtorch"` and hold
`mindspore.Tensor` leaves. For the cross-framework rules (dtype categories, mappings) both count as MindSpore.
"""

from __future__ import annotations

from pathlib import Path

from msprobe_compare.load.layout import first_dump, resolve_input
from msprobe_compare.load.stream import DumpHeader, open_dump
from msprobe_compare.runtime import lazy_regex  # compiled when first used (start-up speed)

FRAMEWORK_ALIASES = {"pytorch": "pytorch", "mindspore": "mindspore", "mindtorch": "mindspore"}
_TYPE = lazy_regex(rb'"type":\s*"(mindspore|torch)')
CHUNK = 1 << 20
SCAN_LIMIT = 256 << 20  # bytes searched for a tensor type before giving up


def dump_framework(header: DumpHeader) -> str | None:
    """'pytorch' or 'mindspore' (MSAdapter's 'mindtorch' counts as MindSpore); None when neither the key nor the
    file's tensor types tell."""
    if header.framework in FRAMEWORK_ALIASES:
        return FRAMEWORK_ALIASES[header.framework]
    return framework_from_types(header.path)


def framework_from_types(path: Path) -> str | None:
    """The first tensor type in the file: `"type": "mindspore...` -> mindspore, `"type": "torch...` -> pytorch."""
    try:
        with open(path, "rb") as f:
            carry = b""
            read = 0
            while read < SCAN_LIMIT:
                chunk = f.read(CHUNK)
                if not chunk:
                    return None
                read += len(chunk)
                text = carry + chunk
                m = _TYPE.search(text)
                if m:
                    return "mindspore" if m.group(1) == b"mindspore" else "pytorch"
                carry = text[-64:]
    except OSError:
        return None
    return None


def framework_of(path: Path) -> str | None:
    """The framework of the NPU dump at `path`: a dump.json, a rank folder, or a step folder / mix dump root (its
    first rank); None when it cannot be told."""
    dump: Path | None = resolve_input(path)
    if dump is not None and dump.is_dir():
        dump = first_dump(dump)
    if dump is None or not dump.is_file() or dump.is_symlink():
        return None
    return dump_framework(open_dump(dump)[0])
