"""msprobe-compare: accuracy comparison of MindStudio Probe dumps.

Pipeline: load -> pair -> measure -> judge -> render; the CLI only wires the stages.
Python API: `compare(npu_path, bench_path, output_dir=...)`, `compare_json(path, ...)` -> `CompareResult`
(imported on first use, so `import msprobe_compare` stays light for the CLI).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "compare": "msprobe_compare.python_api",
    "compare_json": "msprobe_compare.python_api",
    "CompareResult": "msprobe_compare.python_api",
    "Finding": "msprobe_compare.render.findings",
    "CompareError": "msprobe_compare.errors",
    "InputError": "msprobe_compare.errors",
    "OptionError": "msprobe_compare.errors",
    "OutputError": "msprobe_compare.errors",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'msprobe_compare' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
