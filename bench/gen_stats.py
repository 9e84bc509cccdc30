#!/usr/bin/env python3
"""Generate a synthetic PyTorch statistics dump pair for benchmarking `msprobe compare`.

The dump imitates an LLM training step (Megatron-like transformer layers, several micro-batches, forward and
backward, parameter grads, an optimizer tail) at level "mix": Module entries and Functional/Tensor/Torch/Distributed
API entries.  Every tensor leaf carries Max/Min/Mean/Norm, requires_grad, shape and dtype (torch.bfloat16 or
torch.float32, int64 for token ids, bool for masks); inputs also hold int/float/bool/None/str leaves.

The bench side is derived from the NPU side: most statistics are equal or slightly perturbed, about 1% differ a lot,
a few are NaN/Infinity, a few entries exist on one side only, a few shapes differ, some dtypes differ
(bf16 <-> fp32, still matched).  Output (layout as written by the real dumper):

    OUT/npu/step0/rank/{dump.json,stack.json,construct.json}
    OUT/bench/step0/rank/{dump.json,stack.json,construct.json}
    OUT/compare.json   (absolute paths, is_print_compare_log true)
    OUT/meta.json      (counts: entries and leaf rows per side, seed, options)

Usage: python3 bench/gen_stats.py [--entries 200000] [--out DIR] [--seed 1] [--md5] [--layers 32] [--indent 1]
Deterministic for a given seed and options.
"""

import argparse
import gc
import json
import os
import sys
import time
import zlib

import numpy as np

BF16 = "torch.bfloat16"
F32 = "torch.float32"
I64 = "torch.int64"
BOOL = "torch.bool"

# Fractions used when deriving the bench side.
P_EQUAL = 0.30  # statistics identical on both sides
P_LARGE = 0.01  # one or more statistics differ a lot
P_NAN = 0.0007  # a NaN / +inf / -inf statistic on one side
P_DTYPE = 0.02  # bench dtype differs inside the float group (bf16 <-> fp32)
P_SHAPE = 0.0005  # bench shape differs (row becomes unmatched)
P_DROP = 0.0005  # entry missing on the bench side
P_EXTRA = 0.0005  # extra entry on the bench side only

CHUNK = 1 << 16


class StatPool:
    """Statistics generated in vectorised chunks: row i of the pool feeds the i-th float tensor leaf."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.pos = CHUNK
        self.n = 0

    def _refill(self):
        rng = self.rng
        n = CHUNK
        scale = 10.0 ** rng.uniform(-4, 1.5, n)
        mx = scale * rng.uniform(0.5, 6.0, n)
        mn = -scale * rng.uniform(0.5, 6.0, n)
        mean = scale * rng.normal(0.0, 0.05, n)
        norm = scale * 10.0 ** rng.uniform(0.5, 3.5, n)
        npu = np.stack([mx, mn, mean, norm], axis=1).astype(np.float32)

        kind = rng.random(n)
        eps = rng.normal(0.0, 1e-3, (n, 4)) * (10.0 ** rng.uniform(-3, 0, (n, 1)))
        bench = npu.astype(np.float64) * (1.0 + eps)
        equal = kind < P_EQUAL
        bench[equal] = npu[equal]
        large = (kind >= P_EQUAL) & (kind < P_EQUAL + P_LARGE)
        factor = rng.uniform(1.6, 5.0, (n, 4)) * np.where(rng.random((n, 4)) < 0.2, -1.0, 1.0)
        pick = rng.random((n, 4)) < 0.5
        pick[:, 0] |= ~pick.any(axis=1)
        bench = np.where(large[:, None] & pick, npu * factor, bench)
        bench = bench.astype(np.float32)
        nanrow = (kind >= P_EQUAL + P_LARGE) & (kind < P_EQUAL + P_LARGE + P_NAN)
        specials = np.array([np.nan, np.inf, -np.inf, np.nan], dtype=np.float32)
        which_stat = rng.integers(0, 4, n)
        which_val = rng.integers(0, 4, n)
        on_npu = rng.random(n) < 0.5

        def bf16(a):
            b = a.view(np.uint32) & np.uint32(0xFFFF0000)
            return b.view(np.float32)

        npu_bf = bf16(npu.copy())
        bench_bf = bf16(bench.copy())
        for arrs, side in (((npu, npu_bf), True), ((bench, bench_bf), False)):
            rows = np.nonzero(nanrow & (on_npu == side))[0]
            for a in arrs:
                a[rows, which_stat[rows]] = specials[which_val[rows]]
        self.npu32 = npu.astype(np.float64).tolist()
        self.npu16 = npu_bf.astype(np.float64).tolist()
        self.bench32 = bench.astype(np.float64).tolist()
        self.bench16 = bench_bf.astype(np.float64).tolist()
        self.u = rng.random((n, 4)).tolist()  # misc uniform draws (dtype/shape flips)
        self.pos = 0

    def take(self):
        if self.pos >= CHUNK:
            self._refill()
        i = self.pos
        self.pos += 1
        self.n += 1
        return self.npu32[i], self.npu16[i], self.bench32[i], self.bench16[i], self.u[i]


class Gen:
    def __init__(self, seed, md5, layers):
        self.pool = StatPool(seed)
        self.rng = np.random.default_rng(seed + 7919)
        self.md5 = md5
        self.layers = layers
        self.api_count = {}
        # per-side ordered entries: list of (name, npu_body, bench_body)
        self.entries = []
        self.stack_sites = {}  # site key -> index into stack_groups
        self.stack_groups = []  # [[entry names]] per site; the stack lines are made at write time
        self.construct = {}
        self.param_grads_done = set()
        self.tok = 4096
        self.hid = 4096
        self.ffn = 11008
        self.heads = 32
        self.vocab = 32000

    # ---------------------------------------------------------------- leaves
    def _md5(self, stats):
        return "%08x" % zlib.crc32(repr(stats).encode())

    def tensor(self, shape, dtype=BF16, rg=True):
        """Return (npu_leaf, bench_leaf) for a float tensor."""
        n32, n16, b32, b16, u = self.pool.take()
        ns = n16 if dtype == BF16 else n32
        bdtype = dtype
        if u[0] < P_DTYPE:
            bdtype = F32 if dtype == BF16 else BF16
        bs = b16 if bdtype == BF16 else b32
        if not shape:
            ns = [ns[0]] * 4
            bs = [bs[0]] * 4
            ns[3] = abs(ns[3])
            bs[3] = abs(bs[3])
        bshape = shape
        if u[1] < P_SHAPE and shape:
            bshape = list(shape)
            bshape[-1] = bshape[-1] * 2
        npu = {
            "type": "torch.Tensor",
            "dtype": dtype,
            "shape": shape,
            "Max": ns[0],
            "Min": ns[1],
            "Mean": ns[2],
            "Norm": ns[3],
            "requires_grad": rg,
        }
        bench = {
            "type": "torch.Tensor",
            "dtype": bdtype,
            "shape": bshape,
            "Max": bs[0],
            "Min": bs[1],
            "Mean": bs[2],
            "Norm": bs[3],
            "requires_grad": rg,
        }
        if self.md5:
            npu["md5"] = self._md5(ns)
            bench["md5"] = npu["md5"] if (bs == ns and bdtype == dtype) else self._md5((bs, bdtype))
        return npu, bench

    def int_tensor(self, shape, hi):
        numel = 1
        for s in shape:
            numel *= s
        mean = float(np.float32(self.rng.uniform(0.3, 0.7) * hi))
        norm = float(np.float32(mean * 1.15 * numel**0.5))
        leaf = {
            "type": "torch.Tensor",
            "dtype": I64,
            "shape": shape,
            "Max": float(hi - 1),
            "Min": 0.0,
            "Mean": mean,
            "Norm": norm,
            "requires_grad": False,
        }
        if self.md5:
            leaf["md5"] = self._md5((hi, mean))
        return leaf, leaf

    def bool_tensor(self, shape):
        leaf = {
            "type": "torch.Tensor",
            "dtype": BOOL,
            "shape": shape,
            "Max": True,
            "Min": False,
            "Mean": None,
            "Norm": None,
            "requires_grad": False,
        }
        if self.md5:
            leaf["md5"] = "1c2b3a4d"
        return leaf, leaf

    @staticmethod
    def seq(*pairs):
        """A list/tuple argument: (npu list, bench list) from (npu, bench) pairs."""
        return [p[0] for p in pairs], [p[1] for p in pairs]

    @staticmethod
    def scalar(typ, value):
        leaf = {"type": typ, "value": value}
        return leaf, leaf

    # ---------------------------------------------------------------- entries
    def _site(self, key, name):
        idx = self.stack_sites.get(key)
        if idx is None:
            idx = len(self.stack_groups)
            self.stack_sites[key] = idx
            self.stack_groups.append([[]])
        self.stack_groups[idx][0].append(name)

    def add(self, name, npu_body, bench_body, parent, site=None):
        self.entries.append((name, npu_body, bench_body))
        self.construct[name] = parent
        if site is not None:
            self._site(site, name)

    def api(self, api_type, api_name, args, kwargs, outs, parent, site):
        """Forward API entry. args/kwargs/outs hold (npu, bench) pairs; returns entry name and the body pairs."""
        key = f"{api_type}.{api_name}"
        c = self.api_count.get(key, 0)
        self.api_count[key] = c + 1
        name = f"{key}.{c}.forward"
        nb = {
            "input_args": [a[0] for a in args],
            "input_kwargs": {k: v[0] for k, v in kwargs.items()},
            "is_recompute": False,
            "output": [o[0] for o in outs],
        }
        bb = {
            "input_args": [a[1] for a in args],
            "input_kwargs": {k: v[1] for k, v in kwargs.items()},
            "is_recompute": False,
            "output": [o[1] for o in outs],
        }
        self.add(name, nb, bb, parent, site)
        return {"name": name, "bwd": f"{key}.{c}.backward", "args": args, "outs": outs, "parent": parent}

    def module(self, path, cls, mb, args, kwargs, outs, params, parent, site):
        key = f"Module.{path}.{cls}"
        name = f"{key}.forward.{mb}"
        nb = {
            "input_args": [a[0] for a in args],
            "input_kwargs": {k: v[0] for k, v in kwargs.items()},
            "output": [o[0] for o in outs],
        }
        bb = {
            "input_args": [a[1] for a in args],
            "input_kwargs": {k: v[1] for k, v in kwargs.items()},
            "output": [o[1] for o in outs],
        }
        if params:
            nb["parameters"] = {k: v[0] for k, v in params.items()}
            bb["parameters"] = {k: v[1] for k, v in params.items()}
        nb["is_recompute"] = False
        bb["is_recompute"] = False
        self.add(name, nb, bb, parent, site)
        if params and key not in self.param_grads_done:
            self.param_grads_done.add(key)
            pg_n, pg_b = {}, {}
            for pname, (pn, _) in params.items():
                g = self.tensor(pn["shape"], pn["dtype"], False)
                pg_n[pname] = [g[0]]
                pg_b[pname] = [g[1]]
            self.add(f"{key}.parameters_grad", pg_n, pg_b, None)
        return {"name": name, "bwd": f"{key}.backward.{mb}", "args": args, "outs": outs, "parent": parent}

    def backward(self, rec, parent):
        """Backward entry for a forward record: input = grads of tensor outputs, output = grads of float inputs."""

        def grads(items):
            res = []
            for n, _ in items:
                if isinstance(n, dict) and n.get("type") == "torch.Tensor" and n["dtype"] in (BF16, F32):
                    res.append(self.tensor(n["shape"], n["dtype"], False))
                else:
                    res.append((None, None))
            return res

        if rec["name"].startswith("Distributed."):
            return
        gi = [g for g in grads(rec["outs"]) if g[0] is not None]
        go = grads(rec["args"])
        if not gi:
            return
        self.add(
            rec["bwd"],
            {"input": [g[0] for g in gi], "output": [g[0] for g in go]},
            {"input": [g[1] for g in gi], "output": [g[1] for g in go]},
            parent,
        )

    # ---------------------------------------------------------------- model pieces
    def rmsnorm(self, path, mb, x, parent, tree):
        mod_name = f"Module.{path}.RMSNorm.forward.{mb}"
        kids = []
        s = x[0]["shape"]
        red = s[:-1] + [1]
        t1 = self.tensor(s, F32)
        kids.append(self.api("Tensor", "pow", [x, self.scalar("int", 2)], {}, [t1], mod_name, "norm.pow"))
        t2 = self.tensor(red, F32)
        kids.append(
            self.api(
                "Tensor",
                "mean",
                [t1, self.scalar("int", -1)],
                {"keepdim": self.scalar("bool", True)},
                [t2],
                mod_name,
                "norm.mean",
            )
        )
        t3 = self.tensor(red, F32)
        kids.append(self.api("Tensor", "__add__", [t2, self.scalar("float", 1e-05)], {}, [t3], mod_name, "norm.add"))
        t4 = self.tensor(red, F32)
        kids.append(self.api("Torch", "rsqrt", [t3], {}, [t4], mod_name, "norm.rsqrt"))
        t5 = self.tensor(s, F32)
        kids.append(self.api("Tensor", "__mul__", [x, t4], {}, [t5], mod_name, "norm.mul"))
        w = self.tensor([s[-1]], F32)
        out = self.tensor(s, BF16)
        kids.append(self.api("Tensor", "__mul__", [w, t5], {}, [out], mod_name, "norm.mulw"))
        rec = self.module(path, "RMSNorm", mb, [x], {}, [out], {"weight": w}, parent, "mod.norm")
        tree.append((rec, [(k, []) for k in kids]))
        return out

    def linear(self, path, cls, mb, x, out_f, bias, parent, tree, reduce):
        mod_name = f"Module.{path}.{cls}.forward.{mb}"
        kids = []
        in_f = x[0]["shape"][-1]
        w = self.tensor([out_f, in_f], BF16)
        b = self.tensor([out_f], BF16) if bias else (None, None)
        out = self.tensor(x[0]["shape"][:-1] + [out_f], BF16)
        kids.append(self.api("Functional", "linear", [x, w, b], {}, [out], mod_name, f"lin.{cls}"))
        if reduce:
            red = self.tensor(out[0]["shape"], BF16, False)
            kids.append(
                self.api(
                    "Distributed",
                    "all_reduce",
                    [out],
                    {
                        "group": (
                            {
                                "type": "torch.ProcessGroup",
                                "group_ranks": [0, 1, 2, 3, 4, 5, 6, 7],
                                "group_id": "9a3f0c2e",
                            },
                        )
                        * 2,
                        "async_op": self.scalar("bool", False),
                    },
                    [red, (None, None)],
                    mod_name,
                    "allreduce",
                )
            )
            out = red
        params = {"weight": w}
        if bias:
            params["bias"] = b
        rec = self.module(path, cls, mb, [x], {}, [out, (None, None)], params, parent, f"mod.{cls}")
        tree.append((rec, [(k, []) for k in kids]))
        return out

    def attention(self, path, mb, x, mask, parent, tree):
        mod_name = f"Module.{path}.SelfAttention.forward.{mb}"
        sub = []
        hd = self.hid // self.heads
        qkv = self.linear(
            f"{path}.linear_qkv", "ColumnParallelLinear", mb, x, 3 * self.hid // 4, True, mod_name, sub, False
        )
        s = self.tok
        v4 = self.tensor([1, s, self.heads // 4, 3 * hd], BF16)
        sub.append(
            (
                self.api(
                    "Tensor",
                    "view",
                    [
                        qkv,
                        self.scalar("int", 1),
                        self.scalar("int", s),
                        self.scalar("int", self.heads // 4),
                        self.scalar("int", 3 * hd),
                    ],
                    {},
                    [v4],
                    mod_name,
                    "attn.view",
                ),
                [],
            )
        )
        q, k, v = (self.tensor([1, s, self.heads // 4, hd], BF16) for _ in range(3))
        sub.append(
            (
                self.api(
                    "Torch",
                    "split",
                    [v4, self.scalar("int", hd)],
                    {"dim": self.scalar("int", -1)},
                    [q, k, v],
                    mod_name,
                    "attn.split",
                ),
                [],
            )
        )
        qp = self.tensor([1, s, self.heads // 4, hd + 2], BF16)
        sub.append(
            (
                self.api(
                    "Functional",
                    "pad",
                    [q, self.seq(self.scalar("int", 0), self.scalar("int", 2))],
                    {"mode": self.scalar("str", "constant"), "value": self.scalar("float", 0.0)},
                    [qp],
                    mod_name,
                    "attn.pad",
                ),
                [],
            )
        )
        core = f"Module.{path}.core_attention.DotProductAttention.forward.{mb}"
        qt, kt, vt = (self.tensor([1, self.heads // 4, s, hd], BF16) for _ in range(3))
        ckids = []
        for t_in, t_out in ((q, qt), (k, kt), (v, vt)):
            ckids.append(
                self.api(
                    "Tensor",
                    "transpose",
                    [t_in, self.scalar("int", 1), self.scalar("int", 2)],
                    {},
                    [t_out],
                    core,
                    "attn.transpose",
                )
            )
        ctx = self.tensor([1, self.heads // 4, s, hd], BF16)
        ckids.append(
            self.api(
                "Functional",
                "scaled_dot_product_attention",
                [qt, kt, vt],
                {
                    "attn_mask": mask,
                    "dropout_p": self.scalar("float", 0.0),
                    "is_causal": self.scalar("bool", False),
                    "scale": (None, None),
                },
                [ctx],
                core,
                "attn.sdpa",
            )
        )
        ctx2 = self.tensor([1, s, self.hid // 4], BF16)
        ckids.append(
            self.api(
                "Tensor",
                "reshape",
                [ctx, self.scalar("int", 1), self.scalar("int", s), self.scalar("int", -1)],
                {},
                [ctx2],
                core,
                "attn.reshape",
            )
        )
        crec = self.module(
            f"{path}.core_attention",
            "DotProductAttention",
            mb,
            [q, k, v],
            {"attention_mask": mask},
            [ctx2],
            None,
            mod_name,
            "mod.core",
        )
        sub.append((crec, [(c, []) for c in ckids]))
        out = self.linear(f"{path}.linear_proj", "RowParallelLinear", mb, ctx2, self.hid, False, mod_name, sub, True)
        rec = self.module(
            path,
            "SelfAttention",
            mb,
            [x],
            {"attention_mask": mask, "inference_params": (None, None)},
            [out, (None, None)],
            None,
            parent,
            "mod.attn",
        )
        tree.append((rec, sub))
        return out

    def mlp(self, path, mb, x, parent, tree):
        mod_name = f"Module.{path}.MLP.forward.{mb}"
        sub = []
        h = self.linear(
            f"{path}.linear_fc1", "ColumnParallelLinear", mb, x, 2 * self.ffn // 4, False, mod_name, sub, False
        )
        sh = h[0]["shape"][:-1] + [self.ffn // 4]
        a, b = self.tensor(sh, BF16), self.tensor(sh, BF16)
        sub.append(
            (
                self.api(
                    "Torch",
                    "chunk",
                    [h, self.scalar("int", 2)],
                    {"dim": self.scalar("int", -1)},
                    [a, b],
                    mod_name,
                    "mlp.chunk",
                ),
                [],
            )
        )
        sa = self.tensor(sh, BF16)
        sub.append(
            (
                self.api(
                    "Functional", "silu", [a], {"inplace": self.scalar("bool", False)}, [sa], mod_name, "mlp.silu"
                ),
                [],
            )
        )
        m = self.tensor(sh, BF16)
        sub.append((self.api("Tensor", "__mul__", [sa, b], {}, [m], mod_name, "mlp.mul"), []))
        out = self.linear(f"{path}.linear_fc2", "RowParallelLinear", mb, m, self.hid, False, mod_name, sub, True)
        rec = self.module(path, "MLP", mb, [x], {}, [out, (None, None)], None, parent, "mod.mlp")
        tree.append((rec, sub))
        return out

    def layer(self, i, mb, x, mask, tree):
        path = f"decoder.layers.{i}"
        mod_name = f"Module.{path}.TransformerLayer.forward.{mb}"
        sub = []
        n1 = self.rmsnorm(f"{path}.input_layernorm", mb, x, mod_name, sub)
        att = self.attention(f"{path}.self_attention", mb, n1, mask, mod_name, sub)
        d = self.tensor(att[0]["shape"], BF16)
        sub.append(
            (
                self.api(
                    "Functional",
                    "dropout",
                    [att],
                    {
                        "p": self.scalar("float", 0.1),
                        "training": self.scalar("bool", True),
                        "inplace": self.scalar("bool", False),
                    },
                    [d],
                    mod_name,
                    "layer.dropout",
                ),
                [],
            )
        )
        r1 = self.tensor(x[0]["shape"], BF16)
        sub.append((self.api("Tensor", "__add__", [x, d], {}, [r1], mod_name, "layer.add1"), []))
        n2 = self.rmsnorm(f"{path}.pre_mlp_layernorm", mb, r1, mod_name, sub)
        m = self.mlp(f"{path}.mlp", mb, n2, mod_name, sub)
        r2 = self.tensor(x[0]["shape"], BF16)
        sub.append((self.api("Tensor", "__add__", [r1, m], {}, [r2], mod_name, "layer.add2"), []))
        rec = self.module(
            path,
            "TransformerLayer",
            mb,
            [x],
            {"attention_mask": mask, "rotary_pos_emb": (None, None), "inference_params": (None, None)},
            [r2],
            None,
            None,
            "mod.layer",
        )
        tree.append((rec, sub))
        return r2

    def micro_batch(self, mb, budget):
        start = len(self.entries)
        tree = []
        ids = self.int_tensor([1, self.tok], self.vocab)
        emb_name = f"Module.embedding.VocabParallelEmbedding.forward.{mb}"
        w = self.tensor([self.vocab // 4, self.hid], BF16)
        x = self.tensor([1, self.tok, self.hid], BF16)
        e = self.api(
            "Functional",
            "embedding",
            [ids, w],
            {
                "padding_idx": (None, None),
                "max_norm": (None, None),
                "norm_type": self.scalar("float", 2.0),
                "scale_grad_by_freq": self.scalar("bool", False),
                "sparse": self.scalar("bool", False),
            },
            [x],
            emb_name,
            "emb",
        )
        tree.append(
            (
                self.module("embedding", "VocabParallelEmbedding", mb, [ids], {}, [x], {"weight": w}, None, "mod.emb"),
                [(e, [])],
            )
        )
        mask = self.bool_tensor([1, 1, self.tok, self.tok])
        for i in range(self.layers):
            x = self.layer(i, mb, x, mask, tree)
            if len(self.entries) - start >= budget:
                break
        else:
            x = self.rmsnorm("decoder.final_layernorm", mb, x, None, tree)
            logits = self.linear(
                "output_layer", "ColumnParallelLinear", mb, x, self.vocab // 4, False, None, tree, False
            )
            labels = self.int_tensor([1, self.tok], self.vocab)
            loss = self.tensor([], F32)
            tree.append(
                (
                    self.api(
                        "Functional",
                        "cross_entropy",
                        [logits, labels],
                        {
                            "ignore_index": self.scalar("int", -100),
                            "reduction": self.scalar("str", "mean"),
                            "label_smoothing": self.scalar("float", 0.0),
                        },
                        [loss],
                        None,
                        "loss",
                    ),
                    [],
                )
            )

        # backward: reversed post-order
        def walk(nodes, parent_bwd):
            for rec, kids in reversed(nodes):
                walk(kids, rec["bwd"] if rec["name"].startswith("Module.") else parent_bwd)
                self.backward(rec, parent_bwd)

        walk(tree, None)

    def optimizer(self, n):
        self.construct["optimizer"] = None
        for _ in range(n):
            p = self.tensor([self.hid, self.hid // 4], F32)
            g = self.tensor([self.hid, self.hid // 4], F32, False)
            o = self.tensor([self.hid, self.hid // 4], F32)
            self.api("Tensor", "add_", [p, g], {"alpha": self.scalar("float", -0.0001)}, [o], "optimizer", "opt")

    def run(self, n_entries):
        n_opt = min(64, max(1, n_entries // 100))
        mb = 0
        while len(self.entries) < n_entries - n_opt:
            self.micro_batch(mb, n_entries - n_opt - len(self.entries))
            mb += 1
        self.optimizer(n_opt)
        del self.entries[n_entries:]
        return mb


# ------------------------------------------------------------------------ stack text
def stack_lines(key):
    lib = "/usr/local/lib/python3.11/site-packages"
    crc = zlib.crc32(key.encode())
    model = {
        "norm": "megatron/core/transformer/torch_norm.py",
        "lin": "megatron/core/tensor_parallel/layers.py",
        "allreduce": "megatron/core/tensor_parallel/mappings.py",
        "attn": "megatron/core/transformer/attention.py",
        "mlp": "megatron/core/transformer/mlp.py",
        "layer": "megatron/core/transformer/transformer_layer.py",
        "emb": "megatron/core/models/common/embeddings/language_model_embedding.py",
        "loss": "megatron/core/models/gpt/gpt_model.py",
        "opt": "megatron/core/optimizer/optimizer.py",
        "mod": "megatron/core/transformer/module.py",
    }.get(key.split(".")[0], "megatron/core/module.py")
    lines = []
    if not key.startswith("mod."):
        lines.append(
            f"File {lib}/msprobe/pytorch/hook_module/wrap_functional.py, line 94, in api_function, \n"
            f" return api_instance(*args, **kwargs)"
        )
    lines.append(
        f"File /home/user/train/{model}, line {100 + crc % 400}, in forward, \n"
        f" out = self.{key.replace('.', '_')}(hidden_states)"
    )
    for j in range(6):
        lines.append(
            f"File {lib}/torch/nn/modules/module.py, line {1700 + (crc >> (j * 3)) % 180}, "
            f"in _call_impl, \n return forward_call(*args, **kwargs)"
        )
    lines.append(
        "File /home/user/train/megatron/training/training.py, line 1234, in train_step, \n"
        " losses_reduced = forward_backward_func(forward_step_func=forward_step)"
    )
    lines.append("File /home/user/train/pretrain_gpt.py, line 321, in <module>, \n pretrain(train_valid_test_ds)")
    return lines


def leaf_count(body):
    """Number of result rows one entry body flattens to (None counts as a row, empty list/dict as none)."""
    if body is None:
        return 1
    if isinstance(body, list):
        return sum(leaf_count(b) for b in body)
    if isinstance(body, dict):
        if isinstance(body.get("type"), str):
            return 1
        return sum(leaf_count(v) for k, v in body.items() if k != "is_recompute")
    return 0


def write_json(path, obj, indent):
    with open(path, "w") as f:
        if indent:
            f.write(_enc(obj, "", " " * indent))
        else:
            f.write(json.dumps(obj))


_ESC = json.encoder.encode_basestring_ascii
_INF = float("inf")


def _num(v):
    if v != v:
        return "NaN"
    if v == _INF:
        return "Infinity"
    if v == -_INF:
        return "-Infinity"
    return repr(v)


def _enc(o, pad, step):
    """JSON text of o exactly as json.dumps(o, indent=len(step)) lays it out, nested at indentation pad."""
    t = type(o)
    if t is dict:
        if not o:
            return "{}"
        inner = pad + step
        sep = ",\n" + inner
        return "{\n" + inner + sep.join(_ESC(k) + ": " + _enc(v, inner, step) for k, v in o.items()) + "\n" + pad + "}"
    if t is list or t is tuple:
        if not o:
            return "[]"
        inner = pad + step
        sep = ",\n" + inner
        return "[\n" + inner + sep.join(_enc(v, inner, step) for v in o) + "\n" + pad + "]"
    if t is str:
        return _ESC(o)
    if t is float:
        return _num(o)
    if o is True:
        return "true"
    if o is False:
        return "false"
    if o is None:
        return "null"
    return repr(o)


def write_dump(path, data, indent):
    head = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None}
    with open(path, "w") as f:
        if not indent:
            head["data"] = data
            f.write(json.dumps(head))
            return
        # Same text as json.dump(head+data, indent=indent), written entry by entry with a lean encoder
        # (json.dump with indent uses the slow pure-Python encoder).
        step = " " * indent
        f.write("{\n")
        for k, v in head.items():
            f.write(f"{step}{_ESC(k)}: {json.dumps(v)},\n")
        f.write(step + '"data": {')
        first = True
        pad = step * 2
        buf = []
        for name, body in data.items():
            buf.append(("\n" if first else ",\n") + pad + _ESC(name) + ": " + _enc(body, pad, step))
            first = False
            if len(buf) >= 4096:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))
        f.write("\n" + step + "}\n}" if not first else "}\n}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=200_000, help="API/module entries on the NPU side")
    ap.add_argument("--out", default="/tmp/msprobe_bench", help="output folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--md5", action="store_true", help="also write md5 fields (md5 mode)")
    ap.add_argument("--layers", type=int, default=32, help="transformer layers per micro-batch")
    ap.add_argument("--indent", type=int, default=1, help="JSON indent of dump.json (1 like the dumper; 0 compact)")
    a = ap.parse_args(argv)
    t0 = time.time()
    gc.disable()  # millions of small dicts: the cyclic GC would rescan them over and over
    g = Gen(a.seed, a.md5, a.layers)
    n_mb = g.run(a.entries)

    rng = np.random.default_rng(a.seed + 104729)
    npu_data, bench_data = {}, {}
    npu_cons, bench_cons = {}, {}
    drop_u = rng.random(len(g.entries)).tolist()
    extra_u = rng.random(len(g.entries)).tolist()
    extra_k = 0
    npu_rows = bench_rows = 0
    for (name, nb, bb), du, eu in zip(g.entries, drop_u, extra_u):
        npu_data[name] = nb
        npu_rows += leaf_count(nb)
        npu_cons[name] = g.construct.get(name)
        if du >= P_DROP:
            bench_data[name] = bb
            bench_rows += leaf_count(bb)
            bench_cons[name] = g.construct.get(name)
        if eu < P_EXTRA:
            ename = f"Tensor.contiguous.{extra_k}.forward"
            extra_k += 1
            t = g.tensor([1, g.tok, g.hid], BF16)
            bench_data[ename] = {"input_args": [t[1]], "input_kwargs": {}, "is_recompute": False, "output": [t[1]]}
            bench_rows += 2
            bench_cons[ename] = None
    if "optimizer" in g.construct:
        npu_cons["optimizer"] = bench_cons["optimizer"] = None

    stack = {}
    npu_names = set(npu_data)
    for idx, (key, gi) in enumerate(sorted(g.stack_sites.items(), key=lambda kv: kv[1])):
        names = [n for n in g.stack_groups[gi][0] if n in npu_names]
        if names:
            stack[str(len(stack))] = [names, stack_lines(key)]
    bench_stack = dict(stack)
    t1 = time.time()

    out = os.path.abspath(a.out)
    sides = {"npu": (npu_data, npu_cons, stack), "bench": (bench_data, bench_cons, bench_stack)}

    def write_side(side):
        data, cons, stk = sides[side]
        d = os.path.join(out, side, "step0", "rank")
        os.makedirs(d, mode=0o750, exist_ok=True)
        write_dump(os.path.join(d, "dump.json"), data, a.indent)
        write_json(os.path.join(d, "stack.json"), stk, a.indent)
        write_json(os.path.join(d, "construct.json"), cons, a.indent)

    # the two sides are written in parallel: a forked child writes the bench side
    if hasattr(os, "fork"):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                write_side("bench")
                code = 0
            finally:
                os._exit(code)
        write_side("npu")
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit("writing the bench side failed")
    else:
        write_side("npu")
        write_side("bench")
    cfg = {
        "npu_path": os.path.join(out, "npu/step0/rank/dump.json"),
        "bench_path": os.path.join(out, "bench/step0/rank/dump.json"),
        "stack_path": os.path.join(out, "npu/step0/rank/stack.json"),
        "is_print_compare_log": True,
    }
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    meta = {
        "entries_npu": len(npu_data),
        "entries_bench": len(bench_data),
        "rows_npu": npu_rows,
        "rows_bench": bench_rows,
        "micro_batches": n_mb,
        "layers": a.layers,
        "seed": a.seed,
        "md5": a.md5,
        "tensor_leaves_generated": g.pool.n,
        "bytes_npu": os.path.getsize(cfg["npu_path"]),
        "bytes_bench": os.path.getsize(cfg["bench_path"]),
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    t2 = time.time()
    print(
        f"generated {len(npu_data)} npu / {len(bench_data)} bench entries, {npu_rows} / {bench_rows} rows, "
        f"{meta['bytes_npu'] / 1e6:.0f} MB + {meta['bytes_bench'] / 1e6:.0f} MB in {out} "
        f"(build {t1 - t0:.1f}s, write {t2 - t1:.1f}s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
