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
