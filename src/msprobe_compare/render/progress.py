"""A small progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

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
    def __init__(self, label: str, total: float, unit: str = "", stream: TextIO | None = None) -> None:
        self.label, self.total, self.unit = label, max(total, 0), unit
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0.0
        self.start = self._last = time.monotonic()

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = 1.0 if self.total == 0 else min(self.done / self.total, 1.0)
        bar = "#" * int(frac * WIDTH)
        rate = _human(self.done / max(now - self.start, 1e-9), self.unit) + (" it" if not self.unit else "")
        done, total = _human(self.done, self.unit), _human(self.total, self.unit)
        text = f"\r{self.label}: {frac:4.0%} |{bar:<{WIDTH}}| {done}/{total} [{rate}/s]"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
