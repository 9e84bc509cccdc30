"""How the module-tree aligner (pair/align.py) scales with the number of modules: synthetic decoder pairs.

    python bench/align_scale.py [--layers 100,200,400,800]

Each pair is a dump.json of an HF-style decoder (q/k/v, gate/up apart) against a vLLM-style one (qkv_proj and
gate_up_proj merged) of the same weights, L layers, statistics only, with construct.json-style parents. Prints the
time of `module_calls` + `align` + `aligned_tables` per size and the time per module call: near-linear means a flat
time per module call as L grows.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from msprobe_compare.load.rows import flatten  # noqa: E402
from msprobe_compare.pair.align import align, inner_calls, module_calls  # noqa: E402
from msprobe_compare.pair.aligned import aligned_tables  # noqa: E402


def _stat(rng: np.random.Generator, shape: list[int]) -> dict:
    n = math.prod(shape)
    std = float(rng.uniform(0.5, 2.0))
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": 3 * std + rng.random(),
            "Min": -3 * std - rng.random(), "Mean": float(rng.normal(0, 0.01)), "Norm": std * math.sqrt(n),
            "requires_grad": True}  # fmt: skip


def _cat(parts: list[dict], shape: list[int]) -> dict:
    n = [math.prod(p["shape"]) for p in parts]
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": max(p["Max"] for p in parts),
            "Min": min(p["Min"] for p in parts), "Mean": sum(p["Mean"] * k for p, k in zip(parts, n)) / sum(n),
            "Norm": math.sqrt(sum(p["Norm"] ** 2 for p in parts)), "requires_grad": True}  # fmt: skip


def make(layers: int, merged: bool, seed: int = 5) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    h, f = 64, 128
    data: dict = {}
    tree: dict = {}
    x = _stat(rng, [4, 16, h])
    for i in range(layers):
        layer = f"model.layers.{i}"
        w = {k: _stat(rng, s) for k, s in (("q", [h, h]), ("k", [h // 2, h]), ("v", [h // 2, h]), ("o", [h, h]),
                                          ("gate", [f, h]), ("up", [f, h]), ("down", [h, f]), ("n1", [h]),
                                          ("n2", [h]))}  # fmt: skip
        a = {k: _stat(rng, [4, 16, n]) for k, n in (("n1", h), ("q", h), ("k", h // 2), ("v", h // 2), ("ctx", h),
                                                   ("o", h), ("n2", h), ("gate", f), ("up", f), ("act", f),
                                                   ("down", h), ("out", h))}  # fmt: skip
        calls: list[tuple[str, str, dict, dict, dict]] = [("input_layernorm", "RMSNorm", x, a["n1"], w["n1"])]
        if merged:
            calls.append(("self_attn.qkv_proj", "QKVParallelLinear", a["n1"], _cat([a["q"], a["k"], a["v"]],
                          [4, 16, 2 * h]), _cat([w["q"], w["k"], w["v"]], [2 * h, h])))  # fmt: skip
        else:
            calls += [(f"self_attn.{k}_proj", "Linear", a["n1"], a[k], w[k]) for k in "qkv"]
        calls.append(("self_attn.o_proj", "Linear", a["ctx"], a["o"], w["o"]))
        calls.append(("self_attn", "Attention", a["n1"], a["o"], {}))
        calls.append(("post_attention_layernorm", "RMSNorm", a["o"], a["n2"], w["n2"]))
        if merged:
            calls.append(("mlp.gate_up_proj", "MergedColumnParallelLinear", a["n2"], _cat([a["gate"], a["up"]],
                          [4, 16, 2 * f]), _cat([w["gate"], w["up"]], [2 * f, h])))  # fmt: skip
        else:
            calls += [("mlp.gate_proj", "Linear", a["n2"], a["gate"], w["gate"]),
                      ("mlp.up_proj", "Linear", a["n2"], a["up"], w["up"])]  # fmt: skip
        calls.append(("mlp.down_proj", "Linear", a["act"], a["down"], w["down"]))
        calls.append(("mlp", "MLP", a["n2"], a["down"], {}))
        calls.append(("", "DecoderLayer", x, a["out"], {}))
        layer_entry = f"Module.{layer}.DecoderLayer.forward.0"
        for path, cls, inp, out, weight in calls:
            full = f"{layer}.{path}" if path else layer
            name = f"Module.{full}.{cls}.forward.0"
            data[name] = {"input_args": [inp], "input_kwargs": {}, "output": [out],
                          "parameters": {"weight": weight} if weight else {}}  # fmt: skip
            parent = (
                layer_entry
                if path.count(".") == 0
                else f"Module.{layer}.{path.split('.')[0]}.{'Attention' if path.startswith('self_attn') else 'MLP'}.forward.0"
            )
            tree[name] = None if not path else parent
        x = a["out"]
    return data, tree


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="100,200,400,800")
    args = ap.parse_args()
    for layers in (int(x) for x in args.layers.split(",")):
        d_n, t_n = make(layers, merged=False)
        d_b, t_b = make(layers, merged=True)
        n, b = flatten(Path("npu.json"), d_n), flatten(Path("bench.json"), d_b)
        start = time.perf_counter()
        al = align(module_calls(n, t_n), module_calls(b, t_b))
        tables = aligned_tables(al, inner_calls(al, t_n, t_b))
        took = time.perf_counter() - start
        calls = len(al.npu.calls) + len(al.bench.calls)
        print(f"layers {layers:5d}: {calls:6d} module calls, {len(al.pairs):6d} pairs, {tables.rows_paired:6d} rows "
              f"paired, {took:7.3f} s, {took / calls * 1e6:6.1f} us per module call")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
