#!/usr/bin/env python
"""Makes the `ms_*` noise cases (issue #13): MindSpore dumps where every operator differs a little (npu side in
fp16, bench in fp32) and at most one operator is really wrong, made with the reference dumper.

Needs mindstudio-probe 8.3.3 and MindSpore (CPU wheel, PyNative) in a separate virtualenv:
    python3 -m venv /tmp/msvenv && /tmp/msvenv/bin/pip install mindspore==2.7.1 mindstudio-probe==8.3.3
    /tmp/msvenv/bin/python make_ms.py --model mlp --side npu --bug scale --layer 3 --out DIR

The same script runs under MindSpore 2.8.0 (the version-A-against-B cases: a second virtualenv with
mindspore==2.8.0 mindstudio-probe==8.3.3; 2.6.0 has no wheel for Python 3.11).
fp16, not bf16: the MindSpore CPU kernels have no bfloat16 Mul/MatMul ("Select CPU operator[Mul] fail!").
Models: `mlp` (6 residual blocks x + GELU(LayerNorm(Lin(x))) of width 32, `Lin` a cell around nn.Dense, head,
cross-entropy) and `tfm` (2 pre-LN transformer blocks, width 32, 2 heads, attention written with ops.matmul and
ops.softmax, GELU MLP; mean over the sequence, head, cross-entropy). One SGD step, weights and data from a fixed
numpy generator, identical on both sides.
Noise (npu side only): `fp16` (the backbone cast with Cell.to_float(float16); the loss in float32 on both sides).
Bugs (npu side only, in block `--layer`): `none`; `scale` (the output of that block's Lin x`--factor`, inside Lin,
with a Primitive that is no cell attribute, so the dumper does not record it: Lin's output differs from its Dense);
`nan` (one element of that output set to NaN the same way); `gelutanh` (ops.gelu approximate='tanh': a non-tensor
argument); `softmaxdim` (tfm: the attention softmax over axis -2).
`--summary md5` records an md5 per tensor beside the statistics (an md5 dump); `--data-seed K` draws the batch
from another generator (the same weights: what a second rank of data parallelism sees).
Dumper gaps on CPU patched here (as the shared fixtures' maker does): mint.norm has no CPU kernel (the dumper falls
back to ops.norm), and PrecisionDebugger.step() must not look for a graph-mode statistic.csv in PyNative.
"""

import argparse
import json
import os

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--model", required=True, choices=["mlp", "tfm"])
p.add_argument("--side", required=True, choices=["npu", "bench"])
p.add_argument("--noise", default="fp16", choices=["fp16", "none"])
p.add_argument("--bug", default="none", choices=["none", "scale", "nan", "gelutanh", "softmaxdim"])
p.add_argument("--layer", type=int, default=0)
p.add_argument("--factor", type=float, default=1.1)
p.add_argument("--task", default="statistics", choices=["statistics", "tensor"])
p.add_argument("--level", default="mix", choices=["mix", "L1"])
p.add_argument("--summary", default="statistics", choices=["statistics", "md5"])  # statistics task: + md5 per tensor
p.add_argument("--data-seed", type=int, default=None)  # another batch (a second rank of data parallelism)
p.add_argument("--out", required=True)
args = p.parse_args()
NPU = args.side == "npu"
BUG = args.bug if NPU else "none"

import mindspore as ms  # noqa: E402
from mindspore import Tensor, nn, ops  # noqa: E402

ms.set_device("CPU")
ms.set_context(mode=ms.PYNATIVE_MODE)

from msprobe.mindspore import PrecisionDebugger  # noqa: E402

# -- the dumper's CPU gaps ------------------------------------------------------------------------------------
from mindspore import mint as _real_mint  # noqa: E402
import msprobe.core.data_dump.data_processor.mindspore_processor as _mp  # noqa: E402


class _MintWithoutNorm:
    def __getattr__(self, name):
        if name == "norm":
            raise AttributeError(name)
        return getattr(_real_mint, name)


_mp.mint = _MintWithoutNorm()

import msprobe.mindspore.debugger.precision_debugger as _pd  # noqa: E402
from msprobe.core.common.runtime import Runtime as _Runtime  # noqa: E402
from msprobe.mindspore.common.const import Const as _MsConst  # noqa: E402

if hasattr(_pd, "is_graph_mode_cell_dump_allowed"):
    _orig_allowed = _pd.is_graph_mode_cell_dump_allowed

    def _allowed_only_with_graph_cells(config):
        if config.execution_mode == _MsConst.PYNATIVE_MODE and _Runtime.run_mode != _MsConst.PYNATIVE_GRAPH_MODE:
            return False
        return _orig_allowed(config)

    _pd.is_graph_mode_cell_dump_allowed = _allowed_only_with_graph_cells

# primitives that are no cell attribute: the dumper does not hook them (the bug stays out of the dump)
_RAW_MUL = ops.Mul()
_RAW_ADD = ops.Add()

os.makedirs(args.out, exist_ok=True)
cfg = {
    "task": args.task,
    "dump_path": args.out,
    "rank": [],
    "step": [],
    "level": args.level,
    "async_dump": False,
    "tensor": {"scope": [], "list": [], "data_mode": ["all"], "file_format": "npy"},
    "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": args.summary},
}
cfg_path = args.out.rstrip("/") + "_config.json"
with open(cfg_path, "w") as f:
    json.dump(cfg, f, indent=2)


class Lin(nn.Cell):
    """nn.Dense, with the bug (if any) applied to its output unrecorded."""

    def __init__(self, d_in, d_out, bug="none"):
        super().__init__()
        self.dense = nn.Dense(d_in, d_out)
        self.bug = bug

    def construct(self, x):
        y = self.dense(x)
        if self.bug == "scale":
            y = _RAW_MUL(y, Tensor(args.factor, y.dtype))
        elif self.bug == "nan":
            mask = np.zeros(y.shape, np.float32)
            mask.reshape(-1)[0] = np.nan
            y = _RAW_ADD(y, Tensor(mask, y.dtype))
        return y


class MlpBlock(nn.Cell):
    def __init__(self, d, k):
        super().__init__()
        here = k == args.layer
        self.fc = Lin(d, d, BUG if here and BUG in ("scale", "nan") else "none")
        self.ln = nn.LayerNorm((d,))
        self.approximate = "tanh" if here and BUG == "gelutanh" else "none"

    def construct(self, x):
        return x + ops.gelu(self.ln(self.fc(x)), approximate=self.approximate)


class Mlp(nn.Cell):
    def __init__(self, n=6, d=32):
        super().__init__()
        self.blocks = nn.CellList([MlpBlock(d, k) for k in range(n)])
        self.head = nn.Dense(d, 10)

    def construct(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class TfmBlock(nn.Cell):
    def __init__(self, d, heads, k):
        super().__init__()
        here = k == args.layer
        self.heads, self.dh = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm((d,)), nn.LayerNorm((d,))
        self.q, self.k, self.v, self.o = nn.Dense(d, d), nn.Dense(d, d), nn.Dense(d, d), nn.Dense(d, d)
        self.fc1 = Lin(d, 2 * d, BUG if here and BUG in ("scale", "nan") else "none")
        self.fc2 = nn.Dense(2 * d, d)
        self.axis = -2 if here and BUG == "softmaxdim" else -1
        self.approximate = "tanh" if here and BUG == "gelutanh" else "none"

    def split(self, t, b, s):
        return t.reshape(b, s, self.heads, self.dh).transpose(0, 2, 1, 3)

    def construct(self, x):
        b, s, d = x.shape
        h = self.ln1(x)
        q, k, v = self.split(self.q(h), b, s), self.split(self.k(h), b, s), self.split(self.v(h), b, s)
        att = ops.softmax(ops.matmul(q, k.transpose(0, 1, 3, 2)) * (self.dh**-0.5), axis=self.axis)
        y = ops.matmul(att, v).transpose(0, 2, 1, 3).reshape(b, s, d)
        x = x + self.o(y)
        return x + self.fc2(ops.gelu(self.fc1(self.ln2(x)), approximate=self.approximate))


class Tfm(nn.Cell):
    def __init__(self, n=2, d=32, heads=2):
        super().__init__()
        self.blocks = nn.CellList([TfmBlock(d, heads, k) for k in range(n)])
        self.head = nn.Dense(d, 10)

    def construct(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head(x.mean(axis=1))


class WithLoss(nn.Cell):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.loss_fn = nn.CrossEntropyLoss()

    def construct(self, x, y):
        return self.loss_fn(self.backbone(x).astype(ms.float32), y)  # the loss in float32 on both sides


rng = np.random.default_rng(1234)
net = Mlp() if args.model == "mlp" else Tfm()
for prm in sorted(net.get_parameters(), key=lambda q: q.name):
    if "gamma" in prm.name:
        val = np.ones(prm.shape, np.float32)
    elif "beta" in prm.name:
        val = np.zeros(prm.shape, np.float32)
    else:
        val = (rng.standard_normal(prm.shape) / np.sqrt(prm.shape[-1])).astype(np.float32)
    prm.set_data(Tensor(val))
data_rng = rng if args.data_seed is None else np.random.default_rng(args.data_seed)  # default: as before
if args.model == "mlp":
    x_np = data_rng.standard_normal((16, 32)).astype(np.float32)
    y_np = data_rng.integers(0, 10, 16).astype(np.int32)
else:
    x_np = data_rng.standard_normal((4, 8, 32)).astype(np.float32)
    y_np = data_rng.integers(0, 10, 4).astype(np.int32)
if NPU and args.noise == "fp16":
    net.to_float(ms.float16)
model = WithLoss(net)
optimizer = nn.SGD(net.trainable_params(), learning_rate=0.05)
grad_fn = ms.value_and_grad(model, None, optimizer.parameters)
x, y = Tensor(x_np), Tensor(y_np)

debugger = PrecisionDebugger(config_path=cfg_path)
debugger.start(model)
loss, grads = grad_fn(x, y)
optimizer(grads)
debugger.stop()
debugger.step()
print(f"[{args.side}] MindSpore {ms.__version__} loss {float(loss.asnumpy()):.6f}", flush=True)
