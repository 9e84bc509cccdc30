"""Small row tables for the mapping tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msprobe_compare.load.rows import RowTable, flatten


def tensor(shape: list[int] | None = None, dtype: str = "Float32") -> dict[str, Any]:
    return {"type": "mindspore.Tensor", "dtype": dtype, "shape": shape or [2], "Max": 1.0, "Min": 0.0,
            "Mean": 0.5, "Norm": 1.0}  # fmt: skip


def call(inputs: int = 1, outputs: int = 1, **extra: Any) -> dict[str, Any]:
    """An entry body with `inputs` positional tensors and `outputs` output tensors."""
    body: dict[str, Any] = {"input_args": [tensor() for _ in range(inputs)],
                            "output": [tensor() for _ in range(outputs)]}  # fmt: skip
    body.update(extra)
    return body


def table(data: dict[str, Any]) -> RowTable:
    return flatten(Path("dump.json"), data)
