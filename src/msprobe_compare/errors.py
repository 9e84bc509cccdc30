"""Errors that stop a compare. Each names the file (or option) and the problem; the CLI prints one line."""

from __future__ import annotations

from pathlib import Path


class CompareError(Exception):
    """A fatal problem with the user's input or environment (exit code 1, no traceback)."""

    def __init__(self, problem: str, path: str | Path | None = None) -> None:
        self.problem = problem
        self.path = None if path is None else str(path)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if self.path is None:
            return self.problem
        return f"{self.path}: {self.problem}"


class UsageError(CompareError):
    """A command line that cannot work as given, e.g. an option whose optional dependency is missing (exit code 2)."""


class OptionError(UsageError, ValueError):
    """An option that is unknown, of the wrong type or out of range (exit code 2). A ValueError for Python callers."""


class InputError(CompareError):
    """Bad input file or content (missing, unreadable, malformed)."""


class OutputError(CompareError):
    """The output location cannot be written."""


class TensorFileError(Exception):
    """One tensor file cannot be used. Not fatal: the row gets an Err_message and the compare goes on.

    `kind` is a small stable code (never parse `detail`):
    - "missing": the file does not exist
    - "unsafe": symlink, path escaping the dump folder, disallowed pickle content
    - "unsupported": a format or dtype we do not read
    - "corrupt": truncated or inconsistent file
    """

    def __init__(self, kind: str, name: str, detail: str) -> None:
        self.kind = kind
        self.name = name
        self.detail = detail
        super().__init__(f"{kind} tensor file {name}: {detail}")
