"""The row codes the C walker writes are the Python enums' (checked when a walker is made)."""

from __future__ import annotations

import types

import pytest

from msprobe_compare import native
from msprobe_compare.load import rows

NAMES = ("K_NUMBER", "K_INT", "K_NAN", "K_NONE", "K_RAW", "S_INPUT", "S_PARAMETERS", "S_OUTPUT",
         "S_PARAMETERS_GRAD", "RG_MISSING", "RG_FALSE", "RG_TRUE")  # fmt: skip


def _walker() -> types.ModuleType:
    module = native.built("_rowwalk")  # whatever MSPROBE_NATIVE says
    if module is None:
        pytest.skip("the _rowwalk extension is not built")
    return module


def test_the_built_walker_uses_the_python_codes() -> None:
    module = _walker()
    rows.check_walker_codes(module)
    assert module.K_RAW == rows.StatKind.RAW and module.S_OUTPUT == rows.State.OUTPUT
    assert module.RG_MISSING == rows.RG_MISSING


@pytest.mark.parametrize("changed", ["K_RAW", "S_OUTPUT", "RG_TRUE"])
def test_a_walker_with_other_codes_is_refused(changed: str) -> None:
    module = _walker()
    fake = types.SimpleNamespace(**{name: getattr(module, name) for name in NAMES})
    setattr(fake, changed, 99)
    with pytest.raises(ImportError, match=changed):
        rows.check_walker_codes.__wrapped__(fake)
