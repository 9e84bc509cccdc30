#!/usr/bin/env python
"""Makes the `impl_*` cases (issue #30 item 7): real dumps of ONE small Llama-like decoder written in five
implementations from the same weights, with the reference dumper (mindstudio-probe 8.3.3, torch 2.13 CPU).

Two modes.

1. One dump (in the reference virtualenv):
       /tmp/refvenv/bin/python make_impls.py --impl vllm --prec bf16 --bug scale --layer 1 --out DIR
2. Every run, every case with its TRUTH.json, the checks and the archive:
       python3 make_impls.py build --work /tmp/impl --ref /tmp/refvenv/bin/python
   `--set heldout` builds the held-aside set instead (impl_heldout.tar.xz; work folder /tmp/impl_heldout), and
   `--set tuning2` a second tuning set (impl_tuning2.tar.xz; work folder /tmp/impl_tuning2), `--set tuning3` the
   second set's cases on a third model (seed 99, 6 layers, hidden 64, 8 query and 4 key/value heads, intermediate
   128; impl_tuning3.tar.xz), `--set tuning4` on a fourth (seed 2027, 5 layers, hidden 96, 6 query and 3 key/value
   heads, intermediate 160; `--no-pack`: scored from its work folder, not kept in the repository).
Both modes take --seed (weights generator), --layers, --hidden, --heads, --kv-heads and --intermediate. A dump's
defaults are the model below; build's are its set's model (tuning: the model below; heldout: seed 777, 4 layers,
hidden 48, 6 query and 2 key/value heads, intermediate 96; tuning2: seed 4242, 5 layers, hidden 40, 5 query heads
and 1 key/value head, intermediate 80).

The model (all implementations): vocab 64, hidden 32, 3 layers, 4 query heads and 2 key/value heads (head dim 8,
grouped-query attention), RMSNorm (eps 1e-6), rotary embeddings (base 10000, neox/rotate-half style), SwiGLU
(intermediate 64), the head tied to the embedding, next-token cross-entropy, one plain SGD step (lr 0.05);
batch 2, sequence 8, torch.set_num_threads(1). The weights are drawn once, in HF layout, from a fixed torch
Generator (seed 1234) and converted to each implementation's layout BEFORE debugger.start (no conversion call is
dumped). Implementations (each its own nn.Module tree; class names as in the projects they imitate):
  hf        HF transformers Llama: model.embed_tokens, model.rotary_emb, model.layers.N.{input_layernorm,
            self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj, mlp.act_fn}, model.norm,
            lm_head; [b, s, h]; eager attention (repeat_kv, matmul * scaling, additive causal mask, softmax in fp32)
  vllm      vLLM Llama: qkv_proj (QKVParallelLinear) and gate_up_proj (MergedColumnParallelLinear) merged, linear
            layers return (output, bias), SiluAndMul, per-attention RotaryEmbedding(positions, q, k) from a cos/sin
            cache, Attention (per-sequence SDPA, causal, repeat_interleave for GQA), RMSNorm fused with the residual
            add (norm(x, residual) -> (normed, x + residual); layer 0's input norm takes x alone), decoder layers
            return (hidden, residual), logits by a LogitsProcessor(lm_head, hidden); tokens flattened to [b*s, h]
  fsdp      the hf model wrapped as FSDP's auto-wrap does: the root and every decoder layer inside a module of class
            FullyShardedDataParallel holding `_fsdp_wrapped_module` (a plain wrapper, no real FSDP); with
            --recompute each decoder layer under activation checkpointing (torch.utils.checkpoint, non-reentrant:
            the layer's calls are dumped again, as `forward.1`, during the backward pass; impl_recompute.tar.xz)
  megatron  Megatron-core GPTModel: embedding.word_embeddings, rotary_pos_emb, decoder.layers.N.{input_layernorm,
            self_attention.{linear_qkv, core_attention(.scale_mask_softmax), linear_proj}, pre_mlp_layernorm,
            mlp.{linear_fc1, linear_fc2}}, decoder.final_layernorm, output_layer(weight=shared embedding);
            [s, b, h]; linear_qkv interleaved per query group ([q heads of group g, k_g, v_g]), linear_fc1 =
            [gate; up] with glu (chunk, silu, mul) as a function; linear layers by torch.matmul, returning (out,
            bias); baddbmm with alpha = softmax scale, masked_fill_(-10000) and softmax; the loss per token in [s, b]
  fused     the hf tree, but F.scaled_dot_product_attention (is_causal, enable_gqa, scale) for the attention and a
            single F.rms_norm call for every RMSNorm
Precision: fp32, or bf16 autocast (forward and loss), the SAME on both sides of a case.
Bugs (npu side only, at --layer, in the implementation's own modules):
  scale  the output of the linear op inside the layer's MLP down projection x1.1 (hf/fsdp/fused/vllm
         mlp.down_proj's F.linear, megatron mlp.linear_fc2's torch.matmul): a wrapper put in place of the torch
         function before msprobe is imported, armed by that module's hooks, computing with the captured originals
  attn   the softmax scale of that layer's attention 1/head_dim instead of 1/sqrt(head_dim)
  norm   the eps of that layer's post-attention norm (megatron: pre_mlp_layernorm) 1e-1 instead of 1e-6 (not for
         fused: the reference dumper does not dump F.rms_norm, so no API call of the norm would differ)
  gate   the output of the linear op of that layer's MLP gate projection x1.1 (hf/fsdp/fused mlp.gate_proj's
         F.linear; the gate half of vllm mlp.gate_up_proj's F.linear and of megatron mlp.linear_fc1's torch.matmul),
         by the same wrapper as scale
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

IMPLS = ["hf", "vllm", "fsdp", "megatron", "fused"]
PRECS = ["fp32", "bf16"]
BUGS = ["none", "scale", "attn", "norm", "gate"]
V, H, NH, NKV, HD, FF, NL, B, S = 64, 32, 4, 2, 8, 64, 3, 2, 8
SEED, DATA_SEED, FACTOR = 1234, 4321, 1.1
EPS, BAD_EPS = 1e-6, 1e-1  # RMSNorm eps; the `norm` bug's eps

# the model's size and weights seed: today's constants above are the defaults (the tuning set, impl_cases.tar.xz)
MODEL_DEFAULTS = {"seed": SEED, "layers": NL, "hidden": H, "heads": NH, "kv_heads": NKV, "intermediate": FF}


def configure(seed: int, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int) -> None:
    """Set the model globals (SEED, NL, H, NH, NKV, HD, FF) that the dump and the boundaries read."""
    global SEED, NL, H, NH, NKV, HD, FF
    assert hidden % heads == 0 and heads % kv_heads == 0 and layers >= 1, (hidden, heads, kv_heads, layers)
    SEED, NL, H, NH, NKV, HD, FF = seed, layers, hidden, heads, kv_heads, hidden // heads, intermediate


def add_model_args(p: argparse.ArgumentParser, defaults: dict | None) -> None:
    """--seed, --layers, --hidden, --heads, --kv-heads, --intermediate (None: the case set's model, in build)."""
    d = defaults or {}
    p.add_argument("--seed", type=int, default=d.get("seed"), help="weights generator seed (today's: 1234)")
    p.add_argument("--layers", type=int, default=d.get("layers"), help="decoder layers (today's: 3)")
    p.add_argument("--hidden", type=int, default=d.get("hidden"), help="hidden size (today's: 32)")
    p.add_argument("--heads", type=int, default=d.get("heads"), help="query heads (today's: 4)")
    p.add_argument("--kv-heads", type=int, default=d.get("kv_heads"), help="key/value heads (today's: 2)")
    p.add_argument("--intermediate", type=int, default=d.get("intermediate"), help="MLP width (today's: 64)")


def model_of(args) -> dict:
    return {k: getattr(args, k) for k in MODEL_DEFAULTS}


# --------------------------------------------------------------------------------------------- one dump (refvenv)
def dump_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", required=True, choices=IMPLS)
    p.add_argument("--prec", default="fp32", choices=PRECS)
    p.add_argument("--bug", default="none", choices=BUGS)
    p.add_argument("--layer", type=int, default=1)
    p.add_argument("--out", required=True)
    p.add_argument("--tp", type=int, default=1, help="megatron only: tensor-parallel ranks (gloo, one process each)")
    p.add_argument(
        "--recompute",
        action="store_true",
        help="fsdp only: activation checkpointing of every decoder layer (its calls run again in backward)",
    )
    add_model_args(p, MODEL_DEFAULTS)
    args = p.parse_args(argv)
    assert not args.recompute or args.impl == "fsdp", "--recompute: fsdp only"
    impl, bug, L = args.impl, args.bug, args.layer
    configure(**model_of(args))
    assert 0 <= L < NL, (L, NL)
    assert args.tp == 1 or (impl == "megatron" and NKV % args.tp == 0 and FF % args.tp == 0), args.tp
    if args.tp > 1 and "RANK" not in os.environ:  # one process per rank, each dumping its own rank folder
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        procs = [subprocess.Popen([sys.executable, __file__, *argv],
                                  env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(args.tp),
                                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
                 for r in range(args.tp)]  # fmt: skip
        codes = [q.wait() for q in procs]
        assert not any(codes), codes
        return

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(1)
    TP, RANK = args.tp, int(os.environ.get("RANK", "0"))
    import torch.distributed as dist

    if TP > 1:
        dist.init_process_group("gloo", rank=RANK, world_size=TP)
    # the original functions, captured before msprobe wraps them: calls through these are not dumped
    ORIG = dict(linear=F.linear, matmul=torch.matmul, mul=torch.mul, cat=torch.cat, narrow=torch.narrow)
    # cols: scale only the output's first `cols` columns (the gate part of a merged gate/up projection)
    armed = {"on": False, "cols": None}

    def bump(out):
        if armed["cols"] is None:
            return ORIG["mul"](out, FACTOR)
        c = armed["cols"]
        return ORIG["cat"](
            [ORIG["mul"](ORIG["narrow"](out, -1, 0, c), FACTOR), ORIG["narrow"](out, -1, c, out.shape[-1] - c)], -1
        )

    if bug in ("scale", "gate"):

        def linear(input, weight, bias=None):
            out = ORIG["linear"](input, weight, bias)
            if armed["on"]:
                armed["on"] = False
                out = bump(out)
            return out

        def matmul(input, other, *, out=None):
            res = ORIG["matmul"](input, other)
            if armed["on"]:
                armed["on"] = False
                res = bump(res)
            return res

        F.linear, torch.matmul = linear, matmul

    from msprobe.pytorch import PrecisionDebugger, seed_all  # after the replacements

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
    seed_all(seed=SEED, mode=False)
    debugger = PrecisionDebugger(config_path=cfg_path)

    # ---- the weights, HF layout, drawn once (same for every implementation)
    G = torch.Generator().manual_seed(SEED)

    def rnd(*shape, scale):
        return torch.randn(*shape, generator=G) * scale

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
    GD = torch.Generator().manual_seed(DATA_SEED)
    tok = torch.randint(0, V, (B, S + 1), generator=GD)
    ids, labels = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()

    def P(t):
        return nn.Parameter(t.detach().clone())

    BASE = 10000.0
    good_scale, bad_scale = HD**-0.5, 1.0 / HD

    def scale_of(i):
        return bad_scale if (bug == "attn" and i == L) else good_scale

    def eps_of(i):  # the post-attention (megatron: pre-MLP) norm's eps of layer i
        return BAD_EPS if (bug == "norm" and i == L) else EPS

    # ================================================================================================ hf / fused
    fused = impl == "fused"

    class LlamaRMSNorm(nn.Module):
        def __init__(self, w, eps=EPS):
            super().__init__()
            self.weight, self.variance_epsilon = P(w), eps

        def forward(self, hidden_states):
            if fused:
                return F.rms_norm(hidden_states, (H,), self.weight, self.variance_epsilon)
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)

    class LlamaRotaryEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            inv_freq = 1.0 / (BASE ** (torch.arange(0, HD, 2, dtype=torch.int64).float() / HD))
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        def forward(self, x, position_ids):
            inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            with torch.autocast(device_type="cpu", enabled=False):
                freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
                emb = torch.cat((freqs, freqs), dim=-1)
                cos, sin = emb.cos(), emb.sin()
            return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    def repeat_kv(hidden_states, n_rep):
        batch, num_key_value_heads, slen, head_dim = hidden_states.shape
        if n_rep == 1:
            return hidden_states
        hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
        return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

    class LlamaAttention(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.head_dim, self.num_key_value_groups, self.scaling = HD, NH // NKV, scale_of(i)
            self.q_proj = nn.Linear(H, NH * HD, bias=False)
            self.k_proj = nn.Linear(H, NKV * HD, bias=False)
            self.v_proj = nn.Linear(H, NKV * HD, bias=False)
            self.o_proj = nn.Linear(NH * HD, H, bias=False)
            for n in "qkvo":
                getattr(self, f"{n}_proj").weight = P(W[f"{i}.{n}"])

        def forward(self, hidden_states, position_embeddings, attention_mask):
            input_shape = hidden_states.shape[:-1]
            hidden_shape = (*input_shape, -1, self.head_dim)
            query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
            if fused:  # sdpa_attention_forward
                attn_output = F.scaled_dot_product_attention(
                    query_states,
                    key_states,
                    value_states,
                    attn_mask=None,
                    is_causal=True,
                    scale=self.scaling,
                    enable_gqa=True,
                )
                attn_weights = None
            else:  # eager_attention_forward
                key_states = repeat_kv(key_states, self.num_key_value_groups)
                value_states = repeat_kv(value_states, self.num_key_value_groups)
                attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
                causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
                attn_weights = attn_weights + causal_mask
                attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
                attn_output = torch.matmul(attn_weights, value_states)
            attn_output = attn_output.transpose(1, 2).contiguous()
            attn_output = attn_output.reshape(*input_shape, -1).contiguous()
            attn_output = self.o_proj(attn_output)
            return attn_output, attn_weights

    class LlamaMLP(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.gate_proj = nn.Linear(H, FF, bias=False)
            self.up_proj = nn.Linear(H, FF, bias=False)
            self.down_proj = nn.Linear(FF, H, bias=False)
            self.act_fn = nn.SiLU()
            for n in ("gate", "up", "down"):
                getattr(self, f"{n}_proj").weight = P(W[f"{i}.{n}"])

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    class LlamaDecoderLayer(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.self_attn = LlamaAttention(i)
            self.mlp = LlamaMLP(i)
            self.input_layernorm = LlamaRMSNorm(W[f"{i}.n1"])
            self.post_attention_layernorm = LlamaRMSNorm(W[f"{i}.n2"], eps_of(i))

        def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
            hidden_states, _ = self.self_attn(
                hidden_states=hidden_states, attention_mask=attention_mask, position_embeddings=position_embeddings
            )
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = self.mlp(hidden_states)
            hidden_states = residual + hidden_states
            return hidden_states

    class LlamaModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, H)
            self.embed_tokens.weight = P(W["embed"])
            self.layers = nn.ModuleList([LlamaDecoderLayer(i) for i in range(NL)])
            self.norm = LlamaRMSNorm(W["norm"])
            self.rotary_emb = LlamaRotaryEmbedding()

        def forward(self, input_ids):
            inputs_embeds = self.embed_tokens(input_ids)
            position_ids = torch.arange(inputs_embeds.shape[1]).unsqueeze(0)
            causal_mask = None
            if not fused:  # eager: the additive causal mask; sdpa: is_causal
                min_dtype = torch.finfo(inputs_embeds.dtype).min
                causal_mask = torch.full((S, S), fill_value=min_dtype, dtype=inputs_embeds.dtype)
                causal_mask = torch.triu(causal_mask, diagonal=1)
                causal_mask = causal_mask[None, None, :, :].expand(input_ids.shape[0], 1, -1, -1)
            hidden_states = inputs_embeds
            position_embeddings = self.rotary_emb(hidden_states, position_ids)
            for decoder_layer in self.layers:
                hidden_states = decoder_layer(
                    hidden_states,
                    attention_mask=causal_mask,
                    position_ids=position_ids,
                    position_embeddings=position_embeddings,
                )
            return self.norm(hidden_states)

    class LlamaForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = LlamaModel()
            self.lm_head = nn.Linear(H, V, bias=False)
            self.lm_head.weight = self.model.embed_tokens.weight  # tied

        def forward(self, input_ids):
            return self.lm_head(self.model(input_ids))

    class FullyShardedDataParallel(nn.Module):
        """Only the module tree of FSDP's auto-wrap: `_fsdp_wrapped_module` segments in the names."""

        def __init__(self, module, recompute=False):
            super().__init__()
            self._fsdp_wrapped_module = module
            self._recompute = recompute

        def forward(self, *args, **kwargs):
            if self._recompute:  # activation checkpointing: the layer runs again in the backward pass
                import torch.utils.checkpoint as checkpoint

                return checkpoint.checkpoint(self._fsdp_wrapped_module, *args, use_reentrant=False, **kwargs)
            return self._fsdp_wrapped_module(*args, **kwargs)

    # ================================================================================================ vllm
    class VocabParallelEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = P(W["embed"])

        def forward(self, input_):
            return F.embedding(input_, self.weight)

    class ParallelLMHead(VocabParallelEmbedding):
        pass

    class _VLinear(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.weight = P(w)

        def forward(self, input_):
            return F.linear(input_, self.weight), None  # quant_method.apply; (output, output_bias)

    class QKVParallelLinear(_VLinear):
        pass

    class MergedColumnParallelLinear(_VLinear):
        pass

    class RowParallelLinear(_VLinear):
        pass

    class RMSNorm(nn.Module):
        def __init__(self, w, eps=EPS):
            super().__init__()
            self.weight, self.variance_epsilon = P(w), eps

        def forward(self, x, residual=None):  # forward_native
            orig_dtype = x.dtype
            x = x.to(torch.float32)
            if residual is not None:
                x = x + residual.to(torch.float32)
                residual = x.to(orig_dtype)
            variance = x.pow(2).mean(dim=-1, keepdim=True)
            x = x * torch.rsqrt(variance + self.variance_epsilon)
            x = x.to(orig_dtype)
            x = x * self.weight
            return x if residual is None else (x, residual)

    class RotaryEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            inv_freq = 1.0 / (BASE ** (torch.arange(0, HD, 2, dtype=torch.float) / HD))
            t = torch.arange(64, dtype=torch.float)
            freqs = torch.einsum("i,j -> ij", t, inv_freq)
            self.register_buffer("cos_sin_cache", torch.cat((freqs.cos(), freqs.sin()), dim=-1), persistent=False)
            self.head_size = HD

        @staticmethod
        def _apply(x, cos, sin):
            cos = cos.unsqueeze(-2).to(x.dtype)
            sin = sin.unsqueeze(-2).to(x.dtype)
            x1, x2 = torch.chunk(x, 2, dim=-1)
            o1 = x1 * cos - x2 * sin
            o2 = x2 * cos + x1 * sin
            return torch.cat((o1, o2), dim=-1)

        def forward(self, positions, query, key):  # forward_native, neox style, rotary_dim == head_size
            positions = positions.flatten()
            num_tokens = positions.shape[0]
            cos_sin = self.cos_sin_cache.index_select(0, positions)
            cos, sin = cos_sin.chunk(2, dim=-1)
            query_shape = query.shape
            query = self._apply(query.view(num_tokens, -1, self.head_size), cos, sin).reshape(query_shape)
            key_shape = key.shape
            key = self._apply(key.view(num_tokens, -1, self.head_size), cos, sin).reshape(key_shape)
            return query, key

    FWD_CTX = {"seq_lens": [S] * B}  # vLLM's forward context (attention metadata), set by the runner

    class Attention(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.num_heads, self.num_kv_heads, self.head_size, self.scale = NH, NKV, HD, scale

        def forward(self, query, key, value):  # the torch SDPA backend: one sequence at a time
            query = query.view(-1, self.num_heads, self.head_size)
            key = key.view(-1, self.num_kv_heads, self.head_size)
            value = value.view(-1, self.num_kv_heads, self.head_size)
            rep = self.num_heads // self.num_kv_heads
            key = key.repeat_interleave(rep, dim=1)
            value = value.repeat_interleave(rep, dim=1)
            outs, start = [], 0
            for n in FWD_CTX["seq_lens"]:
                q = query[start : start + n].movedim(0, 1)
                k = key[start : start + n].movedim(0, 1)
                v = value[start : start + n].movedim(0, 1)
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
                outs.append(o.movedim(1, 0))
                start += n
            return torch.cat(outs, dim=0).reshape(-1, self.num_heads * self.head_size)

    class VLlamaAttention(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.q_size, self.kv_size = NH * HD, NKV * HD
            self.qkv_proj = QKVParallelLinear(torch.cat([W[f"{i}.q"], W[f"{i}.k"], W[f"{i}.v"]], 0))
            self.o_proj = RowParallelLinear(W[f"{i}.o"])
            self.rotary_emb = RotaryEmbedding()
            self.attn = Attention(scale_of(i))

        def forward(self, positions, hidden_states):
            qkv, _ = self.qkv_proj(hidden_states)
            q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
            q, k = self.rotary_emb(positions, q, k)
            attn_output = self.attn(q, k, v)
            output, _ = self.o_proj(attn_output)
            return output

    class SiluAndMul(nn.Module):
        def forward(self, x):
            d = x.shape[-1] // 2
            return F.silu(x[..., :d]) * x[..., d:]

    class VLlamaMLP(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.gate_up_proj = MergedColumnParallelLinear(torch.cat([W[f"{i}.gate"], W[f"{i}.up"]], 0))
            self.down_proj = RowParallelLinear(W[f"{i}.down"])
            self.act_fn = SiluAndMul()

        def forward(self, x):
            x, _ = self.gate_up_proj(x)
            x = self.act_fn(x)
            x, _ = self.down_proj(x)
            return x

    class VLlamaDecoderLayer(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.self_attn = VLlamaAttention(i)
            self.mlp = VLlamaMLP(i)
            self.input_layernorm = RMSNorm(W[f"{i}.n1"])
            self.post_attention_layernorm = RMSNorm(W[f"{i}.n2"], eps_of(i))

        def forward(self, positions, hidden_states, residual):
            if residual is None:
                residual = hidden_states
                hidden_states = self.input_layernorm(hidden_states)
            else:
                hidden_states, residual = self.input_layernorm(hidden_states, residual)
            hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states)
            hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
            hidden_states = self.mlp(hidden_states)
            return hidden_states, residual

    class VLlamaModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = VocabParallelEmbedding()
            self.layers = nn.ModuleList([VLlamaDecoderLayer(i) for i in range(NL)])
            self.norm = RMSNorm(W["norm"])

        def forward(self, input_ids, positions):
            hidden_states = self.embed_tokens(input_ids)
            residual = None
            for layer in self.layers:
                hidden_states, residual = layer(positions, hidden_states, residual)
            hidden_states, _ = self.norm(hidden_states, residual)
            return hidden_states

    class LogitsProcessor(nn.Module):
        def forward(self, lm_head, hidden_states):
            return F.linear(hidden_states, lm_head.weight)  # lm_head.quant_method.apply(lm_head, hidden_states)

    class VLlamaForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = VLlamaModel()
            self.lm_head = ParallelLMHead()
            self.lm_head.weight = self.model.embed_tokens.weight  # tie_weights
            self.logits_processor = LogitsProcessor()

        def forward(self, input_ids, positions):
            return self.model(input_ids, positions)

        def compute_logits(self, hidden_states):
            return self.logits_processor(self.lm_head, hidden_states)

    VLlamaAttention.__name__ = VLlamaAttention.__qualname__ = "LlamaAttention"
    VLlamaMLP.__name__ = VLlamaMLP.__qualname__ = "LlamaMLP"
    VLlamaDecoderLayer.__name__ = VLlamaDecoderLayer.__qualname__ = "LlamaDecoderLayer"
    VLlamaModel.__name__ = VLlamaModel.__qualname__ = "LlamaModel"
    VLlamaForCausalLM.__name__ = VLlamaForCausalLM.__qualname__ = "LlamaForCausalLM"

    # ================================================================================================ megatron
    class MRMSNorm(nn.Module):
        def __init__(self, w, eps=EPS):
            super().__init__()
            self.eps, self.weight = eps, P(w)

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            output = self._norm(x.float()).type_as(x)
            return output * self.weight

    MRMSNorm.__name__ = MRMSNorm.__qualname__ = "RMSNorm"

    class _CopyToTP(torch.autograd.Function):  # copy_to_tensor_model_parallel_region
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()
            dist.all_reduce(grad)
            return grad

    class _ReduceFromTP(torch.autograd.Function):  # reduce_from_tensor_model_parallel_region
        @staticmethod
        def forward(ctx, x):
            x = x.clone()
            dist.all_reduce(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    class _MLinear(nn.Module):
        def __init__(self, w, split=True):
            super().__init__()
            self.weight = P(w) if w is not None else None
            self.split = split and TP > 1

        def forward(self, input_, weight=None):
            weight = self.weight if weight is None else weight
            if self.split and isinstance(self, ColumnParallelLinear):
                input_ = _CopyToTP.apply(input_)
            output = torch.matmul(input_, weight.t())  # linear_with_grad_accumulation_and_async_allreduce
            if self.split and not isinstance(self, ColumnParallelLinear):
                output = _ReduceFromTP.apply(output)
            return output, None

    class ColumnParallelLinear(_MLinear):
        pass

    class MRowParallelLinear(_MLinear):
        pass

    def cols(t, n):  # this rank's n-th part along the last dim
        k = t.shape[-1] // TP
        return t[..., RANK * k : (RANK + 1) * k] if TP > 1 else t

    def rows(t):  # this rank's part along dim 0
        k = t.shape[0] // TP
        return t[RANK * k : (RANK + 1) * k] if TP > 1 else t

    MRowParallelLinear.__name__ = MRowParallelLinear.__qualname__ = "RowParallelLinear"

    class MVocabParallelEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = P(W["embed"])

        def forward(self, input_):
            return F.embedding(input_, self.weight)

    MVocabParallelEmbedding.__name__ = MVocabParallelEmbedding.__qualname__ = "VocabParallelEmbedding"

    class LanguageModelEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = MVocabParallelEmbedding()

        def forward(self, input_ids, position_ids):
            embeddings = self.word_embeddings(input_ids)
            return embeddings.transpose(0, 1).contiguous()  # [b, s, h] -> [s, b, h]

    class MRotaryEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer(
                "inv_freq", 1.0 / (BASE ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD)), persistent=False
            )

        def forward(self, max_seq_len):
            seq = torch.arange(max_seq_len, dtype=self.inv_freq.dtype)
            freqs = torch.outer(seq, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb[:, None, None, :]

    MRotaryEmbedding.__name__ = MRotaryEmbedding.__qualname__ = "RotaryEmbedding"

    def _rotate_half(x):
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def _apply_rotary_pos_emb_bshd(t, freqs):
        cos_ = torch.cos(freqs).to(t.dtype)
        sin_ = torch.sin(freqs).to(t.dtype)
        return (t * cos_) + (_rotate_half(t) * sin_)

    class FusedScaleMaskSoftmax(nn.Module):
        def forward(self, input, mask):  # forward_torch_softmax, mask_func = attention_mask_func
            mask_output = input.masked_fill_(mask, -10000.0)
            return torch.softmax(mask_output, dim=-1)

    class DotProductAttention(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.softmax_scale = scale_of(i)
            self.scale_mask_softmax = FusedScaleMaskSoftmax()
            # Megatron's global memory buffer for the scores, allocated before the dump starts
            self.register_buffer("matmul_input_buffer", torch.zeros(B * NH // TP, S, S), persistent=False)

        def forward(self, query, key, value, attention_mask):
            np_, ng = query.size(2), key.size(2)
            key = key.repeat_interleave(np_ // ng, dim=2)
            value = value.repeat_interleave(np_ // ng, dim=2)
            output_size = (query.size(1), query.size(2), query.size(0), key.size(0))
            query = query.reshape(output_size[2], output_size[0] * output_size[1], -1)
            key = key.view(output_size[3], output_size[0] * output_size[1], -1)
            matmul_result = torch.baddbmm(
                self.matmul_input_buffer,
                query.transpose(0, 1),
                key.transpose(0, 1).transpose(1, 2),
                beta=0.0,
                alpha=self.softmax_scale,
            )
            attention_scores = matmul_result.view(*output_size)
            attention_probs = self.scale_mask_softmax(attention_scores, attention_mask)
            output_size = (value.size(1), value.size(2), query.size(0), value.size(3))
            value = value.view(value.size(0), output_size[0] * output_size[1], -1)
            attention_probs = attention_probs.view(output_size[0] * output_size[1], output_size[2], -1)
            context = torch.bmm(attention_probs, value.transpose(0, 1))
            context = context.view(*output_size)
            context = context.permute(2, 0, 1, 3).contiguous()
            return context.view(context.size(0), context.size(1), -1)

    class SelfAttention(nn.Module):
        def __init__(self, i):
            super().__init__()
            hpg = NH // NKV
            q = W[f"{i}.q"].view(NKV, hpg * HD, H)
            k = W[f"{i}.k"].view(NKV, HD, H)
            v = W[f"{i}.v"].view(NKV, HD, H)
            self.linear_qkv = ColumnParallelLinear(rows(torch.cat([q, k, v], dim=1)).reshape(-1, H))
            self.core_attention = DotProductAttention(i)
            self.linear_proj = MRowParallelLinear(cols(W[f"{i}.o"], 0))

        def forward(self, hidden_states, attention_mask, rotary_pos_emb=None):
            hpg = NH // NKV
            mixed_qkv, _ = self.linear_qkv(hidden_states)
            new_shape = mixed_qkv.size()[:-1] + (NKV // TP, (hpg + 2) * HD)
            mixed_qkv = mixed_qkv.view(*new_shape)
            query, key, value = torch.split(mixed_qkv, [hpg * HD, HD, HD], dim=3)
            query = query.reshape(query.size(0), query.size(1), -1, HD)
            query = _apply_rotary_pos_emb_bshd(query, rotary_pos_emb)
            key = _apply_rotary_pos_emb_bshd(key, rotary_pos_emb)
            core_attn_out = self.core_attention(query, key, value, attention_mask)
            output, bias = self.linear_proj(core_attn_out)
            return output, bias

    def glu(x):
        x = torch.chunk(x, 2, dim=-1)
        return F.silu(x[0]) * x[1]

    class MLP(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.linear_fc1 = ColumnParallelLinear(torch.cat([rows(W[f"{i}.gate"]), rows(W[f"{i}.up"])], 0))
            self.linear_fc2 = MRowParallelLinear(cols(W[f"{i}.down"], 0))
            self.activation_func = glu

        def forward(self, hidden_states):
            intermediate_parallel, _ = self.linear_fc1(hidden_states)
            intermediate_parallel = self.activation_func(intermediate_parallel)
            output, output_bias = self.linear_fc2(intermediate_parallel)
            return output, output_bias

    class TransformerLayer(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.input_layernorm = MRMSNorm(W[f"{i}.n1"])
            self.self_attention = SelfAttention(i)
            self.pre_mlp_layernorm = MRMSNorm(W[f"{i}.n2"], eps_of(i))
            self.mlp = MLP(i)

        def forward(self, hidden_states, attention_mask=None, rotary_pos_emb=None):
            residual = hidden_states
            input_layernorm_output = self.input_layernorm(hidden_states)
            attention_output, _ = self.self_attention(
                input_layernorm_output, attention_mask=attention_mask, rotary_pos_emb=rotary_pos_emb
            )
            hidden_states = residual + attention_output
            residual = hidden_states
            pre_mlp_layernorm_output = self.pre_mlp_layernorm(hidden_states)
            mlp_output, _ = self.mlp(pre_mlp_layernorm_output)
            hidden_states = residual + mlp_output
            return hidden_states, None

    class TransformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([TransformerLayer(i) for i in range(NL)])
            self.final_layernorm = MRMSNorm(W["norm"])

        def forward(self, hidden_states, attention_mask, rotary_pos_emb=None):
            for layer in self.layers:
                hidden_states, _ = layer(
                    hidden_states=hidden_states, attention_mask=attention_mask, rotary_pos_emb=rotary_pos_emb
                )
            return self.final_layernorm(hidden_states)

    class GPTModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = LanguageModelEmbedding()
            self.rotary_pos_emb = MRotaryEmbedding()
            self.decoder = TransformerBlock()
            self.output_layer = ColumnParallelLinear(None, split=False)  # the whole vocabulary on every rank

        def forward(self, input_ids, position_ids, attention_mask, labels=None):
            decoder_input = self.embedding(input_ids=input_ids, position_ids=position_ids)
            rotary_pos_emb = self.rotary_pos_emb(decoder_input.size(0))
            hidden_states = self.decoder(
                hidden_states=decoder_input, attention_mask=attention_mask, rotary_pos_emb=rotary_pos_emb
            )
            logits, _ = self.output_layer(hidden_states, weight=self.embedding.word_embeddings.weight)
            if labels is None:
                return logits.transpose(0, 1).contiguous()
            # compute_language_model_loss: per-token loss in [s, b], back to [b, s]
            labels = labels.transpose(0, 1).contiguous()
            loss = F.cross_entropy(logits.float().view(-1, V), labels.view(-1), reduction="none")
            return loss.view(labels.shape).transpose(0, 1).contiguous()

    # ================================================================================================ build + run
    target = None
    if impl in ("hf", "fused", "fsdp"):
        model = LlamaForCausalLM()
        if bug == "scale":
            target = model.model.layers[L].mlp.down_proj
        if bug == "gate":
            target = model.model.layers[L].mlp.gate_proj
        if impl == "fsdp":
            for i in range(NL):
                model.model.layers[i] = FullyShardedDataParallel(model.model.layers[i], args.recompute)
            model = FullyShardedDataParallel(model)
    elif impl == "vllm":
        model = VLlamaForCausalLM()
        if bug == "scale":
            target = model.model.layers[L].mlp.down_proj
        if bug == "gate":  # merged [gate; up]: the gate part only
            target, armed["cols"] = model.model.layers[L].mlp.gate_up_proj, FF
        v_ids, v_pos = ids.reshape(-1), torch.arange(S).repeat(B)  # the runner's flattened batch
    else:
        model = GPTModel()
        if bug == "scale":
            target = model.decoder.layers[L].mlp.linear_fc2
        if bug == "gate":  # linear_fc1 = [gate; up]: the gate part only
            target, armed["cols"] = model.decoder.layers[L].mlp.linear_fc1, FF // TP
        # get_ltor_masks_and_position_ids (the data pipeline): boolean causal mask, True = masked
        m_mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)[None, None].expand(B, 1, S, S)
        m_pos = torch.arange(S).unsqueeze(0).expand(B, S)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    if target is not None:

        def pre(mod, inp):
            armed["on"] = True

        def post(mod, inp, out):
            armed["on"] = False

        target.register_forward_pre_hook(pre)
        target.register_forward_hook(post)

    debugger.start(model=model)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.prec == "bf16"):
        if impl == "vllm":
            hidden = model(v_ids, v_pos)
            logits = model.compute_logits(hidden)
            loss = F.cross_entropy(logits, labels.flatten())
        elif impl == "megatron":
            loss = model(ids, m_pos, m_mask, labels=labels).mean()
        else:
            logits = model(ids)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad()
    debugger.stop()
    debugger.step()
    print(f"[{impl} {args.prec} {bug} L{L}] loss {loss.item():.6f}", flush=True)


# ------------------------------------------------------------------------------ boundaries, by construction
def boundaries(impl: str) -> list[tuple[str, str, dict[str, str]]]:
    """(role, module name, {tensor label: slot}) for every module boundary of `impl` that carries a tensor of the
    shared math. Slots name a forward row's place: input_args.N, input_kwargs.NAME, output.N. Labels: ids (token ids),
    emb, h{i} (the residual stream entering layer i; h{NL} leaves the last), m{i} (layer i's stream after the
    attention add), n1_{i}/n2_{i} (the two normed inputs), qkv{i} (q, k, v projections, concatenated), ctx{i}
    (attention output before the output projection), attn{i} (after it), gu{i} (gate and up projections,
    concatenated), act{i} (silu(gate) * up), mlp{i} (the MLP output), fh (final normed hidden), logits."""
    out: list[tuple[str, str, dict[str, str]]] = []
    if impl in ("hf", "fused", "fsdp"):
        fs = impl == "fsdp"
        root = "_fsdp_wrapped_module." if fs else ""

        def lay(i, rest=""):
            base = f"{root}model.layers.{i}" + ("._fsdp_wrapped_module" if fs else "")
            return base + ("." + rest if rest else "")

        out.append(("emb", f"{root}model.embed_tokens", {"ids": "input_args.0", "emb": "output.0"}))
        out.append(("body", f"{root}model", {"ids": "input_args.0", "fh": "output.0"}))
        for i in range(NL):
            out += [
                (f"{i}.layer", lay(i), {f"h{i}": "input_args.0", f"h{i + 1}": "output.0"}),
                (f"{i}.in_norm", lay(i, "input_layernorm"), {f"h{i}": "input_args.0", f"n1_{i}": "output.0"}),
                (f"{i}.attn", lay(i, "self_attn"), {f"n1_{i}": "input_kwargs.hidden_states", f"attn{i}": "output.0"}),
                (
                    f"{i}.qkv",
                    ";".join(lay(i, f"self_attn.{n}_proj") for n in "qkv"),
                    {f"n1_{i}": "input_args.0", f"qkv{i}": "output.0"},
                ),
                (f"{i}.o", lay(i, "self_attn.o_proj"), {f"ctx{i}": "input_args.0", f"attn{i}": "output.0"}),
                (
                    f"{i}.post_norm",
                    lay(i, "post_attention_layernorm"),
                    {f"m{i}": "input_args.0", f"n2_{i}": "output.0"},
                ),
                (f"{i}.mlp", lay(i, "mlp"), {f"n2_{i}": "input_args.0", f"mlp{i}": "output.0"}),
                (
                    f"{i}.gate_up",
                    lay(i, "mlp.gate_proj") + ";" + lay(i, "mlp.up_proj"),
                    {f"n2_{i}": "input_args.0", f"gu{i}": "output.0"},
                ),
                (f"{i}.down", lay(i, "mlp.down_proj"), {f"act{i}": "input_args.0", f"mlp{i}": "output.0"}),
            ]
        out.append(("final_norm", f"{root}model.norm", {f"h{NL}": "input_args.0", "fh": "output.0"}))
        out.append(("head", f"{root}lm_head", {"fh": "input_args.0", "logits": "output.0"}))
    elif impl == "vllm":
        out.append(("emb", "model.embed_tokens", {"ids": "input_args.0", "emb": "output.0"}))
        out.append(("body", "model", {"ids": "input_args.0", "fh": "output.0"}))
        for i in range(NL):
            p = f"model.layers.{i}"
            if i == 0:
                lay = {"h0": "input_args.1", "mlp0": "output.0", "m0": "output.1"}
                inn = {"h0": "input_args.0", "n1_0": "output.0"}
            else:
                lay = {
                    f"mlp{i - 1}": "input_args.1",
                    f"m{i - 1}": "input_args.2",
                    f"mlp{i}": "output.0",
                    f"m{i}": "output.1",
                }
                inn = {
                    f"mlp{i - 1}": "input_args.0",
                    f"m{i - 1}": "input_args.1",
                    f"n1_{i}": "output.0",
                    f"h{i}": "output.1",
                }
            out += [
                (f"{i}.layer", p, lay),
                (f"{i}.in_norm", f"{p}.input_layernorm", inn),
                (f"{i}.attn", f"{p}.self_attn", {f"n1_{i}": "input_kwargs.hidden_states", f"attn{i}": "output.0"}),
                (f"{i}.qkv", f"{p}.self_attn.qkv_proj", {f"n1_{i}": "input_args.0", f"qkv{i}": "output.0"}),
                (f"{i}.o", f"{p}.self_attn.o_proj", {f"ctx{i}": "input_args.0", f"attn{i}": "output.0"}),
                (f"{i}.core", f"{p}.self_attn.attn", {f"ctx{i}": "output.0"}),
                (
                    f"{i}.post_norm",
                    f"{p}.post_attention_layernorm",
                    {f"attn{i}": "input_args.0", f"h{i}": "input_args.1", f"n2_{i}": "output.0", f"m{i}": "output.1"},
                ),
                (f"{i}.mlp", f"{p}.mlp", {f"n2_{i}": "input_args.0", f"mlp{i}": "output.0"}),
                (f"{i}.gate_up", f"{p}.mlp.gate_up_proj", {f"n2_{i}": "input_args.0", f"gu{i}": "output.0"}),
                (f"{i}.act", f"{p}.mlp.act_fn", {f"gu{i}": "input_args.0", f"act{i}": "output.0"}),
                (f"{i}.down", f"{p}.mlp.down_proj", {f"act{i}": "input_args.0", f"mlp{i}": "output.0"}),
            ]
        out.append(
            (
                "final_norm",
                "model.norm",
                {f"mlp{NL - 1}": "input_args.0", f"m{NL - 1}": "input_args.1", "fh": "output.0", f"h{NL}": "output.1"},
            )
        )
        out.append(("head", "logits_processor", {"fh": "input_args.1", "logits": "output.0"}))
    else:  # megatron
        out.append(("emb", "embedding.word_embeddings", {"ids": "input_args.0", "emb": "output.0"}))
        out.append(("body", "decoder", {"emb": "input_kwargs.hidden_states", "fh": "output.0"}))
        for i in range(NL):
            p = f"decoder.layers.{i}"
            out += [
                (f"{i}.layer", p, {f"h{i}": "input_kwargs.hidden_states", f"h{i + 1}": "output.0"}),
                (f"{i}.in_norm", f"{p}.input_layernorm", {f"h{i}": "input_args.0", f"n1_{i}": "output.0"}),
                (f"{i}.attn", f"{p}.self_attention", {f"n1_{i}": "input_args.0", f"attn{i}": "output.0"}),
                (f"{i}.qkv", f"{p}.self_attention.linear_qkv", {f"n1_{i}": "input_args.0", f"qkv{i}": "output.0"}),
                (f"{i}.core", f"{p}.self_attention.core_attention", {f"ctx{i}": "output.0"}),
                (f"{i}.o", f"{p}.self_attention.linear_proj", {f"ctx{i}": "input_args.0", f"attn{i}": "output.0"}),
                (f"{i}.post_norm", f"{p}.pre_mlp_layernorm", {f"m{i}": "input_args.0", f"n2_{i}": "output.0"}),
                (f"{i}.mlp", f"{p}.mlp", {f"n2_{i}": "input_args.0", f"mlp{i}": "output.0"}),
                (f"{i}.gate_up", f"{p}.mlp.linear_fc1", {f"n2_{i}": "input_args.0", f"gu{i}": "output.0"}),
                (f"{i}.down", f"{p}.mlp.linear_fc2", {f"act{i}": "input_args.0", f"mlp{i}": "output.0"}),
            ]
        out.append(("final_norm", "decoder.final_layernorm", {f"h{NL}": "input_args.0", "fh": "output.0"}))
        out.append(("head", "output_layer", {"fh": "input_args.0", "logits": "output.0"}))
    return out


def same_as(impl: str) -> dict[str, str]:
    """Modules that carry exactly the tensors of a paired one (wrappers, outer embedding): not in `pairs`."""
    if impl == "fsdp":
        return {
            f"_fsdp_wrapped_module.model.layers.{i}": f"_fsdp_wrapped_module.model.layers.{i}._fsdp_wrapped_module"
            for i in range(NL)
        }
    if impl == "megatron":
        return {"embedding": "embedding.word_embeddings"}
    return {}


LAYOUT = {"hf": "[b, s, h]", "fused": "[b, s, h]", "fsdp": "[b, s, h]", "vllm": "[b*s, h]", "megatron": "[s, b, h]"}


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
        if role.endswith(".qkv") and "megatron" in (npu, bench):
            notes.append(
                "megatron's linear_qkv output is interleaved per query group ([q heads of group g, k_g, "
                "v_g]): the same elements as q;k;v concatenated, permuted"
            )
        if LAYOUT[npu] != LAYOUT[bench] and role not in ("emb",):
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


# ------------------------------------------------------------------------------------- the case lists and build
ORDER = ["vllm", "fsdp", "megatron", "fused", "hf"]
VARIANTS = [("fp32", "none"), ("bf16", "none"), ("bf16", "scale"), ("fp32", "attn")]
BUG_LAYER = 1


def case_list() -> list[dict]:
    """The tuning set (impl_cases.tar.xz): 28 cases, bugs at layer 1."""
    cases = []
    for other in ORDER:
        for prec, bug in VARIANTS:
            cases.append({"npu": "hf", "bench": other, "prec": prec, "bug": bug, "layer": BUG_LAYER})
    for other in ORDER[:-1]:  # the bug in the other implementation's own modules, against hf
        for prec, bug in VARIANTS[2:]:
            cases.append({"npu": other, "bench": "hf", "prec": prec, "bug": bug, "layer": BUG_LAYER})
    return cases


# the held-aside set: (npu, bench, precision, bug, layer); bugs at layers 0 and 2, each kind in both directions.
# No `norm` bug with npu = fused: the reference dumper does not dump F.rms_norm, so no API call of the norm differs.
HELDOUT_BUGS = [
    # the bug in hf's modules, against each other implementation
    ("hf", "vllm", "fp32", "attn", 0),
    ("hf", "vllm", "bf16", "gate", 2),
    ("hf", "fsdp", "bf16", "scale", 2),
    ("hf", "fsdp", "fp32", "norm", 0),
    ("hf", "megatron", "fp32", "scale", 0),
    ("hf", "megatron", "bf16", "norm", 2),
    ("hf", "fused", "bf16", "attn", 2),
    ("hf", "fused", "fp32", "gate", 0),
    ("hf", "hf", "fp32", "scale", 0),
    # the bug in the other implementation's own modules, against hf
    ("vllm", "hf", "bf16", "scale", 0),
    ("vllm", "hf", "fp32", "attn", 2),
    ("vllm", "hf", "bf16", "gate", 2),
    ("vllm", "hf", "bf16", "norm", 0),
    ("fsdp", "hf", "bf16", "attn", 0),
    ("fsdp", "hf", "fp32", "norm", 2),
    ("fsdp", "hf", "fp32", "gate", 0),
    ("megatron", "hf", "fp32", "scale", 2),
    ("megatron", "hf", "bf16", "norm", 0),
    ("megatron", "hf", "fp32", "gate", 2),
    ("fused", "hf", "bf16", "scale", 2),
    ("fused", "hf", "fp32", "attn", 0),
]


def heldout_case_list() -> list[dict]:
    """The held-aside set (impl_heldout.tar.xz): 30 cases on a wider, deeper model with other weights."""
    cases = [
        {"npu": "hf", "bench": other, "prec": prec, "bug": "none", "layer": None}
        for other in ORDER[:-1]
        for prec in ("fp32", "bf16")
    ]
    cases.append({"npu": "hf", "bench": "hf", "prec": "bf16", "bug": "none", "layer": None})
    cases += [
        {"npu": n, "bench": b, "prec": prec, "bug": bug, "layer": layer} for n, b, prec, bug, layer in HELDOUT_BUGS
    ]
    return cases


# the second tuning set: (npu, bench, precision, bug, layer); bugs at layers 0, 3 and 4 (the last), every kind at each
# of the three layers once per direction, each kind in fp32 and bf16. No `norm` bug with npu = fused (see above).
TUNING2_BUGS = [
    # the bug in hf's modules, against each other implementation
    ("hf", "vllm", "fp32", "scale", 0),
    ("hf", "vllm", "bf16", "norm", 3),
    ("hf", "vllm", "fp32", "gate", 4),
    ("hf", "fsdp", "bf16", "attn", 0),
    ("hf", "fsdp", "fp32", "gate", 3),
    ("hf", "fsdp", "bf16", "scale", 4),
    ("hf", "megatron", "fp32", "norm", 0),
    ("hf", "megatron", "bf16", "scale", 3),
    ("hf", "megatron", "fp32", "attn", 4),
    ("hf", "fused", "bf16", "gate", 0),
    ("hf", "fused", "fp32", "attn", 3),
    ("hf", "fused", "bf16", "norm", 4),
    ("hf", "hf", "fp32", "norm", 4),
    # the bug in the other implementation's own modules, against hf
    ("vllm", "hf", "fp32", "attn", 0),
    ("vllm", "hf", "bf16", "gate", 3),
    ("vllm", "hf", "bf16", "norm", 4),
    ("fsdp", "hf", "bf16", "scale", 0),
    ("fsdp", "hf", "fp32", "norm", 3),
    ("fsdp", "hf", "bf16", "attn", 4),
    ("megatron", "hf", "bf16", "norm", 0),
    ("megatron", "hf", "fp32", "scale", 3),
    ("megatron", "hf", "fp32", "gate", 4),
    ("fused", "hf", "bf16", "gate", 0),
    ("fused", "hf", "bf16", "attn", 3),
    ("fused", "hf", "fp32", "scale", 4),
]


def tuning2_case_list() -> list[dict]:
    """The second tuning set (impl_tuning2.tar.xz): 35 cases on a deeper model with one key/value head."""
    cases = [
        {"npu": "hf", "bench": other, "prec": prec, "bug": "none", "layer": None}
        for other in ORDER
        for prec in ("fp32", "bf16")
    ]
    cases += [
        {"npu": n, "bench": b, "prec": prec, "bug": bug, "layer": layer} for n, b, prec, bug, layer in TUNING2_BUGS
    ]
    return cases


# --set: the case list, the archive it is packed into, and the model (overridable by --seed, --layers, ...)
CASE_SETS = {
    "tuning": (case_list, "impl_cases.tar.xz", MODEL_DEFAULTS),
    "heldout": (
        heldout_case_list,
        "impl_heldout.tar.xz",
        {"seed": 777, "layers": 4, "hidden": 48, "heads": 6, "kv_heads": 2, "intermediate": 96},
    ),
    "tuning2": (
        tuning2_case_list,
        "impl_tuning2.tar.xz",
        {"seed": 4242, "layers": 5, "hidden": 40, "heads": 5, "kv_heads": 1, "intermediate": 80},
    ),
    # a third model, scored before any change made for it (docs/align.md); not packed into the repository
    "tuning3": (
        tuning2_case_list,
        "impl_tuning3.tar.xz",
        {"seed": 99, "layers": 6, "hidden": 64, "heads": 8, "kv_heads": 4, "intermediate": 128},
    ),
    # a fourth model, scored once before any change made for it, tuned on since (docs/align.md); not packed
    "tuning4": (
        tuning2_case_list,
        "impl_tuning4.tar.xz",
        {"seed": 2027, "layers": 5, "hidden": 96, "heads": 6, "kv_heads": 3, "intermediate": 160},
    ),
}


def case_name(c: dict) -> str:
    return f"impl_{c['npu']}_vs_{c['bench']}_{c['prec']}_{c['bug']}" + (f"_L{c['layer']}" if c["bug"] != "none" else "")


def run_key(impl, prec, bug, layer) -> str:
    return f"{impl}_{prec}_{bug}" + (f"_L{layer}" if bug != "none" else "")


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


def forward_calls(data: dict) -> list[str]:
    return [k for k in data if k.endswith(".forward") or ".forward." in k]


def direct_twin(bug_data: dict, twin_data: dict) -> str | None:
    """The first forward API call (dump order) whose tensor inputs agree and whose outputs or arguments differ."""
    for k in data_api_forward(bug_data):
        a, b = bug_data[k], twin_data.get(k)
        if b is None:
            continue
        if [_sig(x) for x in _leaves(a)] != [_sig(x) for x in _leaves(b)]:
            return k
    return None


def data_api_forward(data: dict) -> list[str]:
    return [k for k in data if not k.startswith("Module.") and k.endswith(".forward")]


def module_row(construct: dict, name: str) -> str:
    """`Module.<name>.<Class>.forward.0` from the dump's construct.json."""
    hits = [
        k
        for k in construct
        if k.startswith(f"Module.{name}.") and k.endswith(".forward.0") and k[len(f"Module.{name}.") :].count(".") == 2
    ]
    assert len(hits) == 1, (name, hits)
    return hits[0]


def bug_modules(impl: str, bug: str, layer: int) -> list[str]:
    """The bug's modules in the npu implementation, innermost first."""
    i = layer
    if impl == "megatron":
        p = f"decoder.layers.{i}"
        return {
            "scale": [f"{p}.mlp.linear_fc2", f"{p}.mlp"],
            "attn": [f"{p}.self_attention.core_attention", f"{p}.self_attention"],
            "norm": [f"{p}.pre_mlp_layernorm"],
            "gate": [f"{p}.mlp.linear_fc1", f"{p}.mlp"],
        }[bug]
    if impl == "vllm":
        p = f"model.layers.{i}"
        return {
            "scale": [f"{p}.mlp.down_proj", f"{p}.mlp"],
            "attn": [f"{p}.self_attn.attn", f"{p}.self_attn"],
            "norm": [f"{p}.post_attention_layernorm"],
            "gate": [f"{p}.mlp.gate_up_proj", f"{p}.mlp"],
        }[bug]
    p = f"_fsdp_wrapped_module.model.layers.{i}._fsdp_wrapped_module" if impl == "fsdp" else f"model.layers.{i}"
    return {
        "scale": [f"{p}.mlp.down_proj", f"{p}.mlp"],
        "attn": [f"{p}.self_attn"],
        "norm": [f"{p}.post_attention_layernorm"],
        "gate": [f"{p}.mlp.gate_proj", f"{p}.mlp"],
    }[bug]


def _combine(stats: list[dict]) -> dict:
    """Statistics of the concatenation: exact for Max, Min, Norm (sum of squares), Mean (weighted by counts)."""
    tot = [s["numel"] for s in stats]
    return {
        "Max": max(s["Max"] for s in stats),
        "Min": min(s["Min"] for s in stats),
        "Norm": sum(s["Norm"] ** 2 for s in stats) ** 0.5,
        "Mean": sum(s["Mean"] * t for s, t in zip(stats, tot)) / sum(tot),
    }


def _slot(row: dict, slot: str):
    kind, key = slot.split(".", 1)
    v = row["input_kwargs"][key] if kind == "input_kwargs" else row[kind][int(key)]
    assert isinstance(v, dict) and "Max" in v, (slot, v)
    numel = 1
    for d in v["shape"]:
        numel *= d
    return {"Max": v["Max"], "Min": v["Min"], "Norm": v["Norm"], "Mean": v["Mean"], "numel": numel}


def check_pairs(pairs: list[dict], nd: dict, nc: dict, bd: dict, bc: dict, tol: float) -> tuple[int, list[str]]:
    """Sanity check of the construction on a no-bug fp32 run: the paired slots' statistics agree (merged ones
    combined exactly). Not how the pairs are made."""
    bad, n = [], 0
    for p in pairs:
        for ns, bs, lab in p["io"]:
            n += 1
            sides = []
            for names, data, con in ((p["npu"], nd, nc), (p["bench"], bd, bc)):
                parts = [_slot(data[module_row(con, n)], ns if data is nd else bs) for n in names.split(";")]
                sides.append(_combine(parts) if len(parts) > 1 and "output" in (ns if data is nd else bs) else parts[0])
            a, b = sides
            for k in ("Max", "Min", "Norm", "Mean"):
                scale = max(abs(a["Norm"]) / max(a.get("numel", 1), 1) ** 0.5, 1e-6)
                if abs(a[k] - b[k]) > tol * max(abs(a[k]), abs(b[k]), scale):
                    bad.append(f"{p['npu']} {ns} vs {p['bench']} {bs} ({lab}) {k}: {a[k]} vs {b[k]}")
                    break
    return n, bad


def build_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="make_impls.py build")
    p.add_argument(
        "--set",
        default="tuning",
        choices=sorted(CASE_SETS),
        help="the case list, its archive and its model: tuning (impl_cases.tar.xz, today's), heldout "
        "(impl_heldout.tar.xz), tuning2 (impl_tuning2.tar.xz), tuning3 or tuning4 (tuning2's cases, a "
        "third and a fourth model)",
    )
    p.add_argument("--archive", default=None, help="archive file name in this folder (default: the set's)")
    p.add_argument("--work", default=None, help="work folder (default /tmp/impl, or /tmp/impl_<set> for another set)")
    p.add_argument("--ref", default="/tmp/refvenv/bin/python")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--no-pack", action="store_true")
    add_model_args(p, None)
    a = p.parse_args(argv)
    make_cases, archive_name, set_model = CASE_SETS[a.set]
    model = {k: set_model[k] if getattr(a, k) is None else getattr(a, k) for k in MODEL_DEFAULTS}
    configure(**model)
    work = Path(a.work or ("/tmp/impl" if a.set == "tuning" else f"/tmp/impl_{a.set}"))
    runs, cases_dir = work / "runs", work / "cases"
    runs.mkdir(parents=True, exist_ok=True)
    # the cached runs are of one model only
    stamp = work / "model.json"
    if stamp.is_file() and json.loads(stamp.read_text()) != model:
        sys.exit(f"{work} holds runs of another model ({stamp.read_text().strip()}); use another --work")
    stamp.write_text(json.dumps(model))
    print(f"set {a.set}: model {model}", flush=True)
    me = Path(__file__).resolve()
    todo = make_cases()
    need = {}
    for c in todo:
        assert c["bug"] == "none" or 0 <= c["layer"] < NL, c
        assert not (c["npu"] == "fused" and c["bug"] == "norm"), f"{case_name(c)}: F.rms_norm is not dumped"
        need[run_key(c["npu"], c["prec"], c["bug"], c["layer"])] = (c["npu"], c["prec"], c["bug"], c["layer"])
        need[run_key(c["bench"], c["prec"], "none", None)] = (c["bench"], c["prec"], "none", None)
        need[run_key(c["npu"], c["prec"], "none", None)] = (c["npu"], c["prec"], "none", None)  # the twin

    def do(item):
        key, (impl, prec, bug, layer) = item
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
            str(BUG_LAYER if layer is None else layer),
            "--out",
            str(runs / key),
            *[x for k, v in model.items() for x in (f"--{k.replace('_', '-')}", str(v))],
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if r.returncode:
            print(f"FAILED {key}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}", file=sys.stderr)
        return key, r.returncode

    with ThreadPoolExecutor(a.jobs) as ex:
        for key, rc in ex.map(do, sorted(need.items())):
            print(f"run {key}: {'ok' if rc == 0 else 'FAILED'}", flush=True)

    # checks on the runs: the same call list for every precision and bug of an implementation, and the first call
    # is the embedding (no weight conversion or input preparation call inside the dump)
    calls = {}
    for key in sorted(need):
        data, con = _load(runs / key)
        impl = need[key][0]
        fc = data_api_forward(data)
        assert fc[0] == "Functional.embedding.0.forward", (key, fc[:3])
        calls.setdefault(impl, {})[key] = fc
    for impl, per in calls.items():
        lists = list(per.values())
        same = all(x == lists[0] for x in lists)
        print(f"calls {impl}: {len(lists[0])} forward API calls, identical across {sorted(per)}: {same}")
        assert same, impl

    cases_dir.mkdir(exist_ok=True)
    names = []
    for c in todo:
        name = case_name(c)
        names.append(name)
        d = cases_dir / name
        if d.exists():
            shutil.rmtree(d)
        npu_key = run_key(c["npu"], c["prec"], c["bug"], c["layer"])
        bench_key = run_key(c["bench"], c["prec"], "none", None)
        for side, key in (("npu", npu_key), ("bench", bench_key)):
            dst = d / side / "step0" / "rank"
            dst.mkdir(parents=True)
            for fn in ("dump.json", "construct.json"):
                shutil.copy(runs / key / "step0" / "rank" / fn, dst / fn)
        (d / "compare.json").write_text(
            json.dumps(
                {"npu_path": "./npu/step0/rank/dump.json", "bench_path": "./bench/step0/rank/dump.json"}, indent=1
            )
        )
        nd, nc = _load(runs / npu_key)
        pairs = pairs_between(c["npu"], c["bench"])
        origin, direct = [], None
        if c["bug"] != "none":
            td, _ = _load(runs / run_key(c["npu"], c["prec"], "none", None))
            direct = direct_twin(nd, td)
            mods = [module_row(nc, m) for m in bug_modules(c["npu"], c["bug"], c["layer"])]
            assert direct and nc.get(direct) == mods[0], (name, direct, nc.get(direct), mods)
            origin = [direct] + mods
        same = {**same_as(c["npu"]), **same_as(c["bench"])}
        truth = {
            "case": name,
            "impl": {"npu": c["npu"], "bench": c["bench"]},
            "same_code": c["npu"] == c["bench"],
            "precision": c["prec"],
            "kind": c["bug"],
            "layer": c["layer"] if c["bug"] != "none" else None,
            "factor": FACTOR if c["bug"] in ("scale", "gate") else None,
            "phase": "forward" if c["bug"] != "none" else None,
            "origin": origin,
            "twin": {"direct": direct} if direct else None,
            "pairs": [[x["npu"], x["bench"]] for x in pairs],
            "pairs_io": pairs,
            "same_as": {"npu": same_as(c["npu"]), "bench": same_as(c["bench"])} if same else {},
            "how": (
                "origin: the first forward API call of the twin npu(bug) vs npu(no bug), same implementation and "
                "precision, whose outputs or arguments differ (twin.direct), and the bug's modules in the npu "
                "implementation (forward rows), innermost first; pairs: by construction of the implementations "
                "(make_impls.boundaries), not from statistics"
            ),
        }
        (d / "TRUTH.json").write_text(json.dumps(truth, indent=1))
        # the construction checked on the no-bug fp32 runs (statistics of paired slots agree)
        if c["prec"] == "fp32":
            npu_clean = run_key(c["npu"], "fp32", "none", None)
            cd, cc = _load(runs / npu_clean)
            bd, bc = _load(runs / bench_key)
            n, bad = check_pairs(pairs, cd, cc, bd, bc, 1e-4)
            print(f"pair check {name}: {n} paired slots, {len(bad)} differ" + "".join("\n  " + b for b in bad[:10]))
            assert not bad, name
        print(f"case {name}: {len(pairs)} pairs, origin={origin}", flush=True)

    if not a.no_pack:
        archive = me.parent / (a.archive or archive_name)
        subprocess.run(
            ["tar", "-cJf", str(archive), "-C", str(cases_dir), *sorted(names)],
            check=True,
            env=dict(os.environ, XZ_OPT="-9e"),
        )
        print(f"{archive.name}: {len(names)} cases, {archive.stat().st_size} bytes")


# ------------------------------------------------------------------ runs of different code and parallel layout
# (npu impl, npu tp, bench impl, bench tp, precision, bug, layer): issue #30 item 5, impl_tp.tar.xz
TP_CASES = [
    ("megatron", 2, "hf", 1, "fp32", "none", None),
    ("megatron", 2, "hf", 1, "fp32", "scale", 1),
    ("megatron", 2, "hf", 1, "bf16", "none", None),
    ("megatron", 2, "hf", 1, "bf16", "gate", 2),
    ("megatron", 2, "hf", 1, "fp32", "attn", 0),
    ("hf", 1, "megatron", 2, "fp32", "norm", 1),
    ("hf", 1, "megatron", 2, "bf16", "none", None),
    ("vllm", 1, "megatron", 2, "fp32", "scale", 2),
]


def build_tp_main(argv: list[str]) -> None:
    """impl_tp.tar.xz: step folders of rank folders (megatron at TP=2 by gloo processes; the others at TP=1), each
    case with CASE.json (its bug and layer) and compare.json naming the two step folders."""
    p = argparse.ArgumentParser(prog="make_impls.py build-tp")
    p.add_argument("--work", default="/tmp/impl_tp")
    p.add_argument("--ref", default="/tmp/refvenv/bin/python")
    p.add_argument("--no-pack", action="store_true")
    a = p.parse_args(argv)
    configure(**MODEL_DEFAULTS)
    work = Path(a.work)
    runs, cases_dir = work / "runs", work / "cases"
    runs.mkdir(parents=True, exist_ok=True)
    me = Path(__file__).resolve()
    need = {}
    for n_impl, n_tp, b_impl, b_tp, prec, bug, layer in TP_CASES:
        need[f"{n_impl}_tp{n_tp}_{prec}_{bug}_L{layer}"] = (n_impl, n_tp, prec, bug, layer)
        need[f"{b_impl}_tp{b_tp}_{prec}_none_LNone"] = (b_impl, b_tp, prec, "none", None)
    for key, (impl, tp, prec, bug, layer) in need.items():
        if (runs / key / "step0").is_dir():
            continue
        cmd = [a.ref, str(me), "--impl", impl, "--prec", prec, "--bug", bug, "--layer",
               str(BUG_LAYER if layer is None else layer), "--out", str(runs / key), "--tp", str(tp)]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        print(f"run {key}", flush=True)
    shutil.rmtree(cases_dir, ignore_errors=True)
    for n_impl, n_tp, b_impl, b_tp, prec, bug, layer in TP_CASES:
        name = f"tp_{n_impl}{n_tp}_vs_{b_impl}{b_tp}_{prec}_{bug}" + (f"_L{layer}" if layer is not None else "")
        case = cases_dir / name
        shutil.copytree(runs / f"{n_impl}_tp{n_tp}_{prec}_{bug}_L{layer}" / "step0", case / "npu" / "step0")
        shutil.copytree(runs / f"{b_impl}_tp{b_tp}_{prec}_none_LNone" / "step0", case / "bench" / "step0")
        (case / "compare.json").write_text(json.dumps({"npu_path": "npu/step0", "bench_path": "bench/step0"}))
        (case / "CASE.json").write_text(json.dumps({"npu": n_impl, "npu_tp": n_tp, "bench": b_impl, "bench_tp": b_tp,
                                                    "prec": prec, "bug": bug, "layer": layer}))  # fmt: skip
    if not a.no_pack:
        archive = Path(__file__).resolve().parent / "impl_tp.tar.xz"
        subprocess.run(["tar", "-cJf", str(archive), "-C", str(cases_dir), "."], check=True)
        print(f"wrote {archive}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "build":
        build_main(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "build-tp":
        build_tp_main(sys.argv[2:])
    else:
        dump_main(sys.argv[1:])
