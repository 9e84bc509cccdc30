"""The HTML report's script and page assets: the script's parts (assets/report_*.js, `PARTS`) joined into the one
script the page inlines, and the codes they share with Python checked when they are first read.

The parts are pieces of one function body, joined in `PARTS` order: each may use what another declares (functions
are hoisted; the constants are read only once the page has started), none is a script on its own. Codes checked,
each against its Python table (a copy that differs raises ImportError, as cellkind's checks do):

- the cell kinds `K_*` (cellkind.CellKind);
- the call states: `ST_*`, `STATE_NAMES` and the tables indexed by a state (`SEVERITY`, `STATE_COLOURS`) against
  STATE_CODE (what html.py writes into the payload, a byte per call) and CallState's names; report.html's state
  filter options and report.css's `.st-NAME` rules;
- the colours: `COLOUR_NAMES` against judge.highlight.Colour; report.html's colour filter boxes and report.css's
  `.c-NAME` rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.judge.rootcause import CallState
from msprobe_compare.render.cellkind import check_script as check_cell_kinds

__all__ = ["PARTS", "STATE_CODE", "asset", "check_page", "check_states", "join", "script"]

PARTS = (
    "report_codes.js",  # the codes shared with Python, the helpers every part uses
    "report_numbers.js",  # numbers as Python prints them
    "report_payload.js",  # the payload decoded: columns, dictionaries, cell texts
    "report_stacks.js",  # stack cells as frames
    "report_load.js",  # the decoded report (R), a row's state
    "report_align.js",  # runs of different code: the two module trees side by side
    "report_summary.js",  # what was compared, the counts, origin and suspect cards
    "report_view.js",  # the table's filter and sort
    "report_table.js",  # the table's virtual rendering, the column picker, the filters bound
    "report_tree.js",  # selecting a call; the module tree
    "report_plot.js",  # the metric plot
    "report_start.js",  # the page started: the parts built in order
)
# A call's state as the payload carries it and the script's tables are indexed: STATE_NAMES[code] is its name.
STATE_CODE = {CallState.OK: 0, CallState.ORIGIN: 1, CallState.PROPAGATED: 2, CallState.UNKNOWN: 3,
              CallState.NOISE: 4, CallState.SUSPECT: 5, CallState.ONE_SIDED: 6}  # fmt: skip
_PER_STATE = ("STATE_NAMES", "SEVERITY", "STATE_COLOURS")  # the script's arrays indexed by a state code


@cache
def asset(name: str) -> str:
    """A packaged asset's text (importlib.resources is loaded only when a report is written: start-up speed)."""
    from importlib import resources

    return resources.files("msprobe_compare.render").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def join(parts: Sequence[str]) -> str:
    """The page's script: the parts' texts, a blank line between them, as the body of one strict-mode function."""
    return "'use strict';\n(function () {\n" + "\n".join(parts) + "})();\n"


@cache
def script() -> str:
    """The page's script, its codes and the page's checked against Python's on first use."""
    text = join([asset(name) for name in PARTS])
    check_cell_kinds(text, "render/assets/report_codes.js")
    check_states(text, "render/assets/report_*.js")
    check_page(asset("report.html"), asset("report.css"), "render/assets/report.html, report.css")
    return text


def _names(enum_codes: dict[str, int]) -> list[str]:
    """The names in code order; the codes must be 0, 1, ... (the script indexes arrays by them)."""
    order = sorted(enum_codes, key=enum_codes.__getitem__)
    if [enum_codes[k] for k in order] != list(range(len(order))):
        raise ImportError(f"codes {enum_codes} are not 0 to {len(order) - 1}")
    return order


def _state_names() -> list[str]:
    return _names({state.value: code for state, code in STATE_CODE.items()})


def _colour_names() -> list[str]:
    return _names({colour.name.lower(): int(colour) for colour in Colour})


def _array(script: str, name: str, where: str) -> list[str]:
    """The items of the script's `const NAME = [...];` as texts (quotes removed)."""
    found = re.search(rf"\bconst {name} = \[([^\]]*)\];", script)
    if found is None:
        raise ImportError(f"{where}: no `const {name} = [...]`")
    return [item.strip().strip("'\"") for item in found.group(1).split(",") if item.strip()]


def check_states(script: str, where: str) -> None:
    """The script's state and colour codes must be STATE_CODE's and Colour's."""
    states = _state_names()
    line = next((line for line in script.splitlines() if "const ST_OK" in line), "")
    found = {k: int(v) for k, v in re.findall(r"\b(ST_[A-Z_]+) = (\d+)", line)}
    want = {f"ST_{state.name}": code for state, code in STATE_CODE.items()}
    if found != want:
        raise ImportError(f"{where}: state codes {found} differ from STATE_CODE {want}")
    names = _array(script, "STATE_NAMES", where)
    if names != states:
        raise ImportError(f"{where}: STATE_NAMES {names} differ from STATE_CODE's states {states}")
    for name in _PER_STATE[1:]:
        items = _array(script, name, where)
        if len(items) != len(states):
            raise ImportError(f"{where}: {name} has {len(items)} items, one per state is {len(states)}")
    colours = _array(script, "COLOUR_NAMES", where)
    if colours != _colour_names():
        raise ImportError(f"{where}: COLOUR_NAMES {colours} differ from Colour {_colour_names()}")


def check_page(page: str, css: str, where: str) -> None:
    """report.html's state filter offers every state under its code and name, its colour filter every colour;
    report.css styles every state and colour."""
    states, colours = _state_names(), _colour_names()
    options = {int(v): text for v, text in re.findall(r'<option value="(\d+)">([^<]*)</option>', page)}
    if options != dict(enumerate(states)):
        raise ImportError(f"{where}: the state filter's options {options} differ from STATE_CODE's states")
    boxes = {int(v): name for v, name in re.findall(r'<input type="checkbox" value="(\d+)"[^>]*><i class="swatch '
                                                     r'c-([a-z-]+)"', page)}  # fmt: skip
    if boxes != dict(enumerate(colours)):
        raise ImportError(f"{where}: the colour filter's boxes {boxes} differ from Colour {colours}")
    missing = [rule for rule in [*(f".st-{name}" for name in states), *(f".c-{name}" for name in colours)]
               if not re.search(rf"{re.escape(rule)}(?![\w-])", css)]  # fmt: skip
    if missing:
        raise ImportError(f"{where}: no style for {missing}")
