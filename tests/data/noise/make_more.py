#!/usr/bin/env python
"""Makes the `more_*` noise cases (issue #13) with the reference dumper: models, depths and bug kinds other than
the shared fixtures/noise set, so the rule is not fitted to one set.

Needs mindstudio-probe 8.3.3 and torch 2.13 (CPU) in a separate virtualenv:
    python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install mindstudio-probe==8.3.3 torch==2.13.0
    /tmp/refvenv/bin/python make_more.py --model deep --side npu --noise amp --bug scale --layer 7 --out DIR

Models: `deep` (residual blocks x + GELU(LayerNorm(Linear(x))), 10 blocks of width 64, head, cross-entropy) and
`cnn` (3 x Conv2d-BatchNorm2d-ReLU with a MaxPool after the second, global average pool, Linear).
Noise (npu side only): `amp` (forward and loss under bf16 autocast, bench fp32), `fp16` (under fp16 autocast).
Bugs (npu side only, in block/conv `--layer`): `none`; `scale` (the block's Linear output x`--factor`, in place
after the dumper recorded it, with the original Tensor.mul_, so it is not dumped); `nan` (one element of that
output set to NaN the same way); `nobias` (that Linear/Conv2d called without its bias); `gelutanh` (GELU with
approximate='tanh': a non-tensor argument); `bneps` (BatchNorm eps 1e-2).
"""

import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_ORIG_MUL_ = torch.Tensor.mul_
_ORIG_SETITEM = torch.Tensor.__setitem__

from msprobe.pytorch import PrecisionDebugger, seed_all  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--model", required=True, choices=["deep", "cnn"])
p.add_argument("--side", required=True, choices=["npu", "bench"])
p.add_argument("--noise", default="amp", choices=["amp", "fp16", "none"])
p.add_argument("--bug", default="none", choices=["none", "scale", "nan", "nobias", "gelutanh", "bneps"])
p.add_argument("--layer", type=int, default=0)
p.add_argument("--factor", type=float, default=1.05)
p.add_argument("--task", default="statistics", choices=["statistics", "tensor"])
p.add_argument("--out", required=True)
args = p.parse_args()
NPU = args.side == "npu"
BUG = args.bug if NPU else "none"

os.makedirs(args.out, exist_ok=True)
cfg = {
    "task": args.task,
    "dump_path": args.out,
    "rank": [],
    "step": [],
    "level": "mix",
    "async_dump": False,
    args.task: {"scope": [], "list": [], "data_mode": ["all"]},
}
if args.task == "statistics":
    cfg["statistics"]["summary_mode"] = "statistics"
cfg_path = args.out.rstrip("/") + "_config.json"
with open(cfg_path, "w") as f:
    json.dump(cfg, f, indent=2)
seed_all(seed=1234, mode=False)
debugger = PrecisionDebugger(config_path=cfg_path)


def scale_hook(mod, inp, out):
    with torch.no_grad():
        _ORIG_MUL_(out.data, args.factor)


def nan_hook(mod, inp, out):
    with torch.no_grad():
        _ORIG_SETITEM(out.data, (0, 0), float("nan"))


class NoBiasLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, self.weight)


class NoBiasConv(nn.Conv2d):
    def forward(self, x):
        return F.conv2d(x, self.weight, None, self.stride, self.padding)


class Block(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.fc = (NoBiasLinear if BUG == "nobias" and k == args.layer else nn.Linear)(d, d)
        self.ln = nn.LayerNorm(d)
        self.act = nn.GELU(approximate="tanh" if BUG == "gelutanh" and k == args.layer else "none")

    def forward(self, x):
        return x + self.act(self.ln(self.fc(x)))


class Deep(nn.Module):
    def __init__(self, n=10, d=64):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d, k) for k in range(n)])
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [3, 8, 16, 32]
        convs, bns = [], []
        for k in range(3):
            cls = NoBiasConv if BUG == "nobias" and k == args.layer else nn.Conv2d
            convs.append(cls(chans[k], chans[k + 1], 3, padding=1))
            bns.append(nn.BatchNorm2d(chans[k + 1], eps=1e-2 if BUG == "bneps" and k == args.layer else 1e-5))
        self.convs, self.bns = nn.ModuleList(convs), nn.ModuleList(bns)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        for k in range(3):
            x = F.relu(self.bns[k](self.convs[k](x)))
            if k == 1:
                x = self.pool(x)
        return self.fc(self.gap(x).flatten(1))


G = torch.Generator().manual_seed(4321)
if args.model == "deep":
    model = Deep()
    x, y = torch.randn(16, 64, generator=G), torch.randint(0, 10, (16,), generator=G)
    target = model.blocks[args.layer].fc
else:
    model = CNN()
    x, y = torch.randn(8, 3, 16, 16, generator=G), torch.randint(0, 10, (8,), generator=G)
    target = model.convs[args.layer]
if BUG == "scale":
    target.register_forward_hook(scale_hook)
elif BUG == "nan":
    target.register_forward_hook(nan_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
amp = {"amp": torch.bfloat16, "fp16": torch.float16}.get(args.noise) if NPU else None

debugger.start(model=model)
if amp is not None:
    with torch.autocast("cpu", dtype=amp):
        loss = F.cross_entropy(model(x), y)
else:
    loss = F.cross_entropy(model(x), y)
loss.backward()
opt.step()
opt.zero_grad()
debugger.stop()
debugger.step()
print(f"[{args.side}] loss {loss.item():.6f}", flush=True)
