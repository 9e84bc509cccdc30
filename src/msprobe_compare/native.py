"""The optional C accelerators (built by setup.py when a compiler is present) and the switch to turn them off.

`MSPROBE_NATIVE=0` in the environment makes every stage use its pure-Python path (for comparisons and debugging).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

MODULES = ("_rowwalk", "_tensorkernel", "_legacyparse", "_csvrows", "_join", "_noise")


def enabled() -> bool:
    """False when MSPROBE_NATIVE=0 asks for the pure-Python paths."""
    return os.environ.get("MSPROBE_NATIVE", "1").strip() not in ("0", "false", "no", "off")


def load(name: str) -> ModuleType | None:
    """The compiled module `msprobe_compare.<name>`, or None when it is not built or turned off."""
    if not enabled():
        return None
    try:
        return importlib.import_module(f"msprobe_compare.{name}")
    except ImportError:
        return None


def status() -> dict[str, bool]:
    """Which native modules are importable (ignoring MSPROBE_NATIVE)."""
    out = {}
    for name in MODULES:
        try:
            importlib.import_module(f"msprobe_compare.{name}")
            out[name] = True
        except ImportError:
            out[name] = False
    return out
