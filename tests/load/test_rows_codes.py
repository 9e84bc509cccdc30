"""RowTable.phase_codes (string methods over the whole list) against phase_of, and text_codes."""

from __future__ import annotations

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


def test_text_codes_number_distinct_texts_in_order_of_appearance() -> None:
    from msprobe_compare.load.rows import text_codes

    texts = ["torch.float32", "<class 'int'>", "torch.float32", "None", "<class 'int'>", "torch.bfloat16"]
    distinct, codes = text_codes(texts)
    assert distinct == ["torch.float32", "<class 'int'>", "None", "torch.bfloat16"]
    assert codes.tolist() == [0, 1, 0, 2, 1, 3]
    assert [distinct[c] for c in codes.tolist()] == texts
    empty, none = text_codes([])
    assert empty == [] and none.tolist() == []
