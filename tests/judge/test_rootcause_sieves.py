"""The whole-list sieves of the root cause against the per-name rule they stand for."""

from __future__ import annotations

from msprobe_compare.judge import rootcause

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


def test_inplace_entries_equal_the_per_name_rule() -> None:
    names = list(NAMES)  # a new list: the memo is keyed by the list object
    got = rootcause._inplace_entries(names).tolist()
    assert got == [("_." in n) and rootcause._is_inplace(n) for n in names]
    assert got[:3] == [True, False, True]
    assert sum(got) == 6
