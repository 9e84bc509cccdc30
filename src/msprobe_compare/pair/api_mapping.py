"""API mapping (`-am [yaml]`, spec §3.7): MindSpore API rows -> PyTorch compare keys.

Built-in step (always): the API name is the first two segments of the row name. `Mint.*` becomes
`Torch.*`, `MintFunctional.*` becomes `Functional.*`, and names in the built-in table
(`ms_to_pt_api.yaml`, this project's own) are replaced by their PyTorch name.

User step (`-am FILE`): a YAML list of `{ms_api, pt_api, ms_args/pt_args, ms_outputs/pt_outputs,
ms_parameters/pt_parameters, ms_parameters_grad/pt_parameters_grad}`. An entry applies when `ms_api` occurs
in the NPU rows and `pt_api` in the bench rows; each row of `ms_api` then gets the `pt_api` name with its
argument index translated, or an unmatchable key when its index is not listed. Decision D12: outputs may
be written `ms_outputs`/`pt_outputs` (documented) or `ms_output`/`pt_output` (what 8.3.3 reads).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any
from collections.abc import Callable

from msprobe_compare.errors import InputError
from msprobe_compare.load.rows import RowTable, State
from msprobe_compare.pair.mapping_file import load_yaml, parse_yaml, shown
from msprobe_compare.pair.spans import entry_spans, keys_by_entry
from msprobe_compare.records import dataclass

UNMATCHABLE = None  # the compare key of a row that cannot be mapped: it matches nothing (pair.exact)
TABLE_FILE = "ms_to_pt_api.yaml"

# row state -> (name field, user YAML term)
_FIELDS = {
    State.INPUT: ("input", "args"),
    State.OUTPUT: ("output", "outputs"),
    State.PARAMETERS: ("parameters", "parameters"),
    State.PARAMETERS_GRAD: ("parameters_grad", "parameters_grad"),
}
_TERMS = ("args", "outputs", "parameters", "parameters_grad")
_SPELLINGS = {"outputs": ("outputs", "output")}  # D12: documented spelling first


@lru_cache(maxsize=1)
def builtin_table() -> dict[str, str]:
    """The packaged MindSpore -> PyTorch API name table."""
    from importlib import resources  # only when the table is needed (start-up speed)

    source = resources.files("msprobe_compare.pair").joinpath(TABLE_FILE)
    table = parse_yaml(source.read_bytes(), "the packaged API table", Path(str(source)))
    assert isinstance(table, dict), f"{TABLE_FILE} must be a mapping"
    return {str(k): str(v) for k, v in table.items()}


@dataclass(frozen=True)
class ApiRule:
    """One user YAML entry: the two API names and, per term, the paired index lists (as texts)."""

    ms_api: str
    pt_api: str
    indices: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]

    def consistent(self) -> bool:
        return all(len(ms) == len(pt) for ms, pt in self.indices.values())


def read_api_mapping(path: Path) -> list[dict[str, Any]]:
    """A `-am` YAML: a list of mapping entries, checked for shape (empty file = no entries)."""
    doc = load_yaml(path, "api mapping")
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise InputError(f"api mapping must be a YAML list of entries with ms_api and pt_api, got a "
                         f"{type(doc).__name__}", path)  # fmt: skip
    for n, entry in enumerate(doc, 1):
        if not isinstance(entry, dict):
            raise InputError(f"api mapping entry {n} must be a mapping, got {type(entry).__name__}", path)
        for key in ("ms_api", "pt_api"):
            if not isinstance(entry.get(key), str):
                raise InputError(f"api mapping entry {n} needs '{key}' as a text like 'Functional.add'", path)
        for key, value in entry.items():
            if key in ("ms_api", "pt_api") or value is None:
                continue
            if not isinstance(value, list) or not all(type(v) in (int, str) for v in value) or any(
                    type(v) is int and v.bit_length() >= 64 for v in value):  # fmt: skip
                raise InputError(f"api mapping entry {n}: {shown(key)} must be a list of indices", path)
    return doc


def _rule(entry: dict[str, Any]) -> ApiRule:
    indices = {}
    for term in _TERMS:
        pair = []
        for side in ("ms", "pt"):
            values: list[Any] = []
            for spelling in _SPELLINGS.get(term, (term,)):
                if entry.get(f"{side}_{spelling}") is not None:
                    values = entry[f"{side}_{spelling}"]
                    break
            pair.append(tuple(str(v) for v in values))
        indices[term] = (pair[0], pair[1])
    return ApiRule(str(entry["ms_api"]), str(entry["pt_api"]), indices)


def api_name(row_name: str) -> str:
    """`Functional.add.0.forward.input.0` -> `Functional.add` (the name itself when it has one segment)."""
    first = row_name.find(".")
    if first < 0:
        return row_name
    second = row_name.find(".", first + 1)
    return row_name if second < 0 else row_name[:second]


def builtin_key(name: str, table: dict[str, str]) -> str:
    """The compare key of one row after the built-in step."""
    api = api_name(name)
    prefix = api.split(".", 1)[0]
    if prefix == "Mint":
        return "Torch" + name[len("Mint") :]
    if prefix == "MintFunctional":
        return "Functional" + name[len("MintFunctional") :]
    target = table.get(api)
    return name if target is None else target + name[len(api) :]


def _entry_key(entry: str, table: dict[str, str]) -> tuple[str, None] | None:
    """A row `{entry}{rest}` has the API name of its entry (when the entry has two segments or more)."""
    return (builtin_key(entry, table), None) if "." in entry else None


def api_mapping_keys(
    npu: RowTable,
    bench: RowTable,
    user: list[dict[str, Any]] | None,
    warn: Callable[[str], None] | None = None,
) -> list[str | None]:
    """The compare key of every NPU row under `-am` (spec §3.7 with decision D12)."""
    table = builtin_table()
    keys = keys_by_entry(npu, lambda entry: _entry_key(entry, table), lambda name: builtin_key(name, table))
    if not user:
        return keys
    wanted = {str(entry.get("ms_api")) for entry in user}
    rows_of = {api: rows for api, rows in _rows_by_api(npu).items() if api in wanted}
    bench_apis = set(_rows_by_api(bench))
    for n, entry in enumerate(user, 1):
        rule = _rule(entry)
        if not rule.consistent():
            if warn is not None:
                warn(f"api mapping entry {n} ({rule.ms_api} -> {rule.pt_api}) is skipped: its ms_ and pt_ "
                     "index lists differ in length")  # fmt: skip
            continue
        if rule.ms_api not in rows_of or rule.pt_api not in bench_apis:
            continue
        for i in rows_of[rule.ms_api]:
            keys[i] = _user_key(npu, i, rule)
    return keys


def _rows_by_api(table: RowTable) -> dict[str, list[int]]:
    """API name -> its rows (a row named `{entry}.{...}` has its entry's API name)."""
    rows_of: dict[str, list[int]] = {}
    for e, start, end in entry_spans(table):
        entry = table.entries[e]
        rows = table.names[start:end]
        if "." in entry and all(name.startswith(entry + ".") for name in rows):
            rows_of.setdefault(api_name(entry), []).extend(range(start, end))
            continue
        for i, name in zip(range(start, end), rows):
            rows_of.setdefault(api_name(name), []).append(i)
    return rows_of


def _user_key(npu: RowTable, row: int, rule: ApiRule) -> str | None:
    """Row `row` of `rule.ms_api` renamed to `rule.pt_api` with its index translated, or unmatchable."""
    name = rule.pt_api + npu.names[row][len(rule.ms_api) :]
    state = State(int(npu.state[row]))
    if state not in _FIELDS:
        return UNMATCHABLE
    field, term = _FIELDS[state]
    entry = npu.entries[npu.entry_index[row]].replace(rule.ms_api, rule.pt_api, 1)
    # a parameter-gradient entry is itself named `...parameters_grad` (or `...parameters_grad.<n>`, 26.x): its
    # rows are `{entry}.{param}`; the other rows are `{entry}.{field}.{index}`
    prefix = f"{entry}." if state is State.PARAMETERS_GRAD else f"{entry}.{field}."
    suffix = name[len(prefix) :] if name.startswith(prefix) else name
    ms_indices, pt_indices = rule.indices[term]
    key = UNMATCHABLE
    for ms_index, pt_index in zip(ms_indices, pt_indices):
        if suffix == ms_index:
            key = (
                prefix + pt_index
                if state is State.PARAMETERS_GRAD
                else name.replace(f".{field}.{ms_index}", f".{field}.{pt_index}")
            )
    return key
