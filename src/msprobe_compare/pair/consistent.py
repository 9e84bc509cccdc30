"""msprobe 26.x's `--consistent_check --backend fsdp|megatron` (issue #30): the training engine (NPU side, `-tp`)
against the inference engine (bench side, vLLM-style names), paired by 26.x's fixed name maps.

Its rules (docs/reference-notes.md) become module pairs in the alignment file's form; the aligner (pair/align.py)
takes them first, as it takes a user's file, pairs their tensors by what they carry, and aligns what the maps leave.
So the rows are those of any aligned compare: parts merged N-to-1 with every statistic combined (26.x joins Mean and
Norm as texts), and no crash on dumps that mix module and API rows.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from msprobe_compare.pair.align import Side, call_name

BACKENDS = ("fsdp", "megatron")
MAPS = {
    "fsdp": {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
             "up_proj": "gate_up_proj"},
    "megatron": {"word_embeddings": "embed_tokens", "self_attention": "self_attn", "linear_qkv": "qkv_proj",
                 "q_layernorm": "q_norm", "k_layernorm": "k_norm", "core_attention": "attn", "linear_proj": "o_proj",
                 "router": "gate", "linear_fc1": "gate_up_proj", "linear_fc2": "down_proj"},
}  # fmt: skip
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_WRAPPED = "_fsdp_wrapped_module."


def _key(path: str, training: str | None) -> tuple[int, str]:
    """(layer, the module within it) as 26.x cuts and maps it; `training`: the backend on the training side, None on
    the inference side. Outside the layers a leading `model.` (and `module.`) is dropped on both sides."""
    if training == "fsdp" and _WRAPPED in path:
        within = path.rsplit(_WRAPPED, 1)[1]
    else:
        within = path
    found = list(_LAYER.finditer(path))
    layer = int(found[-1].group(1)) if found else -1
    if found and (training != "fsdp" or _WRAPPED not in path):
        within = path[found[-1].end() :]
    while layer < 0 and within.startswith(("model.", "module.")):
        within = within.split(".", 1)[1]
    if training is not None:
        parts = within.split(".")
        within = ".".join(MAPS[training].get(p, p) for p in parts)
    return layer, within


def consistent_pairs(train: Side, infer: Side, backend: str) -> dict[str, Any]:
    """Module pairs by 26.x's maps, as an alignment file's document: training calls that meet one inference call
    (q/k/v in qkv_proj) merged in call order; calls of one key on both sides paired in call order."""
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: choose {' or '.join(BACKENDS)}")
    groups: dict[str, dict[tuple[int, str], list[int]]] = {"npu": defaultdict(list), "bench": defaultdict(list)}
    for side, s, training in (("npu", train, backend), ("bench", infer, None)):
        for i, c in enumerate(s.calls):
            groups[side][_key(c.path, training)].append(i)
    pairs = []
    for key, npu_calls in groups["npu"].items():
        bench_calls = groups["bench"].get(key)
        if not bench_calls:
            continue
        if len(bench_calls) == 1 and len(npu_calls) > 1 and len({train.calls[c].path for c in npu_calls}) == len(
                npu_calls):  # fmt: skip
            pairs.append({"npu": ";".join(call_name(train.calls[c]) for c in npu_calls),
                          "bench": call_name(infer.calls[bench_calls[0]])})  # fmt: skip
            continue
        for a, b in zip(npu_calls, bench_calls):
            pairs.append({"npu": call_name(train.calls[a]), "bench": call_name(infer.calls[b])})
    return {"pairs": pairs}
