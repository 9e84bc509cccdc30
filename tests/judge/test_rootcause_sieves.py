"""The whole-list sieves of the root cause against the per-name rule they stand for."""

from __future__ import annotations

import pytest

from msprobe_compare.judge import calls
from msprobe_compare.load.rows import is_inplace

NAMES = [
    "Tensor.add_.0.forward",
    "Tensor.__add__.0.forward",  # a dunder method: not in-place
    "Module.x__.add_.0.forward",  # a `__.` elsewhere in the name and an in-place API
    "_.0.forward",
    "a._.0.forward",
    "Tensor.___.0.forward",
    "x_.y",
    "x__.y",
    "Module.a_.Linear.forward.0",
    "Module.a.Lin_.forward.0",
    "Tensor.__iadd__.1.backward",
    "Functional.relu.0.forward",
]


@pytest.mark.parametrize("native", ["1", "0"])
def test_inplace_entries_equal_the_per_name_rule(native: str, monkeypatch) -> None:
    monkeypatch.setenv("MSPROBE_NATIVE", native)  # in C (_noise.phase_flags) or by string methods
    names = list(NAMES) + ["Tensor.add_é.0.forward", "Tensor.mul_.0.forward.é", "é_.x", "add_", "add_.x"]
    got = calls._inplace_entries(names).tolist()  # a new list: the flags are kept for the last list only
    assert got == [("_." in n) and is_inplace(n) for n in names]
    assert got[-5:] == [False, False, True, False, True]
    assert got[:3] == [True, False, True]
    assert sum(got[: len(NAMES)]) == 6
