"""The module-tree aligner (pair/align.py, issue #30) on small hand-made trees: each stage on its own, and the
tables it builds (pair/aligned.py). The real dumps of five implementations are in tests/test_align_impl.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msprobe_compare.errors import InputError
from msprobe_compare.load.rows import flatten
from msprobe_compare.pair.align import align, decide, describe, inner_calls, module_calls
from msprobe_compare.pair.aligned import aligned_tables

RNG = np.random.default_rng(3)


def t(shape: list[int], scale: float = 1.0, dtype: str = "torch.float32") -> dict[str, Any]:
    """A tensor leaf with random-looking statistics."""
    n = math.prod(shape)
    s = float(RNG.uniform(0.5, 2.0)) * scale
    return {"type": "torch.Tensor", "dtype": dtype, "shape": shape, "Max": 3 * s + float(RNG.random()),
            "Min": -3 * s - float(RNG.random()), "Mean": float(RNG.normal(0, 0.05)), "Norm": s * math.sqrt(n),
            "requires_grad": True}  # fmt: skip


def cat(parts: list[dict[str, Any]], shape: list[int]) -> dict[str, Any]:
    """The statistics of the parts concatenated (exact)."""
    n = [math.prod(p["shape"]) for p in parts]
    return {"type": "torch.Tensor", "dtype": parts[0]["dtype"], "shape": shape, "Max": max(p["Max"] for p in parts),
            "Min": min(p["Min"] for p in parts), "Mean": sum(p["Mean"] * k for p, k in zip(parts, n)) / sum(n),
            "Norm": math.sqrt(sum(p["Norm"] ** 2 for p in parts)), "requires_grad": True}  # fmt: skip


def scaled(leaf: dict[str, Any], k: float) -> dict[str, Any]:
    return {**leaf, "Max": leaf["Max"] * k, "Min": leaf["Min"] * k, "Mean": leaf["Mean"] * k, "Norm": leaf["Norm"] * k}


class Dump:
    """A dump.json data object and its construct.json, written call by call."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.tree: dict[str, str | None] = {}

    def module(self, path: str, cls: str, inputs: list[Any], outputs: list[Any], params: dict[str, Any] | None = None,
               parent: str | None = None) -> str:  # fmt: skip
        name = f"Module.{path}.{cls}.forward.0"
        self.data[name] = {"input_args": inputs, "input_kwargs": {}, "output": outputs, "parameters": params or {}}
        self.tree[name] = parent
        return name

    def api(self, name: str, inputs: list[Any], outputs: list[Any], parent: str | None) -> None:
        self.data[name] = {"input_args": inputs, "input_kwargs": {}, "output": outputs}
        self.tree[name] = parent

    def side(self) -> Any:
        return module_calls(flatten(Path("dump.json"), self.data), self.tree)


def names(al: Any) -> set[tuple[str, str]]:
    return {(al.names("npu", p.npu), al.names("bench", p.bench)) for p in al.pairs}


def slots(al: Any, npu: str) -> set[tuple[str, str]]:
    p = next(p for p in al.pairs if al.names("npu", p.npu) == npu)
    return {(s.npu, s.bench) for s in p.slots}


def attention(merged: bool, x: dict[str, Any], w: dict[str, Any], a: dict[str, Any], prefix: str = "m.attn",
              bug: float = 1.0) -> Dump:  # fmt: skip
    """An attention block: q/k/v apart (or merged into qkv) and o, inside `prefix`."""
    d = Dump()
    parent = f"Module.{prefix}.Attention.forward.0"
    if merged:
        d.module(f"{prefix}.qkv", "QKVParallelLinear", [x], [cat([a["q"], a["k"], a["v"]], [16, 64])],
                 {"weight": cat([w["q"], w["k"], w["v"]], [64, 32])}, parent)  # fmt: skip
    else:
        for k in "qkv":
            d.module(f"{prefix}.{k}_proj", "Linear", [x], [a[k]], {"weight": w[k]}, parent)
    d.module(f"{prefix}.o_proj", "Linear", [a["ctx"]], [scaled(a["o"], bug)], {"weight": w["o"]}, parent)
    d.module(prefix, "Attention", [x], [scaled(a["o"], bug)], None, None)
    return d


def weights() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    x = t([16, 32])
    w = {"q": t([32, 32], 0.1), "k": t([16, 32], 0.1), "v": t([16, 32], 0.1), "o": t([32, 32], 0.1)}
    a = {"q": t([16, 32]), "k": t([16, 16]), "v": t([16, 16]), "ctx": t([16, 32]), "o": t([16, 32])}
    return x, w, a


def test_merged_siblings_pair_by_their_parameters_concatenated() -> None:
    x, w, a = weights()
    al = align(attention(False, x, w, a).side(), attention(True, x, w, a, prefix="model.self_attention").side())
    assert ("m.attn.q_proj;m.attn.k_proj;m.attn.v_proj", "model.self_attention.qkv") in names(al)
    assert ("m.attn.o_proj", "model.self_attention.o_proj") in names(al)
    assert ("m.attn", "model.self_attention") in names(al)  # the tree: the same pairs below
    assert slots(al, "m.attn.q_proj;m.attn.k_proj;m.attn.v_proj") == {("input.0", "input.0"), ("output.0", "output.0")}
    assert next(p for p in al.pairs if len(p.npu) == 3).how == "parameters"


def test_merged_rows_combine_exactly_and_a_shared_input_is_read_once() -> None:
    x, w, a = weights()
    al = align(attention(False, x, w, a).side(), attention(True, x, w, a).side())
    tables = aligned_tables(al)
    npu = tables.npu.table
    row = next(i for i, n in enumerate(npu.names) if n.startswith("Module.m.attn.q_proj") and n.endswith("output.0"))
    assert npu.names[row].count(";") == 2 and npu.shape[row] == "[16, 64]"
    want = cat([a["q"], a["k"], a["v"]], [16, 64])
    assert npu.stats[row].tolist() == pytest.approx([want["Max"], want["Min"], want["Mean"], want["Norm"]])
    inp = next(i for i, n in enumerate(npu.names) if n.startswith("Module.m.attn.q_proj") and n.endswith("input.0"))
    assert npu.stats[inp, 3] == pytest.approx(x["Norm"])  # shared: not sqrt(3) x the Norm of a concatenation
    bench = tables.bench.table
    assert bench.names[tables.match[row]].endswith("qkv.QKVParallelLinear.forward.0.output.0")
    assert bench.names[tables.match[inp]].endswith("qkv.QKVParallelLinear.forward.0.input.0")


def test_mindspore_cells_align_as_modules_do() -> None:
    """MindSpore dumps name cells `Cell.<path>.<Class>.forward.<n>`: the same merged pairs and slots as `Module.`."""

    def cells(d: Dump) -> Any:
        data = {k.replace("Module.", "Cell.", 1): v for k, v in d.data.items()}
        tree = {
            k.replace("Module.", "Cell.", 1): p.replace("Module.", "Cell.", 1) if p else p for k, p in d.tree.items()
        }
        return module_calls(flatten(Path("dump.json"), data), tree)

    x, w, a = weights()
    npu, bench = attention(False, x, w, a), attention(True, x, w, a, prefix="model.self_attention")
    al = align(cells(npu), cells(bench))
    assert names(al) == names(align(npu.side(), bench.side()))
    assert ("m.attn.q_proj;m.attn.k_proj;m.attn.v_proj", "model.self_attention.qkv") in names(al)
    assert decide(cells(npu).table, cells(bench).table).differ
    tables = aligned_tables(al)
    row = next(i for i, n in enumerate(tables.npu.table.names) if n.startswith("Cell.m.attn.q_proj") and
               n.endswith("output.0"))  # fmt: skip
    assert tables.bench.table.names[tables.match[row]].startswith("Cell.model.self_attention.qkv")


def test_wrappers_around_the_same_calls_are_the_same_boundary() -> None:
    x, w, a = weights()
    npu = attention(False, x, w, a, prefix="model.layers.0.self_attn")
    bench = attention(False, x, w, a, prefix="_fsdp_wrapped_module.model.layers.0._fsdp_wrapped_module.self_attn")
    bench.module("_fsdp_wrapped_module.model.layers.0", "FullyShardedDataParallel", [x], [a["o"]])
    al = align(npu.side(), bench.side())
    assert ("model.layers.0.self_attn", "_fsdp_wrapped_module.model.layers.0._fsdp_wrapped_module.self_attn") in \
        names(al)  # fmt: skip
    assert ("model.layers.0.self_attn.q_proj",
            "_fsdp_wrapped_module.model.layers.0._fsdp_wrapped_module.self_attn.q_proj") in names(al)  # fmt: skip


def test_calls_without_parameters_pair_by_the_tensors_they_carry_and_act_fns_of_other_math_do_not() -> None:
    x, y, z = t([16, 64]), t([16, 64]), t([16, 32])
    npu, bench = Dump(), Dump()
    npu.module("m.act", "SiLU", [x], [y])
    npu.module("m.rot", "Rotary", [t([16, 32])], [t([16, 32])])  # cos/sin against a cache: nothing in common
    bench.module("m.act_fn", "SiluAndMul", [t([16, 128])], [t([16, 64])])  # other math: nothing in common
    bench.module("m.rotary", "RotaryEmbedding", [t([64, 32])], [t([16, 32])])
    npu.module("m.gelu", "GELU", [y], [z])
    bench.module("m.activation", "GELUTanh", [y], [z])
    al = align(npu.side(), bench.side())
    assert names(al) == {("m.gelu", "m.activation")}
    assert {u for u in al.unpaired["npu"]} and al.unpaired["bench"]


def test_after_the_runs_part_other_layers_say_which_slots_pair() -> None:
    """A bug in layer 1's o_proj: layer 2's tensors all differ, but layer 0 showed which slot carries what."""
    npu, bench = Dump(), Dump()
    x = t([16, 32])
    for layer in range(3):
        w = {"q": t([32, 32], 0.1), "o": t([32, 32], 0.1)}
        a = {"q": t([16, 32]), "o": t([16, 32]), "r": t([16, 32])}
        k = 1.2 if layer >= 1 else 1.0
        for d, name in ((npu, "layers"), (bench, "blocks.layers")):
            bug = k if d is npu else 1.0
            d.module(
                f"{name}.{layer}.q", "Linear", [x], [scaled(a["q"], bug if layer == 2 else 1.0)], {"weight": w["q"]}
            )
            d.module(
                f"{name}.{layer}.o",
                "RowLinear" if d is bench else "Linear",
                [scaled(a["q"], bug if layer == 2 else 1.0)],
                [scaled(a["o"], bug)],
                {"weight": w["o"]},
            )
            # the bench's norm returns (normed, residual): its output.1 is the npu's input
            if d is npu:
                d.module(f"{name}.{layer}.norm", "RMSNorm", [scaled(a["r"], bug)], [x], {"weight": w["q"]})
            else:
                d.module(f"{name}.{layer}.norm", "FusedRMSNorm", [t([16, 32]), t([16, 32])], [x, a["r"]],
                         {"weight": w["q"]})  # fmt: skip
        x = t([16, 32])
    al = align(npu.side(), bench.side())
    assert al.parted >= 0
    assert slots(al, "layers.2.norm") == {("input.0", "output.1"), ("output.0", "output.0")}
    got = next(p for p in al.pairs if al.names("npu", p.npu) == "layers.2.norm")
    assert {(s.npu, s.how) for s in got.slots} >= {("input.0", "layers")}
    assert slots(al, "layers.0.norm") == {("input.0", "output.1"), ("output.0", "output.0")}


def test_one_runs_dataflow_pairs_a_body_whose_output_is_its_final_norms() -> None:
    """HF's `model` holds the embedding and the norm; Megatron's `decoder` only the norm: no tree pairs them, and
    after the runs part no value does; the norm's output, read again as the body's, does."""
    npu, bench = Dump(), Dump()
    h, fh, ids, e = t([16, 32]), t([16, 32]), t([16], 1), t([16, 32])
    wn, we = t([32], 0.1), t([64, 32], 0.1)
    body = "Module.model.Model.forward.0"
    wl = t([32, 32], 0.1)
    npu.module("model.embed", "Embedding", [ids], [e], {"weight": we}, body)
    npu.module("model.layers.0", "Linear", [e], [h], {"weight": wl}, body)
    npu.module("model.norm", "RMSNorm", [h], [fh], {"weight": wn}, body)
    npu.module("model", "Model", [ids], [fh])
    bug = scaled(fh, 1.5)
    bench.module("embedding", "Embedding", [ids], [e], {"weight": we})
    bench.module("decoder.layers.0", "Linear", [e], [scaled(h, 1.5)], {"weight": wl}, "Module.decoder.Block.forward.0")
    bench.module("decoder.final_layernorm", "RMSNorm", [scaled(h, 1.5)], [bug], {"weight": wn},
                 "Module.decoder.Block.forward.0")  # fmt: skip
    bench.module("decoder", "Block", [e], [bug])
    al = align(npu.side(), bench.side())
    assert ("model", "decoder") in names(al)
    assert slots(al, "model") == {("output.0", "output.0")}
    assert next(p for p in al.pairs if al.names("npu", p.npu) == "model").how == "dataflow"


def test_a_weight_given_as_an_argument_anchors_like_a_parameter() -> None:
    emb = t([64, 32], 0.1)
    npu, bench = Dump(), Dump()
    npu.module("model.embed", "Embedding", [t([16], 1)], [t([16, 32])], {"weight": emb})
    npu.module("lm_head", "Linear", [t([16, 32])], [t([16, 64])], {"weight": emb})  # tied
    bench.module("embedding.word_embeddings", "VocabParallelEmbedding", [t([16], 1)], [t([16, 32])], {"weight": emb})
    bench.module("output_layer", "ColumnParallelLinear", [t([16, 32]), emb], [t([16, 64])])
    al = align(npu.side(), bench.side())
    assert {("model.embed", "embedding.word_embeddings"), ("lm_head", "output_layer")} <= names(al)


def test_inner_calls_pair_where_both_run_the_same_apis() -> None:
    x, w, a = weights()
    npu, bench = attention(False, x, w, a), attention(True, x, w, a)
    for d, count in ((npu, 7), (bench, 2)):
        d.api(
            f"Functional.linear.{count}.forward", [a["ctx"], w["o"]], [a["o"]], "Module.m.attn.o_proj.Linear.forward.0"
        )
    al = align(npu.side(), bench.side())
    assert inner_calls(al, npu.tree, bench.tree).tolist() == [
        [
            al.npu.table.entries.index("Functional.linear.7.forward"),
            al.bench.table.entries.index("Functional.linear.2.forward"),
        ]
    ]
    tables = aligned_tables(al, inner_calls(al, npu.tree, bench.tree))
    row = tables.npu.table.names.index("Functional.linear.7.forward.output.0")
    assert tables.bench.table.names[tables.match[row]] == "Functional.linear.2.forward.output.0"


def test_a_row_paired_twice_keeps_its_first_counterpart() -> None:
    x, w, a = weights()
    npu, bench = attention(False, x, w, a), attention(True, x, w, a)
    npu.api("Functional.linear.7.forward", [a["ctx"], w["o"]], [a["o"]], "Module.m.attn.o_proj.Linear.forward.0")
    for count in (2, 3):
        bench.api(f"Functional.linear.{count}.forward", [a["ctx"], w["o"]], [a["o"]],
                  "Module.m.attn.o_proj.Linear.forward.0")  # fmt: skip
    al = align(npu.side(), bench.side())
    e_n = al.npu.table.entries.index("Functional.linear.7.forward")
    e_2, e_3 = (al.bench.table.entries.index(f"Functional.linear.{k}.forward") for k in (2, 3))
    for inner, want in (([[e_n, e_2], [e_n, e_3]], 2), ([[e_n, e_3], [e_n, e_2]], 3)):
        tables = aligned_tables(al, np.array(inner))
        row = tables.npu.table.names.index("Functional.linear.7.forward.output.0")
        assert tables.bench.table.names[tables.match[row]] == f"Functional.linear.{want}.forward.output.0"
        assert np.count_nonzero(tables.match >= 0) == tables.rows_paired


def test_the_users_alignment_wins_and_bad_ones_are_refused() -> None:
    x, w, a = weights()
    npu, bench = attention(False, x, w, a).side(), attention(True, x, w, a).side()
    found = describe(align(npu, bench))
    user = {"pairs": [{"npu": "m.attn.o_proj", "bench": "m.attn.o_proj", "slots": {"input.0": "input.0"}}]}
    al = align(npu, bench, user=user, user_path=Path("a.yaml"))
    assert slots(al, "m.attn.o_proj") == {("input.0", "input.0")}  # taken as given: output.0 left out
    assert any(p["npu"] == "m.attn.q_proj;m.attn.k_proj;m.attn.v_proj" for p in found["pairs"])
    for bad, why in (
        ({"pairs": [{"npu": "nope", "bench": "m.attn.o_proj"}]}, "no npu module call 'nope'"),
        ({"pairs": "x"}, "no 'pairs' list"),
        ({"pairs": [{"npu": 1}]}, "needs 'npu' and 'bench'"),
    ):
        with pytest.raises(InputError, match=why):
            align(npu, bench, user=bad, user_path=Path("a.yaml"))


def test_decide_aligns_only_trees_of_different_code() -> None:
    x, w, a = weights()
    same = decide(
        flatten(Path("a"), attention(False, x, w, a).data), flatten(Path("b"), attention(False, x, w, a).data)
    )
    assert not same.differ
    other = decide(flatten(Path("a"), attention(False, x, w, a).data),
                   flatten(Path("b"), attention(True, x, w, a, prefix="model.self_attention").data))  # fmt: skip
    assert other.differ and other.same_names == 0


def micro_batches(merged: bool, x: list[dict[str, Any]], w: dict[str, Any], a: list[dict[str, Any]],
                  prefix: str, head_calls: int) -> Dump:  # fmt: skip
    """The attention block run once per micro-batch (forward.k for the k-th), then a head module called
    `head_calls` times."""
    d = Dump()
    for k, (xk, ak) in enumerate(zip(x, a)):
        one = attention(merged, xk, w, ak, prefix=prefix)
        for name, entry in one.data.items():
            renamed = name[: -len(".0")] + f".{k}"
            parent = one.tree[name]
            d.data[renamed] = entry
            d.tree[renamed] = parent[: -len(".0")] + f".{k}" if parent else None
    for k in range(head_calls):
        d.data[f"Module.head.Linear.forward.{k}"] = {
            "input_args": [a[k]["o"]],
            "input_kwargs": {},
            "output": [a[k]["ctx"]],
            "parameters": {"weight": w["o"]},
        }
        d.tree[f"Module.head.Linear.forward.{k}"] = None
    return d


def test_later_calls_of_many_micro_batches_follow_the_first_calls() -> None:
    x = [t([16, 32]) for _ in range(3)]
    _, w, _ = weights()
    a = [weights()[2] for _ in range(3)]
    npu, bench = micro_batches(False, x, w, a, "m.attn", 3).side(), micro_batches(True, x, w, a, "model.attn", 2).side()
    al = align(npu, bench)
    got = names(al)
    for k in (1, 2):  # every call of a module called as often on both sides: its k-th with the k-th
        assert (f"m.attn.q_proj#{k};m.attn.k_proj#{k};m.attn.v_proj#{k}", f"model.attn.qkv#{k}") in got
        assert (f"m.attn#{k}", f"model.attn#{k}") in got
    later = [p for p in al.pairs if p.how == "repeat"]
    assert later and all({(s.npu, s.bench) for s in p.slots} for p in later)
    # called 3 times against 2: the later calls pair by value, the third is left
    assert ("head", "head") in got and ("head#1", "head#1") in got
    assert describe(al)["unpaired"]["npu"] == ["head#2"]
    tables = aligned_tables(al)  # the third micro-batch's merged output: its own parts combined
    npu_t = tables.npu.table
    row = npu_t.names.index(";".join(f"Module.m.attn.{k}_proj.Linear.forward.2.output.0" for k in "qkv"))
    want = cat([a[2]["q"], a[2]["k"], a[2]["v"]], [16, 64])
    assert npu_t.stats[row].tolist() == pytest.approx([want["Max"], want["Min"], want["Mean"], want["Norm"]])
    assert tables.bench.table.names[tables.match[row]] == "Module.model.attn.qkv.QKVParallelLinear.forward.2.output.0"
    # a later call reads the parameters its first call did: they pair as the first call's (merged parts combined)
    w_row = npu_t.names.index(";".join(f"Module.m.attn.{k}_proj.Linear.forward.2.parameters.weight" for k in "qkv"))
    assert (
        tables.bench.table.names[tables.match[w_row]]
        == "Module.model.attn.qkv.QKVParallelLinear.forward.2.parameters.weight"
    )


def test_later_calls_of_a_recomputed_module_pair_by_value() -> None:
    """One run recomputes a module in the backward pass (each micro-batch's call made twice, the same tensors), the
    other does not: its calls pair with the first of each two; a run with an extra micro-batch pairs its first
    ones; where the values part (a bug from the second micro-batch on), the calls still pair in order (the
    difference is shown), the extra one left."""
    _, w, _ = weights()
    a = [weights()[2] for _ in range(3)]

    def head(outs: list[dict[str, Any]]) -> Dump:
        d = Dump()
        for k, out in enumerate(outs):
            d.data[f"Module.head.Linear.forward.{k}"] = {
                "input_args": [a[0]["o"]],
                "input_kwargs": {},
                "output": [out],
                "parameters": {"weight": w["o"]},
            }
            d.tree[f"Module.head.Linear.forward.{k}"] = None
        return d  # fmt: skip

    v = [a[k]["ctx"] for k in range(3)]
    recomputed, once = head([v[0], v[0], v[1], v[1], v[2], v[2]]).side(), head(v).side()
    got = names(align(recomputed, once))
    assert got == {("head", "head"), ("head#2", "head#1"), ("head#4", "head#2")}
    got = names(align(once, recomputed))
    assert got == {("head", "head"), ("head#1", "head#2"), ("head#2", "head#4")}
    assert names(align(head(v).side(), head(v[:2]).side())) == {("head", "head"), ("head#1", "head#1")}
    parted = head([v[0], scaled(v[1], 1.5), scaled(v[2], 1.5)]).side()
    assert names(align(parted, head(v[:2]).side())) == {("head", "head"), ("head#1", "head#1")}
    two = head([v[0], v[0], v[0], v[1], v[2]]).side()  # two extra calls in a row, then the others
    assert names(align(two, head(v).side())) == {("head", "head"), ("head#3", "head#1"), ("head#4", "head#2")}


def test_slots_within_tolerance_of_two_tensors_pair_closest_first() -> None:
    """A norm whose input has an RMS near 1 puts out nearly its input (bf16 statistics: within the tolerance of
    both). The fused norm of the other run returns (normed, residual): each slot takes its closest counterpart, not
    the first within tolerance (fresh4's layer 1 had the normed output paired with the residual)."""
    h = t([16, 32], dtype="torch.bfloat16")
    normed = {**h, "Max": h["Max"] * 1.004, "Min": h["Min"] * 1.006, "Norm": h["Norm"] * 1.02}  # ~ its input
    near_h = {**h, "Max": h["Max"] * 1.002, "Norm": h["Norm"] * 0.998}  # the bench's residual: h, rounded otherwise
    near_normed = {**normed, "Min": normed["Min"] * 1.003}
    npu, bench = Dump(), Dump()
    w = t([32], 0.1)
    npu.module("layers.0.norm", "RMSNorm", [h], [normed], {"weight": w})
    bench.module("model.layers.0.norm", "FusedRMSNorm", [t([16, 32]), t([16, 32])], [near_normed, near_h],
                 {"weight": w})  # fmt: skip
    al = align(npu.side(), bench.side())
    assert slots(al, "layers.0.norm") == {("input.0", "output.1"), ("output.0", "output.0")}
