"""The report page's script (render/report_script.py): its parts joined into one function, and its codes (cell
kinds, call states, colours) and the page's filters checked against Python's, a stale copy refused."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from msprobe_compare.judge.highlight import Colour
from msprobe_compare.judge.rootcause import CallState
from msprobe_compare.render import report_script
from msprobe_compare.render.cellkind import CellKind, check_script

SCRIPT = report_script.script()
PAGE = report_script.asset("report.html")
CSS = report_script.asset("report.css")


def test_every_part_is_packaged_and_joined_in_order() -> None:
    assets = resources.files("msprobe_compare.render").joinpath("assets")
    on_disk = sorted(p.name for p in assets.iterdir() if p.name.endswith(".js"))
    assert on_disk == sorted(report_script.PARTS), "a part file that PARTS does not name, or the reverse"
    assert SCRIPT.startswith("'use strict';\n(function () {\n") and SCRIPT.endswith("})();\n")
    at = [SCRIPT.index(report_script.asset(name)) for name in report_script.PARTS]
    assert at == sorted(at) and SCRIPT.count("(function () {\n") == 1
    for name in report_script.PARTS:  # a piece of one function body, its text inlined in the page
        text = report_script.asset(name)
        assert "</" not in text and "<!--" not in text and "'use strict'" not in text, name


def test_script_codes_are_pythons() -> None:
    """The values the script holds are the enums' own: parsed from the script, compared member by member."""
    kinds = dict(re.findall(r"\b(K_[A-Z]+) = (\d+)", SCRIPT))
    assert {k: int(v) for k, v in kinds.items()} == {"K_FLOAT": CellKind.FLOAT, "K_INT": CellKind.INT,
                                                      "K_PCT": CellKind.PERCENT, "K_STR": CellKind.OTHER}  # fmt: skip
    states = {k: int(v) for k, v in re.findall(r"\b(ST_[A-Z_]+) = (\d+)", SCRIPT)}
    assert states == {f"ST_{s.name}": report_script.STATE_CODE[s] for s in CallState}
    names = re.search(r"const STATE_NAMES = \[([^\]]*)\]", SCRIPT).group(1)  # type: ignore[union-attr]
    assert re.findall(r"'([^']*)'", names) == [s.value for s in sorted(CallState, key=report_script.STATE_CODE.get)]
    colours = re.search(r"const COLOUR_NAMES = \[([^\]]*)\]", SCRIPT).group(1)  # type: ignore[union-attr]
    assert re.findall(r"'([^']*)'", colours) == [c.name.lower() for c in Colour]
    assert sorted(report_script.STATE_CODE.values()) == list(range(len(CallState)))
    check_script(SCRIPT, "report")
    report_script.check_states(SCRIPT, "report")
    report_script.check_page(PAGE, CSS, "report")


@pytest.mark.parametrize(
    "old, new, match",
    [
        ("ST_UNKNOWN = 3", "ST_UNKNOWN = 4", "state codes"),
        ("const ST_OK = 0, ", "const ST_OK = 0, ST_LOST = 7, ", "state codes"),
        ("'noise', 'suspect'", "'suspect', 'noise'", "STATE_NAMES"),
        ("'propagated', 'unknown'", "'propagated'", "STATE_NAMES"),
        ("const SEVERITY = [1, 5, 3, 0, 2, 4, 0]", "const SEVERITY = [1, 5, 3, 0, 2, 4]", "SEVERITY"),
        ("const STATE_COLOURS = ['#2e7d32', ", "const STATE_COLOURS = [", "STATE_COLOURS"),
        (
            "const COLOUR_NAMES = ['none', 'yellow', 'red']",
            "const COLOUR_NAMES = ['none', 'red', 'yellow']",
            "COLOUR_NAMES",
        ),
        ("const COLOUR_NAMES", "const COLOR_NAMES", "COLOUR_NAMES"),
    ],
)
def test_a_stale_script_copy_is_refused(old: str, new: str, match: str) -> None:
    assert SCRIPT.count(old) == 1
    with pytest.raises(ImportError, match=match):
        report_script.check_states(SCRIPT.replace(old, new), "report")


@pytest.mark.parametrize(
    "old, new, match",
    [
        ('<option value="3">unknown</option>', '<option value="4">unknown</option>', "state filter"),
        ('<option value="6">one-sided</option>', "", "state filter"),
        (
            'value="1" checked><i class="swatch c-yellow">',
            'value="2" checked><i class="swatch c-yellow">',
            "colour filter",
        ),
    ],
)
def test_a_stale_page_is_refused(old: str, new: str, match: str) -> None:
    assert PAGE.count(old) == 1
    with pytest.raises(ImportError, match=match):
        report_script.check_page(PAGE.replace(old, new), CSS, "report.html")


def test_a_state_without_a_style_is_refused() -> None:
    with pytest.raises(ImportError, match=r"\.st-one-sided"):
        report_script.check_page(PAGE, CSS.replace(".st-one-sided", ".st-lonely"), "report.css")
