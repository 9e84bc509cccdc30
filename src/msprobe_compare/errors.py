"""Errors that stop a compare. Each names the file (or option) and the problem; the CLI prints one line."""

from __future__ import annotations

from enum import Enum
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


class FileProblem(str, Enum):
    """What is wrong with a tensor file (TensorFileError.kind); the value is the word its message starts with."""

    MISSING = "missing"  # the file does not exist
    UNSAFE = "unsafe"  # symlink, path escaping the dump folder, disallowed pickle content
    UNSUPPORTED = "unsupported"  # a format or dtype we do not read
    CORRUPT = "corrupt"  # truncated or inconsistent file


class TensorFileError(Exception):
    """One tensor file cannot be used. Not fatal: the row gets an Err_message and the compare goes on.

    `kind` is a FileProblem code, given as the member or its value (never parse `detail`)."""

    def __init__(self, kind: str, name: str, detail: str) -> None:
        self.kind = FileProblem(kind)
        self.name = name
        self.detail = detail
        super().__init__(f"{self.kind.value} tensor file {name}: {detail}")
