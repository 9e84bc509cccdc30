"""Fixtures of the tensor reader tests (tests/load/test_tensors.py, test_pt.py)."""

from __future__ import annotations

import pytest

from msprobe_compare.load import tensor_files


@pytest.fixture(params=["mapped", "whole"])
def read_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of reading a file: memory-mapped (READ_WHOLE_MAX 0) and read whole (every fixture is small)."""
    if request.param == "mapped":
        monkeypatch.setattr(tensor_files, "READ_WHOLE_MAX", 0)
    else:
        monkeypatch.setattr(tensor_files, "READ_WHOLE_MAX", 1 << 30)
    return str(request.param)
