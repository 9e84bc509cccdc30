"""Read dump.json / stack.json / construct.json files and validate their top-level shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from msprobe_compare.errors import InputError


@dataclass(frozen=True)
class DumpFile:
    """One parsed dump.json: its task, level, framework and the ordered entries."""

    path: Path
    task: str
    level: str | None
    framework: str | None
    data: dict[str, Any] = field(repr=False)


def file_error(exc: OSError, path: Path) -> InputError:
    """The one-line error for a JSON input file that cannot be opened or read."""
    if isinstance(exc, FileNotFoundError):
        return InputError("file does not exist", path)
    if isinstance(exc, IsADirectoryError):
        return InputError("is a directory, expected a JSON file", path)
    return InputError(f"cannot be read ({exc.strerror or exc})", path)


def loads(text: bytes) -> Any:
    """orjson, or the stdlib parser for the NaN/Infinity tokens the dumper writes (which orjson rejects).

    Raises ValueError (json.JSONDecodeError) for text that is not JSON.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def read_json(path: Path) -> Any:
    """Parse a JSON file; NaN/Infinity (written by the dumper) are accepted. Errors name the file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise file_error(exc, path) from None
    try:
        return loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"is not valid JSON ({exc})", path) from None


def read_dump_json(path: Path) -> DumpFile:
    """Read a whole dump.json into memory and check `task` and `data` (spec §2.2).

    The pipeline reads dumps with `stream.open_dump` instead; this stays for tools and tests."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("is not a JSON object; expected a dump.json written by msprobe", path)
    data = doc.get("data")
    task, level, framework = check_dump_header(path, doc, type(data) if "data" in doc else None)
    return DumpFile(path=path, task=task, level=level, framework=framework, data=data)


def check_dump_header(path: Path, doc: dict[str, Any], data_type: type | None) -> tuple[str, str | None, str | None]:
    """Check the top-level keys of a dump.json (`data_type`: type of "data", None if missing) -> task, level,
    framework."""
    task = doc.get("task")
    if not task:
        raise InputError("'task' is missing or empty; expected 'statistics' or 'tensor'", path)
    if not isinstance(task, str):
        raise InputError(f"'task' must be a string, got {type(task).__name__}", path)
    if data_type is None:
        raise InputError("'data' is missing; this is not a complete msprobe dump.json", path)
    if data_type is not dict:
        raise InputError(f"'data' must be an object of entries, got {data_type.__name__}", path)
    level = doc.get("level")
    framework = doc.get("framework")
    return task, level if isinstance(level, str) else None, framework if isinstance(framework, str) else None


def read_stack_json(path: Path) -> dict[str, list[str]]:
    """stack.json in either format (spec §2.6) -> {entry name: stack lines}."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("is not a JSON object; the format of the stack.json is incorrect", path)
    stacks: dict[str, list[str]] = {}
    if "0" in doc:  # new format: {"0": [[names...], [lines...]], ...}
        for value in doc.values():
            if not (isinstance(value, list) and len(value) == 2):
                continue
            names, lines = value
            if not isinstance(names, list):
                continue
            _check_stack_lines(path, names[0] if names else "?", lines)
            for name in names:
                if isinstance(name, str):
                    stacks[name] = lines
    else:  # old format: {name: [lines...]}
        for name, lines in doc.items():
            _check_stack_lines(path, name, lines)
            stacks[name] = lines
    return stacks


def _check_stack_lines(path: Path, name: Any, lines: Any) -> None:
    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise InputError(f"stack of '{name}' must be a list of strings, got {type(lines).__name__}", path)


def read_construct_json(path: Path) -> dict[str, str | None]:
    """construct.json -> {entry name: parent module entry or None} (micro-step lists reduced to the parent)."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("is not a JSON object; expected construct.json", path)
    tree: dict[str, str | None] = {}
    for name, parent in doc.items():
        if name == "megatron_micro_step_number":
            continue
        if isinstance(parent, list):
            parent = parent[0] if parent else None
        tree[name] = parent if isinstance(parent, str) else None
    return tree


def has_md5(data: dict[str, Any]) -> bool:
    """Whether a dump carries md5 fields, checked as the reference does (spec §2.7)."""
    return any(isinstance(body, dict) and body_has_md5(body) for body in data.values())


def body_has_md5(body: dict[str, Any]) -> bool:
    """Whether one entry body has an md5 field where the reference looks for one (its direct values)."""
    for value in body.values():
        if isinstance(value, list):
            for x in value:
                if isinstance(x, dict) and "md5" in x:
                    return True
        elif isinstance(value, dict) and "md5" in value:
            return True
    return False


def check_input_file(path: Path, what: str) -> None:
    """An input file must be a regular file, not a symlink (decision D9 keeps symlinks refused)."""
    if path.is_symlink():
        raise InputError(f"{what} is a symbolic link; links are refused for safety", path)
    if not path.exists():
        raise InputError(f"{what} does not exist", path)
    if not path.is_file():
        raise InputError(f"{what} is not a regular file", path)
