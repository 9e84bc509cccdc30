"""One unmatched marker: a row without counterpart is `match < 0`, never a name, so a bench row really named `N/A`
(or a bench tensor file really called `N/A`) is not matched by accident."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from msprobe_compare.measure.tensor_metrics import TensorMsg
from msprobe_compare.measure.tensor_rows import RowTask, _measure
from msprobe_compare.pair.cell_mapping import cell_mapping_keys
from msprobe_compare.pair.exact import NO_MATCH_NAME, UNMATCHED, match_data_mapping, match_exact
from msprobe_compare.pair.fuzzy import match_fuzzy

from .helpers import call, table, tensor

NPU = {"Functional.relu.0.forward": call(), "x.0.debug": {"a": tensor()}}


def sides() -> tuple:
    npu = table(NPU)
    bench = table(NPU)
    names = list(bench.names)
    names[names.index("x.0.debug.a")] = "N/A"  # a bench row that is really called N/A
    return npu, replace(bench, names=names)


def test_unmappable_rows_do_not_match_a_bench_row_named_na() -> None:
    npu, bench = sides()
    keys = cell_mapping_keys(npu, None)  # -cm: `x.0.debug.a` is neither a call nor parameters_grad
    match = match_exact(npu, bench, keys=keys)
    row = npu.names.index("x.0.debug.a")
    assert match[row] == UNMATCHED
    assert (match[[i for i in range(len(npu)) if i != row]] >= 0).all()  # the other rows still match
    assert match_fuzzy(npu, bench, keys=keys).match[row] == UNMATCHED


def test_a_mapping_to_no_match_is_unmatched_whatever_the_bench_names() -> None:
    npu, bench = sides()
    match = match_data_mapping(npu, bench, {"x.0.debug.a": NO_MATCH_NAME})  # what -lm writes for no counterpart
    assert match[npu.names.index("x.0.debug.a")] == UNMATCHED
    assert match_data_mapping(npu, bench, {"x.0.debug.a": None})[npu.names.index("x.0.debug.a")] == UNMATCHED
    # a plain name join still finds a bench row named N/A when the NPU row is named so too
    plain = replace(npu, names=["N/A" if n == "x.0.debug.a" else n for n in npu.names])
    assert np.array_equal(match_exact(plain, bench), np.arange(len(npu)))


def test_a_bench_tensor_file_named_na_is_read_not_taken_for_unmatched(tmp_path: Path) -> None:
    unmatched, _ = _measure(RowTask(0, "r", "a.pt", None), tmp_path, tmp_path)
    assert unmatched.messages == (TensorMsg.BENCH_UNMATCHED,)
    named, failure = _measure(RowTask(0, "r", "a.pt", "N/A"), tmp_path, tmp_path)
    assert TensorMsg.BENCH_UNMATCHED not in named.messages and TensorMsg.READ_FAILED in named.messages
