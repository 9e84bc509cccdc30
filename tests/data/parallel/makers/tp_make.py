#!/usr/bin/env python
"""Dumps of a small Megatron-style transformer under tensor, pipeline and data parallelism (msprobe 8.3.3 dumper,
torch CPU, gloo). Every layout computes the same math: full weights are created identically and sliced.

Model: VocabParallelEmbedding (tokens -> d), L pre-LN blocks (attention: column-parallel q/k/v, row-parallel o;
MLP: column-parallel fc1, GELU, row-parallel fc2), final LayerNorm, mean over the sequence, a replicated head, cross
entropy; SGD. With tp=1 the plain classes (Embedding, Linear) are used.

  torchrun --nproc_per_node N tp_make.py --tp T --pp P --dp D --out DIR [--bug R] [--summary_mode md5] [--task tensor]

N = T * P * D, Megatron's rank order (rank = t + T * (d + D * p)). --bug R: on global rank R only, the output of the
first fc1 of the last block is scaled by 1.1 (inside F.linear, so the kernel's own output differs).
"""

import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_ORIG_MUL_ = torch.Tensor.mul_
_ORIG_LINEAR = F.linear
BUG = {"on": False, "target": None, "count": 0}


def _linear(x, w, b=None):
    y = _ORIG_LINEAR(x, w, b)
    if BUG["on"] and BUG["count"] == BUG["target"]:
        with torch.no_grad():
            _ORIG_MUL_(y.data, 1.1)
    if BUG["on"]:
        BUG["count"] += 1
    return y


F.linear = _linear

from msprobe.pytorch import PrecisionDebugger, seed_all  # noqa: E402
import torch.distributed as dist  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--tp", type=int, default=1)
p.add_argument("--pp", type=int, default=1)
p.add_argument("--dp", type=int, default=1)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--out", required=True)
p.add_argument("--bug", type=int, default=-1)
p.add_argument("--task", default="statistics", choices=["statistics", "tensor"])
p.add_argument("--summary_mode", default="statistics", choices=["statistics", "md5"])
p.add_argument("--level", default="mix")
p.add_argument("--same_data", action="store_true", help="every DP replica gets replica 0's data")
p.add_argument(
    "--row_bias",
    action="store_true",
    help="row-parallel layers have a bias, added after the all-reduce as Megatron does (an extra "
    "Tensor.__add__ per layer on the sharded side; the plain Linear adds it inside F.linear)",
)
args = p.parse_args()

WORLD = args.tp * args.pp * args.dp
if WORLD > 1:
    dist.init_process_group("gloo")
    RANK = dist.get_rank()
    assert dist.get_world_size() == WORLD
else:
    RANK = 0
T, D = args.tp, args.dp
TP_RANK, DP_RANK, PP_RANK = RANK % T, (RANK // T) % D, RANK // (T * D)


def rank_of(t, d, s):
    return t + T * (d + D * s)


TP_GROUP = DP_GROUP = None
if WORLD > 1:
    for s in range(args.pp):
        for d in range(D):
            g = dist.new_group([rank_of(t, d, s) for t in range(T)])
            if (d, s) == (DP_RANK, PP_RANK):
                TP_GROUP = g
    for s in range(args.pp):
        for t in range(T):
            g = dist.new_group([rank_of(t, d, s) for d in range(D)])
            if (t, s) == (TP_RANK, PP_RANK):
                DP_GROUP = g

os.makedirs(args.out, exist_ok=True)
cfg = {
    "task": args.task,
    "dump_path": args.out,
    "rank": [],
    "step": [],
    "level": args.level,
    "async_dump": False,
    args.task: {"scope": [], "list": [], "data_mode": ["all"]},
}
if args.task == "statistics":
    cfg["statistics"]["summary_mode"] = args.summary_mode
cfg_path = os.path.join(args.out, f"..config_rank{RANK}.json")
with open(cfg_path, "w") as f:
    json.dump(cfg, f)
seed_all(seed=1234, mode=False)
debugger = PrecisionDebugger(config_path=cfg_path)
os.remove(cfg_path)

VOCAB, DM, NH, FF, SEQ, BATCH, CLASSES = 64, 32, 4, 128, 8, 4, 10
GEN = torch.Generator().manual_seed(1)


def full(*shape, scale=None):
    w = torch.randn(*shape, generator=GEN)
    return w * (scale if scale is not None else 1 / math.sqrt(shape[-1]))


class _Copy(torch.autograd.Function):  # identity forward, all-reduce of the gradient backward
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g, group=TP_GROUP)
        return g


class _Reduce(torch.autograd.Function):  # all-reduce forward, identity backward
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x, group=TP_GROUP)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def shard(w, dim):
    return w.chunk(T, dim=dim)[TP_RANK].clone()


class ColumnParallelLinear(nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.weight = nn.Parameter(shard(w, 0))
        self.bias = nn.Parameter(shard(b, 0)) if b is not None else None

    def forward(self, x):
        return F.linear(_Copy.apply(x), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.weight = nn.Parameter(shard(w, 1))
        self.bias = nn.Parameter(b.clone()) if args.row_bias else None

    def forward(self, x):
        out = _Reduce.apply(F.linear(x, self.weight))
        return out + self.bias if self.bias is not None else out


class VocabParallelEmbedding(nn.Module):
    def __init__(self, w):
        super().__init__()
        per = VOCAB // T
        self.start, self.end = TP_RANK * per, (TP_RANK + 1) * per
        self.weight = nn.Parameter(shard(w, 0))

    def forward(self, ids):
        mask = (ids < self.start) | (ids >= self.end)
        local = (ids - self.start).masked_fill(mask, 0)
        out = F.embedding(local, self.weight)
        out = out.masked_fill(mask.unsqueeze(-1), 0.0)
        return _Reduce.apply(out)


def linear(w, b, kind):
    if T == 1:  # row-parallel layers have no bias here (Megatron adds it after the all-reduce, an extra call)
        m = nn.Linear(w.shape[1], w.shape[0], bias=b is not None and (kind == "column" or args.row_bias))
        with torch.no_grad():
            m.weight.copy_(w)
            if m.bias is not None:
                m.bias.copy_(b)
        return m
    return ColumnParallelLinear(w, b) if kind == "column" else RowParallelLinear(w, b)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = linear(full(DM, DM), None, "column")  # no bias: the k bias's gradient is 0 in exact
        self.k_proj = linear(full(DM, DM), None, "column")  # arithmetic, rounding noise in both runs
        self.v_proj = linear(full(DM, DM), None, "column")
        self.o_proj = linear(full(DM, DM), 0.1 * torch.randn(DM, generator=GEN), "row")
        self.nh, self.hd = NH // T, DM // NH

    def forward(self, x):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        a = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd), dim=-1)
        o = torch.matmul(a, v).transpose(1, 2).reshape(B, S, self.nh * self.hd)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = linear(full(FF, DM), torch.zeros(FF), "column")
        self.act = nn.GELU()
        self.fc2 = linear(full(DM, FF), 0.1 * torch.randn(DM, generator=GEN), "row")

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(DM), Attention(), nn.LayerNorm(DM), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Stage(nn.Module):
    def __init__(self, stage):
        super().__init__()
        emb = full(VOCAB, DM, scale=1.0)
        blocks = [Block() for _ in range(args.layers)]  # every stage builds all weights: same random stream
        ln_f, head_w = nn.LayerNorm(DM), full(CLASSES, DM)
        per = args.layers // args.pp
        self.first, self.last = stage == 0, stage == args.pp - 1
        if self.first:
            if T == 1:
                self.embed = nn.Embedding(VOCAB, DM)
                with torch.no_grad():
                    self.embed.weight.copy_(emb)
            else:
                self.embed = VocabParallelEmbedding(emb)
        self.layers = nn.ModuleList(blocks[stage * per : (stage + 1) * per])
        if self.last:
            self.ln_f = ln_f
            self.head = nn.Linear(DM, CLASSES)
            with torch.no_grad():
                self.head.weight.copy_(head_w)
                self.head.bias.zero_()

    def forward(self, x):
        if self.first:
            x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        if self.last:
            x = self.head(self.ln_f(x).mean(dim=1))
        return x


model = Stage(PP_RANK)
if args.bug == RANK:
    BUG["on"] = True
    BUG["target"] = None  # set below: the fc1 of the last block, counted on this rank
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data_gen = torch.Generator().manual_seed(100 + (0 if args.same_data else DP_RANK))
ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=data_gen)
labels = torch.randint(0, CLASSES, (BATCH,), generator=data_gen)
if BUG["on"]:
    # F.linear calls on this rank before the last block's fc1: 6 per block (q, k, v, o, fc1, fc2)
    before = len(model.layers) - 1
    BUG["target"] = 6 * before + 4

debugger.start(model=model)
if model.first:
    x = ids
else:
    x = torch.empty(BATCH, SEQ, DM)
    dist.recv(x, src=rank_of(TP_RANK, DP_RANK, PP_RANK - 1))
    x.requires_grad_(True)
out = model(x)
if model.last:
    loss = F.cross_entropy(out, labels)
    loss.backward()
else:
    dist.send(out.detach(), dst=rank_of(TP_RANK, DP_RANK, PP_RANK + 1))
    grad = torch.empty_like(out)
    dist.recv(grad, src=rank_of(TP_RANK, DP_RANK, PP_RANK + 1))
    out.backward(grad)
if not model.first:
    dist.send(x.grad, dst=rank_of(TP_RANK, DP_RANK, PP_RANK - 1))
if D > 1:
    for prm in model.parameters():
        dist.all_reduce(prm.grad, group=DP_GROUP)
        prm.grad.div_(D)
opt.step()
opt.zero_grad()
debugger.stop()
debugger.step()
if WORLD > 1:
    dist.barrier()
    dist.destroy_process_group()
