"""Read dump.json / stack.json / construct.json files and validate their top-level shape."""

from __future__ import annotations

import itertools
import json
import operator
import os
import re
import stat
from dataclasses import field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from msprobe_compare import native
from msprobe_compare.errors import InputError
from msprobe_compare.records import dataclass
from msprobe_compare.runtime import lazy_regex  # compiled when a text has escapes (start-up speed)

_C: Any = native.built("_sharednames")

MAX_JSON_DEPTH = 512  # nesting of any JSON input, on every parser path (orjson, the stdlib parser)


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


class JSONDepthError(ValueError):
    """JSON text nested deeper than MAX_JSON_DEPTH levels."""

    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_JSON_DEPTH} levels")


class TextEncodingError(ValueError):
    """JSON bytes that are not text in their encoding (UTF-8 unless a BOM or NULs say otherwise): `byte` at
    `offset` of the text starts no character. An encoded surrogate (ED A0 80) is one: no output could hold it."""

    def __init__(self, encoding: str, byte: int, offset: int) -> None:
        super().__init__(f"is not valid {encoding} (byte 0x{byte:02x} at offset {offset})")
        self.encoding, self.byte, self.offset = encoding, byte, offset

    def at(self, start: int) -> str:
        """The message with the offset moved by `start` (where the text began in its file)."""
        return f"is not valid {self.encoding} (byte 0x{self.byte:02x} at offset {start + self.offset})"


# an escaped backslash (kept), a surrogate pair (kept), a lone surrogate (replaced)
_ESCAPES = lazy_regex(
    rb"(\\\\)|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def json_depth(text: bytes) -> int:
    """The deepest nesting of objects and arrays in JSON text (brackets inside strings skipped), vectorised: the
    quotes that open or close strings are the ones after an even run of backslashes; a bracket is inside a
    string when an odd number of them precede it."""
    a = np.frombuffer(text, dtype=np.uint8)
    quotes = np.flatnonzero(a == 0x22)
    slashes = np.flatnonzero(a == 0x5C)
    if len(slashes) and len(quotes):
        # length of the run of backslashes just before each quote: runs are consecutive positions
        run_start = np.r_[True, np.diff(slashes) != 1]
        starts = np.maximum.accumulate(np.where(run_start, np.arange(len(slashes)), 0))
        k = np.searchsorted(slashes, quotes) - 1  # the last backslash before each quote
        before = (k >= 0) & (slashes[np.maximum(k, 0)] == quotes - 1)
        run = np.where(before, k - starts[np.maximum(k, 0)] + 1, 0)
        quotes = quotes[run % 2 == 0]
    opens = np.flatnonzero((a == 0x5B) | (a == 0x7B))
    closes = np.flatnonzero((a == 0x5D) | (a == 0x7D))
    opens = opens[np.searchsorted(quotes, opens) % 2 == 0]
    closes = closes[np.searchsorted(quotes, closes) % 2 == 0]
    if not len(opens):
        return 0
    # depth after each open bracket: opens so far minus closes before it
    depth = np.arange(1, len(opens) + 1) - np.searchsorted(closes, opens)
    return int(depth.max())


def check_depth(text: bytes) -> None:
    """JSONDepthError when `text` nests deeper than MAX_JSON_DEPTH (free unless it has that many brackets)."""
    if text.count(b"[") + text.count(b"{") > MAX_JSON_DEPTH and json_depth(text) > MAX_JSON_DEPTH:
        raise JSONDepthError()


def _lone_surrogate(m: re.Match[bytes]) -> bytes:
    return m.group(0) if m.group(1) or m.group(2) else b"\\ufffd"


def loads(text: bytes) -> Any:
    """orjson, or the stdlib parser for the NaN/Infinity tokens the dumper writes (which orjson rejects).

    Text nested deeper than MAX_JSON_DEPTH raises JSONDepthError on both paths. A lone surrogate escape
    (`\\ud800`, valid JSON but no character) is read as U+FFFD, as orjson refuses it and no output could hold
    it: both dumps get the same text, so their names still pair. Raises ValueError (json.JSONDecodeError)
    for text that is not JSON, TextEncodingError for bytes that are not text (the stdlib parser, left to decode
    them, would take an encoded surrogate)."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    else:
        check_depth(text)
        return doc
    check_depth(text)
    if b"\\u" in text:
        text = _ESCAPES.sub(_lone_surrogate, text)  # same length: offsets stay
    encoding = json.detect_encoding(text)
    try:
        decoded = text.decode(encoding)  # strict (json.loads would decode bytes with surrogatepass)
    except UnicodeDecodeError as exc:
        raise TextEncodingError(exc.encoding, text[exc.start], exc.start) from None
    try:
        return json.loads(decoded)
    except RecursionError:  # within the depth bound but deep in a deep call stack
        raise JSONDepthError() from None


def open_regular(path: Path, what: str = "", expected: str = "a JSON file") -> int:
    """A read-only descriptor of `path`, which must be a regular file reached without a symlink at its last
    component (folders on the way may be links). A FIFO, socket or device is refused before anything could
    block on it (opened non-blocking, then checked with fstat). `what` starts the messages ("stack_path")."""
    lead = f"{what} " if what else ""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise InputError(f"{what or 'file'} does not exist", path) from None
    except OSError as exc:
        raise InputError(f"{lead}cannot be read ({exc.strerror or exc})", path) from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError(f"{lead}is a symbolic link; links are refused for safety", path)
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{lead}is a directory, expected {expected}", path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise file_error(exc, path) from None
    kind = _kind(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise InputError(f"{lead}is a {kind}, expected {expected}", path)
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return fd


def _kind(mode: int) -> str | None:
    """What a non-regular file is, None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISLNK, "symbolic link")):  # fmt: skip
        if test(mode):
            return name
    return "special file"


def read_bytes(path: Path, what: str = "", expected: str = "a JSON file") -> bytes:
    """The content of a regular input file (see open_regular)."""
    fd = open_regular(path, what, expected)
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read()
    except OSError as exc:
        raise file_error(exc, path) from None


def read_json(path: Path) -> Any:
    """Parse a JSON file; NaN/Infinity (written by the dumper) are accepted. Errors name the file."""
    raw = read_bytes(path)
    try:
        return loads(raw)
    except JSONDepthError as exc:
        raise InputError(f"is {exc}; refused", path) from None
    except TextEncodingError as exc:
        raise InputError(str(exc), path) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"is not valid JSON ({exc})", path) from None


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
    return stacks_of(read_json(path), path)


def stacks_of(doc: Any, path: Path) -> dict[str, list[str]]:
    """The parsed stack.json `doc` (read from `path`) -> {entry name: stack lines}."""
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
    tree: dict[str, Any] = doc  # normalised in place: only the values that are not a text are visited
    tree.pop("megatron_micro_step_number", None)
    for name in [*itertools.compress(tree, map(operator.not_, map(isinstance, tree.values(),
                                                                 itertools.repeat(str))))]:  # fmt: skip
        parent = tree[name]
        if isinstance(parent, list):
            parent = parent[0] if parent else None
        tree[name] = parent if isinstance(parent, str) else None
    return tree


ConstructBeside = tuple[dict[str, "str | None"], list[str], bool]
"""A construct.json read beside the other side's tree: (tree, the names of both that may have another parent (a
name given twice is listed though its last parent may be base's: compare `tree[k]` with `base[k]`), whether some
name is not in the other tree)."""


def _py_construct_beside(raw: bytes, base: dict[str, str | None]) -> ConstructBeside | None:
    """None: the Python path reads the file in full (`read_construct_json`) and compares the trees (pair.calls'
    tree_diff); tests/judge/test_noise_native.py holds the C twin to that."""
    return None


def _c_construct_beside(raw: bytes, base: dict[str, str | None]) -> ConstructBeside | None:
    """A construct.json's bytes read beside `base`, the other side's tree, in one pass in C
    (`_sharednames.tree_beside`): the tree is a copy of `base` less the names the file lacks or gives another
    parent, then those (so the names and parents both hold are base's objects, not a second copy of 281,000 of
    each, and its order is base's, then the changed names'; the analysis looks names up, it does not walk the other
    tree in order). None for a file outside the plain subset the C reader takes (an escape, a list of micro-steps,
    a value that is not a text or null, a name given twice, bytes that are not JSON), which read_construct_json
    then reads or reports."""
    got = _C.tree_beside(raw, base) if type(base) is dict else None
    if got is None or "megatron_micro_step_number" in got[0]:  # read_construct_json's normalisation: its path only
        return None
    return got


construct_beside = native.twin("_sharednames", _c_construct_beside, _py_construct_beside)


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
    """An input file must be a regular file, not a symlink (decision D9 keeps symlinks refused), nor a FIFO,
    socket or device; checked with lstat, before anything opens it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{what} does not exist", path) from None
    except OSError as exc:
        raise InputError(f"{what} cannot be read ({exc.strerror or exc})", path) from None
    if stat.S_ISLNK(mode):
        raise InputError(f"{what} is a symbolic link; links are refused for safety", path)
    kind = _kind(mode)
    if kind is not None:
        raise InputError(f"{what} is not a regular file (a {kind})", path)


@dataclass(frozen=True)
class LayerFiles:
    """stack.json and construct.json beside one dump.json, as -lm reads them (each file once per side)."""

    dump_dir: Path
    stack: dict[str, Any] | None  # the stack.json object as written (either format); None: neither file exists
    construct: dict[str, str | None] | None  # read_construct_json's tree; None: neither file exists


def read_layer_files(dump_dir: Path) -> LayerFiles:
    """Both files, or neither (-lm then derives no mapping); one without the other is an error."""
    stack_path, construct_path = dump_dir / "stack.json", dump_dir / "construct.json"
    have_stack, have_construct = stack_path.is_file(), construct_path.is_file()
    if not have_stack and not have_construct:
        return LayerFiles(dump_dir, None, None)
    if not have_stack or not have_construct:
        missing = stack_path if not have_stack else construct_path
        raise InputError(f"layer mapping needs both stack.json and construct.json beside dump.json; "
                         f"{missing.name} is missing", dump_dir)  # fmt: skip
    raw_stack = read_json(stack_path)
    if not isinstance(raw_stack, dict):
        raise InputError("is not a JSON object; the format of the stack.json is incorrect", stack_path)
    return LayerFiles(dump_dir, raw_stack, read_construct_json(construct_path))
