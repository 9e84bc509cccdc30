"""The backward pass judged like the forward (issue #29): a backward call against what its inputs explain.

A backward call's inputs are the gradients of its forward call's outputs; its outputs are the gradients of the
forward call's inputs, computed from those and from what the forward call saved (its inputs, for some APIs its
outputs). So a backward call whose output gradients differ far more than its incoming gradients and its forward
call's tensors do computed something new: its `gain` is the output difference over that floor (per measure, the
largest over the measures, Max/Min weighted as in the forward walk).

Across devices some backward outputs are pure rounding residue (a bias gradient before a softmax or a norm is zero
mathematically), so their gain is large in every layer. A gain is therefore judged against its **peers**: the
backward calls of the same API or module class at the same place of the same module template in other layers
(`blocks.0.attn` and `blocks.3.attn`). A call stands out when its gain exceeds the margin times the largest gain of
its peers (and the margin itself); a call with fewer than MIN_PEERS peers is not judged here (the walk's rule,
`propagated`/`noise` after the first difference, stays).
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from msprobe_compare.load.rows import PHASES
from msprobe_compare.records import dataclass

MIN_PEERS = 2  # other calls of the same kind a backward call is compared with (fewer: not judged here)
_DIGITS = re.compile(r"\.\d+(?=\.|$)")


def forward_of(name: str) -> str | None:
    """`Functional.linear.3.backward` -> `Functional.linear.3.forward`; `Module.fc.Linear.backward.0` ->
    `Module.fc.Linear.forward.0`; None for other names."""
    if name.endswith(".backward"):
        return name[: -len("backward")] + "forward"
    head, dot, counter = name.rpartition(".")
    if dot and counter.isdigit() and head.endswith(".backward"):
        return head[: -len("backward")] + "forward." + counter
    return None


def kind_of(name: str) -> str:
    """The API or module class of a call, its layer indices and counters dropped: `Functional.linear`,
    `Module.blocks.#.attn.Attention`."""
    if name.startswith(("Module.", "Cell.")):
        head = name.rsplit(".", 2)[0]  # drop `backward.0`
    else:
        head = name.rsplit(".", 2)[0]  # drop `3.backward`
    return _DIGITS.sub(".#", head)


def peer_keys(entries: list[str], calls: np.ndarray, parents: dict[str, str | None]) -> list[tuple]:
    """Per call of `calls` (indices into entries): (its kind, its parent's template, the how-many-th call of its
    kind inside that parent call). Calls with one key are the same code in another layer."""
    seen: dict[tuple, int] = defaultdict(int)
    keys = []
    for e in calls.tolist():
        name = entries[e]
        parent = parents.get(name)
        ptemplate = _DIGITS.sub(".#", parent) if parent else ""
        base = (kind_of(name), ptemplate)
        if parent is None:  # no module to count inside: every such call of the kind is a peer
            keys.append(base + (0,))
            continue
        k = seen[(base, parent)]
        seen[(base, parent)] = k + 1
        keys.append(base + (k,))
    return keys


@dataclass(frozen=True)
class BackwardJudgement:
    """Per call (NaN / False where not a judged backward call): its gain over its own floor, the largest gain of
    its peers (at least 1), how many peers it has, the floor per measure its outputs were compared with (own floor
    times the peers' gain), and whether it stands out (gain over `margin` times the peers' gain)."""

    gain: np.ndarray  # (calls,)
    peer_gain: np.ndarray  # (calls,)
    peers: np.ndarray  # int (calls,)
    floor: np.ndarray  # (calls, measures)
    measure: np.ndarray  # int (calls,): the measure of the largest gain
    above: np.ndarray  # bool (calls,)


def judge(entries: list[str], phase_code: np.ndarray, parents: dict[str, str | None], in_d: np.ndarray,
          out_d: np.ndarray, q_all: np.ndarray, ufl: np.ndarray, weight: np.ndarray,
          margin: float) -> BackwardJudgement:  # fmt: skip
    """Gains of the backward calls over their own floors (their incoming gradients' and their forward calls'
    differences, the resolution of their rows, the precision floor), judged against their peers (module
    docstring)."""
    n, k_cols = out_d.shape
    gain = np.full(n, np.nan)
    peer_gain = np.full(n, np.nan)
    peers = np.zeros(n, dtype=np.int64)
    floor = np.full((n, k_cols), np.nan)
    measure = np.zeros(n, dtype=np.int64)
    above = np.zeros(n, dtype=bool)
    calls = np.flatnonzero(phase_code == PHASES.index("backward"))
    if not len(calls):
        return BackwardJudgement(gain, peer_gain, peers, floor, measure, above)
    index = {name: i for i, name in enumerate(entries)} if len(calls) else {}
    fwd = np.array([index.get(forward_of(entries[e]) or "", -1) for e in calls.tolist()], dtype=np.int64)

    def finite(a: np.ndarray) -> np.ndarray:
        return np.where(np.isfinite(a), a, 0.0)

    own = np.maximum(finite(in_d[calls]), np.maximum(q_all[calls], ufl[calls][:, None]))
    has_fwd = fwd >= 0
    f = fwd[has_fwd]
    own[has_fwd] = np.maximum(own[has_fwd], np.maximum(finite(in_d[f]), finite(out_d[f])))
    outs = out_d[calls]
    with np.errstate(all="ignore"):
        r = np.where(np.isfinite(outs) & (outs > 0), outs / np.where(own > 0, own * weight, np.inf), 0.0)
    # the element extremes (the measures weighted above 1) are left out: one element of a long low-precision sum
    # differs by several percent (a bf16 conv's input gradient: Max 5% apart, 8.7x its floor, noise only), while a
    # wrong kernel shows in the whole tensor (every backward bug of the cases shows in the Norm, 9-1056x its peers)
    r[:, weight > 1] = 0.0
    g = r.max(axis=1)
    gain[calls] = g
    measure[calls] = r.argmax(axis=1)
    if not (g > margin).any():  # no gain reaches the margin: nothing stands out, whatever the peers
        return BackwardJudgement(gain, peer_gain, peers, floor, measure, above)
    index_of: dict[tuple, int] = {}
    codes = np.fromiter((index_of.setdefault(k, len(index_of)) for k in peer_keys(entries, calls, parents)),
                        dtype=np.int64, count=len(calls))  # fmt: skip
    size = np.bincount(codes)
    by = np.lexsort((g, codes))  # by kind, then by gain: each kind's largest and second largest gain at its end
    ends = np.cumsum(size) - 1
    top_pos = by[ends]
    top = g[top_pos]
    second = g[by[np.maximum(ends - 1, 0)]]
    judged = size[codes] > MIN_PEERS
    pos = np.flatnonzero(judged)
    code = codes[pos]
    other = np.maximum(np.where(pos == top_pos[code], second[code], top[code]), 1.0)
    e = calls[pos]
    peers[e] = size[code] - 1
    peer_gain[e] = other
    floor[e] = own[pos] * other[:, None]
    above[e] = g[pos] > margin * other
    return BackwardJudgement(gain, peer_gain, peers, floor, measure, above)
