"""The commands: `msprobe-compare` (and `python -m msprobe_compare`) run our subcommands, compare and merge_result;
`msprobe` runs them too and hands every other subcommand (run_ut, parse, acc_check, ...) to the installed
mindstudio-probe, whose command of the same name ours may have replaced.

Light on purpose: cli.py (numpy, the pipeline) is imported only for our own subcommands, and mindstudio-probe is
never imported into this process: its `msprobe` entry point is read from its installed metadata and run in a
fresh interpreter.
"""

from __future__ import annotations

import os
import re
import sys

OURS = ("compare", "merge_result")  # cli.COMMANDS
REFERENCE = "mindstudio-probe"  # the distribution whose `msprobe` command ours stands in for
EXIT_USAGE = 2
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")
# Runs `module:attr` as the reference's console script would, with argv[0] "msprobe". The working directory is
# taken off sys.path first: as its own command the reference never imports from there.
_BOOT = (
    "import importlib, sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "module, attr = sys.argv[1:3]\n"
    "sys.argv[:3] = ['msprobe']\n"
    "target = importlib.import_module(module)\n"
    "for part in attr.split('.'):\n"
    "    target = getattr(target, part)\n"
    "sys.exit(target())\n"
)


def subcommand(argv: list[str]) -> str | None:
    """The subcommand `argv` names: its first word that is neither an option nor the value of -f/--framework."""
    value_next = False
    for word in argv:
        if value_next:
            value_next = False
        elif word in ("-f", "--framework"):
            value_next = True
        elif not word.startswith("-"):
            return word
    return None


def reference_entry() -> tuple[str, str] | None:
    """(module, function) of mindstudio-probe's `msprobe` command, found without importing it; None when it is not
    installed. Its distribution's entry points first; else (a tree installed without metadata) `msprobe/msprobe.py`
    of the `msprobe` package, as both the 8.3.x and 26.x releases lay it out."""
    from importlib import metadata

    try:
        points = metadata.distribution(REFERENCE).entry_points
    except metadata.PackageNotFoundError:
        points = None
    for point in points or ():
        if point.group == "console_scripts" and point.name == "msprobe":
            module, _, attr = point.value.partition(":")
            module, attr = module.strip(), attr.split("[")[0].strip() or "main"
            if _DOTTED.match(module) and _DOTTED.match(attr):
                return module, attr
    import importlib.util

    try:
        spec = importlib.util.find_spec("msprobe")  # the package is located, not imported
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
        if os.path.isfile(os.path.join(folder, "msprobe.py")):
            return "msprobe.msprobe", "main"
    return None


def reference_command(entry: tuple[str, str], argv: list[str]) -> list[str]:
    """The command line that runs the reference's `msprobe` with `argv` in this Python."""
    return [sys.executable, "-c", _BOOT, entry[0], entry[1], *argv]


def hand_over(argv: list[str], *, replace_process: bool = False) -> int:
    """Run mindstudio-probe's `msprobe` with `argv`: its exit code. `replace_process` (the command itself, on POSIX):
    this process becomes the reference's, so signals, the terminal and the exit code are its own. Without the
    reference installed: one line on stderr and EXIT_USAGE."""
    entry = reference_entry()
    word = subcommand(argv)
    if entry is None or not sys.executable:
        print(f"msprobe: '{word}' is not a subcommand of msprobe-compare's msprobe ({', '.join(OURS)}), and "
              f"{REFERENCE}, which runs the others, is not installed in this Python ({sys.prefix}): pip install "
              f"{REFERENCE}", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    command = reference_command(entry, argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    if replace_process and os.name == "posix":
        os.execv(sys.executable, command)  # does not return
    import subprocess  # only when handing over in-process (start-up speed)

    return subprocess.call(command)


def msprobe(argv: list[str] | None = None) -> int:
    """The `msprobe` command: compare and merge_result here, any other subcommand by mindstudio-probe."""
    words = sys.argv[1:] if argv is None else argv
    word = subcommand(words)
    if word is not None and word not in OURS:
        return hand_over(words, replace_process=argv is None)
    from msprobe_compare.cli import main

    return main(argv, prog="msprobe")


def msprobe_compare(argv: list[str] | None = None) -> int:
    """The `msprobe-compare` command (and `python -m msprobe_compare`): ours only, never handed over."""
    from msprobe_compare.cli import main

    return main(argv, prog="msprobe-compare")
