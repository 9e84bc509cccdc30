"""Parameter-gradient entries across dumper versions: 8.3.x names them `{module}.parameters_grad`, 26.x
`{module}.parameters_grad.{n}` (a counter that goes on across steps). `parameters_grad` and `parameters_grad.0`
pair with each other; rows keep their dump's names, only the NPU compare key is rewritten."""

from __future__ import annotations

import operator
from itertools import repeat
from typing import Any

import numpy as np

from msprobe_compare import native
from msprobe_compare.load.rows import RowTable, is_param_grad


_C: Any = native.built("_sharednames")


def _py_grad_entries(entries: list[str]) -> np.ndarray:
    """Positions of the entries that contain `parameters_grad` (a few of a million): one substring search per entry
    mapped over the list."""
    found = map(operator.contains, entries, repeat("parameters_grad"))
    return np.flatnonzero(np.fromiter(found, dtype=bool, count=len(entries)))


def _c_grad_entries(entries: list[str]) -> np.ndarray:
    """_py_grad_entries searched in C (`_sharednames.containing`; a list only, texts with a UTF-8 form)."""
    positions = _C.containing(entries, "parameters_grad") if type(entries) is list else None
    return _py_grad_entries(entries) if positions is None else np.frombuffer(positions, dtype=np.int64)


grad_entries = native.twin("_sharednames", _c_grad_entries, _py_grad_entries)


def _styles(table: RowTable) -> tuple[bool, bool]:
    """(has bare `parameters_grad` entries, has `parameters_grad.0` entries)."""
    bare = zero = False
    entries = table.entries
    for e in grad_entries(entries).tolist():
        entry = entries[e]
        if entry.endswith("parameters_grad") and is_param_grad(entry):
            bare = True
        elif entry.endswith(".parameters_grad.0") and is_param_grad(entry):
            zero = True
    return bare, zero


def param_grad_keys(npu: RowTable, bench: RowTable, keys: list[str | None] | None) -> list[str | None] | None:
    """NPU compare keys with `parameters_grad` rewritten to the bench side's spelling when the two sides spell it
    differently (one side only bare names, the other only `.0`); `keys` (or None: the names) otherwise unchanged."""
    npu_bare, npu_zero = _styles(npu)
    bench_bare, bench_zero = _styles(bench)
    if npu_bare and not npu_zero and bench_zero and not bench_bare:
        add = True
    elif npu_zero and not npu_bare and bench_bare and not bench_zero:
        add = False
    else:
        return keys
    base: list[str | None] = list(npu.names if keys is None else keys)
    entries = npu.entries
    grads = grad_entries(entries)
    rows = np.flatnonzero(np.isin(npu.entry_index, grads))  # the rows of those entries only
    for i, e in zip(rows.tolist(), npu.entry_index[rows].tolist()):
        entry = entries[e]
        if add and entry.endswith("parameters_grad") and is_param_grad(entry):
            key = base[i]
            at = key.find(".parameters_grad.") if key is not None else -1
            if key is not None and at >= 0:
                base[i] = key[: at + 16] + ".0" + key[at + 16 :]
        elif not add and entry.endswith(".parameters_grad.0") and is_param_grad(entry):
            key = base[i]
            at = key.find(".parameters_grad.0.") if key is not None else -1
            if key is not None and at >= 0:
                base[i] = key[: at + 16] + key[at + 18 :]
    return base
