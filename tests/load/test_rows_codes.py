"""RowTable.phase_codes (string methods over the whole list) against phase_of, and text_codes."""

from __future__ import annotations

import numpy as np
import pytest

from msprobe_compare.load.rows import PHASES, phase_codes, phase_of

NAMES = [
    "Functional.linear.0.forward",
    "Functional.linear.0.backward",
    "Module.a.Linear.forward.0",
    "Module.a.Linear.backward.0",
    "Module.a.Linear.backward.12",
    "Module.fc1.Linear.parameters_grad",
    "Module.fc1.Linear.parameters_grad.3",
    "Module.backward_hook.Linear.forward.0",  # `backward` inside a module name: forward
    "Module.backward_hook.Linear.backward.0",
    "Tensor.backward.0.forward",  # the API `backward`, called forward
    "backward.0",
    "backward",
    "x.backward",
    "Module.parameters_grad_like.Linear.forward.0",  # `parameters_grad` in a name, not a gradient
    "Module.parameters_grad_like.Linear.backward.0",
    "Distributed.all_reduce.3.backward",
    "",
    "forward",
]


def test_phase_codes_equal_phase_of() -> None:
    codes = phase_codes(NAMES)
    assert [PHASES[c] for c in codes.tolist()] == [phase_of(n) for n in NAMES]
    assert codes.tolist().count(PHASES.index("parameters_grad")) == 2
    assert phase_codes([]).tolist() == []
    assert phase_codes(["Module.a.Linear.backward.0"]).tolist() == [1]


@pytest.mark.parametrize("use_native", ["1", "0"])
def test_text_codes_number_distinct_texts_in_order_of_appearance(use_native: str, monkeypatch) -> None:
    from msprobe_compare.load.rows import text_codes

    monkeypatch.setenv("MSPROBE_NATIVE", use_native)  # by identity in C, then by value; or a dict
    texts = ["torch.float32", "<class 'int'>", "torch.float32", "None", "<class 'int'>", "torch.bfloat16",
             "".join(["torch.", "float32"]), "".join(["No", "ne"])]  # equal texts, other objects  # fmt: skip
    distinct, codes = text_codes(texts)
    assert distinct == ["torch.float32", "<class 'int'>", "None", "torch.bfloat16"]
    assert codes.tolist() == [0, 1, 0, 2, 1, 3, 0, 2] and codes.dtype == np.int32
    assert [distinct[c] for c in codes.tolist()] == texts
    empty, none = text_codes([])
    assert empty == [] and none.tolist() == []


def test_entry_bounds_are_the_search_of_each_entry() -> None:
    """RowTable.entry_bounds (running counts) equals a search of each entry in the sorted entry_index, with
    entries without rows at the start, between and at the end, and with no rows at all."""
    from types import SimpleNamespace

    import numpy as np

    from msprobe_compare.load.rows import RowTable

    bounds = RowTable.entry_bounds.func  # type: ignore[attr-defined]
    rng = np.random.default_rng(2)
    for rows, n in ((0, 0), (0, 4), (1, 1), (50, 7), (1000, 300)):
        ei = np.sort(rng.integers(1 if n > 1 else 0, max(n - 1, 1), rows)).astype(np.int32)
        got = bounds(SimpleNamespace(entry_index=ei, entries=["e"] * n))
        assert got.tolist() == np.searchsorted(ei, np.arange(n + 1)).tolist()
