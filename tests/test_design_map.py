"""docs/design.md's module map stays true to the tree: every module, C extension and asset of the package is named
in it, and every file name it gives exists (issue #32: the map had drifted, `_noise.c` and the aligner missing)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "msprobe_compare"
DESIGN = ROOT / "docs" / "design.md"
KINDS = (".py", ".c", ".js", ".css", ".html", ".yaml")


def _module_map() -> str:
    """The fenced block after '# Design as built': the module map."""
    text = DESIGN.read_text(encoding="utf-8")
    return text.split("```", 2)[1]


def _files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in KINDS and "__pycache__" not in p.parts
                  and p.name != "__init__.py")  # fmt: skip


def test_every_module_of_the_package_is_in_the_design_map() -> None:
    block = _module_map()
    missing = [str(p.relative_to(PACKAGE)) for p in _files() if not re.search(rf"\b{re.escape(p.name)}\b", block)]
    assert not missing, f"docs/design.md's module map does not name: {missing}"


def test_every_file_the_design_map_names_exists() -> None:
    names = {p.name for p in _files()}
    named = set(re.findall(r"\b[\w]+\.(?:py|c|js|css|html|yaml)\b", _module_map()))
    assert named, "no file names found in the module map"
    assert not named - names, f"docs/design.md names files that are not in the package: {sorted(named - names)}"


def test_the_count_of_c_extensions_is_the_trees() -> None:
    count = len(list(PACKAGE.glob("*.c")))
    words = {5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert f"builds {words[count]} small CPython extensions" in DESIGN.read_text(encoding="utf-8")
