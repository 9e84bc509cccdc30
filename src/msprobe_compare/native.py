"""The optional C accelerators (built by setup.py when a compiler is present), their Python twins, and the switch.

Each C function has a Python twin that gives the same answer; the module that owns the job defines both and binds
one name to the pair, once (CONTRIBUTING.md, "C and Python twins"):

    def _py_stem_counts(entries): ...                  # the Python twin: the reference
    def _c_stem_counts(entries): ...                   # the C twin: calls msprobe_compare._sharednames
    stem_counts = native.twin("_sharednames", _c_stem_counts, _py_stem_counts)

Callers use `stem_counts`; tests call `_c_stem_counts` and `_py_stem_counts` directly (tests/test_twins.py runs every
pair in `TWINS` on the same inputs). `MSPROBE_NATIVE=0` in the environment makes every bound name call its Python twin
(read at each call, so a test may flip it); a module that is not built binds the Python twin alone.

The C modules by stage (tests/test_imports.py holds the package to it): `_rowwalk` load, `_legacyparse` and
`_tensorkernel` measure, `_noise` judge, `_csvrows` render; `_sharednames` is the shared layer (lists of names and
texts: joins, identity codes, name flags, construct.json's parents), called from load and pair.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

MODULES = ("_rowwalk", "_tensorkernel", "_legacyparse", "_csvrows", "_sharednames", "_noise")

F = TypeVar("F", bound=Callable[..., Any])

TWINS: dict[str, tuple[str, Callable[..., Any], Callable[..., Any]]] = {}
"""Every bound pair: `module.name` -> (the C module, the C twin, the Python twin), filled as the modules import."""


def enabled() -> bool:
    """False when MSPROBE_NATIVE=0 asks for the pure-Python paths."""
    return os.environ.get("MSPROBE_NATIVE", "1").strip() not in ("0", "false", "no", "off")


def built(name: str) -> ModuleType | None:
    """The compiled module `msprobe_compare.<name>` whatever MSPROBE_NATIVE says; None when it is not built."""
    try:
        return importlib.import_module(f"msprobe_compare.{name}")
    except ImportError:
        return None


def load(name: str) -> ModuleType | None:
    """The compiled module `msprobe_compare.<name>`, or None when it is not built or turned off."""
    return built(name) if enabled() else None


def twin(module: str, c: F, py: F, usable: bool = True) -> F:
    """One name for the C twin `c` (which calls `msprobe_compare.<module>`) and the Python twin `py`: a call goes to
    `c` while that module is built and MSPROBE_NATIVE is not 0, else to `py`. `usable` False: the built module
    cannot serve (its codes are not ours), `py` alone. The pair is listed in `TWINS`."""
    TWINS[f"{py.__module__}.{py.__qualname__}".replace("_py_", "", 1)] = (module, c, py)
    if built(module) is None or not usable:
        return py

    @functools.wraps(py)
    def bound(*args: Any, **kwargs: Any) -> Any:
        return (c if enabled() else py)(*args, **kwargs)

    return bound  # type: ignore[return-value]


def status() -> dict[str, bool]:
    """Which native modules are importable (ignoring MSPROBE_NATIVE)."""
    return {name: built(name) is not None for name in MODULES}
