"""API mapping keys (spec §3.7, decision D12) and the built-in table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from msprobe_compare.errors import InputError
from msprobe_compare.pair.api_mapping import (
    TABLE_FILE,
    UNMATCHABLE,
    api_mapping_keys,
    builtin_key,
    builtin_table,
    read_api_mapping,
)

from .helpers import call, table, tensor

NPU = {
    "Mint.flatten.0.forward": call(),
    "MintFunctional.linear.0.forward": call(inputs=3),
    "Functional.dense.0.forward": call(inputs=3, input_kwargs={"bias": tensor()}),
    "Functional.matmul.0.forward": call(inputs=2),
    "Functional.not_in_table.0.forward": call(),
    "Tensor.transpose.0.forward": call(),
    "Functional.dense.0.backward": {"input": [tensor()], "output": [tensor(), tensor(), tensor()]},
}
BENCH = {
    "Functional.linear.0.forward": call(inputs=3),
    "Functional.linear.0.backward": {"input": [tensor()], "output": [tensor(), tensor(), tensor()]},
}


def keys(user: list[dict[str, Any]] | None, warnings: list[str] | None = None) -> dict[str, str]:
    npu, bench = table(NPU), table(BENCH)
    return dict(zip(npu.names, api_mapping_keys(npu, bench, user, warn=None if warnings is None else warnings.append)))


def test_builtin_rules_and_table():
    k = keys(None)
    assert k["Mint.flatten.0.forward.input.0"] == "Torch.flatten.0.forward.input.0"
    assert k["MintFunctional.linear.0.forward.input.2"] == "Functional.linear.0.forward.input.2"
    assert k["Functional.dense.0.forward.input.bias"] == "Functional.linear.0.forward.input.bias"
    assert k["Functional.matmul.0.forward.output.0"] == "Torch.matmul.0.forward.output.0"
    assert k["Functional.not_in_table.0.forward.input.0"] == "Functional.not_in_table.0.forward.input.0"
    assert k["Tensor.transpose.0.forward.input.0"] == "Tensor.permute.0.forward.input.0"
    npu = table(NPU)
    assert api_mapping_keys(npu, table(BENCH), None) == [builtin_key(n, builtin_table()) for n in npu.names]


def test_builtin_table_is_packaged_and_well_formed():
    table_ = builtin_table()
    assert len(table_) >= 300
    prefixes = {"Functional", "Tensor", "Distributed", "MintDistributed"}
    targets = {"Torch", "Functional", "Tensor", "Distributed"}
    for ms, pt in table_.items():
        assert ms.split(".")[0] in prefixes and len(ms.split(".")) == 2, ms
        assert pt.split(".")[0] in targets and len(pt.split(".")) == 2, pt
    for ms, pt in (("Functional.relu", "Functional.relu"), ("Functional.matmul", "Torch.matmul"),
                   ("Functional.add", "Torch.add"), ("Tensor.add", "Tensor.add"),
                   ("Functional.dense", "Functional.linear")):  # fmt: skip
        assert table_[ms] == pt
    assert TABLE_FILE == "ms_to_pt_api.yaml"


USER = [{"ms_api": "Functional.dense", "pt_api": "Functional.linear", "ms_args": [0, 2], "pt_args": [0, 1],
         "ms_outputs": [0], "pt_outputs": [0]}]  # fmt: skip


def test_user_entry_translates_listed_indices_and_drops_the_rest():
    k = keys(USER)
    assert k["Functional.dense.0.forward.input.0"] == "Functional.linear.0.forward.input.0"
    assert k["Functional.dense.0.forward.input.2"] == "Functional.linear.0.forward.input.1"
    assert k["Functional.dense.0.forward.input.1"] is UNMATCHABLE  # not listed
    assert k["Functional.dense.0.forward.input.bias"] is UNMATCHABLE  # kwargs use ms_args too
    assert k["Functional.dense.0.forward.output.0"] == "Functional.linear.0.forward.output.0"
    assert k["Functional.dense.0.backward.input.0"] == "Functional.linear.0.backward.input.0"
    assert k["Functional.dense.0.backward.output.2"] is UNMATCHABLE  # backward outputs use the output lists
    assert k["Mint.flatten.0.forward.input.0"] == "Torch.flatten.0.forward.input.0"  # other APIs: built-in only


def test_d12_both_output_spellings():
    singular = [{k.replace("outputs", "output"): v for k, v in USER[0].items()}]
    assert "ms_output" in singular[0] and "ms_outputs" not in singular[0]
    assert keys(singular) == keys(USER)


def test_user_entry_needs_both_apis_present():
    absent = [dict(USER[0], pt_api="Functional.not_dumped")]
    assert keys(absent) == keys(None)


def test_inconsistent_lengths_are_skipped_with_a_warning():
    warnings: list[str] = []
    bad = [dict(USER[0], pt_args=[0])]
    assert keys(bad, warnings) == keys(None)
    assert len(warnings) == 1 and "Functional.dense" in warnings[0]


def test_read_api_mapping(tmp_path: Path):
    good = tmp_path / "am.yaml"
    good.write_text(yaml.safe_dump(USER))
    assert read_api_mapping(good) == USER
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert read_api_mapping(empty) == []
    for text, message in (("a: b\n", "must be a YAML list"), ("- 3\n", "entry 1 must be a mapping"),
                          ("- {pt_api: X.y}\n", "entry 1 needs 'ms_api'"),
                          ("- {ms_api: A.b, pt_api: X.y, ms_args: 0}\n", "'ms_args' must be a list"),
                          ("- [\n", "not valid YAML")):  # fmt: skip
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(InputError, match=message) as err:
            read_api_mapping(bad)
        assert str(bad) in err.value.message and "\n" not in err.value.message


def test_user_entry_maps_parameter_gradients():
    """ms_parameters_grad/pt_parameters_grad (spec §3.7) translate the rows of a parameter-gradient entry, named
    `...parameters_grad` (8.3.3) or `...parameters_grad.0` (26.x), whose rows are `{entry}.{param}`."""
    npu = table({"Cell.fc1.Dense.forward": call(parameters={"weight": tensor(), "bias": tensor()}),
                 "Cell.fc1.Dense.parameters_grad": {"weight": tensor(), "bias": tensor(), "extra": tensor()},
                 "Cell.fc1.Dense.parameters_grad.0": {"weight": tensor()}})  # fmt: skip
    bench = table({"Module.fc1.Dense.parameters_grad": {"w": tensor(), "b": tensor()}})
    user = [{"ms_api": "Cell.fc1", "pt_api": "Module.fc1", "ms_parameters": ["weight"], "pt_parameters": ["w"],
             "ms_parameters_grad": ["weight", "bias"], "pt_parameters_grad": ["w", "b"]}]  # fmt: skip
    k = dict(zip(npu.names, api_mapping_keys(npu, bench, user)))
    assert k["Cell.fc1.Dense.parameters_grad.weight"] == "Module.fc1.Dense.parameters_grad.w"
    assert k["Cell.fc1.Dense.parameters_grad.bias"] == "Module.fc1.Dense.parameters_grad.b"
    assert k["Cell.fc1.Dense.parameters_grad.extra"] is UNMATCHABLE  # not listed
    assert k["Cell.fc1.Dense.parameters_grad.0.weight"] == "Module.fc1.Dense.parameters_grad.0.w"
    assert k["Cell.fc1.Dense.forward.parameters.weight"] == "Module.fc1.Dense.forward.parameters.w"
    assert k["Cell.fc1.Dense.forward.parameters.bias"] is UNMATCHABLE
