"""The import graph of src/: stages import only downwards, and no two files import each other, however indirectly.

Stages, lowest first: base modules (errors, log, ...) < load < pair < measure < judge < model < render < the top
(api, layouts, folders, cli, ...). Function-level imports count like top-level ones, so a late import cannot hide
a cycle; a late import is only for start-up speed, never the way around a cycle.
"""

from __future__ import annotations

import ast
import re
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
            names = [f"{base}.{a.name}" if f"{base}.{a.name}"[len(PKG) + 1 :] in known else base for a in node.names]
        for name in names:
            if name == PKG or name.startswith(PKG + "."):
                found.append((name[len(PKG) + 1 :], node.lineno, id(node) in top_level))
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
                cycles.append(" -> ".join(stack[stack.index(t) :] + [t]))
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
                if isinstance(t, ast.Attribute) and not (
                    isinstance(t.value, ast.Name) and t.value.id in ("self", "cls")
                ):
                    bad.append(f"{path.name}:{node.lineno}: {ast.unparse(t)}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                bad.append(f"{path.name}:{node.lineno}: setattr")
    assert not bad, "\n".join(bad)


def test_no_benchmark_switch_in_the_package() -> None:
    """No environment variable of the benchmarks steers a production path (bench/ holds its own drivers)."""
    found = [f"{p.relative_to(SRC)}" for p in sorted((SRC / PKG).rglob("*.py")) if "MSPROBE_BENCH" in p.read_text()]
    assert not found, found


# -- names parsed once, words in render/ (issue #32 items 3 and 4) ------------------------------------------------

CORE = ("pair", "measure", "judge")
WORDS = {"render.texts", "render.story", "render.layout_rules", "render.celltext", "render.findings"}
API_PREFIX_WORDS = {"Functional", "Tensor", "Torch", "Distributed", "NPU", "Aten", "Jit", "Mint", "MintFunctional",
                    "Primitive", "Communication", "Ops"}  # fmt: skip
# modules that still take entry names apart by hand (a direction word in a string), each with its reason; the list
# only shrinks: test_entry_names_are_parsed_in_load_names fails on a module not here, and on one here that no longer
# needs to be
HAND_PARSES = {
    "load.names": "the parser",
    "load.rows": "the phase codes of millions of rows: vectorised string passes, twin of _noise.phase_flags",
    "load.parallel_layout": "plain_class_name rewrites row names (not entries) at their last direction part",
    "pair.align": "module calls and inner API calls of 1M-row dumps in one rpartition pass over the module entries "
    "(parse_entry per entry costs about 0.3 s more there, bench/align_1m.py)",
    "pair.calls": "call_key(s): twin of _sharednames' counter removal over whole name lists",
    "pair.param_grad": "the two dumpers' parameters_grad spellings, rewritten in place",
    "pair.risk_level": "its stems come from _sharednames.stem_counts (C): the same rule on both paths",
    "pair.fuzzy": "the reference's normalisation (the first direction word anywhere in a row name)",
    "pair.cell_mapping": "the -cm mapping file's cell names (the reference's rule)",
    "pair.layer_mapping": "the -lm mapping's scopes (the reference's rule)",
    "pair.api_mapping": "the -am mapping's API names (the reference's rule)",
    "judge.advisor": "the reference's advice: substring tests on the NPU Name",
    "judge.backward": "forward names of backward calls in one C-level pass over millions of names",
    "judge.highlight": "the reference's colour groups, per entry run of millions of rows",
    "judge.noise": "matmul classes of every call in one pass",
    "render.html": "merged entries (`a;b`) whose parts are module forward calls",
}
_DIRECTION_WORD = re.compile(r"(?:^|[.|(])(?:forward|backward|parameters_grad)(?:$|[.|)])")


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}  # fmt: skip
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]  # fmt: skip


def test_words_are_imported_by_render_and_the_top_only() -> None:
    """The modules of words (texts, story, the layout rules' words, cell texts, findings) reach no core stage: the
    core gives codes and numbers, render/ says them."""
    bad = [f"{m} imports {t} at line {line}" for m, edges in graph().items() for t, line, _ in edges
           if t in WORDS and m.split(".")[0] in CORE + ("load", "model")]  # fmt: skip
    assert not bad, "\n".join(bad)


def test_api_prefixes_have_one_table() -> None:
    """The API prefixes and the communication calls are listed in load/names.py only: no other module holds a
    literal collection of two prefixes or of communication call names (and none builds its own call regex)."""
    bad = []
    allowed = {"pair.layer_mapping": {"Jit", "Primitive"}}  # the reference's entries without stacks (STACKLESS_TYPES)
    for m, path in modules().items():
        if m == "load.names":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                texts = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                prefixes = texts & API_PREFIX_WORDS
                if (
                    len(prefixes) > 1
                    and prefixes != allowed.get(m)
                    or any(t.startswith(("Distributed.", "Communication.", "Primitive.")) for t in texts)
                ):
                    bad.append(f"{m}:{node.lineno}: {sorted(texts)[:4]}")
            if isinstance(node, ast.Name) and node.id == "api_call_pattern":
                bad.append(f"{m}:{node.lineno}: api_call_pattern (use load.names.parse_entry)")
    assert not bad, "\n".join(bad)


def test_entry_names_are_parsed_in_load_names() -> None:
    """Entry names are taken apart by load/names.py (`parse_entry`, `EntryName`): a string holding a direction word
    (`.forward`, `backward.`, `|parameters_grad`) marks a hand parse, allowed only in HAND_PARSES, each with its
    reason; a module listed there that no longer parses by hand must leave the list."""
    found = {m for m, path in modules().items() if any(_DIRECTION_WORD.search(v) for _, v in _strings(path))}
    assert not found - set(HAND_PARSES), f"parse names with load.names.parse_entry: {sorted(found - set(HAND_PARSES))}"
    assert not set(HAND_PARSES) - found, (
        f"no hand parse left: remove {sorted(set(HAND_PARSES) - found)} from HAND_PARSES"
    )


def test_layout_rules_are_codes() -> None:
    """A parallel layout's rules are `Rule` members in the code: no module of the layouts compares with, or builds,
    a rule's code text outside its definition (pair/layout_rules.py); render/layout_rules.py keys its words by
    member."""
    import msprobe_compare.pair.layout_rules as rules  # the codes themselves, read from the enum

    codes = {r.value for r in rules.Rule} | {part for r in rules.Rule for part in r.value.split("/")}
    layout_modules = {"pair.parallel", "pair.shards", "pair.stages", "measure.parallel_tensors", "layouts",
                      "layouts_aligned", "render.layout_rules"}  # fmt: skip
    bad = [f"{m}:{line}: {v!r}" for m, path in modules().items() if m in layout_modules
           for line, v in _strings(path) if v in codes or v.startswith("/")]  # fmt: skip
    assert not bad, "\n".join(bad)


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


C_MODULE_STAGE = {"_rowwalk": "load", "_legacyparse": "measure", "_tensorkernel": "measure", "_noise": "judge",
                  "_csvrows": "render", "_sharednames": "load pair"}  # fmt: skip


def test_each_c_module_serves_one_stage_or_the_shared_layer() -> None:
    """Which stage calls which C extension (issue #32): a C module serves one stage, or it is the shared layer and
    its name says so (`_shared...`); the stages reach it only through their twins' bindings (`native.built`,
    `native.load`, `native.twin` with the module's name), never by importing it."""
    c_files = {p.stem for p in (SRC / PKG).glob("*.c")}
    assert c_files == set(C_MODULE_STAGE), "a C extension without its stage here"
    used: dict[str, set[str]] = {name: set() for name in c_files}
    bad = []
    for module, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                bad += [f"{module}:{node.lineno} imports {n}" for n in names if n.split(".")[-1] in c_files]
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "native"
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in c_files):  # fmt: skip
                head = module.split(".")[0]
                used[node.args[0].value].add(head if head in STAGES else "top")
    assert not bad, bad
    for name, stages in used.items():
        assert stages <= set(C_MODULE_STAGE[name].split()), f"{name} is called from {sorted(stages)}"
        assert len(stages) <= 1 or name.startswith("_shared"), f"{name} serves {sorted(stages)}: not one stage"
