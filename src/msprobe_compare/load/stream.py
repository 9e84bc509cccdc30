"""Streaming reader of dump.json: the header first, then the entries of "data" one at a time.

Memory stays proportional to a few blocks of the file plus the set of entry names (and the caller's rows), never to
the whole text or document.

Finding "data": in the dumper's `json.dump(..., indent=n)` layout the header is read from the first block and the
end of "data" from a tail window (`_fast_layout`); in any other layout a first pass reads the top-level keys and
skips "data" by counting brackets (in C when the native module is there), so header keys written after "data" are
known before any entry.

Native text path (any layout: compact, any indent, CRLF, blanks anywhere JSON allows them): the row builder's
native walker reads the entries straight from the bytes (`_text_batches`, Walker.walk in _rowwalk.c) and hands
back, delimited, only the entries it leaves to the object path; each is parsed alone.

Without the native module, two Python paths:
- indent=n layout: inside "data" every entry starts at a line `<2n spaces>"name": ...` and no line inside "data"
  has an indent below 2n; "data" closes at the line `<n spaces>}`. JSON strings cannot hold a raw newline, so the
  byte pattern `\\n<2n spaces>"` marks exactly the entry starts. Blocks are split on it and batches of entries are
  parsed with orjson (the stdlib parser only for entries with NaN/Infinity). Each piece is checked (a trailing
  comma between entries, exactly one key); any surprise hands the rest of "data" to the general path;
- general path (compact JSON, tabs, odd layouts): a tokenizer whose steps are compiled regular expressions, exact
  for any valid JSON, which also words every error. A document whose top level is not an object is parsed whole
  (it is an error report anyway).

Results equal a whole-document parse's `data.items()`, with one exception: a name repeated inside "data" (which a JSON
object parse silently merges) is refused with an InputError.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import field
from itertools import chain
from pathlib import Path
from collections.abc import Generator, Iterable, Iterator
from types import ModuleType
from typing import Any, TypeAlias


import orjson

from msprobe_compare import native
from msprobe_compare.errors import InputError
from msprobe_compare.load.rows import MAX_DEPTH
from msprobe_compare.load.dumpjson import (
    JSONDepthError,
    TextEncodingError,
    check_dump_header,
    file_error,
    loads,
    open_regular,
    read_json,
)
from msprobe_compare.records import dataclass
from msprobe_compare.runtime import lazy_regex  # the tokenizer's patterns: compiled when it runs (start-up speed)

BLOCK = 16 << 20  # bytes read at a time
_C_ROWWALK: Any = native.built("_rowwalk")  # load's C module

SKIP_BUFFER = 1 << 20  # the reused buffer of the native skip over "data" (cache-sized)
WALK_BUFFER = 1 << 20  # the reused buffer of the native text path (cache-sized; grown for a longer entry)
HEAD = 1 << 20  # the header before "data" must lie in this many first bytes for the fast path
TAIL = 1 << 20  # first tail window searched for the end of "data"
MAX_TAIL = 64 << 20
BOM = b"\xef\xbb\xbf"
JSON_WS = b" \t\r\n"

Entry = tuple[str, Any]
Batch: TypeAlias = "dict[str, Any] | list[Entry]"  # consecutive entries: a dict parsed in one go, or (name, body) pairs
BATCH = 1 << 20  # bytes of entries parsed by one orjson call on the fast path
# top-level keys that decide how the dump is read: one of them given twice is refused (a JSON parse keeps the last)
STRUCTURAL = ("task", "level", "framework", "dump_data_dir", "data")


@dataclass(frozen=True)
class DumpHeader:
    """The top-level keys of a dump.json other than "data"."""

    path: Path
    task: str
    level: str | None
    framework: str | None


@dataclass
class _Layout:
    """Where "data" lies in the file and the other top-level keys."""

    keys: dict[str, Any]
    data_type: type | None  # dict when "data" is an object, None when missing
    data_start: int = -1  # offset of the "{" of "data"
    data_end: int = -1  # offset just past its "}"
    indent: int = 0  # n of the indent=n layout; 0 for the general path
    first: int = -1  # offset of the newline before the first entry (indent=n layout)
    empty: bool = False
    values: list[Entry] = field(default_factory=list)  # whole-document fallback only


def open_dump(path: Path) -> tuple[DumpHeader, Iterator[Entry]]:
    """Read the header of a dump.json (`task` and `data` checked by dumpjson.check_dump_header) and return it with a lazy iterator over
    the `(name, body)` entries of "data" in file order. The file is opened again when iteration starts."""
    size, head = _read_head(path)
    layout = _fast_layout(path, size, head)
    if layout is None:
        layout = _scan_document(path)
    task, level, framework = check_dump_header(path, layout.keys, layout.data_type)
    header = DumpHeader(path, task, level, framework)
    return header, Entries(path, layout)


class _Walked:
    """Entries whose rows a native walker added straight from the text (their names, for the repeat check)."""

    __slots__ = ("names",)

    def __init__(self, names: list[str]) -> None:
        self.names = names


class Entries:
    """The `(name, body)` entries of "data", read when iterated. A row builder may first hand over its native
    walker (`use_walker`): the fast path then lets it read whole batches of entries from the text, and yields
    only the entries it left to be parsed as objects."""

    def __init__(self, path: Path, layout: _Layout) -> None:
        self._path = path
        self._layout = layout
        self._walker: Any = None
        self._it: Iterator[Entry] | None = None

    def use_walker(self, walker: Any) -> None:
        if self._it is None:
            self._walker = walker

    def __iter__(self) -> Iterator[Entry]:
        return self

    def __next__(self) -> Entry:
        if self._it is None:
            self._it = self._start()
        try:
            return next(self._it)
        except StopIteration:
            # the walker holds the builder's columns: let them go with the table (a forked reader frees them
            # before it sends the table back)
            self._walker = None
            self._it = iter(())
            raise

    def _start(self) -> Iterator[Entry]:
        path, layout = self._path, self._layout
        if layout.values:
            batches: Iterator[Batch | _Walked] = iter([layout.values])
        elif layout.empty:
            batches = iter(())
        elif self._walker is not None:
            batches = _text_batches(path, layout, self._walker)
        elif layout.indent:
            batches = _fast_batches(path, layout)
        else:
            batches = _singles(_general_entries(path, layout.data_start, at_key=False, expect_end=layout.data_end))
        # the entries of each checked batch are iterated in C: no Python frame per entry
        return chain.from_iterable(_unique(path, batches))


# -- header ---------------------------------------------------------------------------------------------------------
def _read_head(path: Path) -> tuple[int, bytes]:
    fd = open_regular(path)  # a regular file, never a FIFO or device (which could block) nor a symlink
    try:
        with os.fdopen(fd, "rb") as f:
            return os.fstat(f.fileno()).st_size, f.read(HEAD)
    except OSError as exc:
        raise file_error(exc, path) from None


_DATA_KEY = re.compile(rb'\n( +)"data": ')


def _fast_layout(path: Path, size: int, head: bytes) -> _Layout | None:
    """Header and the span of "data" from the head and tail of an indent=n file, or None for another layout."""
    m = _DATA_KEY.search(head)
    if m is None:
        return None
    n = len(m.group(1))
    prefix = head[: m.start()].removeprefix(BOM).strip(JSON_WS)
    if _may_repeat(prefix):
        return None  # the general path names the repeated key
    if prefix == b"{":
        before: Any = {}
    elif prefix.startswith(b"{") and prefix.endswith(b","):
        before = _loads_or_none(prefix[:-1] + b"}")
        if not isinstance(before, dict) or "data" in before:
            return None
    else:
        return None
    start = m.end()
    if head.startswith(b"{}", start):
        with open(path, "rb") as f:
            f.seek(start + 2)
            rest = f.read()
        trailing = _trailing_keys(rest)
        if trailing is None or not before.keys().isdisjoint(trailing):
            return None
        return _Layout({**before, **trailing}, dict, start, start + 2, n, empty=True)
    opening = b"{\r\n" if head.startswith(b"{\r", start) else b"{\n"
    if not head.startswith(opening + b" " * (2 * n) + b'"', start):
        return None
    found = _find_data_end(path, size, start, n)
    if found is None:
        return None
    end, trailing = found
    if not before.keys().isdisjoint(trailing):
        return None
    return _Layout({**before, **trailing}, dict, start, end, n, first=start + len(opening) - 1)


def _find_data_end(path: Path, size: int, start: int, n: int) -> tuple[int, dict[str, Any]] | None:
    """Offset just past the "}" closing "data" and the top-level keys after it, from a tail window.

    The lines indented by exactly n spaces after "data" opens are its closing line, then the keys written after
    it: one line each, or an opening line and a closing line for a multi-line value. They are paired from the end;
    the closing line left without an opener is the end of "data". When the window does not reach back to "data",
    that line must have half the window before it, free of such lines (a value after "data" of that size would
    deceive it), and the guess is checked again when the entries are read (`_general_entries` refuses a mismatch).
    """
    depth1 = re.compile(b"\n" + b" " * n + b"(?! )")
    window = TAIL
    with open(path, "rb") as f:
        while True:
            lo = max(start, size - window)
            f.seek(lo)
            text = f.read(size - lo)
            lines = [x.start() for x in depth1.finditer(text)]
            i = len(lines) - 1
            while i >= 0:
                p = lines[i]
                kind = text[p + 1 + n : p + 2 + n]
                if kind in (b"}", b"]"):
                    if i == 0:
                        if lo > start and p < len(text) // 2:
                            break  # its opener may lie before the window: look further back
                        if kind != b"}":
                            return None
                        trailing = _trailing_keys(text[p + 2 + n :])
                        if trailing is None:
                            return None
                        return lo + p + 2 + n, trailing
                    q = lines[i - 1]
                    opener = text[q + 1 : text.find(b"\n", q + 1)].rstrip(JSON_WS)
                    if not (opener[n : n + 1] == b'"' and opener[-1:] in (b"{", b"[")):
                        return None
                    i -= 2
                elif kind == b'"':
                    i -= 1
                else:
                    return None
            if lo == start or window >= MAX_TAIL:
                return None
            window *= 4


def _trailing_keys(rest: bytes) -> dict[str, Any] | None:
    """The top-level keys in the text after the "}" of "data" (`,"k": v ...}` or `}`), or None if malformed."""
    rest = rest.strip(JSON_WS)
    if rest == b"}":
        return {}
    if not rest.startswith(b",") or _may_repeat(rest):
        return None
    keys = _loads_or_none(b"{" + rest[1:])
    if not isinstance(keys, dict) or "data" in keys:
        return None
    return keys


def _may_repeat(text: bytes) -> bool:
    """Whether a structural key's quoted name occurs twice in header text (then the general path decides)."""
    return any(text.count(b'"%s"' % key.encode()) > 1 for key in STRUCTURAL)


# -- fast path -----------------------------------------------------------------------------------------------------
def _fast_batches(path: Path, layout: _Layout) -> Iterator[Batch]:
    """Entries of "data" in an indent=n file, split at the entry-start lines.

    About BATCH bytes of whole entries at a time are parsed by one orjson call as one object; that is exact when
    the object has as many members as the batch has entry-start lines. Otherwise (NaN/Infinity, a repeated name,
    a surprise in the layout) the batch is split (`_batches`) down to the entries that need `_parse_piece`.
    (With the native walker, `_text_batches` reads every layout instead.)"""
    n = layout.indent
    sep = b"\n" + b" " * (2 * n) + b'"'
    lsep = len(sep)
    region_end = layout.data_end - (n + 2)  # the newline before `<n spaces>}`
    pos = layout.first  # file offset of buf[0]; buf always starts with sep
    buf = b""
    with open(path, "rb") as f:
        f.seek(pos)
        while True:
            # geometric growth when one entry spans several blocks
            chunk = f.read(min(max(BLOCK, len(buf)), region_end - pos - len(buf)))
            last = pos + len(buf) + len(chunk) >= region_end
            if not chunk and not last:
                raise InputError("changed while it was read (it became shorter)", path)
            buf = buf + chunk if buf else chunk
            del chunk
            end = len(buf)
            i = 0
            while True:
                # [i, k): whole entries, about BATCH bytes (all the rest at the end of "data")
                k = buf.find(sep, i + BATCH)
                if k < 0:
                    k = end if last else buf.rfind(sep, i + lsep)
                    if k <= i:
                        break
                if (yield from _object_path(path, layout, buf, i, k, sep, end, pos)):
                    return
                if k == end:
                    return
                i = k
            buf = buf[i:]
            pos += i


def _object_path(path: Path, layout: _Layout, buf: bytes, i: int, k: int, sep: bytes, end: int,
                 pos: int) -> Generator[Batch, None, bool]:  # fmt: skip
    """The entries in buf[i:k] parsed as objects; when one does not parse alone, the general path reads the rest
    of "data" from there, and the generator returns True (the caller stops)."""
    for batch in _batches(buf, i, k, sep, end):
        if isinstance(batch, int):
            yield from _singles(_general_entries(path, pos + batch + len(sep) - 1, at_key=True,
                                                 expect_end=layout.data_end))  # fmt: skip
            return True
        yield batch
    return False


def _batches(buf: bytes, i: int, k: int, sep: bytes, end: int) -> Iterator[Batch | int]:
    """The entries in buf[i:k] as batches: parsed in one go where exact, else split in two around the middle entry
    start, down to single entries (so a NaN or an odd entry costs a few small parses, not one per entry). Ends
    with the offset of an entry that does not parse alone, if there is one."""
    batch = _parse_batch(buf, i, k, sep, final=k == end)
    if batch is not None:
        yield batch
        return
    lsep = len(sep)
    m = buf.find(sep, i + max(lsep, (k - i) // 2), k)
    if m < 0:
        m = buf.find(sep, i + lsep, k)
    if m < 0:  # one entry
        entry = _parse_piece(buf[i + lsep : k], final=k == end)
        yield [entry] if entry is not None else i
        return
    for part in _batches(buf, i, m, sep, end):
        yield part
        if isinstance(part, int):
            return
    yield from _batches(buf, m, k, sep, end)


def _parse_batch(buf: bytes, i: int, k: int, sep: bytes, final: bool) -> dict[str, Any] | None:
    """The entries in buf[i:k] (each starting with `sep`) parsed as one object, or None when that is not exact."""
    text = _members(buf[i + len(sep) - 1 : k], final)
    if text is None:
        return None
    try:
        doc = orjson.loads(b"{" + text + b"}")
    except orjson.JSONDecodeError:
        return None
    return doc if len(doc) == buf.count(sep, i, k) else None


def _members(text: bytes, final: bool) -> bytes | None:
    """Object members followed by the comma before the next entry (none after the last): the members, or None."""
    text = text.rstrip(JSON_WS)
    if text.endswith(b","):
        return None if final else text[:-1]
    return text if final else None


def _singles(entries: Iterator[Entry]) -> Iterator[Batch]:
    return ([entry] for entry in entries)


def _parse_piece(piece: bytes, final: bool) -> Entry | None:
    """`name": body,` (the text after an entry-start quote) -> (name, body); None if it is not exactly that."""
    body = _members(piece, final)
    if body is None:
        return None
    doc = _loads_or_none(b'{"' + body + b"}")
    if not isinstance(doc, dict) or len(doc) != 1:
        return None
    return next(iter(doc.items()))


# -- native text path: any layout -----------------------------------------------------------------------------------
WALK_END, WALK_MORE = 0, 1  # Walker.walk's status codes (_rowwalk.WALK_END, WALK_MORE); else WALK_OBJECT


def _text_batches(path: Path, layout: _Layout, walker: Any) -> Iterator[Batch | _Walked]:
    """The entries of "data" in any layout, read by the native walker straight from the bytes (Walker.walk in
    _rowwalk.c): it adds the rows of every plain entry itself, a reused buffer of WALK_BUFFER bytes at a time
    (grown for an entry that does not fit), and hands back each entry it leaves to the object path, delimited; that
    one is parsed alone here. An entry that does not parse alone (or text that is not valid JSON) sends the rest
    of "data" to the general path, which words the error."""
    region_end = layout.data_end  # just past the "}" of "data"
    base = layout.data_start  # file offset of buf[0]
    # no bigger than "data" itself: a small dump does not fault in a whole buffer's pages (start-up speed)
    buf = bytearray(max(1, min(WALK_BUFFER, region_end - base)))
    view = memoryview(buf)
    try:
        with open(path, "rb") as f:
            f.seek(base)
            filled = f.readinto(view[: min(len(buf), region_end - base)])
            at = 0
            while True:
                final = base + filled >= region_end
                names, at, status, extent = walker.walk(view[:filled], at, final)
                if names:
                    yield _Walked(names)
                if status == WALK_END:
                    if base + at != region_end:  # the tail window guessed the end of "data" wrong
                        raise _unexpected_layout(path)
                    return
                if status == WALK_MORE:  # an entry runs past the buffer: keep it, read more after it
                    keep = filled - at
                    if keep * 2 > len(buf):  # an entry longer than half the buffer: double it
                        view.release()
                        buf.extend(bytes(len(buf)))
                        view = memoryview(buf)
                    view[:keep] = view[at:filled]
                    base, at, filled = base + at, 0, keep
                    got = f.readinto(view[filled : min(len(buf), region_end - base)])
                    if not got:
                        raise InputError("changed while it was read (it became shorter)", path)
                    filled += got
                    continue
                piece = bytes(view[at + 1 : extent]) if extent > at else b""
                entry = _parse_piece(piece, final=True) if piece else None
                if entry is None:
                    yield from _singles(_general_entries(path, base + at, at_key=True, expect_end=region_end))
                    return
                yield [entry]
                at = extent
    finally:
        view.release()


# -- general path --------------------------------------------------------------------------------------------------
_WS = lazy_regex(rb"[ \t\r\n]*")
_STRING = lazy_regex(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
# text up to the next bracket, whole strings included (an unterminated string stops it at its quote)
_RUN = lazy_regex(rb'(?:[^"{}\[\]]+|"[^"\\]*(?:\\.[^"\\]*)*")*', re.S)
_SCALAR = lazy_regex(rb'[^ \t\r\n,:{}\[\]"]+')
_OPEN, _CLOSE = frozenset(b"{["), frozenset(b"}]")


class _Scanner:
    """A forward byte scanner over a file: a sliding buffer, steps by compiled regexes.

    `mark` (a buffer index, or -1) pins the start of a value being captured; everything before min(pos, mark) is
    dropped when the next block is read.
    """

    def __init__(self, path: Path, f: io.BufferedReader, offset: int) -> None:
        self.path = path
        self.f = f
        f.seek(offset)
        self.buf = b""
        self.pos = 0
        self.base = offset  # file offset of buf[0]
        self.mark = -1
        self.eof = False

    def offset(self) -> int:
        return self.base + self.pos

    def more(self) -> bool:
        """Read the next block; False at the end of the file."""
        if self.eof:
            return False
        keep = self.pos if self.mark < 0 else min(self.mark, self.pos)
        chunk = self.f.read(max(BLOCK, len(self.buf) - keep))
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[keep:] + chunk
        self.base += keep
        self.pos -= keep
        if self.mark >= 0:
            self.mark -= keep
        return True

    def peek(self) -> int:
        """The next non-blank byte (not consumed), -1 at the end of the file."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return -1

    def expect(self, chars: bytes, what: str) -> int:
        c = self.peek()
        if c < 0 or c not in chars:
            self.fail(what)
        self.pos += 1
        return c

    def string(self) -> None:
        while True:
            m = _STRING.match(self.buf, self.pos)
            if m is not None:
                self.pos = m.end()
                return
            if not self.more():
                self.fail("Unterminated string")

    def _c_container(self) -> None:
        """_py_container's counting in C (`_rowwalk.skip`)."""
        pos, depth, done = _C_ROWWALK.skip(self.buf, self.pos, 0)
        self.pos = pos
        if not done:
            self._skip_rest(_C_ROWWALK, depth)

    def _py_container(self) -> None:
        """Skip an object or array (brackets are counted, strings skipped whole; parsing validates the rest)."""
        depth = 0
        while True:
            buf = self.buf
            end = len(buf)
            pos = _RUN.match(buf, self.pos).end()  # type: ignore[union-attr]
            while pos < end:
                c = buf[pos]
                if c in _OPEN:
                    depth += 1
                elif c in _CLOSE:
                    depth -= 1
                    if depth == 0:
                        self.pos = pos + 1
                        return
                else:  # the quote of a string cut by the end of the buffer
                    break
                pos = _RUN.match(buf, pos + 1).end()  # type: ignore[union-attr]
            self.pos = pos
            if not self.more():
                self.fail("Unexpected end of data")

    container = native.twin("_rowwalk", _c_container, _py_container)

    def _skip_rest(self, fast: ModuleType, depth: int) -> None:
        """The rest of a container that the buffer cuts (at its end or at the quote of a string), counted in C
        over the file read into one small reused buffer (no new block per read); the scanner then goes on after
        it. A container that does not end fails as `container` does, at the same offset."""
        if self.mark >= 0:  # a capture spans it: the ordinary blocks keep its bytes
            while True:
                if not self.more():
                    self.fail("Unexpected end of data")
                pos, depth, done = fast.skip(self.buf, self.pos, depth)
                self.pos = pos
                if done:
                    return
        tail = len(self.buf) - self.pos  # a cut string: counted again with what follows it
        at = self.base + self.pos  # file offset of buf[0]
        buf = bytearray(max(SKIP_BUFFER, 2 * tail))
        buf[:tail] = self.buf[self.pos :]
        view = memoryview(buf)
        self.buf, self.pos = b"", 0
        filled = tail
        while True:
            got = self.f.readinto(view[filled:]) if not self.eof else 0
            if not got:  # fails where `container` does: the end of the file, or the quote of a cut string
                self.eof = True
                self.buf, self.base, self.pos = bytes(view[:filled]), at, 0
                view.release()
                self.fail("Unexpected end of data")
            filled += got
            pos, depth, done = fast.skip(view[:filled], 0, depth)
            if done:
                end = at + pos
                break
            keep = filled - pos  # a string cut by the buffer's end, from its quote
            if keep * 2 > len(buf):  # a string longer than half the buffer
                view.release()
                buf.extend(bytes(len(buf)))
                view = memoryview(buf)
            view[:keep] = view[pos:filled]
            at, filled = at + pos, keep
        view.release()
        self.f.seek(end)
        self.buf, self.base, self.pos, self.eof = b"", end, 0, False

    def value(self) -> None:
        c = self.peek()
        if c in _OPEN:
            self.container()
        elif c == 0x22:  # '"'
            self.string()
        else:
            while True:
                m = _SCALAR.match(self.buf, self.pos)
                if m is None:
                    self.fail("Expecting value")
                if m.end() < len(self.buf) or not self.more():  # type: ignore[union-attr]
                    self.pos = m.end()  # type: ignore[union-attr]
                    return

    def capture(self, step: str) -> bytes:
        """Run `string` or `value` and return the bytes it consumed."""
        self.peek()
        self.mark = self.pos
        getattr(self, step)()
        text = self.buf[self.mark : self.pos]
        self.mark = -1
        return text

    def parse(self, text: bytes, at: int) -> Any:
        """A captured JSON text; errors are reported at their file offset (`at` = offset of text[0])."""
        try:
            return loads(text)
        except JSONDepthError:
            raise
        except TextEncodingError as exc:
            raise InputError(exc.at(at), self.path) from None
        except json.JSONDecodeError as exc:
            head = text.decode("utf-8", "replace")[: exc.pos]
            raise _invalid(self.path, exc.msg, at + len(head.encode())) from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"is not valid JSON ({exc})", self.path) from None

    def fail(self, what: str) -> None:
        raise _invalid(self.path, what, self.offset())


def _invalid(path: Path, what: str, offset: int) -> InputError:
    """'is not valid JSON' with the line and column of a file offset."""
    line, last_nl, done = 1, -1, 0
    try:
        with open(path, "rb") as f:
            while done < offset:
                chunk = f.read(min(BLOCK, offset - done))
                if not chunk:
                    break
                k = chunk.rfind(b"\n")
                if k >= 0:
                    line += chunk.count(b"\n")
                    last_nl = done + k
                done += len(chunk)
    except OSError:
        pass
    return InputError(f"is not valid JSON ({what}: line {line} column {offset - last_nl} (byte {offset}))", path)


def _scan_document(path: Path) -> _Layout:
    """First pass of the general path: the top-level keys, with "data" skipped and located."""
    with open(path, "rb") as f:
        s = _Scanner(path, f, 0)
        s.more()
        if s.buf.startswith(BOM):
            s.pos = len(BOM)
        # not an object (parsed whole for the error report), or UTF-16/32 text (which the stdlib parser decodes)
        if s.peek() != 0x7B or b"\x00" in s.buf[:4]:
            return _whole_document(path)
        s.pos += 1
        keys: dict[str, Any] = {}
        layout = _Layout(keys, None)
        seen: set[str] = set()
        if s.peek() == 0x7D:
            s.pos += 1
        else:
            while True:
                if s.peek() != 0x22:
                    s.fail("Expecting property name enclosed in double quotes")
                at = s.offset()
                key = s.parse(s.capture("string"), at)
                if key in seen and key in STRUCTURAL:
                    raise InputError(f"top-level key '{key}' appears more than once; which one counts is ambiguous",
                                     path)  # fmt: skip
                seen.add(key)
                s.expect(b":", "Expecting ':' delimiter")
                if key == "data" and s.peek() == 0x7B:
                    layout.data_type, layout.data_start = dict, s.offset()
                    s.container()
                    layout.data_end = s.offset()
                else:
                    s.peek()
                    at = s.offset()
                    try:
                        value = s.parse(s.capture("value"), at)
                    except JSONDepthError as exc:
                        raise InputError(f"top-level key '{key}' is {exc}", path) from None
                    if key == "data":
                        layout.data_type, layout.data_start = type(value), -1
                    else:
                        keys[key] = value
                if s.expect(b",}", "Expecting ',' delimiter") == 0x7D:
                    break
        if s.peek() >= 0:
            s.fail("Extra data")
    return layout


def _whole_document(path: Path) -> _Layout:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("is not a JSON object; expected a dump.json written by msprobe", path)
    data = doc.get("data")
    keys = {k: v for k, v in doc.items() if k != "data"}
    layout = _Layout(keys, type(data) if "data" in doc else None, empty=not data)
    if isinstance(data, dict):
        layout.values = list(data.items())
    return layout


def _general_entries(path: Path, offset: int, at_key: bool, expect_end: int) -> Iterator[Entry]:
    """Second pass of the general path: the entries of "data" from `offset` (its "{", or an entry's name)."""
    with open(path, "rb") as f:
        s = _Scanner(path, f, offset)
        if not at_key:
            s.expect(b"{", "Expecting '{'")
            if s.peek() == 0x7D:
                s.pos += 1
                return
        while True:
            if s.peek() != 0x22:
                s.fail("Expecting property name enclosed in double quotes")
            s.mark = s.pos
            at = s.offset()
            s.string()
            s.expect(b":", "Expecting ':' delimiter")
            s.value()
            text = s.buf[s.mark : s.pos]
            s.mark = -1
            try:
                doc = s.parse(b"{" + text + b"}", at - 1)
            except JSONDepthError:  # deeper than any entry may be (rows.MAX_DEPTH): the walk's own message
                name = s.parse(_STRING.match(text).group(0), at)  # type: ignore[union-attr]
                raise InputError(f"entry '{name}' is nested deeper than {MAX_DEPTH} levels", path) from None
            yield next(iter(doc.items()))
            if s.expect(b",}", "Expecting ',' delimiter") == 0x7D:
                break
        if s.offset() != expect_end:
            raise _unexpected_layout(path)


def _unexpected_layout(path: Path) -> InputError:
    return InputError(
        "could not be read as one document: the keys after 'data' are laid out unexpectedly "
        "(re-save it with json.dump(..., indent=1))",
        path,
    )


def _unique(path: Path, batches: Iterator[Batch | _Walked]) -> Iterator[Iterable[Entry]]:
    """Refuse a repeated entry name (a whole-document parse would silently keep only its last body); the entries
    before it are still yielded first, so errors come in file order."""
    seen: set[str] = set()
    met: list[list[str]] = []  # every batch's names in file order, to name a walked batch's repeat
    for batch in batches:
        if isinstance(batch, _Walked):
            names = batch.names
            before = len(seen)
            seen.update(names)  # one pass over the names; a repeat shows in the count
            met.append(names)
            if len(seen) - before == len(names):
                continue
            again: set[str] = set()  # their rows are added already: only the error matters now
            for name in chain.from_iterable(met):  # the first repeat in file order is in this batch
                if name in again:
                    raise InputError(f"entry '{name}' appears more than once in 'data'", path)
                again.add(name)
            continue  # not reached: the count showed a repeat, which the loop above raises on
        if isinstance(batch, dict) and seen.isdisjoint(batch):
            seen.update(batch)
            met.append(list(batch))
            yield batch.items()
            continue
        out: list[Entry] = []
        for name, body in batch.items() if isinstance(batch, dict) else batch:
            if name in seen:
                yield out
                raise InputError(f"entry '{name}' appears more than once in 'data'", path)
            seen.add(name)
            out.append((name, body))
        met.append([name for name, _ in out])
        yield out


def _loads_or_none(text: bytes) -> Any:
    """Parse JSON text (NaN/Infinity accepted); None when it is not valid."""
    try:
        return loads(text)
    except ValueError:
        return None
