"""Flatten dump.json entries into a columnar row table (spec §3.1).

One row per leaf (tensor, scalar argument, or null). Names are parsed once here; later stages
work on the columns: numeric statistics stay numeric, with a small kind code per cell.
"""

from __future__ import annotations

import functools
import itertools
import operator
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import field
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
from orjson import JSONEncodeError, dumps

from msprobe_compare import native
from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import body_has_md5
from msprobe_compare.load.names import PHASES, EntryName, parse_entries, slot_key
from msprobe_compare.records import dataclass

MAX_DEPTH = 400
STAT_KEYS = ("Max", "Min", "Mean", "Norm")


class State(IntEnum):
    INPUT = 0
    PARAMETERS = 1
    OUTPUT = 2
    PARAMETERS_GRAD = 3
    DEBUG = 4


class StatKind(IntEnum):
    """What a statistic cell holds. NUMBER/INT/NAN are numeric; NONE and RAW are not."""

    NUMBER = 0  # float (finite or +-inf) in the value array
    INT = 1  # integer in the value array
    NAN = 2  # NaN statistic (rendered "Nan")
    NONE = 3  # missing / null (rendered "None")
    RAW = 4  # non-numeric raw value (bool, str, ...), kept in RowTable.raw


# fields of a forward/backward entry, in row order: inputs, parameters, outputs (spec §3.1 step 4)
_FIELDS = (
    ("input_args", ".input", State.INPUT),
    ("input_kwargs", ".input", State.INPUT),
    ("input", ".input", State.INPUT),
    ("parameters", ".parameters", State.PARAMETERS),
    ("output", ".output", State.OUTPUT),
)

RG_MISSING, RG_FALSE, RG_TRUE = -1, 0, 1

_C_ROWWALK: Any = native.built("_rowwalk")  # load's C module
_C_SHARED: Any = native.built("_sharednames")  # the shared layer


@functools.cache
def check_walker_codes(module: Any) -> None:
    """The row codes _rowwalk.c writes (K_*, S_*, RG_*) must be StatKind's, State's and RG_*'s: checked once."""
    want = {f"K_{k.name}": int(k) for k in StatKind}
    want |= {f"S_{s.name}": int(s) for s in State if s is not State.DEBUG}
    want |= {"RG_MISSING": RG_MISSING, "RG_FALSE": RG_FALSE, "RG_TRUE": RG_TRUE}
    got = {name: getattr(module, name, None) for name in want}
    if got != want:
        raise ImportError(f"_rowwalk: row codes {got} differ from load/rows.py's {want}")


_NUMBER, _INT, _NAN, _NONE, _RAW = (int(k) for k in StatKind)  # plain ints: IntEnum access is slow in hot loops
_ALL_NUMBERS = (_NUMBER,) * 4
_ALL_NONE = (_NONE,) * 4
_ZEROS = (0.0,) * 4
INTERN_LIMIT = 1 << 16  # distinct dtype/shape strings shared through the builder's cache


NO_DATA_FILE = "-1"  # a row's data_name when no file holds its tensor (as the dumper and the reference write it)


def names_a_file(data_name: str) -> bool:
    """Whether a row's data_name names a tensor file (not NO_DATA_FILE, nor the "N/A" of no counterpart)."""
    return data_name not in (NO_DATA_FILE, "N/A")


@dataclass
class RowTable:
    """Columnar rows of one dump. Row i belongs to entry `entry_index[i]`."""

    entries: list[str]
    names: list[str]
    entry_index: np.ndarray  # int32
    state: np.ndarray  # int8 (State)
    dtype: list[str]
    shape: list[str]
    stats: np.ndarray  # float64 (n, 4): Max, Min, Mean, Norm
    stat_kind: np.ndarray  # int8 (n, 4) StatKind
    raw: RawCells  # (row, stat column) -> raw value for StatKind.RAW
    requires_grad: np.ndarray  # int8: -1 missing, 0 False, 1 True
    md5: list[str | None]
    data_name: list[str]  # "-1" when the leaf has no data file
    stacks: dict[str, list[str]] = field(default_factory=dict)
    has_md5: bool = False  # some entry has an md5 field where the reference looks (spec §2.7)

    def __len__(self) -> int:
        return len(self.names)

    @functools.cached_property
    def entry_bounds(self) -> np.ndarray:
        """Rows of entry e are [bounds[e], bounds[e + 1]) (rows are in entry order); computed once per table: the
        running count of rows per entry (what a search of each entry in the sorted entry_index gives, in one pass)."""
        n = len(self.entries)
        counts = np.bincount(self.entry_index, minlength=n) if len(self.entry_index) else np.zeros(n, np.int64)
        bounds = np.zeros(n + 1, dtype=np.intp)
        np.cumsum(counts[:n], out=bounds[1:])
        return bounds

    @functools.cached_property
    def phase_codes(self) -> np.ndarray:
        """The call direction of each entry as an index into PHASES (`phase_of`), parsed once per table."""
        return phase_codes(self.entries)

    @functools.cached_property
    def entry_names(self) -> list[EntryName]:
        """Each entry's name in fields (load/names.py), parsed on first use, once per table."""
        return parse_entries(self.entries)

    @functools.cached_property
    def slot_keys(self) -> list[str]:
        """Each row's slot in its entry (`input.0`, `output.1`, `parameters.weight`; load/names.py `slot_key`),
        computed on first use, once per table."""
        return list(map(slot_key, self.names, map(self.entries.__getitem__, self.entry_index.tolist())))

    @functools.cached_property
    def phases(self) -> list[str]:
        """The call direction of each entry (`phase_of`), parsed once per table."""
        return _PHASE_NAMES[self.phase_codes].tolist()

    @functools.cached_property
    def dtype_codes(self) -> tuple[list[str], np.ndarray]:
        """(the distinct dtype texts, each row's index into them): one pass over the dtype column per table."""
        return text_codes(self.dtype)

    def dtype_mask(self, predicate: Callable[[str], bool]) -> np.ndarray:
        """`predicate(dtype)` per row, evaluated once per distinct dtype text."""
        distinct, codes = self.dtype_codes
        return np.array([bool(predicate(d)) for d in distinct], dtype=bool)[codes]

    def stat_display(self, row: int, col: int) -> Any:
        """The statistic as a Python value for rendering (float, int, str) or a marker string."""
        kind = int(self.stat_kind[row, col])
        if kind == _NUMBER:
            return float(self.stats[row, col])
        if kind == _INT:
            return int(self.stats[row, col])
        if kind == _NAN:
            return "Nan"
        if kind == _NONE:
            return "None"
        return self.raw[(row, col)]


class _Cells(tuple):
    """The four statistic cells of a row whose raw values differ (`_ABSENT` where not raw)."""


class _Absent:
    """Marks a cell of `_Cells` that is not raw; one instance, kept by pickling (rows cross processes)."""

    def __reduce__(self) -> str:
        return "_ABSENT"


_ABSENT = _Absent()


class RawCells(Mapping[tuple[int, int], Any]):
    """Non-numeric statistics by (row, column), one slot per row: a scalar leaf repeats one value in all four."""

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows: dict[int, Any] = {}

    def put(self, row: int, cells: list[Any]) -> None:
        """Store a row's four cells (`_ABSENT` for the ones that are not raw)."""
        first = cells[0]
        if first is not _ABSENT and cells[1] is first and cells[2] is first and cells[3] is first:
            self._rows[row] = first
        else:
            self._rows[row] = _Cells(cells)

    def moved(self, new_of_old: np.ndarray, into: RawCells) -> None:
        """Put each row's cells into `into` at row `new_of_old[row]` (rows mapped below 0 are left out)."""
        for row, value in self._rows.items():
            new = int(new_of_old[row])
            if new >= 0:
                into._rows[new] = value

    def sort(self) -> None:
        """Order the rows by row number (after `moved`)."""
        self._rows = dict(sorted(self._rows.items()))

    def __getitem__(self, key: tuple[int, int]) -> Any:
        row, col = key
        value = self._rows[row]
        if type(value) is _Cells:
            value = value[col]
            if value is _ABSENT:
                raise KeyError(key)
        return value

    def column(self, rows: list[int], col: int) -> list[Any]:
        """The raw values of `rows` in column `col` (each must hold one), as `[self[(r, col)] for r in rows]`."""
        cells = [v[col] if type(v) is _Cells else v for v in map(self._rows.__getitem__, rows)]
        if _ABSENT in cells:  # a row without a raw value in this column
            raise KeyError((rows[cells.index(_ABSENT)], col))
        return cells

    def first_column(self) -> tuple[np.ndarray, list[Any]]:
        """(the rows with a raw value in column 0, in storage order; those values): one pass over the rows."""
        rows = np.fromiter(self._rows, dtype=np.int64, count=len(self._rows))
        values = [v[0] if type(v) is _Cells else v for v in self._rows.values()]
        if _ABSENT in values:  # rows whose column 0 is numeric
            keep = [k for k, v in enumerate(values) if v is not _ABSENT]
            return rows[keep], [values[k] for k in keep]
        return rows, values

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for row, value in self._rows.items():
            if type(value) is _Cells:
                yield from ((row, col) for col in range(4) if value[col] is not _ABSENT)
            else:
                yield from ((row, col) for col in range(4))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _py_row_walker(builder: _Builder) -> Any:
    """None: the Python twin of the C row walker is `_Builder.entry`'s own walk."""
    return None


def _c_row_walker(builder: _Builder) -> Any:
    """A `_rowwalk.Walker` that appends rows to the builder's columns straight from an entry's text or object (what
    `_Builder.entry` does in Python), the walker's codes checked to be ours."""
    check_walker_codes(_C_ROWWALK)
    b = builder
    return _C_ROWWALK.Walker(b.names, b.dtype, b.shape, b.md5, b.data_name, b.entries, b.entry_index, b.state,
                             b.stats, b.kinds, b.rg, b.raw._rows, b._strings, INTERN_LIMIT, _Cells, _ABSENT)  # fmt: skip


row_walker = native.twin("_rowwalk", _c_row_walker, _py_row_walker)


class _Builder:
    """Collects rows in compact columns: typed arrays for numbers, shared strings for dtype and shape."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[str] = []
        self.names: list[str] = []
        self.entry_index = array("i")
        self.state = array("b")
        self.dtype: list[str] = []
        self.shape: list[str] = []
        self.stats = array("d")  # 4 per row
        self.kinds = array("b")  # 4 per row
        self.raw = RawCells()
        self.rg = array("b")
        self.md5: list[str | None] = []
        self.data_name: list[str] = []
        self.has_md5 = False
        self._strings: dict[str, str] = {}
        self._shapes: dict[bytes, str] = {}  # JSON text of a shape list -> its str()
        self._crcs: dict[tuple[type, Any], str] = {}  # (type, value) of a scalar -> its checksum text
        self._walker = row_walker(self)

    def intern(self, text: str) -> str:
        """One shared object per distinct dtype/shape string (millions of rows hold a few distinct values)."""
        shared = self._strings.get(text)
        if shared is not None:
            return shared
        if len(self._strings) < INTERN_LIMIT:
            self._strings[text] = text
        return text

    # -- leaves ---------------------------------------------------------------------------------
    def add_row(
        self,
        name: str,
        state: int,
        dtype: str,
        shape: str,
        values: tuple[Any, Any, Any, Any],
        rg: int,
        md5: str | None,
        data_name: str,
    ) -> None:
        row = len(self.names)
        a, b, c, d = values
        if type(a) is type(b) is type(c) is type(d) is float and a == a and b == b and c == c and d == d:
            self.stats.extend(values)  # the common case: four floats, none NaN
            self.kinds.extend(_ALL_NUMBERS)
        elif a is None and b is None and c is None and d is None:
            self.stats.extend(_ZEROS)
            self.kinds.extend(_ALL_NONE)
        else:
            nums = [0.0, 0.0, 0.0, 0.0]
            kinds = [_NONE, _NONE, _NONE, _NONE]
            raw: list[Any] | None = None
            for col, v in enumerate(values):
                if v is None:
                    continue
                tv = type(v)
                if tv is float:
                    if v != v:
                        kinds[col] = _NAN
                    else:
                        nums[col] = v
                        kinds[col] = _NUMBER
                elif tv is int:
                    try:
                        nums[col] = float(v)
                        kinds[col] = _INT
                    except OverflowError:  # beyond the float range: +-inf, a number, as the literal 1e400 reads
                        nums[col] = float("inf") if v > 0 else float("-inf")
                        kinds[col] = _NUMBER
                else:
                    kinds[col] = _RAW
                    if raw is None:
                        raw = [_ABSENT, _ABSENT, _ABSENT, _ABSENT]
                    raw[col] = v
            if raw is not None:
                self.raw.put(row, raw)
            self.stats.extend(nums)
            self.kinds.extend(kinds)
        strings = self._strings
        self.names.append(name)
        self.entry_index.append(len(self.entries) - 1)
        self.state.append(state)
        self.dtype.append(strings.get(dtype) or self.intern(dtype))
        self.shape.append(strings.get(shape) or self.intern(shape))
        self.rg.append(rg)
        self.md5.append(md5)
        self.data_name.append(data_name)

    def leaf(self, op: str, name: str, state: int, leaf: dict[str, Any]) -> None:
        get = leaf.get
        data_name = get("data_name")
        if data_name is None:
            data_name = "-1"
        elif isinstance(data_name, str) and data_name and data_name != "-1":
            name = data_name.rsplit(".", 1)[0] if "." in data_name else data_name
        else:
            data_name = "-1"
        if "class_type" in leaf and "tensor" in leaf:  # P2POp: the row comes from its tensor
            tensor = leaf["tensor"]
            if isinstance(tensor, dict):
                self.leaf(op, name, state, tensor)
            return
        dtype = get("dtype")
        md5 = get("md5")
        if md5 is not None and not isinstance(md5, str):
            md5 = _number_md5(md5, name, self.path)
        if dtype is None:
            self._scalar(name, state, leaf, md5, data_name)
            return
        # a tensor
        if not isinstance(dtype, str):
            raise InputError(f"dtype of '{name}' must be a string, got {type(dtype).__name__}", self.path)
        shape = get("shape")
        if shape is not None and not isinstance(shape, list):
            raise InputError(
                f"shape of input or output of {op} is not a list: '{name}' has {type(shape).__name__}",
                self.path,
            )
        rg_raw = get("requires_grad")
        if rg_raw is None:
            rg = RG_MISSING
        elif rg_raw is True:
            rg = RG_TRUE
        elif rg_raw is False:
            rg = RG_FALSE
        else:
            raise InputError(
                f"requires_grad of input or output of {op} is not a bool: '{name}' has {rg_raw!r}",
                self.path,
            )
        values = (get("Max"), get("Min"), get("Mean"), get("Norm"))  # STAT_KEYS
        for v in values:
            if v is not None and type(v) is not float and not isinstance(v, (int, float, bool)):
                raise InputError(f"statistic of '{name}' must be a number or null, got {v!r}", self.path)
        self.add_row(name, state, dtype, self.shape_text(shape), values, rg, md5, data_name)

    def shape_text(self, shape: list[Any] | None) -> str:
        """str() of a shape list, computed once per distinct shape (keyed by its exact JSON form)."""
        try:
            key = dumps(shape)  # 1, 1.0 and true differ here; cheaper than str() of the list
        except JSONEncodeError:  # an int beyond 64 bits (from the stdlib parser)
            return str(shape)
        if b"null" in key:  # None and NaN both print as null: not a key that tells them apart
            return str(shape)
        text = self._shapes.get(key)
        if text is None:
            text = self.intern(str(shape))
            if len(self._shapes) < INTERN_LIMIT:
                self._shapes[key] = text
        return text

    def _scalar(self, name: str, state: int, leaf: dict[str, Any], md5: str | None, data_name: str) -> None:
        """A non-tensor leaf (spec §3.1 step 3)."""
        kind = leaf.get("type")
        if not isinstance(kind, str):  # e.g. a leaf with class_type but neither tensor nor type
            raise InputError(f"argument '{name}' has no 'type' text", self.path)
        value = leaf.get("value")
        stat: Any = None
        if kind == "torch.Size":
            dtype, shape = "torch.Size", str(value)
        elif kind == "slice":
            dtype, shape = "slice", str(np.shape(value)) if value is not None else "()"
        elif kind == "ellipsis":
            dtype, shape, stat = "ellipsis", "[]", value
        elif name.endswith((".src", ".dst", ".group_src", ".group_dst")):
            dtype, shape, stat = kind, "[]", str(value)
            md5 = md5 or stat
        elif kind == "torch.ProcessGroup":
            ranks = str(leaf.get("group_ranks"))
            dtype, shape, stat = "torch.ProcessGroup", "[]", ranks
            md5 = md5 or ranks
        else:
            dtype, shape, stat = _CLASS_TEXT.get(type(value)) or f"<class '{_pytype(value)}'>", "[]", value
        if md5 is None:
            tv = type(value)
            if tv is int or tv is str or tv is bool or value is None:  # exact keys (not float: 0.0 == -0.0)
                key = (tv, value)
                md5 = self._crcs.get(key)
                if md5 is None:
                    md5 = _crc_text(value)
                    if len(self._crcs) < INTERN_LIMIT:
                        self._crcs[key] = md5
            else:
                md5 = _crc_text(value)
        self.add_row(name, state, dtype, shape, (stat, stat, stat, stat), RG_MISSING, md5, data_name)

    def null(self, name: str, state: int) -> None:
        self.add_row(name, state, "None", "None", (None, None, None, None), RG_MISSING, None, "-1")

    # -- structure ------------------------------------------------------------------------------
    def walk(self, op: str, node: Any, name: str, state: int, depth: int, index_lists: bool = True) -> None:
        if depth > MAX_DEPTH:
            raise InputError(f"entry '{op}' is nested deeper than {MAX_DEPTH} levels", self.path)
        if node is None:
            self.null(name, state)
        elif isinstance(node, list):
            leaf, walk, fast = self.leaf, self.walk, depth < MAX_DEPTH
            for i, item in enumerate(node):
                child = f"{name}.{i}" if index_lists else name
                if fast and type(item) is dict and type(item.get("type")) is str:  # a leaf: skip a level
                    leaf(op, child, state, item)
                else:
                    walk(op, item, child, state, depth + 1)
        elif isinstance(node, dict):
            if isinstance(node.get("type"), str) or "class_type" in node:
                self.leaf(op, name, state, node)
            else:
                for key, item in node.items():
                    self.walk(op, item, f"{name}.{key}", state, depth + 1)
        else:
            raise InputError(
                f"entry '{op}' has a {type(node).__name__} where an argument description was expected", self.path
            )

    def entry(self, op: str, body: Any) -> None:
        walker = self._walker
        if walker is not None:
            if walker.entry(op, body):  # the native walk handled it (the common case)
                return
            walker.flush()  # its pending cells go first: the Python walk appends after them
        if not isinstance(body, dict):
            raise InputError(f"entry '{op}' must be an object, got {type(body).__name__}", self.path)
        self.entries.append(op)
        if not self.has_md5:
            self.has_md5 = body_has_md5(body)
        last = op.rsplit(".", 1)[-1]
        if last == "debug":
            self.walk(op, body, op, State.DEBUG, 0)
        elif is_param_grad(op):
            for param, value in body.items():
                self.walk(op, value, f"{op}.{param}", State.PARAMETERS_GRAD, 1, index_lists=False)
        else:
            for key, suffix, state in _FIELDS:
                if key in body:
                    self.walk(op, body[key], op + suffix, state, 1)

    def build(self, stacks: dict[str, list[str]]) -> RowTable:
        if self._walker is not None:
            self._walker.flush()
            self.has_md5 = self.has_md5 or self._walker.has_md5
            self._walker = None
        n = len(self.names)
        return RowTable(
            entries=self.entries,
            names=self.names,
            entry_index=_column(self.entry_index, np.int32),
            state=_column(self.state, np.int8),
            dtype=self.dtype,
            shape=self.shape,
            stats=_column(self.stats, np.float64).reshape(n, 4),
            stat_kind=_column(self.kinds, np.int8).reshape(n, 4),
            raw=self.raw,
            requires_grad=_column(self.rg, np.int8),
            md5=self.md5,
            data_name=self.data_name,
            stacks=stacks,
            has_md5=self.has_md5,
        )


def _number_md5(value: Any, name: str, path: Path) -> str:
    """An md5 written as a JSON number (msprobe's own unit-test dumps: an int; 26.x xor mode: a 0-d tensor's value)
    is compared as the number's text, as the dumper (Python's json) wrote it."""
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return repr(value)
    raise InputError(f"md5 of '{name}' must be a string or a number, got {type(value).__name__}", path)


def is_param_grad(op: str) -> bool:
    """A parameter-gradient entry: named `...parameters_grad` (8.3.x) or `...parameters_grad.<n>` (26.x dumpers,
    which count them); its rows keep the entry name: `{entry}.{param}`."""
    head, _, last = op.rpartition(".")
    if last.isdigit() and last.isascii():
        last = head.rpartition(".")[2]
    return last == "parameters_grad"


def _py_text_codes(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """(the distinct texts in order of first appearance, each text's index into them), in one pass over `texts`:
    each text is numbered by the position where it first appears, then the positions are renumbered."""
    first: dict[str, int] = {}
    pos = np.fromiter(map(first.setdefault, texts, itertools.count()), dtype=np.int64, count=len(texts))
    renumber = np.zeros(len(texts), dtype=np.int32)
    renumber[np.fromiter(first.values(), dtype=np.int64, count=len(first))] = np.arange(len(first), dtype=np.int32)
    return list(first), renumber[pos]


def _c_text_codes(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """_py_text_codes' numbering by `_c_coded` (by identity in C, then by value; a list)."""
    if type(texts) is not list:
        return _py_text_codes(texts)
    codes, distinct = _c_coded(texts)
    return distinct, codes


text_codes = native.twin("_sharednames", _c_text_codes, _py_text_codes)


_PHASE_NAMES = np.array(PHASES, dtype=object)


_NAME_FLAGS: list[tuple[list[str], tuple[np.ndarray, ...]]] = []  # the last list's flags (two callers ask)


def name_flags(entries: list[str]) -> tuple[np.ndarray, ...]:
    """Per name: "backward" in it, "parameters_grad" in it, it ends with ".backward", a call of an in-place API
    (`is_inplace`); one pass over the texts (in C with `_noise`), kept for the last list asked about (read only)."""
    if _NAME_FLAGS and _NAME_FLAGS[0][0] is entries and len(_NAME_FLAGS[0][1][0]) == len(entries):
        return _NAME_FLAGS[0][1]
    flags = phase_flags(entries)
    for f in flags:
        f.flags.writeable = False
    _NAME_FLAGS[:] = [(entries, flags)]
    return flags


def _py_phase_flags(entries: list[str]) -> tuple[np.ndarray, ...]:
    """`name_flags`' four bool arrays, by string methods mapped over the list."""
    n = len(entries)
    return (np.fromiter(map(operator.contains, entries, itertools.repeat("backward")), dtype=bool, count=n),
            np.fromiter(map(operator.contains, entries, itertools.repeat("parameters_grad")), dtype=bool, count=n),
            np.fromiter(map(str.endswith, entries, itertools.repeat(".backward")), dtype=bool, count=n),
            _inplace_calls(entries))  # fmt: skip


def _c_phase_flags(entries: list[str]) -> tuple[np.ndarray, ...]:
    """_py_phase_flags in one pass over the texts in C (`_sharednames.phase_flags`; a list)."""
    if type(entries) is not list:
        return _py_phase_flags(entries)
    flags = tuple(np.empty(len(entries), dtype=bool) for _ in range(4))
    _C_SHARED.phase_flags(entries, *flags)
    return flags


phase_flags = native.twin("_sharednames", _c_phase_flags, _py_phase_flags)


def _inplace_calls(entries: list[str]) -> np.ndarray:
    """`is_inplace` per entry: first sieved by string methods mapped over the list (`_.` in it, and not only as
    the end of `__.`: dunder methods `__add__.0.forward`), then decided one by one."""
    inplace = np.fromiter(map(operator.contains, entries, itertools.repeat("_.")), dtype=bool, count=len(entries))
    sieved = np.flatnonzero(inplace)
    if len(sieved):
        names = operator.itemgetter(*sieved.tolist())(entries) if len(sieved) > 1 else (entries[int(sieved[0])],)
        single = np.fromiter(
            map(
                operator.gt,
                map(str.count, names, itertools.repeat("_.")),
                map(str.count, names, itertools.repeat("__.")),
            ),
            dtype=bool,
            count=len(sieved),
        )
        inplace[sieved[~single]] = False
        for e in sieved[single].tolist():
            inplace[e] = is_inplace(entries[e])
    return inplace


def is_inplace(entry: str) -> bool:
    """A call of an in-place API (`Tensor.add_.3.forward`): its API part ends with one "_" (not a dunder's "__")."""
    api = entry.rsplit(".", 2)[0].rsplit(".", 1)[-1]
    return api.endswith("_") and not api.endswith("__")


def phase_codes(entries: list[str]) -> np.ndarray:
    """`PHASES.index(phase_of(e))` per entry: the names that cannot be anything but forward (no `backward`, no
    `parameters_grad` in them) or backward (no `parameters_grad`, and `backward` the last or the last but one
    part: `X.3.backward`, `Module.x.backward.0`) are sorted by string methods mapped over the whole list at once;
    `phase_of` decides the rest."""
    backward, grad, ends, _ = name_flags(entries)
    ends = ends.copy()  # the flags are shared (name_flags): changed below
    codes = backward.astype(np.int8)  # backward texts: backward when they end so, else decided below
    odd = np.flatnonzero(backward & ~ends & ~grad)
    if len(odd):  # the last but one part `backward` (modules: `.backward.0`), else phase_of below
        sub = operator.itemgetter(*odd.tolist())(entries) if len(odd) > 1 else (entries[int(odd[0])],)
        heads = map(operator.itemgetter(0), map(str.rpartition, sub, itertools.repeat(".")))
        module = np.fromiter(map(str.endswith, heads, itertools.repeat(".backward")), dtype=bool, count=len(odd))
        ends[odd[module]] = True
    for e in np.flatnonzero(grad | (backward & ~ends)).tolist():
        codes[e] = PHASES.index(phase_of(entries[e]))
    return codes


def phase_of(entry: str) -> str:
    """The call direction of an entry name: "forward", "backward" or "parameters_grad"."""
    if "backward" not in entry:  # the common case, decided by one or two substring searches
        return "parameters_grad" if "parameters_grad" in entry and is_param_grad(entry) else "forward"
    if is_param_grad(entry):  # `...parameters_grad` or 26.x `...parameters_grad.<n>`
        return "parameters_grad"
    tail = entry.rsplit(".", 2)
    return "backward" if "backward" in tail[-2:] or entry.endswith(".backward") else "forward"


def _column(values: array, dtype: type) -> np.ndarray:
    """A typed array as a numpy column, without a copy (it owns the buffer from now on)."""
    if not values:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(values, dtype=dtype)


_CLASS_TEXT = {t: f"<class '{t.__name__}'>" for t in (int, float, bool, str, list, dict)} | {
    type(None): "<class 'NoneType'>"
}


NONE_DTYPE = "None"  # the dtype cell of a None argument (the dumper records it without data)
INT_DTYPE = _CLASS_TEXT[int]  # the dtype cell of a Python int argument


def is_scalar_dtype(dtype: str) -> bool:
    """The dtype cell of a Python scalar argument (`<class 'int'>`, `<class 'float'>`, ...), not a tensor's."""
    return dtype.startswith("<class")


def _crc_text(value: Any) -> str:
    """The checksum shown as a scalar's md5: CRC-32 of its Python text, 8 hex digits."""
    return f"{zlib.crc32(('' if value is None else str(_pyrepr(value))).encode()):08x}"


def _pytype(value: Any) -> str:
    if value is None:
        return "NoneType"
    return type(value).__name__


def _pyrepr(value: Any) -> str:
    """str() of a JSON value as Python prints it (True/False/None, lists with repr items)."""
    return str(value)


def flatten(
    path: Path,
    entries: Iterable[tuple[str, Any]] | Mapping[str, Any],
    stacks: dict[str, list[str]] | None = None,
) -> RowTable:
    """The entries of a dump.json `data` object ((name, body) pairs in dump order, e.g. from
    `stream.open_dump`, or the object itself) -> RowTable."""
    builder = _Builder(path)
    if builder._walker is not None and hasattr(entries, "use_walker"):
        entries.use_walker(builder._walker)  # it may add rows straight from the text; the rest comes here
    for op, body in entries.items() if isinstance(entries, Mapping) else entries:
        builder.entry(op, body)
    return builder.build(stacks or {})


def _py_coded(values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """(int32 code per value, the distinct values in order of first appearance): equal values share a code."""
    index: dict[Any, int] = {}
    for v in dict.fromkeys(values):
        index[v] = len(index)
    return np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values)), list(index)


def _c_coded(values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """_py_coded for rows that share their dtype/shape text objects: coded by identity in C first
    (`_sharednames.code_objects`; a list), then the few distinct objects merged by value."""
    if type(values) is not list:
        return _py_coded(values)
    raw, distinct = _C_SHARED.code_objects(values)
    index: dict[Any, int] = {}
    remap = np.fromiter((index.setdefault(v, len(index)) for v in distinct), dtype=np.int32, count=len(distinct))
    return remap[np.frombuffer(raw, dtype=np.int32)], list(index)


coded = native.twin("_sharednames", _c_coded, _py_coded)


def _py_identity_codes(items: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """(int32 code per item, the distinct objects in order of first appearance): items are told apart by identity
    (lists of stack lines, say, that entries of one call site share)."""
    seen: dict[int, int] = {}
    codes = np.fromiter((seen.setdefault(id(x), len(seen)) for x in items), dtype=np.int32, count=len(items))
    return codes, list({id(x): x for x in items}.values())


def _c_identity_codes(items: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """_py_identity_codes in C (`_sharednames.code_objects`; a list)."""
    if type(items) is not list:
        return _py_identity_codes(items)
    raw, distinct = _C_SHARED.code_objects(items)
    return np.frombuffer(raw, dtype=np.int32), distinct


identity_codes = native.twin("_sharednames", _c_identity_codes, _py_identity_codes)


def empty_entries(table: RowTable) -> list[str]:
    """The entries that yielded no row (e.g. only empty lists, or objects without a tensor description), in dump
    order: they are reported, never dropped silently."""
    counts = np.bincount(np.asarray(table.entry_index, dtype=np.int64), minlength=len(table.entries))
    return [table.entries[i] for i in np.flatnonzero(counts == 0).tolist()]
