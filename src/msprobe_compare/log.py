"""Console output in the reference's format: `YYYY-mm-dd HH:MM:SS (PID) [LEVEL] message`."""

from __future__ import annotations

import os
import re
import sys
import time
from typing import TextIO

LEVELS = {"DEBUG": 0, "INFO": 1, "WARNING": 2, "ERROR": 3}
_UNSAFE = re.compile(r"[\n\r\x7f\b\f\t\v]|%0[8abcd]|%7f", re.IGNORECASE)
BANNER_WIDTH = 84


def _threshold() -> int:
    raw = os.environ.get("MSPROBE_LOG_LEVEL", "1")
    return int(raw) if raw in ("0", "1", "2", "3", "4") else 1


class Console:
    """Log lines on stdout. `prefix` tags lines of one rank ("[rank0]"); `quiet` prints nothing."""

    def __init__(self, stream: TextIO | None = None, prefix: str = "", quiet: bool = False) -> None:
        self.stream = stream
        self.prefix = prefix
        self.threshold = len(LEVELS) if quiet else _threshold()

    def log(self, level: str, message: str) -> None:
        if LEVELS[level] < self.threshold:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = _UNSAFE.sub("_", message)
        stream = self.stream or sys.stdout
        print(f"{stamp} ({os.getpid()}) [{level}] {self.prefix}{text}", file=stream, flush=True)

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
