"""The backward pass judged like the forward (issue #29): a backward call against what its inputs explain.

A backward call's inputs are the gradients of its forward call's outputs; its outputs are the gradients of the
forward call's inputs, computed from those and from what the forward call saved (its inputs, for some APIs its
outputs). So a backward call whose output gradients differ far more than its incoming gradients and its forward
call's tensors do computed something new: its `gain` is the difference of its first output (`output.0`, the gradient
it passes on) over that floor, the largest over the Norm and Mean measures (single elements of a low-precision
gradient are too noisy for Max/Min). A matmul-class module's weight gradient (`parameters_grad`, x^T g) is judged
the same way, against its module's backward call's incoming gradients and its forward call's tensors.

Across devices some backward outputs are pure rounding residue (a bias gradient before a softmax or a norm is zero
mathematically), so their gain is large in every layer. A gain is therefore judged against its **peers**: the
backward calls of the same API or module class under the same module template in other layers
(`blocks.0.attn` and `blocks.3.attn`). A call stands out when its gain exceeds the margin times the largest gain of
its peers (and the margin itself); a call whose kind the run has in fewer than MIN_PEERS + 1 layers is not judged
here (the walk's rule, `propagated`/`noise` after the first difference, stays).
"""

from __future__ import annotations

from collections.abc import Callable
import operator
import re

import numpy as np

from msprobe_compare.judge.noise import matmul_calls
from msprobe_compare.load.names import Direction
from msprobe_compare.pair.calls import Names, call_keys
from msprobe_compare.records import dataclass

MIN_PEERS = 2  # other layers a backward call's kind must have for it to be judged here (fewer: not judged)
_DIGITS = re.compile(r"\.\d+(?=\.|$)")


def _forward_names(names: list[str]) -> list[str]:
    """Each backward call's forward call (`Functional.linear.3.backward` -> `Functional.linear.3.forward`,
    `Module.fc.Linear.backward.0` -> `Module.fc.Linear.forward.0`), in one C-level pass (`.backward` replaced; a name
    it does not fit is simply not found); of a parameter-gradient entry (`Module.fc.Linear.parameters_grad`), its module's first
    forward call (`Module.fc.Linear.forward.0`)."""
    replace: Callable[[str], str] = operator.methodcaller("replace", ".backward", ".forward")
    return [n[: -len("parameters_grad")] + "forward.0" if n.endswith(".parameters_grad") else n
            for n in map(replace, names)]  # fmt: skip


def _backward_names(names: list[str]) -> list[str]:
    """Of a parameter-gradient entry, its module's first backward call (its incoming gradients); "" for others."""
    return [n[: -len("parameters_grad")] + "backward.0" if n.endswith(".parameters_grad") else "" for n in names]


_DIGITS_LINES = re.compile(r"\.\d+(?=\.|$)", re.M)


def _templates(texts: list[str]) -> list[str]:
    """Each text with its dot-separated numbers (layer indices, counters) as `#`, in one regex pass."""
    joined = "\n".join(texts)
    if not texts or joined.count("\n") != len(texts) - 1:  # a line break inside a name: one at a time
        return [_DIGITS.sub(".#", t) for t in texts]
    return _DIGITS_LINES.sub(".#", joined).split("\n")


def kinds(names: list[str]) -> list[str]:
    """The API or module class of each call, its counters and layer indices dropped: `Functional.linear..backward`,
    `Module.blocks.#.attn.Attention.backward.` (the counters by `pair.calls.call_keys`, in C; the layer indices of
    module names by one regex pass)."""
    keys = call_keys(names)
    starts = operator.methodcaller("startswith", ("Module.", "Cell."))
    module = np.flatnonzero(np.fromiter(map(starts, keys), dtype=bool, count=len(keys))).tolist()
    if module:
        for i, t in zip(module, _templates(_pick(keys, np.asarray(module)))):
            keys[i] = t
    return keys


def kind_of(name: str) -> str:
    """`kinds` of one name."""
    return kinds([name])[0]


def peer_keys(entries: list[str], calls: np.ndarray, parents: dict[str, str | None]) -> np.ndarray:
    """Per call of `calls` (indices into entries), a code of (its kind, its parent's template): calls with one code
    are the same code in other layers (or, without a parent, every call of the kind)."""
    names = _pick(entries, calls)
    if not names:
        return np.zeros(0, dtype=np.int64)
    parent = list(map(parents.get, names))
    return _codes(list(zip(kinds(names), _templates([p or "" for p in parent]))))


def layers(entries: list[str], calls: np.ndarray, parents: dict[str, str | None],
           backward_calls: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per call of `calls`, how many calls of its kind the run has where it has one: the module calls of its
    parent's template (the layers), or, without a parent, the calls of its kind among the `backward_calls` without
    one."""
    names = _pick(entries, calls)
    parent = list(map(parents.get, names))
    out = np.zeros(len(names), dtype=np.int64)
    if any(p is not None for p in parent):
        modules = list(dict.fromkeys(filter(None, parents.values())))
        count: dict[str, int] = {}
        for t in _templates(modules):
            count[t] = count.get(t, 0) + 1
        mine = _templates([p or "" for p in parent])
        out[:] = [count.get(t, 0) if p is not None else 0 for t, p in zip(mine, parent)]
    top = [i for i, p in enumerate(parent) if p is None]
    if top:  # every call of the kind without a parent is a peer
        every = _pick(entries, backward_calls)
        alone = [n for n, p in zip(every, map(parents.get, every)) if p is None]
        count = {}
        for k in kinds(alone):
            count[k] = count.get(k, 0) + 1
        for i, k in zip(top, kinds([names[i] for i in top])):
            out[i] = count.get(k, 0)
    return out


def _pick(entries: list[str], calls: np.ndarray) -> list[str]:
    """entries[calls] as a list (one C-level pass)."""
    if len(calls) < 2:
        return [entries[e] for e in calls.tolist()]
    return list(operator.itemgetter(*calls.tolist())(entries))


def _codes(keys: list) -> np.ndarray:
    """A dense integer code per key (equal keys, equal codes)."""
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return np.fromiter(map(ids.__getitem__, keys), dtype=np.int64, count=len(keys))


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
    docstring). Gains are first taken without the forward calls' tensors (an upper bound: the floor can only
    rise); a peer's gain counts from 1 up, so only the calls above 1 are looked at further (on a 1M-row compare,
    1,204 of 136,989 backward calls)."""
    n, k_cols = out_d.shape
    gain = np.full(n, np.nan)
    peer_gain = np.full(n, np.nan)
    peers = np.zeros(n, dtype=np.int64)
    floor = np.full((n, k_cols), np.nan)
    measure = np.zeros(n, dtype=np.int64)
    above = np.zeros(n, dtype=bool)
    out = BackwardJudgement(gain, peer_gain, peers, floor, measure, above)
    # backward calls, and the parameter gradients of matmul-class modules (a weight gradient x^T g: a matmul, computed
    # by the module's backward call); a norm's scale and shift gradients are sums over the batch whose cancellation
    # varies from layer to layer (a BatchNorm weight gradient stood 4-5x above its peers, noise only)
    calls = np.flatnonzero(phase_code == int(Direction.BACKWARD))  # int: numpy compares an IntEnum slowly
    grads = np.flatnonzero(phase_code == int(Direction.PARAMETERS_GRAD))
    if len(grads):
        calls = np.sort(np.r_[calls, grads[matmul_calls(_pick(entries, grads))]])
    g0, m0, _ = _gains(calls, None, in_d, out_d, q_all, ufl, weight)
    gain[calls], measure[calls] = g0, m0
    if not (g0 > margin).any():  # no gain reaches the margin: nothing stands out, whatever the peers
        return out
    loud = calls[g0 > 1.0]
    index, loud_names = Names(entries), _pick(entries, loud)
    sources = [index.find(_forward_names(loud_names)), index.find(_backward_names(loud_names))]
    g, m, own = _gains(loud, sources, in_d, out_d, q_all, ufl, weight)
    gain[loud], measure[loud] = g, m
    if not (g > margin).any():
        return out
    codes = peer_keys(entries, loud, parents)
    by = np.lexsort((g, codes))  # by key, then by gain: each key's largest and second largest gain at its end
    size = np.bincount(codes)
    ends = np.cumsum(size) - 1
    top_pos = by[ends]
    second = np.where(size > 1, g[by[np.maximum(ends - 1, 0)]], 0.0)
    cand = np.flatnonzero(g > margin)
    code = codes[cand]
    other = np.maximum(np.where(cand == top_pos[code], second[code], g[top_pos[code]]), 1.0)
    count = layers(entries, loud[cand], parents, calls)
    judged = count > MIN_PEERS
    e = loud[cand[judged]]
    peers[e] = count[judged] - 1
    peer_gain[e] = other[judged]
    floor[e] = own[cand[judged]] * other[judged][:, None]
    above[e] = g[cand[judged]] > margin * other[judged]
    return out


def _gains(calls: np.ndarray, sources: list[np.ndarray] | None, in_d: np.ndarray, out_d: np.ndarray,
           q_all: np.ndarray, ufl: np.ndarray,
           weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Per call of `calls`: its gain, the measure that has it, and its own floor per measure; `sources` the
    positions of the calls whose tensors it is computed from besides its inputs (its forward call; a parameter
    gradient's module backward call), -1 where none, None where not looked up (left out)."""

    def finite(a: np.ndarray) -> np.ndarray:
        return np.where(np.isfinite(a), a, 0.0)

    own = np.maximum(finite(in_d[calls]), np.maximum(q_all[calls], ufl[calls][:, None]))
    for fwd in sources or ():
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
    if not len(calls):
        return np.zeros(0), np.zeros(0, dtype=np.int64), own
    return r.max(axis=1), r.argmax(axis=1), own
