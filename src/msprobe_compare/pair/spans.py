"""Rows grouped by entry, so that name rewriting can be worked out once per entry."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from msprobe_compare.load.rows import RowTable


def entry_spans(table: RowTable) -> Iterator[tuple[int, int, int]]:
    """(entry number, first row, end row) of each run of rows of one entry, in row order."""
    index = table.entry_index
    if len(index) == 0:
        return
    starts = np.concatenate(([0], np.flatnonzero(np.diff(index)) + 1))
    ends = np.concatenate((starts[1:], [len(index)]))
    yield from zip(index[starts].tolist(), starts.tolist(), ends.tolist())


def keys_by_entry(
    table: RowTable,
    entry_key: Callable[[str], tuple[str, str | None] | None],
    row_key: Callable[[str], str | None],
) -> list[str | None]:
    """One key per row, worked out once per entry where possible.

    `entry_key(entry)` gives `(prefix, guard)`: a row named `{entry}{rest}` (rest starting with a dot) has
    the key `prefix + rest` unless its name contains `guard`; it must agree with `row_key(name)`. Other
    rows, and entries for which it returns None, go through `row_key`.
    """
    keys: list[str | None] = []
    cache: dict[int, tuple[str, str | None] | None] = {}
    names = table.names
    for e, start, end in entry_spans(table):
        if e not in cache:
            cache[e] = entry_key(table.entries[e])
        how = cache[e]
        rows = names[start:end]
        if how is None:
            keys.extend([row_key(name) for name in rows])
            continue
        prefix, guard = how
        dotted = table.entries[e] + "."
        cut = len(dotted) - 1
        if guard is None:
            keys.extend([prefix + name[cut:] if name.startswith(dotted) else row_key(name) for name in rows])
        else:
            keys.extend([prefix + name[cut:] if guard not in name and name.startswith(dotted) else row_key(name)
                         for name in rows])  # fmt: skip
    return keys
