"""Helpers shared by the benchmark scripts (run as `python3 bench/<script>.py`, so this folder is on sys.path)."""

import os
import shutil
import sys


def find_ours(ref):
    """Command for our tool: `msprobe` on PATH unless it is the reference's, else `python -m msprobe_compare`."""
    exe = shutil.which("msprobe")
    if exe and not (ref and os.path.realpath(exe) == os.path.realpath(ref)) and "refvenv" not in exe:
        return [exe]
    return [sys.executable, "-m", "msprobe_compare"]


def tail(path, n=15):
    """The last `n` non-empty lines of a log file, indented, for failure reports."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").replace("\r", "\n").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + ln for ln in [x for x in lines if x.strip()][-n:])
