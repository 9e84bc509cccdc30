"""The project's docs stand alone: no pointers to files outside the repository, links and citations resolve.

Checked on the files git tracks (skipped when git or the work tree is not available, e.g. in an unpacked sdist):
Markdown files, and the docstrings and comments of Python files, must not name files kept outside the repository
(the original spec and decision list, sibling folders of the checkout) or one machine's absolute paths. Every
relative link in README.md and docs/*.md must reach a tracked file, every `§N.M` cited in code or docs must be a
heading of docs/reference.md, and every `decision Dn` a row of docs/deviations.md.
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# files outside the repository, and absolute paths of one machine (built up so this file does not match itself)
FORBIDDEN = re.compile(
    "|".join(
        re.escape(text)
        for text in (
            "../" + "shared",
            "msprobe-compare-" + "spec.md",
            "decisions" + ".md",
            "../" + "tools/",
            "/" + "work/",
            "/var/" + "tmp/",
        )
    )
)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SECTION = re.compile(r"§\s?(\d+(?:\.\d+)*)")
DECISION = re.compile(r"\bdecisions?\s+(D\d+)")
HEADING = re.compile(r"^#{2,4}\s+§(\d+(?:\.\d+)*)\s", re.M)


def _tracked() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git is not available")
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    except (subprocess.SubprocessError, OSError):
        pytest.skip("not a git work tree")
    files = [name for name in out.stdout.decode("utf-8", "replace").split("\0") if name]
    if not files:
        pytest.skip("git tracks no files here")
    return [name for name in files if (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    return _tracked()


def _python_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source."""
    found: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                found.append((node.body[0].lineno, doc))
    return found


def test_prose_names_nothing_outside_the_repository(tracked: list[str]) -> None:
    bad = []
    for name in tracked:
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        if name.endswith(".md"):
            lines = enumerate(text.splitlines(), 1)
            bad += [f"{name}:{i}: {line.strip()}" for i, line in lines if FORBIDDEN.search(line)]
        elif name.endswith(".py"):
            for line, prose in _python_prose(text):
                bad += [f"{name}:{line}: ...{m.group(0)}..." for m in FORBIDDEN.finditer(prose)]
    assert not bad, "references to files outside the repository or to machine paths:\n" + "\n".join(bad)


def _is_relative(target: str) -> bool:
    return not (re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "/")))


def test_relative_links_resolve(tracked: list[str]) -> None:
    files = set(tracked)
    folders = {str(Path(name).parent) for name in tracked}
    pages = [name for name in tracked if name == "README.md" or re.fullmatch(r"docs/[^/]+\.md", name)]
    assert "README.md" in pages
    bad = []
    for page in pages:
        text = (ROOT / page).read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # links inside code blocks are not links
        for target in LINK.findall(text):
            if not _is_relative(target):
                continue
            path = target.split("#", 1)[0]
            resolved = (ROOT / page).parent.joinpath(path).resolve()
            try:
                rel = str(resolved.relative_to(ROOT))
            except ValueError:
                bad.append(f"{page}: {target} leaves the repository")
                continue
            if rel not in files and rel not in folders:
                bad.append(f"{page}: {target} -> {rel} is not a tracked file")
    assert not bad, "broken relative links:\n" + "\n".join(bad)


def _citations(tracked: list[str], pattern: re.Pattern[str], known: set[str]) -> list[str]:
    """`file:line: citation` for every match of `pattern` in tracked code and Markdown that is not in `known`."""
    bad = []
    for name in tracked:
        if not name.endswith((".py", ".c", ".js", ".md")):
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        for i, line in enumerate(text.splitlines(), 1):
            bad += [f"{name}:{i}: {c}" for c in pattern.findall(line) if c not in known]
    return bad


def test_cited_sections_are_headings_of_the_reference_page(tracked: list[str]) -> None:
    reference = (ROOT / "docs/reference.md").read_text(encoding="utf-8")
    headings = set(HEADING.findall(reference))
    assert {"1.2", "3.2", "4.8", "5", "9"} <= headings
    bad = _citations(tracked, SECTION, headings)
    assert not bad, "sections (§) cited but not in docs/reference.md:\n" + "\n".join(bad)


def test_cited_decisions_are_rows_of_the_deviations_page(tracked: list[str]) -> None:
    deviations = (ROOT / "docs/deviations.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\|\s*(D\d+)\s*\|", deviations, flags=re.M))
    assert {"D1", "D13"} <= rows
    bad = _citations(tracked, DECISION, rows)
    assert not bad, "decisions cited but not in docs/deviations.md:\n" + "\n".join(bad)


# --------------------------------------------------------------------- the README true to the code and the install

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
           "ten": 10}  # fmt: skip
PIP_INSTALL = re.compile(r"pip install ([^\n`|]*)")


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_c_extension_count_is_the_code_s():
    """README and docs/design.md say how many C extensions are built: the .c files setup.py builds."""
    sources = sorted(p.stem for p in (ROOT / "src/msprobe_compare").glob("*.c"))
    built = re.search(r"_NATIVE = \(([^)]*)\)", (ROOT / "setup.py").read_text(encoding="utf-8"))
    assert built and sorted(re.findall(r'"(\w+)"', built.group(1))) == sources
    for page in ("README.md", "docs/design.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        said = re.findall(r"\b(\w+) small (?:optional )?C(?:Python)? extensions", text)
        assert said and all(NUMBERS.get(word) == len(sources) for word in said), (page, said, len(sources))


def test_readme_install_commands_can_run():
    """Every `pip install` in the README installs this checkout (`.`, `.[extra]` with an extra pyproject.toml
    defines) or a named release of another package, never `msprobe-compare` from an index, where it is not."""
    extras = set(_pyproject()["project"]["optional-dependencies"])
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = PIP_INSTALL.findall(text)
    assert len(commands) >= 4
    for command in commands:
        words = [w.strip("'\"") for w in command.split("&&")[0].split() if not w.startswith("-")]
        assert words, command
        for word in words:
            assert not word.startswith("msprobe-compare"), command
            if word.startswith("."):
                assert re.fullmatch(r"\.(\[(\w+(,\w+)*)\])?", word), command
                named = re.findall(r"\w+", word)
                assert set(named) <= extras, (command, extras)


def test_ray_install_hint_is_the_ray_extra():
    from msprobe_compare import distribute

    (ray,) = _pyproject()["project"]["optional-dependencies"]["ray"]
    assert f"pip install '{ray}'" in distribute.INSTALL_HINT and "pip install '.[ray]'" in distribute.INSTALL_HINT


def test_documented_commands_are_installed():
    """The commands the README names are the console scripts pyproject.toml installs, and `python -m
    msprobe_compare` runs."""
    scripts = _pyproject()["project"]["scripts"]
    assert scripts == {"msprobe": "msprobe_compare.launch:msprobe",
                       "msprobe-compare": "msprobe_compare.launch:msprobe_compare"}  # fmt: skip
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python -m msprobe_compare" in text and "msprobe-compare -f pytorch compare" in text
    assert (ROOT / "src/msprobe_compare/__main__.py").is_file()
    assert "## Beside mindstudio-probe" in text and "pip install --force-reinstall --no-deps ." in text
