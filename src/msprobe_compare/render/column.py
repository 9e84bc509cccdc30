"""A column of the result table in compact form (`Column`: numbers as arrays with a kind per cell, repetitive values
as codes into a small table), its cells as a list (`Cells`), rows of a list read in place (`TextRange`,
`TakenRows`) and a table's columns made a range of rows at a time (`ColumnBlocks`)."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable, Sequence

import numpy as np

from msprobe_compare.render.cellkind import KIND_FLOAT, KIND_INT, KIND_PERCENT
from msprobe_compare.render.numtext import float_reprs


class Cells(list):
    """A column's cell values (a plain list to the writers) that also keeps them in numeric form.

    `kind` per cell: 0 a float, 1 an int, 2 a float written as f"{x!r}%", 3 anything else (the cell
    itself tells); `values` holds the number of kinds 0-2 (float64). The HTML report reads these.
    """

    kind: np.ndarray
    values: np.ndarray


class Column:
    """One column of the result table in compact form, in one of three shapes:

    - `objects` (a list) holds the cell values;
    - `codes` and `table`: cell i is table[codes[i]] (a column of few distinct values);
    - `kind`, `values` and `objects` (an object array): `kind[i]` KIND_FLOAT, KIND_INT and KIND_PERCENT
      mean the number `values[i]` (a float, an int, a float written f"{x!r}%"), KIND_OTHER the value
      `objects[i]`. Numbers never become Python objects unless `cells()` asks. The objects may be given as
      `others` instead: (a code per cell, the list of objects the codes index), the object array then made on
      first use (the writers read the codes).
    """

    __slots__ = ("_objects", "kind", "values", "codes", "table", "others")

    def __init__(
        self, objects: Any = None, kind: np.ndarray | None = None, values: np.ndarray | None = None, *,
        codes: np.ndarray | None = None, table: list[Any] | None = None,
        others: tuple[np.ndarray, list[Any]] | None = None,
    ) -> None:  # fmt: skip
        self._objects = objects
        self.kind = kind
        self.values = values
        self.codes = codes
        self.table = table
        self.others = others

    @property
    def objects(self) -> Any:
        """The cell values (an object array in the numeric shape); made from the codes when coded."""
        if self._objects is None and self.codes is not None:
            return object_array(self.table or [])[self.codes].tolist()
        if self._objects is None and self.others is not None:
            codes, objects = self.others
            self._objects = object_array(objects)[codes]
        return self._objects

    def __len__(self) -> int:
        if self.codes is not None:
            return len(self.codes)
        return len(self.kind) if self._objects is None and self.kind is not None else len(self._objects)

    def cells(self) -> list[Any]:
        """The cell values as a list: a `Cells` (numbers as float/int/str objects) when the column has kinds."""
        if self.kind is None:
            objects = self.objects
            return objects if isinstance(objects, list) else list(objects)
        kind, values = self.kind, self.values
        assert values is not None
        out = self.objects.copy()
        sel = kind == KIND_FLOAT
        out[sel] = values[sel].astype(object)
        sel = kind == KIND_INT
        ints = object_array([int(v) for v in values[sel].tolist()])  # exact, also beyond 64 bits
        out[sel] = ints
        sel = kind == KIND_PERCENT
        if sel.any():
            texts = np.empty(int(np.count_nonzero(sel)), dtype=object)
            texts[:] = [t + "%" for t in float_reprs(values[sel])]
            out[sel] = texts
        cells = Cells(out.tolist())
        cells.values, cells.kind = values, kind
        return cells


class TextRange(Sequence):
    """Rows [start, stop) of a list of cell values, without a copy: a block's column of a whole table's texts that a
    native writer reads in place (render.flat), so a forked writer touches none of the objects it shares."""

    __slots__ = ("items", "start", "stop")

    def __init__(self, items: list[Any], start: int, stop: int) -> None:
        self.items, self.start, self.stop = items, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, k: Any) -> Any:
        rows = range(self.start, self.stop)[k]
        if isinstance(rows, int):
            return self.items[rows]
        return self.items[rows.start : rows.stop] if rows.step == 1 else [self.items[i] for i in rows]


class TakenRows(Sequence):
    """Cell k is items[rows[k]], or `missing` where rows[k] is -1, without a copy: a column of the bench side's
    texts in NPU row order (the match) that a native writer reads in place, as a TextRange."""

    __slots__ = ("items", "rows", "missing")

    def __init__(self, items: list[Any], rows: np.ndarray, missing: Any) -> None:
        self.items, self.rows, self.missing = items, np.ascontiguousarray(rows, dtype=np.int64), missing

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return self._take(self.rows[k])
        r = int(self.rows[k])
        return self.missing if r < 0 else self.items[r]

    def __iter__(self) -> Any:
        return iter(self._take(self.rows))

    def _take(self, rows: np.ndarray) -> list[Any]:
        if not len(self.items):
            return [self.missing] * len(rows)
        table = np.empty(len(self.items) + 1, dtype=object)
        table[:-1] = self.items
        table[-1] = self.missing  # index -1 lands here
        return table[rows].tolist()


class ColumnBlocks:
    """A table's columns made on demand a range of rows at a time: `rows(lo, hi)` gives rows [lo, hi) of every
    column (as `Column`s or sequences of cell values), the same cells whatever the range. A writer given one builds
    only the rows it writes, in the process that writes them, and never holds the whole table."""

    __slots__ = ("n", "rows")

    def __init__(self, n: int, rows: Callable[[int, int], list[Any]]) -> None:
        self.n = n
        self.rows = rows

    def __len__(self) -> int:
        return self.n


def object_array(items: list[Any]) -> np.ndarray:
    """A 1-d object array of `items` (which may themselves be sequences)."""
    out = np.empty(len(items), dtype=object)
    for k, item in enumerate(items):
        out[k] = item
    return out
