"""CompareConfig: compare.json plus command-line options, validated once (spec §1.2-§1.4)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import read_json


@dataclass(frozen=True)
class Options:
    """Command-line options of `compare`."""

    framework: str  # "pytorch" | "mindspore"
    output_dir: Path = Path("./output")
    stack_mode: bool = False
    auto_analyze: bool = True
    fuzzy_match: bool = False
    highlight: bool = True  # decision D1: colour marks on by default
    data_mapping: Path | None = None
    cell_mapping: Path | bool | None = None  # None: off; True: built-in rule only; Path: with a YAML
    api_mapping: Path | bool | None = None
    layer_mapping: Path | bool | None = None
    jobs: int | None = None
    formats: tuple[str, ...] = ("xlsx", "html")  # see render.report.FORMATS
    parallel_read: bool = True  # read the bench dump.json in a forked child (off inside parallel ranks)
    ray: str | bool | None = None  # None: local pools; True: RAY_ADDRESS or a local Ray; str: that cluster
    tolerance: str | None = None  # root cause: `origin=3,suspect=1.5` over judge.noise.Tolerance (issue #13)


@dataclass(frozen=True)
class CompareConfig:
    input_path: Path  # compare.json
    npu_path: Path
    bench_path: Path
    stack_path: Path | None  # from compare.json; None when absent
    print_compare_log: bool
    options: Options

    @property
    def is_directory_compare(self) -> bool:
        return self.npu_path.is_dir()


def _path_field(doc: dict[str, Any], key: str, source: Path) -> Path:
    value = doc.get(key)
    if value is None or value == "":
        raise InputError(f"'{key}' is missing; compare.json needs both npu_path and bench_path", source)
    if not isinstance(value, str):
        raise InputError(f"'{key}' must be a path string, got {type(value).__name__}", source)
    return Path(os.path.abspath(value))  # relative paths: against the working directory (spec §1.3)


def load_config(input_path: Path, options: Options) -> CompareConfig:
    doc = read_json(input_path)
    if not isinstance(doc, dict):
        raise InputError("must be a JSON object with npu_path and bench_path", input_path)
    npu = _path_field(doc, "npu_path", input_path)
    bench = _path_field(doc, "bench_path", input_path)
    for key, path in (("npu_path", npu), ("bench_path", bench)):
        if not path.exists():
            raise InputError(f"{key} does not exist", path)
    if npu.is_dir() != bench.is_dir():
        raise InputError(
            "npu_path and bench_path must be of the same type (both dump.json files or both step directories)",
            input_path,
        )
    stack = doc.get("stack_path")
    if stack is not None and not isinstance(stack, str):
        raise InputError(f"'stack_path' must be a path string, got {type(stack).__name__}", input_path)
    print_log = doc.get("is_print_compare_log", True)  # decision D11: absent means on
    if not isinstance(print_log, bool):
        raise InputError("'is_print_compare_log' must be true or false", input_path)
    return CompareConfig(
        input_path=input_path,
        npu_path=npu,
        bench_path=bench,
        stack_path=Path(os.path.abspath(stack)) if stack else None,
        print_compare_log=print_log,
        options=options,
    )
