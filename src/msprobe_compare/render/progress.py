"""A small progress bar on stderr, drawn only when stderr is a terminal; console lines are printed above it."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from msprobe_compare.log import CLEAR, is_terminal, set_live_line

WIDTH = 30


def _human(n: float, unit: str) -> str:
    if unit != "B":
        return f"{int(n)}"
    for suffix in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or suffix == "TB":
            return f"{n:.1f}{suffix}" if suffix != "B" else f"{int(n)}B"
        n /= 1024
    return f"{n}"


class Progress:
    """`label: 40% |####      | done/total [rate/s]`, redrawn at most every 0.1 s; `enabled` False: nothing drawn
    (not a terminal, or a quiet run)."""

    def __init__(self, label: str, total: float, unit: str = "", stream: TextIO | None = None,
                 enabled: bool = True) -> None:  # fmt: skip
        self.label, self.total, self.unit = label, max(total, 0), unit
        self.stream = stream or sys.stderr
        self.enabled = enabled and is_terminal(self.stream)
        self.done = 0.0
        self.start = self._last = time.monotonic()
        self.drawn = False
        if self.enabled:
            set_live_line(self)
            self._draw(self.start)

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            self._draw(now)

    def text(self, now: float) -> str:
        frac = 1.0 if self.total == 0 else min(self.done / self.total, 1.0)
        bar = "#" * int(frac * WIDTH)
        rate = _human(self.done / max(now - self.start, 1e-9), self.unit) + (" it" if not self.unit else "")
        done, total = _human(self.done, self.unit), _human(self.total, self.unit)
        return f"{self.label}: {frac:4.0%} |{bar:<{WIDTH}}| {done}/{total} [{rate}/s]"

    def _draw(self, now: float) -> None:
        self._write(CLEAR + self.text(now))
        self.drawn = True

    def hide(self) -> None:
        if self.drawn:
            self._write(CLEAR)
            self.drawn = False

    def show(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())

    def close(self) -> None:
        if self.enabled:
            set_live_line(None)
            self._draw(time.monotonic())
            self._write("\n")
            self.enabled = self.drawn = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: progress is not worth an error
            pass
