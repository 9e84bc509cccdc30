#!/usr/bin/env python
"""Makes `impl_ms.tar.xz` (issue #30 item 7, "a MindSpore pair"): real dumps of ONE small Llama-like decoder written
in two MindSpore implementations from the same weights, made with the reference dumper (mindstudio-probe 8.3.3)
under MindSpore on the CPU, PyNative mode.

Two modes.

1. One dump (in a MindSpore virtualenv that has mindstudio-probe 8.3.3; see Versions below):
       OMP_NUM_THREADS=1 /tmp/msvenv/bin/python make_ms_impls.py --impl mf --prec fp32 --bug scale --layer 1 --out DIR
2. Every run, every case with its TRUTH.json, the checks and the archive (any python3; it starts the runs with --ref):
       python3 make_ms_impls.py build --ref /tmp/msvenv/bin/python [--work /tmp/impl_ms]

The model (both implementations): vocab 64, hidden 32, 3 layers, 4 query heads and 2 key/value heads (head dim 8,
grouped-query attention), RMSNorm (eps 1e-6), rotary embeddings (base 10000, rotate-half style), SwiGLU
(intermediate 64), an untied head, next-token cross-entropy (ops.cross_entropy, outside the model), one plain SGD
step (nn.SGD, lr 0.05) by mindspore.value_and_grad; batch 2, sequence 8. The weights are drawn once with numpy
(default_rng(1234)), in HF layout, and converted to each implementation's layout (merged) BEFORE debugger.start.
Implementations (each its own nn.Cell tree):
  hfms  HF transformers Llama written in MindSpore the way mindone/mindnlp do, with mint functional APIs:
        model.embed_tokens (ops.gather), model.rotary_emb, model.layers.N.{input_layernorm,
        self_attn.{q_proj,k_proj,v_proj,o_proj}, post_attention_layernorm, mlp.{gate_proj,up_proj,down_proj,act_fn}},
        model.norm, lm_head; [b, s, h]; Linear = mint.nn.functional.linear; eager attention (repeat_kv by
        broadcast_to, matmul * scaling, additive causal mask of finfo.min, softmax in fp32)
  mf    MindFormers Llama (qkv_concat, ffn_concat): every op a Primitive held by its cell (P.MatMul, P.Reshape,
        P.Transpose, P.BatchMatMul, P.Mul, P.Add, P.Softmax, SplitWithSize, ...; msprobe dumps them as
        `Primitive.<attribute>.<Class>.N`): model.tok_embeddings (P.Gather), model.freqs_mgr (precomputed cos, sin
        and swap mask), model.layers.N.{attention_norm, attention.{w_qkv ([q; k; v] in one Linear), apply_rotary_emb
        (rotate-half by a matmul with the swap mask), wo}, ffn_norm, feed_forward.{w_gate_hidden ([gate; up] in one
        Linear), w2}}, model.norm_out, lm_head. Tokens are flattened to [b*s, h] after the embedding; Linear reshapes
        to 2-D and back; the causal mask is 1 = masked, times -10000, added; repeat_kv by P.Tile.
Precision: fp32, or fp16 by mindspore.amp.auto_mixed_precision(model, "auto", float16) (per-op casts of amp's list:
matmul, linear, ...; the cell tree and class names stay; O1 would rewrite the classes and O2 wrap the root in
_OutputTo32), the SAME on both sides of a case. Norms, softmax and the rotary tables stay fp32 in both; the CPU has
no bf16 kernels.
Versions: MindSpore 2.8.0 (CPU), mindstudio-probe 8.3.3, Python 3.11. 8.3.3 fails with MindSpore 2.10.0: it
compares versions as strings ('2.10.0' < '2.7.0'), so every cell's backward hook is called the old way (TypeError).
Virtualenv: python3 -m venv /tmp/msvenv && /tmp/msvenv/bin/pip install mindspore==2.8.0 mindstudio-probe==8.3.3
Bugs (npu side only, at --layer, in the implementation's own cells):
  scale  the output of the layer's MLP down projection (hfms mlp.down_proj, mf feed_forward.w2) x1.1, inside that
         cell's construct: the cell arms a wrapper that is the op it calls (hfms: mint.nn.functional.linear replaced
         before msprobe is imported; mf: its MatMul primitive is a subclass of P.MatMul named MatMul), and the
         wrapper multiplies with ops.mul captured before msprobe is imported, so the dumped call names stay those of
         the implementation and the dumped op's output carries the factor
  attn   the softmax scale of that layer's attention 1/head_dim instead of 1/sqrt(head_dim) (hfms: the float of
         Tensor.__mul__; mf: the scalar tensor `inv_norm_factor` of its P.Mul)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

IMPLS = ["hfms", "mf"]
PRECS = ["fp32", "fp16"]
BUGS = ["none", "scale", "attn"]
V, H, NH, NKV, HD, FF, NL, B, S = 64, 32, 4, 2, 8, 64, 3, 2, 8
SEED, DATA_SEED, FACTOR, LR = 1234, 4321, 1.1, 0.05
EPS, BASE = 1e-6, 10000.0


# --------------------------------------------------------------------------------------------- one dump (msvenv)
def dump_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", required=True, choices=IMPLS)
    p.add_argument("--prec", default="fp32", choices=PRECS)
    p.add_argument("--bug", default="none", choices=BUGS)
    p.add_argument("--layer", type=int, default=1)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    impl, bug, L = args.impl, args.bug, args.layer
    assert 0 <= L < NL, (L, NL)

    import numpy as np
    import mindspore as ms
    from mindspore import Parameter, Tensor, mint, nn, ops
    from mindspore.mint.nn import functional as F

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(SEED)

    # ---- the `scale` bug: the op itself returns out * FACTOR when its cell arms it. The originals are captured
    # before msprobe is imported: calls through them are not dumped.
    ORIG = {"linear": F.linear, "mul": ops.mul}
    armed = {"on": False}

    def linear(input, weight, bias=None):  # mint.nn.functional.linear's signature
        out = ORIG["linear"](input, weight, bias)
        if armed["on"]:
            armed["on"] = False
            out = ORIG["mul"](out, FACTOR)
        return out

    if bug == "scale" and impl == "hfms":
        F.linear = linear

    class MatMul(ops.MatMul):  # the name is the primitive's class name in the dump: keep "MatMul"
        def __call__(self, *a):
            return ORIG["mul"](super().__call__(*a), FACTOR)

    # ---- msprobe, with the two CPU workarounds of shared/fixtures/makers/mindspore_dump.py
    from msprobe.mindspore import PrecisionDebugger

    # (1) statistics use mint.norm (kernel LinalgVectorNorm, not registered on the CPU): fall back to ops.norm
    import msprobe.core.data_dump.data_processor.mindspore_processor as _mp

    class _MintWithoutNorm:
        def __getattr__(self, name):
            if name == "norm":
                raise AttributeError(name)
            return getattr(mint, name)

    _mp.mint = _MintWithoutNorm()
    # (2) 8.3.3 runs the graph-mode cell dump's step() on every L0/mix dump in PyNative and looks for a
    # statistic.csv that only a graph KBK dump writes; guard it as 26.2.0 does
    import msprobe.mindspore.debugger.precision_debugger as _pd
    from msprobe.core.common.runtime import Runtime as _Runtime
    from msprobe.mindspore.common.const import Const as _MsConst

    _orig_allowed = _pd.is_graph_mode_cell_dump_allowed

    def _allowed_only_with_graph_cells(config):
        if config.execution_mode == _MsConst.PYNATIVE_MODE and _Runtime.run_mode != _MsConst.PYNATIVE_GRAPH_MODE:
            return False
        return _orig_allowed(config)

    _pd.is_graph_mode_cell_dump_allowed = _allowed_only_with_graph_cells

    os.makedirs(args.out, exist_ok=True)
    cfg = {
        "task": "statistics",
        "dump_path": args.out,
        "rank": [],
        "step": [],
        "level": "mix",
        "async_dump": False,
        "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
    }
    cfg_path = args.out.rstrip("/") + "_config.json"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    debugger = PrecisionDebugger(config_path=cfg_path)

    # ---- the weights, HF layout ([out, in]), drawn once (same for every implementation)
    rng = np.random.default_rng(SEED)

    def rnd(*shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    W = {"embed": rnd(V, H, scale=0.5)}
    for i in range(NL):
        W[f"{i}.q"] = rnd(NH * HD, H, scale=H**-0.5)
        W[f"{i}.k"] = rnd(NKV * HD, H, scale=H**-0.5)
        W[f"{i}.v"] = rnd(NKV * HD, H, scale=H**-0.5)
        W[f"{i}.o"] = rnd(H, NH * HD, scale=(NH * HD) ** -0.5)
        W[f"{i}.gate"] = rnd(FF, H, scale=H**-0.5)
        W[f"{i}.up"] = rnd(FF, H, scale=H**-0.5)
        W[f"{i}.down"] = rnd(H, FF, scale=FF**-0.5)
        W[f"{i}.n1"] = 1 + rnd(H, scale=0.1)
        W[f"{i}.n2"] = 1 + rnd(H, scale=0.1)
    W["norm"] = 1 + rnd(H, scale=0.1)
    W["head"] = rnd(V, H, scale=H**-0.5)
    drng = np.random.default_rng(DATA_SEED)
    tok = drng.integers(0, V, (B, S + 1)).astype(np.int32)
    ids_np, labels_np = tok[:, :-1].copy(), tok[:, 1:].copy()

    def P(w, name):
        return Parameter(Tensor(np.ascontiguousarray(w)), name=name)

    f16 = args.prec == "fp16"
    CD = ms.float32  # MindFormers' compute_dtype, for its casts: fp32 (fp16 comes from amp, below)
    good_scale, bad_scale = HD**-0.5, 1.0 / HD

    def scale_of(i):
        return bad_scale if (bug == "attn" and i == L) else good_scale

    # ================================================================================================ hfms
    def build_hfms():
        class Embedding(nn.Cell):
            def __init__(self, w, name):
                super().__init__()
                self.weight = P(w, name)

            def construct(self, input_ids):
                return ops.gather(self.weight, input_ids, 0)

        class Linear(nn.Cell):
            def __init__(self, w, name, bug_here=False):
                super().__init__()
                self.weight = P(w, name)
                self.bug_here = bug_here

            def construct(self, x):
                if self.bug_here:
                    armed["on"] = True
                return F.linear(x, self.weight)

        class LlamaRMSNorm(nn.Cell):
            def __init__(self, w, name, eps=EPS):
                super().__init__()
                self.weight, self.variance_epsilon = P(w, name), eps

            def construct(self, hidden_states):
                input_dtype = hidden_states.dtype
                hidden_states = hidden_states.astype(ms.float32)
                variance = mint.mean(hidden_states.pow(2), -1, keepdim=True)
                hidden_states = hidden_states * mint.rsqrt(variance + self.variance_epsilon)
                return self.weight.astype(input_dtype) * hidden_states.astype(input_dtype)

        class LlamaRotaryEmbedding(nn.Cell):
            def __init__(self):
                super().__init__()
                self.inv_freq = Tensor(
                    (1.0 / (BASE ** (np.arange(0, HD, 2, dtype=np.int64).astype(np.float32) / HD))).astype(np.float32)
                )

            def construct(self, x, position_ids):
                # HF runs this product with autocast off (fp32); an elementwise product is not on amp's fp16 list
                inv_freq_expanded = mint.broadcast_to(
                    self.inv_freq.reshape(1, 1, -1), (position_ids.shape[0], 1, HD // 2)
                )
                position_ids_expanded = position_ids.reshape(position_ids.shape[0], -1, 1).astype(ms.float32)
                freqs = position_ids_expanded * inv_freq_expanded  # [b, s, HD / 2]
                emb = mint.cat((freqs, freqs), dim=-1)
                return mint.cos(emb).astype(x.dtype), mint.sin(emb).astype(x.dtype)

        def rotate_half(x):
            x1 = x[..., : x.shape[-1] // 2]
            x2 = x[..., x.shape[-1] // 2 :]
            return mint.cat((-x2, x1), dim=-1)

        def apply_rotary_pos_emb(q, k, cos, sin):
            cos = cos.unsqueeze(1)
            sin = sin.unsqueeze(1)
            return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

        def repeat_kv(hidden_states, n_rep):
            batch, num_key_value_heads, slen, head_dim = hidden_states.shape
            if n_rep == 1:
                return hidden_states
            hidden_states = mint.broadcast_to(
                hidden_states.unsqueeze(2), (batch, num_key_value_heads, n_rep, slen, head_dim)
            )
            return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

        class LlamaAttention(nn.Cell):
            def __init__(self, i):
                super().__init__()
                self.head_dim, self.num_key_value_groups, self.scaling = HD, NH // NKV, scale_of(i)
                pre = f"model.layers.{i}.self_attn."
                self.q_proj = Linear(W[f"{i}.q"], pre + "q_proj.weight")
                self.k_proj = Linear(W[f"{i}.k"], pre + "k_proj.weight")
                self.v_proj = Linear(W[f"{i}.v"], pre + "v_proj.weight")
                self.o_proj = Linear(W[f"{i}.o"], pre + "o_proj.weight")

            def construct(self, hidden_states, position_embeddings, attention_mask):
                b, s, _ = hidden_states.shape
                query_states = mint.transpose(self.q_proj(hidden_states).reshape(b, s, -1, self.head_dim), 1, 2)
                key_states = mint.transpose(self.k_proj(hidden_states).reshape(b, s, -1, self.head_dim), 1, 2)
                value_states = mint.transpose(self.v_proj(hidden_states).reshape(b, s, -1, self.head_dim), 1, 2)
                cos, sin = position_embeddings
                query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
                key_states = repeat_kv(key_states, self.num_key_value_groups)
                value_states = repeat_kv(value_states, self.num_key_value_groups)
                attn_weights = mint.matmul(query_states, mint.transpose(key_states, 2, 3)) * self.scaling
                attn_weights = attn_weights + attention_mask
                attn_weights = F.softmax(attn_weights, dim=-1, dtype=ms.float32).astype(query_states.dtype)
                attn_output = mint.matmul(attn_weights, value_states)
                attn_output = mint.transpose(attn_output, 1, 2).reshape(b, s, -1)
                return self.o_proj(attn_output)

        class LlamaMLP(nn.Cell):
            def __init__(self, i):
                super().__init__()
                pre = f"model.layers.{i}.mlp."
                self.gate_proj = Linear(W[f"{i}.gate"], pre + "gate_proj.weight")
                self.up_proj = Linear(W[f"{i}.up"], pre + "up_proj.weight")
                self.down_proj = Linear(W[f"{i}.down"], pre + "down_proj.weight", bug_here=(bug == "scale" and i == L))
                self.act_fn = mint.nn.SiLU()

            def construct(self, x):
                return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

        class LlamaDecoderLayer(nn.Cell):
            def __init__(self, i):
                super().__init__()
                self.self_attn = LlamaAttention(i)
                self.mlp = LlamaMLP(i)
                self.input_layernorm = LlamaRMSNorm(W[f"{i}.n1"], f"model.layers.{i}.input_layernorm.weight")
                self.post_attention_layernorm = LlamaRMSNorm(
                    W[f"{i}.n2"], f"model.layers.{i}.post_attention_layernorm.weight"
                )

            def construct(self, hidden_states, attention_mask, position_embeddings):
                residual = hidden_states
                hidden_states = self.input_layernorm(hidden_states)
                hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask)
                hidden_states = residual + hidden_states
                residual = hidden_states
                hidden_states = self.post_attention_layernorm(hidden_states)
                hidden_states = self.mlp(hidden_states)
                return residual + hidden_states

        class LlamaModel(nn.Cell):
            def __init__(self):
                super().__init__()
                self.embed_tokens = Embedding(W["embed"], "model.embed_tokens.weight")
                self.layers = nn.CellList([LlamaDecoderLayer(i) for i in range(NL)])
                self.norm = LlamaRMSNorm(W["norm"], "model.norm.weight")
                self.rotary_emb = LlamaRotaryEmbedding()
                # the additive causal mask (finfo.min above the diagonal), made when the model is built
                mask = np.triu(np.full((S, S), np.finfo(np.float32).min, np.float32), 1)[None, None]
                self.causal_mask = Tensor(np.broadcast_to(mask, (B, 1, S, S)).copy())
                self.position_ids = Tensor(np.arange(S, dtype=np.int32)[None])

            def construct(self, input_ids):
                inputs_embeds = self.embed_tokens(input_ids)
                hidden_states = inputs_embeds
                position_embeddings = self.rotary_emb(hidden_states, self.position_ids)
                for decoder_layer in self.layers:
                    hidden_states = decoder_layer(hidden_states, self.causal_mask, position_embeddings)
                return self.norm(hidden_states)

        class LlamaForCausalLM(nn.Cell):
            def __init__(self):
                super().__init__()
                self.model = LlamaModel()
                self.lm_head = Linear(W["head"], "lm_head.weight")

            def construct(self, input_ids):
                return self.lm_head(self.model(input_ids))

        return LlamaForCausalLM()

    # ================================================================================================ mf
    def build_mf():
        class Linear(nn.Cell):
            """mindformers.modules.layers.Linear: reshape to 2-D, MatMul(transpose_b), reshape back."""

            def __init__(self, w, name, bug_here=False):
                super().__init__()
                self.in_channels, self.out_channels = w.shape[1], w.shape[0]
                self.weight = P(w, name)
                self.matmul = (MatMul if bug_here else ops.MatMul)(transpose_b=True)
                self.reshape = ops.Reshape()
                self.cast = ops.Cast()
                self.dtype = CD

            def construct(self, x):
                out_shape = x.shape[:-1] + (self.out_channels,)
                x = self.reshape(x, (-1, self.in_channels))
                x = self.matmul(self.cast(x, self.dtype), self.cast(self.weight, self.dtype))
                return self.reshape(x, out_shape)

        class LlamaEmbedding(nn.Cell):
            def __init__(self, w, name):
                super().__init__()
                self.embedding_weight = P(w, name)
                self.gather = ops.Gather()
                self.cast = ops.Cast()

            def construct(self, input_ids):
                return self.cast(self.gather(self.embedding_weight, input_ids, 0), CD)

        class LlamaRMSNorm(nn.Cell):
            """mindformers LlamaRMSNorm._self_norm (compute type fp32)."""

            def __init__(self, w, name, eps=EPS):
                super().__init__()
                self.weight, self.eps = P(w, name), eps
                self.square, self.mean, self.add = ops.Square(), ops.ReduceMean(keep_dims=True), ops.Add()
                self.rsqrt, self.mul, self.mul2, self.cast = ops.Rsqrt(), ops.Mul(), ops.Mul(), ops.Cast()

            def construct(self, x):
                original_type = x.dtype
                norm_factor = self.square(self.cast(x, ms.float32))
                norm_factor = self.mean(norm_factor, -1)
                norm_factor = self.add(norm_factor, self.eps)
                norm_factor = self.rsqrt(norm_factor)
                output = self.mul(x, self.cast(norm_factor, original_type))
                return self.mul2(output, self.cast(self.weight, original_type))

        class FreqsMgr(nn.Cell):
            """mindformers FreqsMgr: cos, sin and the swap mask precomputed with numpy, sliced to the sequence."""

            def __init__(self):
                super().__init__()
                inv = 1.0 / (BASE ** (np.arange(0, HD, 2).astype(np.float32) / HD))
                freqs = np.outer(np.arange(S, dtype=np.float32), inv.astype(np.float32))
                emb = np.concatenate((freqs, freqs), axis=-1)
                self.freqs_cos = Tensor(np.cos(emb).astype(np.float32))
                self.freqs_sin = Tensor(np.sin(emb).astype(np.float32))
                half = HD // 2
                swap = np.zeros((HD, HD), np.float32)
                swap[half:, :half] = -np.eye(half)  # x @ swap = [-x2, x1]
                swap[:half, half:] = np.eye(half)
                self.swap_mask = Tensor(swap)
                self.slice = ops.StridedSlice()

            def construct(self, seq_length):
                freqs_cos = self.slice(self.freqs_cos, (0, 0), (seq_length, HD), (1, 1))
                freqs_sin = self.slice(self.freqs_sin, (0, 0), (seq_length, HD), (1, 1))
                return freqs_cos, freqs_sin, self.swap_mask

        class RotaryEmbedding(nn.Cell):
            def __init__(self):
                super().__init__()
                self.mul, self.mul_inc, self.add = ops.Mul(), ops.Mul(), ops.Add()
                self.bmm_swap, self.reshape, self.cast = ops.MatMul(), ops.Reshape(), ops.Cast()

            def rotate_half(self, x, swap_mask):
                # the CPU backend's BatchMatMul does not broadcast [b, n, s, d] @ [d, d]: a 2-D MatMul instead
                return self.reshape(self.bmm_swap(self.reshape(x, (-1, HD)), swap_mask), x.shape)

            def construct(self, xq, xk, freqs_cis):
                original_type = xq.dtype
                xq, xk = self.cast(xq, ms.float32), self.cast(xk, ms.float32)
                freqs_cos, freqs_sin, swap_mask = freqs_cis
                xq_out = self.add(self.mul(xq, freqs_cos), self.mul_inc(self.rotate_half(xq, swap_mask), freqs_sin))
                xk_out = self.add(self.mul(xk, freqs_cos), self.mul_inc(self.rotate_half(xk, swap_mask), freqs_sin))
                return self.cast(xq_out, original_type), self.cast(xk_out, original_type)

        class LLamaAttention(nn.Cell):
            def __init__(self, i):
                super().__init__()
                pre = f"model.layers.{i}.attention."
                self.n_rep = NH // NKV
                self.w_qkv = Linear(np.concatenate([W[f"{i}.q"], W[f"{i}.k"], W[f"{i}.v"]], 0), pre + "w_qkv.weight")
                self.wo = Linear(W[f"{i}.o"], pre + "wo.weight")
                self.apply_rotary_emb = RotaryEmbedding()
                self.split_qkv = ops.auto_generate.SplitWithSize()
                self.reshape, self.transpose, self.merger_head_transpose = (
                    ops.Reshape(),
                    ops.Transpose(),
                    ops.Transpose(),
                )
                self.tile_kv = ops.Tile()
                self.batch_matmul_q_k = ops.BatchMatMul(transpose_b=True)
                self.batch_matmul = ops.BatchMatMul()
                self.mul, self.mul_mask, self.add = ops.Mul(), ops.Mul(), ops.Add()
                self.softmax, self.cast = ops.Softmax(), ops.Cast()
                self.inv_norm_factor = Tensor(scale_of(i), CD)
                self.multiply_data = Tensor([-10000.0], CD)

            def _repeat_kv(self, x, rep):
                bs, n_kv_head, seqlen, head_dim = x.shape
                x = self.reshape(x, (bs, n_kv_head, 1, seqlen * head_dim))
                x = self.tile_kv(x, (1, 1, rep, 1))
                return self.reshape(x, (bs, n_kv_head * rep, seqlen, head_dim))

            def construct(self, x, freqs_cis, mask, batch_size, seq_len):
                qkv = self.w_qkv(x)  # [b*s, (NH + 2 NKV) * HD]
                query, key, value = self.split_qkv(qkv, (NH * HD, NKV * HD, NKV * HD), 1)
                query = self.transpose(self.reshape(query, (batch_size, seq_len, NH, HD)), (0, 2, 1, 3))
                key = self.transpose(self.reshape(key, (batch_size, seq_len, NKV, HD)), (0, 2, 1, 3))
                value = self.transpose(self.reshape(value, (batch_size, seq_len, NKV, HD)), (0, 2, 1, 3))
                query, key = self.apply_rotary_emb(query, key, freqs_cis)
                key = self._repeat_kv(key, self.n_rep)
                value = self._repeat_kv(value, self.n_rep)
                score = self.batch_matmul_q_k(query, key)
                score = self.mul(score, self.inv_norm_factor)
                score = self.add(self.mul_mask(mask, self.multiply_data), score)
                probs = self.cast(self.softmax(self.cast(score, ms.float32)), CD)
                context = self.batch_matmul(probs, value)  # [b, n, s, d]
                context = self.merger_head_transpose(context, (0, 2, 1, 3))
                context = self.reshape(context, (batch_size * seq_len, NH * HD))
                return self.wo(context)

        class LlamaFeedForward(nn.Cell):
            def __init__(self, i):
                super().__init__()
                pre = f"model.layers.{i}.feed_forward."
                self.w_gate_hidden = Linear(
                    np.concatenate([W[f"{i}.gate"], W[f"{i}.up"]], 0), pre + "w_gate_hidden.weight"
                )
                self.w2 = Linear(W[f"{i}.down"], pre + "w2.weight", bug_here=(bug == "scale" and i == L))
                self.split = ops.auto_generate.SplitWithSize()
                self.sigmoid, self.mul_act, self.mul = ops.Sigmoid(), ops.Mul(), ops.Mul()

            def construct(self, x):
                gate_hidden_out = self.w_gate_hidden(x)
                gate, hidden = self.split(gate_hidden_out, (FF, FF), 1)
                gate = self.mul_act(gate, self.sigmoid(gate))  # LlamaSiLU: x * sigmoid(x)
                hidden = self.mul(hidden, gate)
                return self.w2(hidden)

        class LLamaDecodeLayer(nn.Cell):
            def __init__(self, i):
                super().__init__()
                self.attention_norm = LlamaRMSNorm(W[f"{i}.n1"], f"model.layers.{i}.attention_norm.weight")
                self.ffn_norm = LlamaRMSNorm(W[f"{i}.n2"], f"model.layers.{i}.ffn_norm.weight")
                self.attention = LLamaAttention(i)
                self.feed_forward = LlamaFeedForward(i)
                self.add = ops.Add()

            def construct(self, x, freqs_cis, mask, batch_size, seq_len):
                input_x = self.attention_norm(x)
                h = self.attention(input_x, freqs_cis, mask, batch_size, seq_len)
                h = self.add(x, h)
                ffn_norm = self.ffn_norm(h)
                ffn_out = self.feed_forward(ffn_norm)
                return self.add(h, ffn_out)

        class LlamaModel(nn.Cell):
            def __init__(self):
                super().__init__()
                self.tok_embeddings = LlamaEmbedding(W["embed"], "model.tok_embeddings.embedding_weight")
                self.freqs_mgr = FreqsMgr()
                self.layers = nn.CellList([LLamaDecodeLayer(i) for i in range(NL)])
                self.norm_out = LlamaRMSNorm(W["norm"], "model.norm_out.weight")
                self.reshape = ops.Reshape()
                # CausalMask: 1 above the diagonal (masked), made when the model is built
                self.casual_mask = Tensor(
                    np.broadcast_to(np.triu(np.ones((S, S), np.float32), 1)[None, None], (B, 1, S, S)).copy(), CD
                )

            def construct(self, tokens):
                bs, seq_len = tokens.shape
                h = self.tok_embeddings(tokens)
                h = self.reshape(h, (bs * seq_len, H))
                freqs_cis = self.freqs_mgr(seq_len)
                for layer in self.layers:
                    h = layer(h, freqs_cis, self.casual_mask, bs, seq_len)
                return self.norm_out(h)

        class LlamaForCausalLM(nn.Cell):
            def __init__(self):
                super().__init__()
                self.model = LlamaModel()
                self.lm_head = Linear(W["head"], "lm_head.weight")

            def construct(self, input_ids):
                return self.lm_head(self.model(input_ids))  # [b*s, V]

        return LlamaForCausalLM()

    # ================================================================================================ run
    model = build_hfms() if impl == "hfms" else build_mf()
    if f16:  # amp "auto": white-listed ops (MatMul, BatchMatMul, linear, ...) cast to fp16 per call, like autocast
        model = ms.amp.auto_mixed_precision(model, "auto", dtype=ms.float16)
    opt = nn.SGD(model.trainable_params(), learning_rate=LR)

    def forward_fn(input_ids, labels):
        logits = model(input_ids)
        return ops.cross_entropy(logits.reshape(-1, V).astype(ms.float32), labels.reshape(-1))

    grad_fn = ms.value_and_grad(forward_fn, None, opt.parameters)
    ids, labels = Tensor(ids_np), Tensor(labels_np)
    debugger.start(model)
    loss, grads = grad_fn(ids, labels)
    opt(grads)
    debugger.stop()
    debugger.step()
    print(f"[{impl} {args.prec} {bug} L{L}] loss {float(loss.asnumpy()):.7f}", flush=True)


# ------------------------------------------------------------------------------ boundaries, by construction
LAYOUT = {"hfms": "[b, s, h]", "mf": "[b*s, h]"}


def boundaries(impl: str) -> list[tuple[str, str, dict[str, str]]]:
    """(role, cell name, {tensor label: slot}) for every cell boundary of `impl` that carries a tensor of the shared
    math. Slots name a forward row's place: input_args.N, output.N. Labels: ids (token ids), emb, h{i} (the residual
    stream entering layer i; h{NL} leaves the last), m{i} (layer i's stream after the attention add), n1_{i}/n2_{i}
    (the two normed inputs), qkv{i} (q, k, v projections, concatenated), ctx{i} (attention output before the output
    projection), attn{i} (after it), gu{i} (gate and up projections, concatenated), act{i} (silu(gate) * up), mlp{i}
    (the MLP output), fh (final normed hidden), logits."""
    hf = impl == "hfms"
    out: list[tuple[str, str, dict[str, str]]] = [
        ("emb", "model.embed_tokens" if hf else "model.tok_embeddings", {"ids": "input_args.0", "emb": "output.0"}),
        ("body", "model", {"ids": "input_args.0", "fh": "output.0"}),
    ]
    for i in range(NL):
        p = f"model.layers.{i}"
        if hf:
            names = {
                "in_norm": f"{p}.input_layernorm",
                "attn": f"{p}.self_attn",
                "qkv": ";".join(f"{p}.self_attn.{n}_proj" for n in "qkv"),
                "o": f"{p}.self_attn.o_proj",
                "post_norm": f"{p}.post_attention_layernorm",
                "mlp": f"{p}.mlp",
                "gate_up": f"{p}.mlp.gate_proj;{p}.mlp.up_proj",
                "down": f"{p}.mlp.down_proj",
            }
        else:
            names = {
                "in_norm": f"{p}.attention_norm",
                "attn": f"{p}.attention",
                "qkv": f"{p}.attention.w_qkv",
                "o": f"{p}.attention.wo",
                "post_norm": f"{p}.ffn_norm",
                "mlp": f"{p}.feed_forward",
                "gate_up": f"{p}.feed_forward.w_gate_hidden",
                "down": f"{p}.feed_forward.w2",
            }
        io = {
            "in_norm": {f"h{i}": "input_args.0", f"n1_{i}": "output.0"},
            "attn": {f"n1_{i}": "input_args.0", f"attn{i}": "output.0"},
            "qkv": {f"n1_{i}": "input_args.0", f"qkv{i}": "output.0"},
            "o": {f"ctx{i}": "input_args.0", f"attn{i}": "output.0"},
            "post_norm": {f"m{i}": "input_args.0", f"n2_{i}": "output.0"},
            "mlp": {f"n2_{i}": "input_args.0", f"mlp{i}": "output.0"},
            "gate_up": {f"n2_{i}": "input_args.0", f"gu{i}": "output.0"},
            "down": {f"act{i}": "input_args.0", f"mlp{i}": "output.0"},
        }
        out.append((f"{i}.layer", p, {f"h{i}": "input_args.0", f"h{i + 1}": "output.0"}))
        out += [(f"{i}.{role}", names[role], io[role]) for role in io]
    out.append(("final_norm", "model.norm" if hf else "model.norm_out", {f"h{NL}": "input_args.0", "fh": "output.0"}))
    out.append(("head", "lm_head", {"fh": "input_args.0", "logits": "output.0"}))
    return out


def pairs_between(npu: str, bench: str) -> list[dict]:
    """The boundary pairs of the two trees: same role, at least one tensor label in common; io = the slots."""
    bb = {role: (name, io) for role, name, io in boundaries(bench)}
    res = []
    for role, name, io in boundaries(npu):
        if role not in bb:
            continue
        bname, bio = bb[role]
        common = [lab for lab in io if lab in bio]
        if not common:
            continue
        notes = []
        if ";" in name or ";" in bname:
            notes.append("merged: the ';' side's outputs concatenated along the last dim")
        if LAYOUT[npu] != LAYOUT[bench] and role != "emb":
            notes.append(f"layout {LAYOUT[npu]} vs {LAYOUT[bench]}")
        res.append(
            {
                "npu": name,
                "bench": bname,
                "role": role,
                "io": [[io[lab], bio[lab], lab] for lab in common],
                "note": "; ".join(notes),
            }
        )
    return res


def bug_modules(impl: str, bug: str, layer: int) -> list[str]:
    """The bug's cells in the npu implementation, innermost first."""
    p = f"model.layers.{layer}"
    if impl == "hfms":
        return {"scale": [f"{p}.mlp.down_proj", f"{p}.mlp"], "attn": [f"{p}.self_attn"]}[bug]
    return {"scale": [f"{p}.feed_forward.w2", f"{p}.feed_forward"], "attn": [f"{p}.attention"]}[bug]


# ------------------------------------------------------------------------------------- the case list and build
BUG_LAYER = 1
CASES = [  # (npu, bench, precision, bug)
    ("mf", "hfms", "fp32", "none"),
    ("hfms", "mf", "fp32", "none"),
    ("hfms", "hfms", "fp32", "none"),
    ("mf", "hfms", "fp32", "scale"),
    ("hfms", "mf", "fp32", "scale"),
    ("mf", "hfms", "fp32", "attn"),
    ("hfms", "mf", "fp32", "attn"),
    ("mf", "hfms", "fp16", "none"),
    ("mf", "hfms", "fp16", "scale"),
    ("hfms", "mf", "fp16", "scale"),
]
# stack.json holds the paths of the run: written as in shared/fixtures (site-packages and the training script)
STACK_PATHS = [
    (re.compile(r"/[^,\s\"']*?/site-packages/"), "/usr/local/lib/python3.11/site-packages/"),
    (re.compile(r"/[^,\s\"']*?/make_ms_impls\.py"), "/home/user/train/make_ms_impls.py"),
]


def case_name(npu, bench, prec, bug) -> str:
    return f"impl_{npu}_vs_{bench}_{prec}_{bug}" + (f"_L{BUG_LAYER}" if bug != "none" else "")


def run_key(impl, prec, bug) -> str:
    return f"{impl}_{prec}_{bug}" + (f"_L{BUG_LAYER}" if bug != "none" else "")


def _load(run: Path):
    r = run / "step0" / "rank"
    return json.loads((r / "dump.json").read_text())["data"], json.loads((r / "construct.json").read_text())


def _leaves(v):
    if isinstance(v, dict):
        if "type" in v and ("Max" in v or "value" in v):
            yield v
        else:
            for x in v.values():
                yield from _leaves(x)
    elif isinstance(v, list):
        for x in v:
            yield from _leaves(x)


def _sig(leaf: dict):
    return tuple(leaf.get(k) for k in ("type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "value"))


def data_api_forward(data: dict) -> list[str]:
    return [k for k in data if not k.startswith("Cell.") and k.endswith(".forward")]


def direct_twin(bug_data: dict, twin_data: dict) -> str | None:
    """The first forward API call (dump order) whose inputs, arguments or outputs differ."""
    for k in data_api_forward(bug_data):
        a, b = bug_data[k], twin_data.get(k)
        if b is not None and [_sig(x) for x in _leaves(a)] != [_sig(x) for x in _leaves(b)]:
            return k
    return None


def module_row(construct: dict, name: str, phase: str = "forward") -> str:
    """`Cell.<name>.<Class>.forward.0` (or backward) from the dump's construct.json."""
    hits = [
        k
        for k in construct
        if k.startswith(f"Cell.{name}.") and k.endswith(f".{phase}.0") and k[len(f"Cell.{name}.") :].count(".") == 2
    ]
    assert len(hits) == 1, (name, hits)
    return hits[0]


def _combine(stats: list[dict]) -> dict:
    """Statistics of the concatenation: exact for Max, Min, Norm (sum of squares), Mean (weighted by counts)."""
    tot = [s["numel"] for s in stats]
    return {
        "Max": max(s["Max"] for s in stats),
        "Min": min(s["Min"] for s in stats),
        "Norm": sum(s["Norm"] ** 2 for s in stats) ** 0.5,
        "Mean": sum(s["Mean"] * t for s, t in zip(stats, tot)) / sum(tot),
        "numel": sum(tot),
    }


def _slot(row: dict, slot: str):
    kind, key = slot.split(".", 1)
    v = row["input_kwargs"][key] if kind == "input_kwargs" else row[kind][int(key)]
    assert isinstance(v, dict) and "Max" in v, (slot, v)
    numel = 1
    for d in v["shape"]:
        numel *= d
    return {"Max": v["Max"], "Min": v["Min"], "Norm": v["Norm"], "Mean": v["Mean"], "numel": numel}


def _close(a: dict, b: dict, tol: float) -> str | None:
    scale = max(abs(a["Norm"]) / max(a.get("numel", 1), 1) ** 0.5, 1e-6)
    for k in ("Max", "Min", "Norm", "Mean"):
        if abs(a[k] - b[k]) > tol * max(abs(a[k]), abs(b[k]), scale):
            return f"{k}: {a[k]} vs {b[k]}"
    return None


def check_pairs(pairs: list[dict], nd: dict, nc: dict, bd: dict, bc: dict, tol: float) -> tuple[int, list[str]]:
    """Sanity check of the construction on a no-bug fp32 run: the paired slots' statistics agree (merged ones
    combined exactly), and so do the gradients of the paired outputs (backward rows' input.N). Not how the pairs are
    made."""
    bad, n = [], 0
    for p in pairs:
        for ns, bs, lab in p["io"]:
            slots = [("forward", ns, bs)]
            if ns.startswith("output.") and bs.startswith("output."):
                slots.append(("backward", "input." + ns.split(".")[1], "input." + bs.split(".")[1]))
            for phase, a_slot, b_slot in slots:
                n += 1
                sides = []
                for names, data, con, slot in ((p["npu"], nd, nc, a_slot), (p["bench"], bd, bc, b_slot)):
                    parts = [_slot(data[module_row(con, m, phase)], slot) for m in names.split(";")]
                    merged = len(parts) > 1 and (phase == "backward" or slot.startswith("output."))
                    sides.append(_combine(parts) if merged else parts[0])
                why = _close(sides[0], sides[1], tol)
                if why:
                    bad.append(f"{p['npu']} {phase} {a_slot} vs {p['bench']} {b_slot} ({lab}) {why}")
    return n, bad


def build_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="make_ms_impls.py build")
    p.add_argument("--work", default="/tmp/impl_ms", help="work folder (runs/ and cases/)")
    p.add_argument("--ref", default="/tmp/msvenv/bin/python", help="python of the MindSpore + msprobe virtualenv")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--no-pack", action="store_true")
    a = p.parse_args(argv)
    work = Path(a.work)
    runs, cases_dir = work / "runs", work / "cases"
    runs.mkdir(parents=True, exist_ok=True)
    me = Path(__file__).resolve()
    need = {}
    for npu, bench, prec, bug in CASES:
        need[run_key(npu, prec, bug)] = (npu, prec, bug)
        need[run_key(bench, prec, "none")] = (bench, prec, "none")
        need[run_key(npu, prec, "none")] = (npu, prec, "none")  # the twin

    def do(item):
        key, (impl, prec, bug) = item
        if (runs / key / "step0" / "rank" / "dump.json").is_file():
            return key, 0
        cmd = [
            a.ref,
            str(me),
            "--impl",
            impl,
            "--prec",
            prec,
            "--bug",
            bug,
            "--layer",
            str(BUG_LAYER),
            "--out",
            str(runs / key),
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        (runs / f"{key}.log").write_text(r.stdout + r.stderr)
        if r.returncode:
            print(f"FAILED {key}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}", file=sys.stderr)
        return key, r.returncode

    with ThreadPoolExecutor(a.jobs) as ex:
        for key, rc in ex.map(do, sorted(need.items())):
            print(f"run {key}: {'ok' if rc == 0 else 'FAILED'}", flush=True)
            assert rc == 0, key
    for key in sorted(need):
        print(f"loss {key}: " + re.findall(r"loss (\S+)", (runs / f"{key}.log").read_text())[-1])

    # checks on the runs: the same call list for every bug of an implementation and precision, and the first
    # forward call is inside the embedding (no weight conversion or input preparation call inside the dump)
    calls = {}
    for key in sorted(need):
        data, con = _load(runs / key)
        impl, prec, _ = need[key]
        fc = data_api_forward(data)
        emb = module_row(con, "model.embed_tokens" if impl == "hfms" else "model.tok_embeddings")
        assert con.get(fc[0]) == emb, (key, fc[0], con.get(fc[0]))
        calls.setdefault((impl, prec), {})[key] = fc
    for (impl, prec), per in sorted(calls.items()):
        lists = list(per.values())
        same = all(x == lists[0] for x in lists)
        print(f"calls {impl} {prec}: {len(lists[0])} forward API calls, identical across {sorted(per)}: {same}")
        assert same, (impl, prec)

    cases_dir.mkdir(exist_ok=True)
    names = []
    for npu, bench, prec, bug in CASES:
        name = case_name(npu, bench, prec, bug)
        names.append(name)
        d = cases_dir / name
        if d.exists():
            shutil.rmtree(d)
        npu_key, bench_key = run_key(npu, prec, bug), run_key(bench, prec, "none")
        for side, key in (("npu", npu_key), ("bench", bench_key)):
            dst = d / side / "step0" / "rank"
            dst.mkdir(parents=True)
            for fn in ("dump.json", "construct.json", "stack.json"):
                text = (runs / key / "step0" / "rank" / fn).read_text()
                if fn == "stack.json":
                    for pat, rep in STACK_PATHS:
                        text = pat.sub(rep, text)
                (dst / fn).write_text(text)
        (d / "compare.json").write_text(
            json.dumps(
                {"npu_path": "./npu/step0/rank/dump.json", "bench_path": "./bench/step0/rank/dump.json"}, indent=1
            )
        )
        nd, nc = _load(runs / npu_key)
        pairs = pairs_between(npu, bench)
        origin, direct = [], None
        if bug != "none":
            td, _ = _load(runs / run_key(npu, prec, "none"))
            direct = direct_twin(nd, td)
            mods = [module_row(nc, m) for m in bug_modules(npu, bug, BUG_LAYER)]
            assert direct and nc.get(direct) == mods[0], (name, direct, nc.get(direct), mods)
            origin = [direct] + mods
        truth = {
            "case": name,
            "impl": {"npu": npu, "bench": bench},
            "same_code": npu == bench,
            "precision": prec,
            "kind": bug,
            "layer": BUG_LAYER if bug != "none" else None,
            "factor": FACTOR if bug == "scale" else None,
            "phase": "forward" if bug != "none" else None,
            "origin": origin,
            "twin": {"direct": direct} if direct else None,
            "pairs": [[x["npu"], x["bench"]] for x in pairs],
            "pairs_io": pairs,
            "same_as": {},
            "how": (
                "origin: the first forward API call of the twin npu(bug) vs npu(no bug), same implementation and "
                "precision, whose outputs or arguments differ (twin.direct), and the bug's cells in the npu "
                "implementation (forward rows), innermost first; pairs: by construction of the implementations "
                "(make_ms_impls.boundaries), not from statistics"
            ),
        }
        (d / "TRUTH.json").write_text(json.dumps(truth, indent=1))
        if prec == "fp32":  # the construction checked on the no-bug fp32 runs (statistics of paired slots agree)
            cd, cc = _load(runs / run_key(npu, "fp32", "none"))
            bd, bc = _load(runs / bench_key)
            n, bad = check_pairs(pairs, cd, cc, bd, bc, 1e-4)
            print(f"pair check {name}: {n} paired slots, {len(bad)} differ" + "".join("\n  " + b for b in bad[:10]))
            assert not bad, name
        print(f"case {name}: {len(pairs)} pairs, origin={origin}", flush=True)

    if not a.no_pack:
        archive = me.parent / "impl_ms.tar.xz"
        subprocess.run(
            [
                "tar",
                "-cJf",
                str(archive),
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "--sort=name",
                "--mtime=2026-01-01 00:00:00",
                "-C",
                str(cases_dir),
                *sorted(names),
            ],
            check=True,
            env=dict(os.environ, XZ_OPT="-9e"),
        )
        print(f"{archive.name}: {len(names)} cases, {archive.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "build":
        build_main(sys.argv[2:])
    else:
        dump_main(sys.argv[1:])
