"""Console output in the reference's format: `YYYY-mm-dd HH:MM:SS (PID) [LEVEL] message`, and the progress of a
long compare on a terminal's stderr.

Every line is written whole, in one write(2) (never a text and its newline apart, which PYTHONUNBUFFERED=1 would
make two writes): lines of parallel workers never interleave inside a line on a terminal, in a file, or through a
pipe (whole up to PIPE_BUF, 4 KiB; longer lines too where the workers share the lock of `share_lock`).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import Any, Protocol, TextIO

LEVELS = {"DEBUG": 0, "INFO": 1, "WARNING": 2, "ERROR": 3}
_UNSAFE = re.compile(r"[\n\r\x7f\b\f\t\v]|%0[8abcd]|%7f", re.IGNORECASE)
BANNER_WIDTH = 84
CLEAR = "\r\x1b[K"  # back to the line's start, and erase it
_LOCK = threading.Lock()  # whole lines among this process's threads
_SHARED: Any = None  # a multiprocessing lock shared with worker processes (share_lock), else None
SHARED_WAIT_S = 10.0  # a worker that died holding the shared lock stops no one for longer
KEEP_STAGES_S = 2.0  # a compare that took longer leaves its stages line (with the times) when done


class LiveLine(Protocol):
    """A line redrawn in place on stderr (a progress bar, the stages of a compare): console lines go above it."""

    def hide(self) -> None: ...

    def show(self) -> None: ...


_live: tuple[int, LiveLine] | None = None  # (pid, line): forked workers inherit it but never draw it


def set_live_line(line: LiveLine | None) -> None:
    """Make `line` the one that console lines of this process are printed above (None: no such line); the one it
    replaces is erased."""
    global _live
    old = _live_line()
    if old is not None and old is not line:
        old.hide()
    _live = None if line is None else (os.getpid(), line)


def _live_line() -> LiveLine | None:
    return _live[1] if _live is not None and _live[0] == os.getpid() else None


def share_lock(lock: Any) -> None:
    """In a worker process (a pool's initializer): take the lock its parent and siblings write lines under."""
    global _SHARED
    _SHARED = lock


def is_terminal(stream: Any) -> bool:
    """Whether `stream` is open on a terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def write_line(text: str, stream: TextIO | None = None) -> None:
    """`text` and a newline as one write, flushed, with any live line of this process kept below it."""
    stream = stream or sys.stdout
    shared = _SHARED is not None and _SHARED.acquire(timeout=SHARED_WAIT_S)
    try:
        with _LOCK:
            live = _live_line() if is_terminal(stream) else None
            if live is not None:
                live.hide()
            stream.write(text + "\n")
            stream.flush()
            if live is not None:
                live.show()
    finally:
        if shared:
            _SHARED.release()


def _threshold() -> int:
    raw = os.environ.get("MSPROBE_LOG_LEVEL", "1")
    return int(raw) if raw in ("0", "1", "2", "3", "4") else 1


class Console:
    """Log lines on stdout. `prefix` tags lines of one rank ("[rank0]"); `quiet` prints nothing. `stages`: this
    console may show the compare's stages on a terminal's stderr (`stage`; the command's console only)."""

    def __init__(self, stream: TextIO | None = None, prefix: str = "", quiet: bool = False,
                 stages: bool = False) -> None:  # fmt: skip
        self.stream = stream
        self.prefix = prefix
        self.threshold = len(LEVELS) if quiet else _threshold()
        self.stages: StatusLine | None = StatusLine() if stages and not quiet and is_terminal(sys.stderr) else None

    @property
    def quiet(self) -> bool:
        """Whether this console prints nothing (the Python API's default, MSPROBE_LOG_LEVEL=4): no progress either."""
        return self.threshold >= len(LEVELS)

    def log(self, level: str, message: str) -> None:
        if LEVELS[level] < self.threshold:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = _UNSAFE.sub("_", message)
        write_line(f"{stamp} ({os.getpid()}) [{level}] {self.prefix}{text}", self.stream)

    def debug(self, message: str) -> None:
        self.log("DEBUG", message)

    def info(self, message: str) -> None:
        self.log("INFO", message)

    def warning(self, message: str) -> None:
        self.log("WARNING", message)

    def error(self, message: str) -> None:
        self.log("ERROR", message)

    def banner(self) -> None:
        stars = "*" * BANNER_WIDTH
        self.info(stars)
        self.info("*" + "msprobe compare ends successfully.".center(BANNER_WIDTH - 2) + "*")
        self.info(stars)

    def stage(self, name: str) -> None:
        """The compare goes on to stage `name` (shown on a terminal only, by the command's console only)."""
        if self.stages is not None:
            self.stages.enter(name)

    def progress(self, text: str) -> None:
        """A line of progress on stderr (a terminal only; not in quiet consoles), e.g. ranks done of all."""
        if not self.quiet and is_terminal(sys.stderr):
            write_line(text, sys.stderr)

    def end_stages(self) -> None:
        """The last stage is done: its line stays, with every stage's time."""
        if self.stages is not None:
            self.stages.close()
            self.stages = None


class StatusLine:
    """The stages of one compare on one line of stderr, redrawn in place: each finished stage with its seconds, then
    the current one (`compare: reading 2.1s, pairing 0.3s, measuring...`). Cut to the terminal's width (a wrapped
    line cannot be redrawn in place). When done, the line stays if the compare took KEEP_STAGES_S or longer."""

    def __init__(self, label: str = "compare", stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.done: list[tuple[str, float]] = []
        self.current: str | None = None
        self.began = self.started = time.monotonic()
        self.drawn = False

    def enter(self, name: str) -> None:
        now = time.monotonic()
        if self.current is not None:
            self.done.append((self.current, now - self.started))
        elif not self.done:
            self.began = now
        self.current, self.started = name, now
        with _LOCK:
            if _live_line() is not self:
                set_live_line(self)
            self.show()

    def text(self) -> str:
        parts = [f"{name} {seconds:.1f}s" for name, seconds in self.done]
        if self.current is not None:
            parts.append(f"{self.current}...")
        text = f"{self.label}: {', '.join(parts)}"
        width = _columns(self.stream) - 1
        return text if len(text) <= width else "..." + text[len(text) - width + 3 :]

    def hide(self) -> None:
        if self.drawn:
            self._write(CLEAR)
            self.drawn = False

    def show(self) -> None:
        self._write(CLEAR + self.text())
        self.drawn = True

    def close(self) -> None:
        """The current stage is done; the line is no longer redrawn. It stays, with every stage's time, when the
        compare took KEEP_STAGES_S or longer, else it is erased."""
        now = time.monotonic()
        if self.current is not None:
            self.done.append((self.current, now - self.started))
            self.current = None
        if _live_line() is self:
            set_live_line(None)
        with _LOCK:
            if not self.done:  # no stage was ever entered: nothing was drawn
                pass
            elif now - self.began >= KEEP_STAGES_S:
                self._write(CLEAR + self.text() + "\n")
            elif self.drawn:
                self._write(CLEAR)
        self.drawn = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: progress is not worth an error
            pass


def _columns(stream: Any) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80
