"""The import graph of src/: stages import only downwards, and no two files import each other, however indirectly.

Stages, lowest first: base modules (errors, log, ...) < load < pair < measure < judge < model < render < the top
(api, layouts, folders, cli, ...). Function-level imports count like top-level ones, so a late import cannot hide
a cycle; a late import is only for start-up speed, never the way around a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "msprobe_compare"
BASE = {"errors", "log", "runtime", "floattext", "native", "records", ""}  # "" is the package's own __init__
STAGES = {"load": 1, "pair": 2, "measure": 3, "judge": 4, "model": 5, "render": 6}
TOP = 7  # api, layouts, folders, config, cli, python_api, distribute, merge, __main__


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PKG).rglob("*.py")):
        parts = path.relative_to(SRC / PKG).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def rank(module: str) -> int:
    head = module.split(".")[0]
    if module in BASE:
        return 0
    return STAGES.get(head, TOP)


def imports(path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported module relative to the package, line, at module level) for every import of our package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    for node in tree.body:  # imports under a module-level `if`/`try` are module-level too
        if isinstance(node, (ast.If, ast.Try)):
            top_level |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            base = node.module
            names = [f"{base}.{a.name}" if f"{base}.{a.name}"[len(PKG) + 1:] in known else base for a in node.names]
        for name in names:
            if name == PKG or name.startswith(PKG + "."):
                found.append((name[len(PKG) + 1:], node.lineno, id(node) in top_level))
    return found


def graph() -> dict[str, list[tuple[str, int, bool]]]:
    mods = modules()
    known = set(mods)
    return {m: [(t, line, top) for t, line, top in imports(p, known) if t != m] for m, p in mods.items()}


def test_stage_order() -> None:
    """No module imports a higher stage (at module level or inside a function)."""
    bad = [f"{m} (stage {rank(m)}) imports {t} (stage {rank(t)}) at line {line}"
           for m, edges in graph().items() for t, line, _ in edges if rank(t) > rank(m)]  # fmt: skip
    assert not bad, "\n".join(bad)


def test_no_cycles() -> None:
    """No file cycle, function-level imports included."""
    edges = {m: sorted({t for t, _, _ in e}) for m, e in graph().items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in edges.get(m, []):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in edges:
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(cycles)


def test_the_checker_sees_what_it_must(tmp_path: Path) -> None:
    """The parser finds late imports and resolves `from package import module` to the module."""
    src = tmp_path / "m.py"
    src.write_text("from msprobe_compare.render import table\n\n\ndef f():\n"
                   "    from msprobe_compare.judge.gate import gate_hits\n")  # fmt: skip
    found = imports(src, {"render.table", "judge.gate"})
    assert found == [("render.table", 1, True), ("judge.gate", 5, False)]


@pytest.mark.parametrize("module,expected", [("load.rows", 1), ("judge.gate", 4), ("model", 5), ("render.html", 6),
                                             ("api", TOP), ("errors", 0)])  # fmt: skip
def test_ranks(module: str, expected: int) -> None:
    assert rank(module) == expected


def test_judge_writes_nothing_onto_other_objects() -> None:
    """judge/ assigns attributes only on its own objects (`self`, `cls`): the root cause keeps what it computes
    (stat bits, argument values) in its own records, not on load/'s row tables (issue #29)."""
    bad = []
    for path in sorted((SRC / PKG / "judge").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])  # fmt: skip
            for t in targets:
                if isinstance(t, ast.Attribute) and not (isinstance(t.value, ast.Name) and t.value.id in ("self", "cls")):
                    bad.append(f"{path.name}:{node.lineno}: {ast.unparse(t)}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                bad.append(f"{path.name}:{node.lineno}: setattr")
    assert not bad, "\n".join(bad)


def test_no_benchmark_switch_in_the_package() -> None:
    """No environment variable of the benchmarks steers a production path (bench/ holds its own drivers)."""
    found = [f"{p.relative_to(SRC)}" for p in sorted((SRC / PKG).rglob("*.py")) if "MSPROBE_BENCH" in p.read_text()]
    assert not found, found


def test_the_analysis_pairing_lives_in_pair() -> None:
    """One home for every way rows are paired: the root cause's call matcher is pair/calls.py, and judge/ holds
    no pairing of its own (no module there defines the matcher's entry points)."""
    judge_defs = set()
    for path in sorted((SRC / PKG / "judge").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        judge_defs |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert not judge_defs & {"analysis_pairing", "analysis_match", "tree_diff", "tree_beside", "call_keys", "Names"}
    calls = ast.parse((SRC / PKG / "pair" / "calls.py").read_text(encoding="utf-8"))
    assert {"analysis_pairing", "tree_beside", "Names"} <= {n.name for n in calls.body if hasattr(n, "name")}
