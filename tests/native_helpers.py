"""The optional C extensions in tests: skip without them, unless MSPROBE_REQUIRE_NATIVE=1 (CI) makes that a failure."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from msprobe_compare import native


def native_module(name: str) -> ModuleType:
    """The extension `msprobe_compare.<name>`; skips the test when it is not built (fails where it is required).

    A test that asks for it tests the C code: it runs on the C twins also in the suite's MSPROBE_NATIVE=0 run (the
    variable is set to 1 here; tests/conftest.py restores it after each test)."""
    module = native.built(name)
    if module is None:
        if os.environ.get("MSPROBE_REQUIRE_NATIVE") == "1":
            pytest.fail(f"MSPROBE_REQUIRE_NATIVE=1 but msprobe_compare.{name} is not importable")
        pytest.skip(f"the {name} extension is not built")
    os.environ["MSPROBE_NATIVE"] = "1"
    return module


def examples(default: int) -> int:
    """Hypothesis examples of a native-path property test: `default`, or fewer where MSPROBE_FUZZ_EXAMPLES says so
    (.ci/sanitize, where every example runs under AddressSanitizer)."""
    cap = os.environ.get("MSPROBE_FUZZ_EXAMPLES")
    return min(default, int(cap)) if cap else default
