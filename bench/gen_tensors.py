#!/usr/bin/env python3
"""Generate a synthetic real-data (task "tensor") dump pair for benchmarking `msprobe compare`.

The dump imitates one training step of a LLaMA-like model at level "mix": Module entries (embedding, RMSNorm,
q/k/v/o and gate/up/down Linear layers, repeated per decoder layer) with their parameters, Functional/Tensor API
entries inside them (Tensor.float, scaled_dot_product_attention, silu, __mul__, __add__ residuals), the backward
entries of all of them in reverse order, and parameters_grad entries.  Default shapes: batch 1, seq 2048,
hidden 4096, 32 heads, ffn 11008 -> activations [1, 2048, 4096] / [1, 2048, 11008], weights [4096, 4096] /
[11008, 4096] / [4096, 11008].  Activations, weights and activation grads are bfloat16; norm inputs after
Tensor.float, norm weights and parameter grads (main grads) are float32; token ids are int64.

One decoder layer holds about 2.9 GB of tensors at the default shapes, so the layer count is derived from --gb and
the entries are then thinned evenly (as a dump with a `list`/`scope` filter would be) to just over --gb per side
(the default --gb 2 gives one thinned layer plus the embedding and final norm: 52 rows, 2.25 GB per side; use
--layers N to spread the same budget over N repeated layers).  Thinning keeps forward, backward and parameters_grad
entries in proportion; tensor sizes do not change with --gb, so throughput measured on a small pair is comparable
with a big one.  Smaller --seq/--hidden/--ffn give many small tensors (see bench/TENSOR_RESULTS.md).

The bench side is the NPU side with small perturbations: float32 tensors get relative noise ~1e-4, bfloat16
tensors relative noise ~1e-3 before rounding to bfloat16 (many elements then differ by one bf16 ulp); token ids are
equal.  A few tensors carry larger errors (relative noise 0.2, a block shifted by +1, one tensor with a NaN on
the NPU side only) and one bench tensor is float32 where the NPU one is bfloat16.

Files are real tensor files: with torch importable, each tensor is written by torch.save as `<row name>.pt`
(framework "pytorch", names "Module."/"Functional."/"Tensor.").  FALLBACK without torch: each tensor is a `.npy`
(framework "mindspore", "Cell." instead of "Module.", dtypes "Float32"/"BFloat16"/"Int64"); bfloat16 tensors are
stored as float32 .npy holding bf16-rounded values (numpy has no bfloat16), so their files are twice as big.

Output (layout as written by the real dumper):

    OUT/npu/step0/rank/{dump.json,stack.json,construct.json,dump_tensor_data/*.pt}
    OUT/bench/step0/rank/{...}
    OUT/compare.json   (absolute paths, is_print_compare_log true)
    OUT/meta.json      (framework, rows, entries, tensor bytes per side, options)

Usage: python3 bench/gen_tensors.py [--gb 2] [--out DIR] [--seed 1] [--seq 2048] [--hidden 4096] [--ffn 11008]
                                    [--heads 32] [--vocab 32000] [--layers N] [--no-torch] [-v]
Default --out: msprobe_bench_tensors in /var/tmp (not /tmp, which other jobs on a shared machine may clean).
Deterministic for a given seed and options.  Data come from two pools of up to 64 Mi normal numbers (taken at
random offsets, scaled per tensor) and go through buffers allocated once, so generation runs at memory and
torch.save speed rather than RNG speed (about 20 s for the default 2 x 2.25 GB on an idle 2-core VM).
"""

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

POOL_MAX = 1 << 26  # elements in each random pool (at most 256 MB float32; less for small tensors)
P_LARGE = 0.04  # fraction of float tensors (at least 2) given a larger error on the bench side
BUF = 1 << 24  # write buffer for .npy files

try:  # torch is only a convenience for writing .pt files; without it we write .npy (see the docstring)
    if os.environ.get("GEN_TENSORS_NO_TORCH"):
        raise ImportError
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


# --------------------------------------------------------------------------------------------- model layout


class Leaf:
    """One tensor of the dump: shape, dtype ('bf16', 'f32', 'i64'), requires_grad, value scale."""

    __slots__ = ("shape", "dtype", "rg", "scale", "data_name", "numel")

    def __init__(self, shape, dtype="bf16", rg=True, scale=1.0):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.rg = rg
        self.scale = scale
        self.numel = int(np.prod(self.shape))
        self.data_name = None

    def nbytes(self, fw):
        item = {"bf16": 2 if fw == "pytorch" else 4, "f32": 4, "i64": 8}[self.dtype]
        return self.numel * item


class Entry:
    """One dump.json entry: name, kind ('forward', 'backward', 'grad') and its leaves by slot."""

    def __init__(self, name, kind, parent, slots):
        self.name, self.kind, self.parent, self.slots = name, kind, parent, slots

    def leaves(self):
        for slot, value in self.slots.items():
            if isinstance(value, dict):
                yield from value.values()
            else:
                yield from value

    def nbytes(self, fw):
        return sum(leaf.nbytes(fw) for leaf in self.leaves())


class Model:
    """Builds the entry list of a LLaMA-like step: forward in order, then backward in reverse order."""

    def __init__(self, args, fw):
        self.a = args
        self.mod = "Module" if fw == "pytorch" else "Cell"
        self.counters = {}
        self.forward = []
        self.backward_ops = []  # (fwd entry, grad-slot spec) pushed in forward order, emitted reversed

    def _count(self, api):
        n = self.counters.get(api, 0)
        self.counters[api] = n + 1
        return n

    def api(self, kind, name, inputs, outputs, parent, backward=True):
        base = f"{kind}.{name}.{self._count((kind, name))}"
        fwd = Entry(f"{base}.forward", "forward", parent, {"input_args": inputs, "input_kwargs": {}, "output": outputs})
        self.forward.append(fwd)
        if backward:
            self.backward_ops.append((base, parent, inputs, outputs, None))

    def module(self, path, cls, inputs, outputs, params, parent):
        base = f"{self.mod}.{path}.{cls}"
        slots = {"input_args": inputs, "input_kwargs": {}, "output": outputs}
        if params:
            slots["parameters"] = params
        self.forward.append(Entry(f"{base}.forward.0", "forward", parent, slots))
        self.backward_ops.append((base, parent, inputs, outputs, params))
        return f"{base}.forward.0"

    def build(self, layers):
        a = self.a
        S, H, F, NH = a.seq, a.hidden, a.ffn, a.heads
        act = (1, S, H)
        self.module(
            "embed_tokens",
            "Embedding",
            [Leaf((1, S), "i64", False)],
            [Leaf(act)],
            {"weight": Leaf((a.vocab, H), scale=0.02)},
            None,
        )
        for i in range(layers):
            p = f"layers.{i}"
            layer = f"{self.mod}.{p}.LlamaDecoderLayer.forward.0"
            for norm in ("input_layernorm", "post_attention_layernorm"):
                nm = self.module(
                    f"{p}.{norm}", "RMSNorm", [Leaf(act)], [Leaf(act)], {"weight": Leaf((H,), "f32", scale=0.3)}, layer
                )
                self.api("Tensor", "float", [Leaf(act)], [Leaf(act, "f32")], nm)
                if norm == "input_layernorm":
                    attn = f"{self.mod}.{p}.self_attn.LlamaAttention.forward.0"
                    for proj in ("q_proj", "k_proj", "v_proj"):
                        self.module(
                            f"{p}.self_attn.{proj}",
                            "Linear",
                            [Leaf(act)],
                            [Leaf(act)],
                            {"weight": Leaf((H, H), scale=0.02)},
                            attn,
                        )
                    qkv = [Leaf((1, NH, S, H // NH)) for _ in range(3)]
                    self.api("Functional", "scaled_dot_product_attention", qkv, [Leaf((1, NH, S, H // NH))], attn)
                    self.module(
                        f"{p}.self_attn.o_proj",
                        "Linear",
                        [Leaf(act)],
                        [Leaf(act)],
                        {"weight": Leaf((H, H), scale=0.02)},
                        attn,
                    )
                    self.api("Tensor", "__add__", [Leaf(act), Leaf(act)], [Leaf(act)], layer)
            mlp = f"{self.mod}.{p}.mlp.LlamaMLP.forward.0"
            for proj in ("gate_proj", "up_proj"):
                self.module(
                    f"{p}.mlp.{proj}",
                    "Linear",
                    [Leaf(act)],
                    [Leaf((1, S, F))],
                    {"weight": Leaf((F, H), scale=0.02)},
                    mlp,
                )
            self.api("Functional", "silu", [Leaf((1, S, F))], [Leaf((1, S, F))], mlp)
            self.api("Tensor", "__mul__", [Leaf((1, S, F)), Leaf((1, S, F))], [Leaf((1, S, F))], mlp)
            self.module(
                f"{p}.mlp.down_proj",
                "Linear",
                [Leaf((1, S, F))],
                [Leaf(act)],
                {"weight": Leaf((H, F), scale=0.02)},
                mlp,
            )
            self.api("Tensor", "__add__", [Leaf(act), Leaf(act)], [Leaf(act)], layer)
        self.module("norm", "RMSNorm", [Leaf(act)], [Leaf(act)], {"weight": Leaf((H,), "f32", scale=0.3)}, None)

        entries = list(self.forward)
        for base, parent, inputs, outputs, params in reversed(self.backward_ops):
            bparent = parent.replace(".forward.", ".backward.") if parent else None
            is_api = base.split(".")[0] in ("Functional", "Tensor", "Torch")
            name = f"{base}.backward" if is_api else f"{base}.backward.0"
            # grads: "input" has the forward outputs' shapes, "output" the forward inputs' (float ones only)
            g_in = [Leaf(o.shape, "bf16", False, scale=1e-3) for o in outputs]
            g_out = [Leaf(x.shape, "bf16", False, scale=1e-3) for x in inputs if x.dtype != "i64"]
            entries.append(Entry(name, "backward", bparent, {"input": g_in, "output": g_out}))
            if params:
                entries.append(
                    Entry(
                        f"{base}.parameters_grad",
                        "grad",
                        None,
                        {k: [Leaf(v.shape, "f32", False, scale=1e-4)] for k, v in params.items()},
                    )
                )
        return entries


def assign_names(entries, ext):
    for e in entries:
        if e.kind == "grad":
            for key, leaves in e.slots.items():
                leaves[0].data_name = f"{e.name}.{key}{ext}"
            continue
        for slot, value in e.slots.items():
            if slot == "input_kwargs":
                continue
            if slot == "parameters":
                for key, leaf in value.items():
                    leaf.data_name = f"{e.name}.parameters.{key}{ext}"
            else:
                word = "input" if slot in ("input_args", "input") else "output"
                for k, leaf in enumerate(value):
                    leaf.data_name = f"{e.name}.{word}.{k}{ext}"


def thin(entries, budget, fw):
    """Keep an evenly spread subset of the entries holding just over `budget` bytes (all when budget >= total)."""
    sizes = [e.nbytes(fw) for e in entries]
    total = sum(sizes)
    if budget >= total:
        return entries
    ratio = budget / total
    keep = [False] * len(entries)
    kept = seen = 0
    for i, size in enumerate(sizes):
        seen += size
        if kept + size / 2 <= ratio * seen:
            keep[i] = True
            kept += size
    for i in sorted((i for i in range(len(sizes)) if not keep[i]), key=sizes.__getitem__):
        if kept >= budget:  # top up to at least the budget, smallest entries first
            break
        keep[i] = True
        kept += sizes[i]
    return [e for e, k in zip(entries, keep) if k]


# ------------------------------------------------------------------------------------------------- tensor data


class Source:
    """Tensor values from random pools: NPU = pool slice * scale, bench = NPU with relative noise.

    Values are written into buffers allocated once (fresh memory costs a page fault per 4 KiB page, which on this
    kind of VM is slower than the arithmetic); `pair` returns views of them, valid until the next call."""

    def __init__(self, seed, max_numel):
        rng = np.random.default_rng(seed)
        self.rng = np.random.default_rng(seed + 1)
        self.size = min(POOL_MAX, max(1 << 20, 2 * max_numel))
        self.pool = rng.standard_normal(self.size, dtype=np.float32)
        self.noise = rng.standard_normal(self.size, dtype=np.float32)
        self.npu = np.empty(max_numel, np.float32)
        self.bench = np.empty(max_numel, np.float32)
        self.npu.fill(0)
        self.bench.fill(0)

    def _fill(self, out, pool, factor):
        """out[:] = pool[random offset...] * factor, in pool-sized pieces."""
        n = out.shape[0]
        pos = 0
        while pos < n:
            k = min(n - pos, self.size)
            off = int(self.rng.integers(0, self.size - k + 1))
            np.multiply(pool[off : off + k], np.float32(factor), out=out[pos : pos + k])
            pos += k

    def pair(self, leaf, error):
        """(npu float32/int64 array, bench array) before dtype conversion, shaped like the leaf."""
        if leaf.dtype == "i64":
            ids = self.rng.integers(0, 32000, size=leaf.numel, dtype=np.int64).reshape(leaf.shape)
            return ids, ids
        n = leaf.numel
        npu, bench = self.npu[:n], self.bench[:n]
        self._fill(npu, self.pool, leaf.scale)
        rel = 0.2 if error == "noise" else {"f32": 1e-4, "bf16": 1e-3}[leaf.dtype]
        self._fill(bench, self.noise, rel)
        bench *= npu
        bench += npu
        if error == "block":
            start = int(self.rng.integers(0, max(1, n - n // 8)))
            bench[start : start + max(1, n // 64)] += np.float32(1.0)
        elif error == "nan":
            npu[int(self.rng.integers(0, n))] = np.nan
        return npu.reshape(leaf.shape), bench.reshape(leaf.shape)


def bf16_round(a):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (NaN kept NaN)."""
    u = a.view(np.uint32)
    rounded = ((u >> 16) & 1) + np.uint32(0x7FFF)
    rounded += u
    rounded >>= 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def _stats_np(flat):
    if flat.dtype == np.int64:
        f = flat.astype(np.float64)
        return float(flat.max()), float(flat.min()), float(f.mean()), float(np.sqrt(np.dot(f, f)))
    with np.errstate(all="ignore"):
        return (
            float(flat.max()),
            float(flat.min()),
            float(flat.mean(dtype=np.float64)),
            float(np.sqrt(np.dot(flat, flat))),
        )


# --------------------------------------------------------------------------------------------------- writers


TORCH_DTYPE = {"bf16": "torch.bfloat16", "f32": "torch.float32", "i64": "torch.int64"}
MS_DTYPE = {"bf16": "BFloat16", "f32": "Float32", "i64": "Int64"}


class PtWriter:
    """torch.save of each tensor; bfloat16 rounded by torch (nearest even) into a reused buffer.
    Statistics are taken like the dumper does: on the saved tensor, in float32 (bfloat16 widened)."""

    def __init__(self, max_numel):
        self.bits = np.zeros(max_numel, np.uint16)
        self.wide = np.zeros(max_numel, np.float32)

    def __call__(self, path, values, dtype):
        flat = np.ascontiguousarray(values).reshape(-1)
        n = flat.shape[0]
        src = torch.from_numpy(flat)
        if dtype == "bf16":
            t = torch.from_numpy(self.bits[:n]).view(torch.bfloat16)
            t.copy_(src)
            torch.save(t.view(values.shape), path)
            wide = torch.from_numpy(self.wide[:n])
            wide.copy_(t)
            return self._stats(wide)
        torch.save(src.view(values.shape), path)
        if src.dtype == torch.int64:
            return _stats_np(flat)
        return self._stats(src)

    @staticmethod
    def _stats(t):
        mn, mx = torch.aminmax(t)
        return float(mx), float(mn), float(t.mean()), float(torch.linalg.vector_norm(t))


class NpyWriter:
    """FALLBACK without torch: .npy files; bfloat16 tensors stored as float32 holding bf16-rounded values."""

    def __init__(self, max_numel):
        self.wide = np.zeros(max_numel, np.float32)

    def __call__(self, path, values, dtype):
        flat = np.ascontiguousarray(values).reshape(-1)
        if dtype == "bf16":
            wide = self.wide[: flat.shape[0]]
            np.copyto(wide.view(np.uint32), bf16_round(flat), casting="unsafe")
            wide.view(np.uint32)[:] <<= 16
            flat = wide
        with open(path, "wb", buffering=BUF) as f:
            np.lib.format.write_array(f, flat.reshape(values.shape), allow_pickle=False)
        return _stats_np(flat)


def leaf_json(leaf, dtype, stats, fw):
    mx, mn, mean, norm = stats
    d = {
        "type": "torch.Tensor" if fw == "pytorch" else "mindspore.Tensor",
        "dtype": (TORCH_DTYPE if fw == "pytorch" else MS_DTYPE)[dtype],
        "shape": list(leaf.shape),
        "Max": mx,
        "Min": mn,
        "Mean": mean,
        "Norm": norm,
        "requires_grad": leaf.rg,
        "data_name": leaf.data_name,
    }
    if fw != "pytorch":
        del d["requires_grad"]
    return d


def write_side_files(rank, data, stack, construct, meta_head):
    os.makedirs(rank, exist_ok=True)
    with open(os.path.join(rank, "dump.json"), "w") as f:
        json.dump({**meta_head, "dump_data_dir": os.path.join(rank, "dump_tensor_data"), "data": data}, f, indent=1)
    with open(os.path.join(rank, "stack.json"), "w") as f:
        json.dump(stack, f, indent=1)
    with open(os.path.join(rank, "construct.json"), "w") as f:
        json.dump(construct, f, indent=1)


def stack_lines(name):
    parts = name.split(".")
    return [
        "File /usr/local/lib/python3.11/site-packages/msprobe/core/data_dump/api_registry.py, line 94, in "
        "api_function, \n return api_instance(*args, **kwargs)",
        f"File /home/user/train/modeling_llama.py, line {100 + 7 * len(parts)}, in forward, \n "
        f"out = self.{parts[1] if len(parts) > 1 else 'model'}(x)",
        "File /home/user/train/pretrain.py, line 252, in <module>, \n loss = model(batch)",
    ]


def generate(args):
    fw = "pytorch" if torch is not None and not args.no_torch else "mindspore"
    ext = ".pt" if fw == "pytorch" else ".npy"
    if fw == "pytorch":
        torch.set_num_threads(max(1, os.cpu_count() or 1))
    budget = int(args.gb * 1e9)

    one = Model(args, fw)
    layer_bytes = sum(e.nbytes(fw) for e in one.build(1)) - sum(e.nbytes(fw) for e in Model(args, fw).build(0))
    layers = max(1, -(-budget // max(1, layer_bytes))) if args.layers is None else args.layers
    entries = Model(args, fw).build(layers)
    entries = thin(entries, budget, fw)
    assign_names(entries, ext)

    rng = np.random.default_rng(args.seed + 7)
    float_leaves = [leaf for e in entries for leaf in e.leaves() if leaf.dtype != "i64"]
    n_large = max(2, int(len(float_leaves) * P_LARGE))
    picks = rng.choice(len(float_leaves), size=min(n_large + 2, len(float_leaves)), replace=False).tolist()
    errors = {}
    for k, idx in enumerate(picks[:n_large]):
        errors[id(float_leaves[idx])] = "noise" if k % 2 == 0 else "block"
    if len(picks) > n_large:
        errors[id(float_leaves[picks[n_large]])] = "nan"
    dtype_flip = None
    if len(picks) > n_large + 1 and float_leaves[picks[n_large + 1]].dtype == "bf16":
        dtype_flip = id(float_leaves[picks[n_large + 1]])

    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    ranks = {side: os.path.join(out, side, "step0", "rank") for side in ("npu", "bench")}
    for r in ranks.values():
        os.makedirs(os.path.join(r, "dump_tensor_data"))
    max_numel = max(leaf.numel for e in entries for leaf in e.leaves())
    src = Source(args.seed, max_numel)
    write = PtWriter(max_numel) if fw == "pytorch" else NpyWriter(max_numel)
    data = {"npu": {}, "bench": {}}
    sizes = {"npu": 0, "bench": 0}
    files = 0
    t0 = time.perf_counter()
    for e in entries:
        bodies = {"npu": {}, "bench": {}}
        for slot, value in e.slots.items():
            for side in bodies:
                bodies[side][slot] = {} if isinstance(value, dict) else []
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, leaf in items:
                err = errors.get(id(leaf))
                npu_vals, bench_vals = src.pair(leaf, err)
                for side, vals in (("npu", npu_vals), ("bench", bench_vals)):
                    dtype = leaf.dtype
                    if side == "bench" and id(leaf) == dtype_flip:
                        dtype = "f32"
                    path = os.path.join(ranks[side], "dump_tensor_data", leaf.data_name)
                    stats = write(path, vals, dtype)
                    sizes[side] += os.path.getsize(path)
                    j = leaf_json(leaf, dtype, stats, fw)
                    target = bodies[side][slot]
                    if isinstance(target, dict):
                        target[key] = j
                    else:
                        target.append(j)
                files += 1
        for side in bodies:
            data[side][e.name] = bodies[side]
        if args.verbose:
            print(f"  {e.name}: {sizes['npu'] / 1e9:.2f} GB per side", file=sys.stderr)
    gen_time = time.perf_counter() - t0

    stack = {}
    construct = {}
    for k, e in enumerate(x for x in entries if x.kind != "grad"):
        stack[str(k)] = [[e.name], stack_lines(e.name)]
    for e in entries:
        if e.kind != "grad":
            construct[e.name] = e.parent
    head = {"task": "tensor", "level": "mix", "framework": fw}
    for side in ("npu", "bench"):
        write_side_files(ranks[side], data[side], stack, construct, head)
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(
            {
                "npu_path": os.path.join(ranks["npu"], "dump.json"),
                "bench_path": os.path.join(ranks["bench"], "dump.json"),
                "stack_path": os.path.join(ranks["npu"], "stack.json"),
                "is_print_compare_log": True,
            },
            f,
            indent=1,
        )
    meta = {
        "framework": fw,
        "entries": len(entries),
        "rows_npu": files,
        "tensor_bytes_npu": sizes["npu"],
        "tensor_bytes_bench": sizes["bench"],
        "tensor_bytes_total": sizes["npu"] + sizes["bench"],
        "layers": layers,
        "layer_bytes": layer_bytes,
        "large_errors": sum(1 for v in errors.values() if v != "nan"),
        "nan_rows": sum(1 for v in errors.values() if v == "nan"),
        "dtype_flip_rows": int(dtype_flip is not None),
        "options": {k: v for k, v in vars(args).items() if k not in ("verbose",)},
        "generation_seconds": round(gen_time, 2),
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=2.0, help="tensor bytes per side, in 1e9 bytes (default 2)")
    ap.add_argument("--out", default="/var/tmp/msprobe_bench_tensors", help="output folder (replaced)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--layers", type=int, default=None, help="decoder layers before thinning (default: from --gb)")
    ap.add_argument("--no-torch", action="store_true", help="write .npy (MindSpore style) even if torch exists")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.hidden % args.heads:
        ap.error("--hidden must be a multiple of --heads")
    t0 = time.perf_counter()
    meta = generate(args)
    print(
        json.dumps(
            {
                k: meta[k]
                for k in ("framework", "entries", "rows_npu", "tensor_bytes_npu", "tensor_bytes_bench", "layers")
            }
        )
    )
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
