"""Every C function and its Python twin (`native.TWINS`, bound once by `native.twin`): both called directly on the
same small input give the same answer. A pair whose twins are compared at length elsewhere names that test here;
a pair in neither table fails `test_every_twin_pair_is_compared`, so a new pair comes with its comparison."""

from __future__ import annotations

import ast
import importlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msprobe_compare import native
from tests.native_helpers import native_module

ROOT = Path(__file__).resolve().parent
PKG = ROOT.parent / "src" / "msprobe_compare"

# the modules that bind twins (every `native.twin(` in the package: test_the_binding_modules_are_listed)
MODULES = ("load.dumpjson", "load.rows", "load.stream", "pair.align", "pair.aligned", "pair.calls", "pair.exact",
           "pair.param_grad",
           "pair.risk_level", "measure.legacy_parse", "measure.stats", "measure.tensor_compare", "judge.noise",
           "judge.calls", "judge.floors", "render.flat", "render.xlsx")  # fmt: skip

for _name in MODULES:
    importlib.import_module(f"msprobe_compare.{_name}")

NAMES = ["Functional.linear.0.forward", "Functional.linear.1.backward", "Module.a.Linear.forward.0",
         "Module.a.weight.parameters_grad", "Module.b.parameters_grad.2", "Tensor.add_.3.forward", "",
         "Torch.é.12.backward", "Functional.linear.0.forward", "x" * 40]  # fmt: skip


def _same(a: Any, b: Any) -> bool:
    """Equal values, arrays equal byte for byte with the same dtype and shape, tuples and lists item by item."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _index_answers(index: Any, keys: list[str]) -> tuple[Any, ...]:
    out = np.empty(len(keys), dtype=np.int64)
    index.find(keys, out)
    return out, [index.get(k) for k in keys], int(index.repeated)


def _scan(container: Callable[[Any], None], raw: bytes) -> int:
    from msprobe_compare.load.stream import _Scanner

    s = _Scanner(Path("dump.json"), io.BytesIO(raw), 0)  # type: ignore[arg-type]
    s.peek()
    container(s)
    return s.offset()


def _csv_columns() -> list[Any]:
    return [["a", "b,c", "=1+1", "é"], [1.5, float("nan"), 1e-300, -0.0], [None, True, 2**40, "N/A"]]


def _jsonl_formats() -> list[Any]:
    from msprobe_compare.render.columntext import JsonFormat

    return [JsonFormat("t", "{"), JsonFormat("v", ","), JsonFormat("o", ",", "}\n")]


def _csv_format() -> Any:
    from msprobe_compare.render.columntext import CsvFormat

    return CsvFormat()


# pair -> (the inputs, how the answers are compared); each twin gets inputs of its own (some change them)
Case = tuple[Callable[[], tuple[Any, ...]], Callable[[Any, Any], bool]]
CALLS: dict[str, Callable[..., Any]] = {  # a twin called otherwise than with the inputs: a method, say
    "msprobe_compare.load.stream._Scanner.container": _scan,
}
CASES: dict[str, Case] = {
    "msprobe_compare.pair.risk_level.stem_counts": (lambda: (list(NAMES),), lambda a, b: dict(a) == dict(b)),
    "msprobe_compare.pair.param_grad.grad_entries": (lambda: (list(NAMES) + ["\ud800parameters_grad"],), _same),
    "msprobe_compare.pair.exact.first_index": (lambda: (list(NAMES), NAMES[::-1] + ["absent", "é"]), _same),
    "msprobe_compare.pair.calls.call_keys": (lambda: (list(NAMES),), _same),
    "msprobe_compare.pair.calls.children": (
        lambda: (
            {"m.forward.0": None, "a.0.forward": "m.forward.0", "é.0.forward": "m.forward.0", "b": None},
            {"m.forward.0", "absent"},
        ),
        _same,
    ),  # fmt: skip
    "msprobe_compare.pair.calls.name_index": (
        lambda: (list(NAMES),),
        lambda a, b: _same(_index_answers(a, NAMES + ["none", "é"]), _index_answers(b, NAMES + ["none", "é"])),
    ),
    "msprobe_compare.load.rows.text_codes": (lambda: (["f32", "f16", "f32", "é", "f16"],), _same),
    "msprobe_compare.load.rows.coded": (lambda: ([*(["[1, 2]", "[3]"] * 3), "".join(["[1, ", "2]"])],), _same),
    "msprobe_compare.load.rows.identity_codes": (lambda: ([shared := ["a"], None, shared, ["a"], None],), _same),
    "msprobe_compare.load.rows.phase_flags": (lambda: (list(NAMES),), _same),
    "msprobe_compare.load.stream._Scanner.container": (
        lambda: (b' {"a": [1, {"b": "}]\\"x"}], "c": {}} , "tail"',),
        _same,
    ),
    "msprobe_compare.measure.legacy_parse.reference_parse": (
        lambda: (np.array([0.1, 1e22, -2.2250738585072014e-308, 5e-324, 123456.789, np.nan, -np.inf, 0.3]),),
        _same,
    ),  # fmt: skip
    "msprobe_compare.render.flat.csv_block": (lambda: (_csv_format(), _csv_columns(), 1, 4, False), _same),
    "msprobe_compare.render.flat.jsonl_block": (lambda: (_jsonl_formats(), _csv_columns(), 0, 4, False), _same),
}

# pairs compared at length by another test (path::function), often through the whole caller: the Python twin of the
# row walker, the construct.json reader and stat_calls is the caller's own loop (their Python twin answers None)
ELSEWHERE = {
    "msprobe_compare.load.rows.row_walker": "load/test_rowwalk.py::test_fixture_tables_are_identical",
    "msprobe_compare.load.dumpjson.construct_beside":
        "judge/test_noise_native.py::test_tree_beside_equals_the_full_read_on_every_fixture_pair",
    "msprobe_compare.judge.noise.stat_calls": "judge/test_noise_native.py::test_stat_calls_equal_the_numpy_sequence",
    "msprobe_compare.judge.noise.stat_rows": "judge/test_noise_native.py::test_stat_measures_equal_numpy",
    "msprobe_compare.judge.noise.coarse_bits": "judge/test_noise_native.py::test_statistic_bits_equal_numpy",
    "msprobe_compare.judge.calls.seg_max": "judge/test_noise_native.py::test_per_call_maxima_equal_numpy",
    "msprobe_compare.judge.floors.margins": "judge/test_noise_native.py::test_margins_equal_numpy",
    "msprobe_compare.judge.floors.running_floor": "judge/test_noise_native.py::test_running_floor_equals_numpy",
    "msprobe_compare.measure.stats.stat_cells":
        "measure/test_stats.py::test_native_cells_are_in_use_and_equal_numpy_on_many_rows",
    "msprobe_compare.render.xlsx.sheet_block": "render/test_xlsx_native.py::test_native_rows_are_the_python_rows",
    "msprobe_compare.pair.align.module_scan": "pair/test_align_native.py::test_module_scan_twins_agree_on_real_dumps",
    "msprobe_compare.pair.aligned.rows_alike":
        "pair/test_align_native.py::test_rows_alike_and_keyed_rows_twins_agree",
    "msprobe_compare.pair.aligned.keyed_rows":
        "pair/test_align_native.py::test_rows_alike_and_keyed_rows_twins_agree",
    "msprobe_compare.measure.tensor_compare.accumulate":
        "measure/test_metric_table.py::test_every_metric_is_produced_by_both_twins",
}  # fmt: skip


def test_every_twin_pair_is_compared() -> None:
    assert set(native.TWINS) == set(CASES) | set(ELSEWHERE), "a twin pair without a comparison, or a stale entry"
    assert not set(CASES) & set(ELSEWHERE)


def test_the_binding_modules_are_listed() -> None:
    """Every module of the package that binds a pair is imported above (so TWINS holds all pairs)."""
    binding = {str(p.relative_to(PKG).with_suffix("")).replace("/", ".") for p in PKG.rglob("*.py")
               if p.name != "native.py" and "native.twin(" in p.read_text(encoding="utf-8")}  # fmt: skip
    assert binding == set(MODULES)


@pytest.mark.parametrize("key", sorted(ELSEWHERE))
def test_the_comparison_elsewhere_exists(key: str) -> None:
    path, name = ELSEWHERE[key].split("::")
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("key", sorted(CASES))
def test_the_c_twin_gives_the_python_twins_answer(key: str) -> None:
    module, c, py = native.TWINS[key]
    native_module(module)
    inputs, same = CASES[key]
    call = CALLS.get(key, lambda twin, *args: twin(*args))
    want = call(py, *inputs())
    got = call(c, *inputs())
    assert same(got, want), (key, got, want)


def test_the_bound_name_follows_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one name callers use calls the C twin, and the Python twin under MSPROBE_NATIVE=0 (read at each call)."""
    from msprobe_compare.pair import risk_level

    native_module("_sharednames")
    seen: list[str] = []
    monkeypatch.setattr(risk_level, "_C", type("C", (), {"stem_counts": lambda _, e: seen.append("c") or {}})())
    assert risk_level.stem_counts(["a.0.forward"]) == {} and seen == ["c"]
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    assert risk_level.stem_counts(["a.0.forward"]) == {"a": 1} and seen == ["c"]
