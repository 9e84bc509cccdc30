"""table._coded: equal values share one code, whether or not they are one object (native and Python paths)."""

from __future__ import annotations

import pytest

from msprobe_compare.render.table import _coded


@pytest.mark.parametrize("use_native", ["1", "0"])
def test_equal_values_share_a_code(monkeypatch: pytest.MonkeyPatch, use_native: str) -> None:
    monkeypatch.setenv("MSPROBE_NATIVE", use_native)
    parts = ["torch.", "float32"]
    values = ["[1, 2]", "".join(parts), "".join(parts), "[1, 2]", None, "".join(["[1, ", "2]"]), None, 3]
    assert values[1] is not values[2]  # equal texts, distinct objects
    col = _coded(values)
    assert col.table == ["[1, 2]", "torch.float32", None, 3]
    assert col.codes.tolist() == [0, 1, 1, 0, 2, 0, 2, 3]
    assert _coded([]).table == [] and len(_coded([]).codes) == 0
