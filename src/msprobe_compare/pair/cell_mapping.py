"""Cell mapping (`-cm [yaml]`, spec §3.6): MindSpore cell rows -> PyTorch module compare keys.

Every row that belongs to a forward/backward call or to a `parameters_grad` entry gets its name with
the first `Cell` turned into `Module`; other rows get the unmatchable key `N/A`. With a YAML of
`{cell_path.CellClass: module_path.ModuleClass}` the cell part of the name (between the leading
`Cell.` and `.forward.`/`.backward.`/`.parameters_grad.`) is replaced when it is a key.

Decision D13: a key also matches a cell whose path ends with it at a segment boundary
(`fc2.Dense` matches `backbone.fc2.Dense`), as the documentation writes keys; an exact key wins,
then the longest matching tail.
"""

from __future__ import annotations

import re
from pathlib import Path

from msprobe_compare.errors import InputError
from msprobe_compare.load.rows import RowTable
from msprobe_compare.pair.mapping_file import load_yaml, shown
from msprobe_compare.pair.spans import keys_by_entry

UNMATCHABLE = None  # the compare key of a row that cannot be mapped: it matches nothing (pair.exact)

_CALL = re.compile(r"\.(?:forward|backward)\.")
_CELL_END = re.compile(r"\.(?:forward|backward|parameters_grad)\.")


def read_cell_mapping(path: Path) -> dict[str, str]:
    """A `-cm` YAML: a mapping of MindSpore cell paths to PyTorch module paths (empty file = no entries)."""
    doc = load_yaml(path, "cell mapping")
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InputError(
            f"cell mapping must be a YAML mapping of 'cell_path.CellClass' to 'module_path.ModuleClass', "
            f"got {shown(doc)}",
            path,
        )
    for key, value in doc.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InputError(f"cell mapping entry {shown(key)}: {shown(value)} must map a text to a text", path)
    return dict(doc)


class _CellRenamer:
    """Looks up a cell path in the YAML: exact key first, then the longest key that is a tail of it."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping
        self.cache: dict[str, str | None] = {}

    def renamed(self, cell: str) -> str | None:
        if cell in self.cache:
            return self.cache[cell]
        new = None
        if cell in self.mapping:
            new = self.mapping[cell]
        else:
            parts = cell.split(".")
            for start in range(1, len(parts)):  # longest tail first
                tail = ".".join(parts[start:])
                if tail in self.mapping:
                    new = ".".join(parts[:start]) + "." + self.mapping[tail]
                    break
        self.cache[cell] = new
        return new


def cell_mapping_keys(npu: RowTable, mapping: dict[str, str] | None) -> list[str | None]:
    """The compare key of every NPU row under `-cm` (spec §3.6 with decision D13)."""
    renamer = _CellRenamer(mapping) if mapping else None
    return keys_by_entry(npu, lambda entry: _entry_key(entry, renamer), lambda name: _row_key(name, renamer))


def _row_key(name: str, renamer: _CellRenamer | None) -> str | None:
    if not _CALL.search(name) and "parameters_grad" not in name.split("."):
        return UNMATCHABLE
    key = name.replace("Cell", "Module", 1)
    if renamer is not None:
        cell = _CELL_END.split(key.split(".", 1)[-1], 1)[0]
        new = renamer.renamed(cell)
        if new is not None:
            key = key.replace(cell, new, 1)
    return key


def _entry_key(entry: str, renamer: _CellRenamer | None) -> tuple[str, str | None] | None:
    """Key prefix of the rows of `entry` (see `keys_by_entry`); None when the rest of a row name decides
    more than its tail (rare: entries of no forward/backward call)."""
    if not _CALL.search(entry + ".") and "parameters_grad" not in entry.split("."):
        return None
    if "." not in entry:
        return None
    key = entry.replace("Cell", "Module", 1)
    if renamer is not None:
        end = _CELL_END.search(key.split(".", 1)[-1] + ".")
        if end is None:
            return None
        cell = key.split(".", 1)[-1][: end.start()]
        new = renamer.renamed(cell)
        if new is not None:
            key = key.replace(cell, new, 1)
    return key, ("Cell" if "Cell" not in entry else None)  # else the first `Cell` would be in the rest
