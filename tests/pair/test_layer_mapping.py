"""Layer mapping (spec §3.8): entries paired by their place in the model, rows by suffix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import read_layer_files
from msprobe_compare.pair.layer_mapping import layer_mapping, read_layer_mapping

from .helpers import call, table, tensor


def side(folder: Path, data: dict[str, Any], construct: dict[str, Any] | None, stack: Any = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "mix", "data": data}))
    if construct is not None:
        (folder / "construct.json").write_text(json.dumps(construct))
    if stack is not None:
        (folder / "stack.json").write_text(json.dumps(stack))
    return folder


def run(tmp_path: Path, npu: tuple, bench: tuple, mapping: dict | None = None) -> dict[str, str]:
    n = side(tmp_path / "npu", *npu)
    b = side(tmp_path / "bench", *bench)
    return layer_mapping(read_layer_files(n), read_layer_files(b), mapping, table(npu[0]), table(bench[0]),
                         bench_framework="pytorch")  # fmt: skip


MS = {
    "Cell.net.Net.forward.0": call(),
    "Cell.net.block.Block.forward.0": call(),
    "Cell.net.block.norm.LayerNorm.forward.0": call(parameters={"gamma": tensor(), "beta": tensor()}),
    "Cell.net.block.dense.Dense.forward.0": call(),
    "Cell.net.block.dense.Dense.backward.0": {"input": [tensor()], "output": [tensor()]},
    "Cell.net.block.dense.Dense.parameters_grad": {"weight": [tensor()]},
}
MS_TREE = {"Cell.net.Net.forward.0": None, "Cell.net.block.Block.forward.0": "Cell.net.Net.forward.0",
           "Cell.net.block.norm.LayerNorm.forward.0": "Cell.net.block.Block.forward.0",
           "Cell.net.block.dense.Dense.forward.0": "Cell.net.block.Block.forward.0",
           "Cell.net.block.dense.Dense.backward.0": "Cell.net.block.Block.backward.0"}  # fmt: skip
PT = {
    "Module.net.Net.forward.0": call(),
    "Module.net.block.Block.forward.0": call(),
    "Module.net.block.ln.LayerNorm.forward.0": call(parameters={"weight": tensor(), "bias": tensor()}),
    "Module.net.block.dense.Linear.forward.0": call(),
    "Module.net.block.dense.Linear.backward.0": {"input": [tensor()], "output": [tensor()]},
    "Module.net.block.dense.Linear.parameters_grad": {"weight": [tensor()]},
}
PT_TREE = {k.replace("Cell", "Module").replace("norm", "ln").replace("Dense", "Linear"): (
    v and v.replace("Cell", "Module")) for k, v in MS_TREE.items()}  # fmt: skip
NEW_STACK = {"0": [["x"], ["File a.py, line 1, in f, \n x"]]}  # 8.3.x format: not used by layer mapping


def test_modules_pair_by_attribute_path_whatever_their_class(tmp_path: Path):
    m = run(tmp_path, (MS, MS_TREE, NEW_STACK), (PT, PT_TREE, NEW_STACK))
    assert m["Cell.net.block.dense.Dense.forward.0.input.0"] == "Module.net.block.dense.Linear.forward.0.input.0"
    assert m["Cell.net.block.dense.Dense.backward.0.output.0"] == "Module.net.block.dense.Linear.backward.0.output.0"
    assert m["Cell.net.block.dense.Dense.parameters_grad.weight"] == (
        "Module.net.block.dense.Linear.parameters_grad.weight")  # fmt: skip
    assert m["Cell.net.block.norm.LayerNorm.forward.0.input.0"] == "N/A"  # `norm` is `ln` on the bench side
    assert set(m) == set(table(MS).names)


def test_yaml_renames_children_of_a_layer_class(tmp_path: Path):
    m = run(tmp_path, (MS, MS_TREE, NEW_STACK), (PT, PT_TREE, NEW_STACK), {"Block": {"norm": "ln"}})
    assert m["Cell.net.block.norm.LayerNorm.forward.0.output.0"] == "Module.net.block.ln.LayerNorm.forward.0.output.0"
    assert m["Cell.net.block.norm.LayerNorm.forward.0.parameters.gamma"] == "N/A"  # suffixes differ


def test_multi_segment_rule_and_legacy_top_key(tmp_path: Path):
    ms = {"Cell.enc.block.Block.forward.0": call(), "Cell.head.Dense.forward.0": call()}
    pt = {"Module.encoder.Block.forward.0": call(), "Module.fc.Linear.forward.0": call()}
    m = run(tmp_path, (ms, dict.fromkeys(ms), NEW_STACK), (pt, dict.fromkeys(pt), NEW_STACK),
            {"Cell": {"enc.block": "encoder", "enc": "WRONG", "head": "fc"}})  # fmt: skip
    assert m["Cell.enc.block.Block.forward.0.input.0"] == "Module.encoder.Block.forward.0.input.0"
    assert m["Cell.head.Dense.forward.0.output.0"] == "Module.fc.Linear.forward.0.output.0"


MS_STACK_LINES = [
    "File /x/site-packages/msprobe/mindspore/api_register.py, line 1, in api, \n ApiTemplate(x)",
    "File /x/site-packages/mindspore/ops/function/math_func.py, line 2, in inner, \n y",
    "File /x/site-packages/mindspore/nn/layer/basic.py, line 3, in {fn}, \n y",
    "File /home/u/model.py, line 4, in construct, \n y",
]
PT_STACK_LINES = [
    "File /x/site-packages/msprobe/pytorch/api_register.py, line 1, in api, \n ApiTemplate(x)",
    "File /x/site-packages/torch/nn/functional.py, line 2, in {fn}, \n y",
    "File /home/u/model.py, line 4, in forward, \n y",
]


def api_side(prefix: str, layers: list[int], lines: list[str], fns: tuple[str, str]) -> tuple:
    data: dict[str, Any] = {f"{prefix}.tr.ParallelTransformer.forward.0": call()}
    tree: dict[str, Any] = {f"{prefix}.tr.ParallelTransformer.forward.0": None}
    stack: dict[str, Any] = {}
    for n, layer in enumerate(layers):
        cell = f"{prefix}.tr.layers.{layer}.Layer.forward.0"
        data[cell] = call()
        tree[cell] = f"{prefix}.tr.ParallelTransformer.forward.0"
        for k, fn in enumerate(fns):
            api = f"Functional.add.{2 * n + k}.forward"
            data[api] = call(inputs=2)
            tree[api] = cell
            stack[api] = [line.replace("{fn}", fn) for line in lines]
        back = f"Functional.add.{2 * n + fns.index('residual')}.backward"
        data[back] = {"input": [tensor()], "output": [tensor(), tensor()]}
        tree[back] = cell
    return data, tree, stack


def test_apis_scoped_by_module_and_framework_function_with_renumbered_layers(tmp_path: Path):
    npu = api_side("Cell", [4, 5], MS_STACK_LINES, ("residual", "bias_add"))
    bench = api_side("Module", [0, 1], PT_STACK_LINES, ("bias_add", "residual"))  # called in the other order
    m = run(tmp_path, npu, bench)
    # layers 4, 5 of the pipeline stage are layers 0, 1; the calling function tells the two adds apart
    assert m["Functional.add.0.forward.input.1"] == "Functional.add.1.forward.input.1"
    assert m["Functional.add.1.forward.output.0"] == "Functional.add.0.forward.output.0"
    assert m["Functional.add.3.forward.input.0"] == "Functional.add.2.forward.input.0"
    assert m["Cell.tr.layers.5.Layer.forward.0.input.0"] == "Module.tr.layers.1.Layer.forward.0.input.0"
    # a backward entry takes the scope of its forward entry
    assert m["Functional.add.2.backward.output.1"] == "Functional.add.3.backward.output.1"


def test_no_structure_files_means_no_mapping(tmp_path: Path):
    assert run(tmp_path, (MS, None), (PT, PT_TREE, NEW_STACK)) == {}
    empty_tree = run(tmp_path / "b", (MS, {}, NEW_STACK), (PT, PT_TREE, NEW_STACK))
    assert empty_tree == {}


def test_bench_without_structure_maps_everything_to_na(tmp_path: Path):
    m = run(tmp_path, (MS, MS_TREE, NEW_STACK), (PT, None))
    assert m and set(m.values()) == {"N/A"}


def test_one_structure_file_missing_is_an_error(tmp_path: Path):
    with pytest.raises(InputError, match="stack.json is missing"):
        run(tmp_path, (MS, MS_TREE), (PT, PT_TREE, NEW_STACK))


def test_short_entry_names_are_refused(tmp_path: Path):
    with pytest.raises(InputError, match="fewer than four"):
        run(tmp_path, ({"x.0.debug": {"a": tensor()}}, {"x.0.debug": None}, NEW_STACK), (PT, PT_TREE, NEW_STACK))


def test_read_layer_mapping(tmp_path: Path):
    good = tmp_path / "lm.yaml"
    good.write_text("Block:\n  norm: ln\n")
    assert read_layer_mapping(good) == {"Block": {"norm": "ln"}}
    for text, message in (("[1]\n", "must be a YAML mapping"), ("Block: ln\n", "must map a class name"),
                          ("Block:\n  norm: [ln]\n", "must map a text to a text")):  # fmt: skip
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(InputError, match=message) as err:
            read_layer_mapping(bad)
        assert str(bad) in err.value.message
