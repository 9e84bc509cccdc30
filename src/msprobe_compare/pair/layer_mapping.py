"""Layer mapping (`-lm [yaml]`, spec §3.8): pair entries by their place in the model, then rows by suffix.

Each entry of a dump gets a *scope*: the attribute path of the cell/module it is (or, for an API, of the
module that called it, from construct.json), plus for APIs the framework function that called it (from an
old-format stack.json: a 8.3.x stack.json, keyed by "0", "1", ..., gives none, as in the reference), plus
its own name. Backward entries take the scope of their forward entry; `ParallelTransformer.layers.N`
indices are renumbered from the smallest one. Bench entries are put in a tree by scope; each NPU scope is
translated segment by segment with the YAML (`{LayerClass: {ms_child: pt_child, 'a.b': 'x'}}`, longest
rule first, same names map to themselves) and looked up with the same direction and occurrence number.
Rows of paired entries are paired by equal suffixes; everything else maps to `N/A`. The result is a row
data mapping, used like `-dm`.
"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path
from typing import Any

from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import LayerFiles
from msprobe_compare.load.names import MODULE_PREFIXES
from msprobe_compare.load.rows import RowTable
from msprobe_compare.pair.exact import NO_MATCH_NAME
from msprobe_compare.pair.mapping_file import load_yaml, shown
from msprobe_compare.pair.spans import entry_spans
from msprobe_compare.records import dataclass

NO_MATCH = NO_MATCH_NAME
TOP_LAYER = "TopLayer"
LAYER_TYPES = frozenset(MODULE_PREFIXES)
STACKLESS_TYPES = frozenset({"Primitive", "Jit"})  # entries whose stacks are not used
FRAME_FILES = ("site-packages/torch", "package/torch", "site-packages/mindspore", "package/mindspore")
SKIP_FILES = ("msprobe", "MindSpeed")
SKIP_FUNCS = ("construct", "__call__")
STACK_SIGNS = {"mindspore": ("Template", "construct"), "pytorch": ("Template", r"in (for|back)ward,")}
RENUMBERED = ("ParallelTransformer", "layers")  # pipeline stages number these layers globally

Rules = dict[str, dict[str, list[tuple[str, str, int]]]]


@dataclass
class _Item:
    """One entry as layer mapping sees it."""

    name: str
    type_name: str
    state: str  # forward / backward / parameters_grad
    full_scope: str


@dataclass
class _Node:
    type_name: str
    children: dict[str, _Node] = field(default_factory=dict)
    items: dict[str, list[str]] = field(default_factory=dict)  # state -> entry names, in dump order


def read_layer_mapping(path: Path) -> dict[str, dict[str, str]]:
    """A `-lm` YAML: `{LayerClassName: {ms_child_name: pt_child_name}}` (empty file = no rules)."""
    doc = load_yaml(path, "layer mapping")
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InputError(f"layer mapping must be a YAML mapping of layer class names to "
                         f"{{ms_child: pt_child}} mappings, got a {type(doc).__name__}", path)  # fmt: skip
    for type_name, rules in doc.items():
        if not isinstance(type_name, str) or not isinstance(rules, dict):
            raise InputError(f"layer mapping {shown(type_name)} must map a class name to a mapping of child names",
                             path)  # fmt: skip
        for key, value in rules.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InputError(f"layer mapping {shown(type_name)}: {shown(key)}: {shown(value)} must map a text "
                                 "to a text", path)  # fmt: skip
    return doc


def layer_mapping(
    npu_files: LayerFiles,
    bench_files: LayerFiles,
    mapping: dict[str, Any] | None,
    npu: RowTable,
    bench: RowTable,
    bench_framework: str | None = None,
) -> dict[str, str]:
    """Row data mapping NPU row name -> bench row name (or NO_MATCH_NAME) derived from the layer structure, from the
    two sides as read (rows, stack.json and construct.json: `load.dumpjson.read_layer_files`); reads no file."""
    npu_items = _side_items(npu_files, npu, "mindspore")
    if not npu_items:
        return {}
    bench_items = _side_items(bench_files, bench, bench_framework or _guess_framework(bench))
    rules = _rules(mapping or {})
    (npu_root, occurrence), (bench_root, _) = _tree(npu_items), _tree(bench_items)
    entry_map = {item.name: _lookup(bench_root, _translate(npu_root, item, rules), item.state, occurrence[item.name])
                 for item in npu_items}  # fmt: skip
    return _row_mapping(entry_map, npu, bench)


# -- reading one side --------------------------------------------------------------------------------


def _side_items(files: LayerFiles, table: RowTable, framework: str) -> list[_Item]:
    """Items of one dump in dump order; none when the dump has no stack.json/construct.json (or empty ones)."""
    raw_stack, construct, dump_dir = files.stack, files.construct, files.dump_dir
    if not raw_stack or not construct:
        return []
    stacks = {} if "0" in raw_stack else raw_stack  # 8.3.x format: not keyed by entry, so no stack is used
    items = {name: _item(name, construct.get(name), stacks.get(name), framework, dump_dir)
             for name in table.entries}  # fmt: skip
    _backward_scopes(items)
    _renumber(list(items.values()), *RENUMBERED)
    return list(items.values())


def _guess_framework(table: RowTable) -> str:
    """PyTorch dumps name modules `Module.*` and dtypes `torch.*`."""
    torch_like = any(name.startswith("Module.") for name in table.entries) or any(
        d.startswith("torch.") for d in table.dtype)  # fmt: skip
    return "pytorch" if torch_like else "mindspore"


def _item(name: str, parent: str | None, stack: Any, framework: str, dump_dir: Path) -> _Item:
    parts = name.split(".")
    if len(parts) < 4:
        raise InputError(f"entry '{name}' has fewer than four dot-separated fields; layer mapping needs "
                         "'{Type}.{name}.{index}.{direction}' names", dump_dir / "dump.json")  # fmt: skip
    if parent and "." in parent and len(parent.split(".")) < 4:
        raise InputError(f"construct.json parent '{parent}' of '{name}' has fewer than four fields",
                         dump_dir / "construct.json")  # fmt: skip
    if parts[-1] == "parameters_grad":  # {Type}.{path}.{attr}.{Class}.parameters_grad
        api_type, type_name, own, state = "parameters_grad", parts[-2], parts[-3], "parameters_grad"
        layer_scope = ".".join(parts[:-3])
    elif parts[0] in LAYER_TYPES:  # {Type}.{path}.{attr}.{Class}.{direction}.{n}
        api_type, type_name, own, state = parts[0], parts[-3], parts[-4], parts[-2]
        layer_scope = ".".join(parts[:-4])
    else:  # an API, {Type}.{api}.{n}.{direction}: in the scope of the module that called it
        api_type, type_name, state = parts[0], parts[-3], parts[-1]
        own = type_name
        layer_scope = ".".join(parent.split(".")[:-3]) if parent else TOP_LAYER
    scope = layer_scope
    if api_type not in LAYER_TYPES and api_type not in STACKLESS_TYPES and stack:
        if not isinstance(stack, list) or not all(isinstance(line, str) for line in stack):
            raise InputError(f"stack of '{name}' must be a list of strings", dump_dir / "stack.json")
        frame = _frame_function(stack, framework)
        if frame:
            scope = f"{scope}.{frame}"
    return _Item(name, type_name, state, f"{scope}.{own}")


def _frame_function(stack: list[str], framework: str) -> str:
    """The framework function that called the API: the last framework frame after the `Template` frame."""
    start_sign, end_sign = STACK_SIGNS.get(framework, STACK_SIGNS["mindspore"])
    start, end = -1, len(stack)
    for i, line in enumerate(stack):
        if re.search(start_sign, line):
            start = i
        elif start >= 0 and re.search(end_sign, line):
            end = i
            break
    frame = None
    for line in stack[start + 1 : end]:
        if not any(f in line.split(",")[0] for f in FRAME_FILES):
            break
        frame = line
    if frame is None:
        return ""
    fields = frame.split(",")
    if any(s in fields[0] for s in SKIP_FILES) or len(fields) < 3 or any(s in fields[2] for s in SKIP_FUNCS):
        return ""
    words = fields[2].split()
    return words[1] if len(words) > 1 else ""


def _backward_scopes(items: dict[str, _Item]) -> None:
    """Backward entries have no stack of their own: they take the scope of their forward entry."""
    for item in items.values():
        parts = item.name.split(".")
        if "backward" not in parts[-2:]:
            continue
        forward = items.get(".".join(parts[:-2] + [p.replace("backward", "forward") for p in parts[-2:]]))
        if forward is not None:
            item.full_scope = forward.full_scope


def _renumber(items: list[_Item], type_name: str, child: str) -> None:
    """Renumber `{scope of a type_name layer}.{child}.{N}` relative to the smallest N found."""
    prefixes = list(dict.fromkeys(f"{it.full_scope}.{child}" for it in items if it.type_name == type_name))
    lowest: dict[str, int] = {}
    for prefix in prefixes:
        numbers = [n for it in items if (n := _next_number(it.full_scope, prefix)[1]) is not None]
        if numbers:
            lowest[prefix] = min(numbers)
    for prefix, low in lowest.items():
        for it in items:
            segment, number = _next_number(it.full_scope, prefix)
            if segment is not None and number is not None:
                it.full_scope = f"{prefix}.{number - low}" + it.full_scope[len(prefix) + 1 + len(segment) :]


def _next_number(scope: str, prefix: str) -> tuple[str | None, int | None]:
    """The segment after `prefix.` in `scope` and the last integer inside it."""
    if not scope.startswith(prefix + "."):
        return None, None
    segment = scope[len(prefix) + 1 :].split(".", 1)[0]
    if not segment or any(c.isspace() for c in segment):
        return None, None
    digits = re.findall(r"\d+", segment)
    return segment, (int(digits[-1]) if digits else None)


# -- trees and lookup --------------------------------------------------------------------------------


def _tree(items: list[_Item]) -> tuple[_Node, dict[str, int]]:
    """The scope tree of one dump, and each entry's occurrence number among same-state entries of its node."""
    root = _Node(TOP_LAYER)
    occurrence: dict[str, int] = {}
    for item in items:
        node = root
        for segment in item.full_scope.split(".")[1:]:
            node = node.children.setdefault(segment, _Node(segment))
        same_state = node.items.setdefault(item.state, [])
        occurrence[item.name] = len(same_state)
        same_state.append(item.name)
        node.type_name = item.type_name
    return root, occurrence


def _rules(mapping: dict[str, Any]) -> Rules:
    """YAML -> {class: {first child segment: [(rule, target, length), ...] longest first}}."""
    mapping = dict(mapping)
    if "Cell" in mapping:  # the older name of the top layer
        mapping[TOP_LAYER] = mapping.pop("Cell")
    rules: Rules = {}
    for type_name, children in mapping.items():
        by_first: dict[str, list[tuple[str, str, int]]] = {}
        for origin, target in children.items():
            segments = origin.split(".")
            by_first.setdefault(segments[0], []).append((origin, target.split("(")[0], len(segments)))
        for candidates in by_first.values():
            candidates.sort(key=lambda rule: -rule[2])
        rules[type_name] = by_first
    return rules


def _translate(root: _Node, item: _Item, rules: Rules) -> list[str]:
    """The NPU item's scope in bench names (below the top layer)."""
    scope = item.full_scope.split(".")
    translated: list[str] = []
    node = root
    i = 0
    while i < len(scope) - 1:
        child = scope[i + 1]
        target, step = child, 1
        for origin, new, length in rules.get(node.type_name, {}).get(child, ()):
            if ".".join(scope[i + 1 : i + 1 + length]) == origin:
                target, step = new, length
                break
        translated.extend(target.split("."))
        for _ in range(step):
            node = node.children[scope[i + 1]]
            i += 1
    return translated


def _lookup(root: _Node, scope: list[str], state: str, index: int) -> str | None:
    node = root
    for segment in scope:
        found = node.children.get(segment)
        if found is None:
            return None
        node = found
    candidates = node.items.get(state, [])
    return candidates[index] if index < len(candidates) else None


# -- rows --------------------------------------------------------------------------------------------


def _entry_rows(table: RowTable) -> dict[str, range]:
    """Entry name -> its rows (rows of one entry are contiguous, in dump order)."""
    return {table.entries[e]: range(start, end) for e, start, end in entry_spans(table)}


def _row_mapping(entry_map: dict[str, str | None], npu: RowTable, bench: RowTable) -> dict[str, str]:
    npu_rows, bench_rows = _entry_rows(npu), _entry_rows(bench)
    mapping: dict[str, str] = {}
    for npu_entry, rows in npu_rows.items():
        if npu_entry not in entry_map:
            continue
        bench_entry = entry_map[npu_entry]
        by_suffix: dict[str, str] = {}
        if bench_entry is not None:
            for j in bench_rows.get(bench_entry, ()):
                by_suffix[bench.names[j][len(bench_entry) :]] = bench.names[j]
        for i in rows:
            mapping[npu.names[i]] = by_suffix.get(npu.names[i][len(npu_entry) :], NO_MATCH)
    return mapping
