"""Root cause: the operator where accuracy first breaks.

Once one operator goes wrong, every operator after it inherits the error, so a table full of red
says little. Here each API/module call is classified from the rows of its inputs (and parameters)
and of its outputs:

- `origin`: its inputs agree within tolerance but its outputs do not (computation), or a
  non-tensor argument differs while its tensor inputs agree (configuration mismatch), or its inputs
  already differ although no earlier call's outputs did: the data changed between two recorded
  calls (boundary: after the last agreeing output, before this input);
- `propagated`: its inputs already differ;
- `ok`: nothing differs.

Calls are walked in execution (dump) order; forward origins rank first, then backward, then
parameter gradients. A module that is an origin gives way to an API or module inside it (from
construct.json) that is an origin too, so the innermost call is named.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from msprobe_compare.load.rows import RowTable, State, StatKind, is_param_grad
from msprobe_compare.model import CompareOutcome, Mode

STAT_TOLERANCE = 1e-4  # relative difference of max/min/mean/norm
COSINE_TOLERANCE = 0.9999  # a Cosine below this differs
ONE_K_TOLERANCE = 0.99  # a One Thousandth Err Ratio below this differs


class CallState(Enum):
    OK = "ok"
    ORIGIN = "origin"
    PROPAGATED = "propagated"
    UNKNOWN = "unknown"  # nothing comparable (unmatched rows only)


class OriginKind(Enum):
    COMPUTATION = "computation"
    BOUNDARY = "boundary"
    CONFIGURATION = "configuration"


@dataclass(frozen=True)
class Evidence:
    """Worst metric values of a call's inputs and outputs, with the threshold that decides."""

    metric: str
    inputs: float | None
    outputs: float | None
    threshold: float
    first_row: str | None  # the first differing row


@dataclass(frozen=True)
class Origin:
    entry: str
    kind: OriginKind
    phase: str  # "forward" | "backward" | "parameters_grad"
    after: str | None  # boundary: the last call whose outputs agree
    evidence: Evidence
    differing_args: tuple[str, ...] = ()  # configuration: the non-tensor arguments that differ

    @property
    def description(self) -> str:
        if self.kind is OriginKind.BOUNDARY:
            before = f"after {self.after}'s output, " if self.after else ""
            return f"{before}before {self.entry}'s input"
        if self.kind is OriginKind.CONFIGURATION:
            return f"{self.entry}: non-tensor arguments differ ({', '.join(self.differing_args)})"
        return f"{self.entry}: inputs agree, outputs differ"


@dataclass
class RootCause:
    entries: list[str]
    states: list[CallState]
    origins: list[Origin] = field(default_factory=list)
    metric: str = ""
    in_scores: np.ndarray | None = None  # per entry, worst input metric (NaN when none)
    out_scores: np.ndarray | None = None
    parents: dict[str, str | None] = field(default_factory=dict)  # module tree from construct.json

    @property
    def first(self) -> Origin | None:
        return self.origins[0] if self.origins else None

    @property
    def compared_calls(self) -> int:
        """Calls with at least one compared row (the others have no bench counterpart)."""
        return sum(state is not CallState.UNKNOWN for state in self.states)


def phase_of(entry: str) -> str:
    if "backward" not in entry:  # the common case, decided by one substring search
        return "parameters_grad" if is_param_grad(entry) else "forward"
    if is_param_grad(entry):  # `...parameters_grad` or 26.x `...parameters_grad.<n>`
        return "parameters_grad"
    tail = entry.rsplit(".", 2)
    return "backward" if "backward" in tail[-2:] or entry.endswith(".backward") else "forward"


@functools.lru_cache(maxsize=65536)
def _numel(shape: str) -> float:
    try:
        dims = [int(x) for x in shape.strip("[]()").split(",") if x.strip()]
    except ValueError:
        return 1.0
    return float(np.prod(dims)) if dims else 1.0


def _row_scores(o: CompareOutcome) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, float]:
    """(metric name, score per row (higher is worse, NaN unknown), differs, known, threshold)."""
    npu, bench, match = o.npu, o.bench, o.match
    n = len(npu)
    hit = match >= 0
    if o.mode is Mode.MD5:
        b_md5 = [bench.md5[j] if j >= 0 else None for j in match.tolist()]
        differs = np.array([hit[i] and npu.md5[i] != b_md5[i] for i in range(n)], dtype=bool)
        score = differs.astype(float)
        return "md5 differs", np.where(hit, score, np.nan), differs, hit, 0.5
    if o.mode is Mode.ALL and o.tensors is not None:
        t = o.tensors
        cos, one_k, rel = t.column("cosine"), t.column("one_thousandth"), t.column("max_rel_err")
        from msprobe_compare.measure.tensor_metrics import MetricState

        na = t.states[:, 0] == MetricState.NOT_AVAILABLE  # NaN/inf positions differ
        known = hit & ((~np.isnan(one_k)) | na | ~np.isnan(rel))
        with np.errstate(invalid="ignore"):
            differs = known & (na | (cos < COSINE_TOLERANCE) | (one_k < ONE_K_TOLERANCE))
        score = np.where(known, np.where(na, 1.0, 1.0 - np.where(np.isnan(one_k), 1.0, one_k)), np.nan)
        return "1 - One Thousandth Err Ratio", score, differs, known, 1 - ONE_K_TOLERANCE
    # statistics: relative differences of max/min/mean/norm
    b_vals = np.zeros((n, 4))
    b_kind = np.full((n, 4), StatKind.NONE, dtype=np.int8)
    if len(bench):
        b_vals[hit] = bench.stats[match[hit]]
        b_kind[hit] = bench.stat_kind[match[hit]]
    numeric = (StatKind.NUMBER, StatKind.INT)
    ok = np.isin(npu.stat_kind, numeric) & np.isin(b_kind, numeric)
    nan_n, nan_b = npu.stat_kind == StatKind.NAN, b_kind == StatKind.NAN
    with np.errstate(all="ignore"):
        nv, bv = npu.stats, b_vals
        denom = np.maximum(np.abs(nv), np.abs(bv))
        numel = {s: _numel(s) for s in set(npu.shape)}  # a few distinct shape texts
        typical = bv[:, 3] / np.sqrt(np.fromiter(map(numel.__getitem__, npu.shape), dtype=np.float64, count=n))
        denom[:, 2] = np.maximum(denom[:, 2], typical)  # mean: measured against the typical magnitude
        rel = np.where(nv == bv, 0.0, np.abs(nv - bv) / np.where(denom > 0, denom, 1.0))
        rel = np.where(ok, rel, np.where(nan_n ^ nan_b, np.inf, np.where(nan_n & nan_b, 0.0, np.nan)))
    known = hit & np.any(~np.isnan(rel), axis=1)
    score = np.where(known, np.nanmax(np.where(np.isnan(rel), -np.inf, rel), axis=1), np.nan)
    differs = known & (score > STAT_TOLERANCE)
    return "max relative difference of max/min/mean/norm", score, differs, known, STAT_TOLERANCE


def inplace_artifacts(o: CompareOutcome, differs: np.ndarray) -> np.ndarray:
    """Rows of `differs` that are input rows of in-place APIs (`add_`, ...) recorded after the write on one side.

    The dumper can hash or measure an in-place call's input after the call has overwritten it; that
    side's input then equals its own output. Such a row says nothing about the data, so it is not
    counted as a difference.
    """
    npu, bench, match = o.npu, o.bench, o.match
    out = np.zeros(len(npu), dtype=bool)
    outputs = np.flatnonzero(npu.state == State.OUTPUT)
    entries, first = np.unique(npu.entry_index[outputs], return_index=True)
    first_out = dict(zip(entries.tolist(), outputs[first].tolist()))
    for i in np.flatnonzero(differs & (npu.state == State.INPUT)).tolist():
        entry = npu.entries[npu.entry_index[i]]
        api = entry.rsplit(".", 2)[0].rsplit(".", 1)[-1]
        k = first_out.get(int(npu.entry_index[i]))
        if k is None or not (api.endswith("_") and not api.endswith("__")):
            continue
        j, jk = int(match[i]), int(match[k])
        if j < 0 or jk < 0:
            continue
        out[i] = _same_value(npu, i, npu, k) or _same_value(bench, j, bench, jk)
    return out


def _same_value(a: RowTable, i: int, b: RowTable, j: int) -> bool:
    if a.md5[i] is not None and a.md5[i] == b.md5[j]:
        return True
    return bool(np.all(a.stat_kind[i] == StatKind.NUMBER) and np.array_equal(a.stats[i], b.stats[j]))


def _is_scalar(dtype: str) -> bool:
    return dtype.startswith("<class")


def _config_rows(o: CompareOutcome, scalar: np.ndarray) -> np.ndarray:
    """Non-tensor argument rows whose values differ (a `dim`, a `p`, an `eps`)."""
    npu, bench, match = o.npu, o.bench, o.match
    out = np.zeros(len(npu), dtype=bool)
    rows = np.flatnonzero(scalar & (match >= 0))
    if not len(rows):
        return out
    cols = match[rows]
    kn, kb = npu.stat_kind[rows, 0], bench.stat_kind[cols, 0]
    numeric = (StatKind.NUMBER, StatKind.INT)  # compared by value
    both_numeric = np.isin(kn, numeric) & np.isin(kb, numeric)
    raw = (kn == StatKind.RAW) | (kb == StatKind.RAW)
    differs = np.where(both_numeric, npu.stats[rows, 0] != bench.stats[cols, 0], kn != kb)
    for k in np.flatnonzero(raw).tolist():  # text, bool, ...: as Python compares the shown values
        differs[k] = npu.stat_display(int(rows[k]), 0) != bench.stat_display(int(cols[k]), 0)
    out[rows] = differs
    return out


def _in_entry_order(ei: np.ndarray) -> bool:
    return not len(ei) or bool(np.all(ei[1:] >= ei[:-1]))


def analyse(o: CompareOutcome, parents: dict[str, str | None] | None = None) -> RootCause:
    npu = o.npu
    entries = npu.entries
    n_entries = len(entries)
    metric, score, differs, known, threshold = _row_scores(o)
    artifact = inplace_artifacts(o, differs)
    differs, known = differs & ~artifact, known & ~artifact
    scalar = npu.dtype_mask(_is_scalar)
    config = _config_rows(o, scalar)
    tensor_row = ~scalar & ~npu.dtype_mask("None".__eq__)
    is_in = (npu.state == State.INPUT) | (npu.state == State.PARAMETERS)
    is_out = (npu.state == State.OUTPUT) | (npu.state == State.PARAMETERS_GRAD)
    ei = npu.entry_index

    # rows come in entry order (the builder appends them so): reductions over contiguous segments; any other
    # order takes the unbuffered ufunc.at path
    in_order = _in_entry_order(ei)
    seg = np.flatnonzero(np.r_[True, ei[1:] != ei[:-1]]) if len(ei) else np.zeros(0, dtype=np.intp)
    seg_entry = ei[seg]

    def per_entry(mask: np.ndarray, values: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(n_entries, fill)
        if in_order and len(seg):
            out[seg_entry] = np.maximum.reduceat(np.where(mask & ~np.isnan(values), values, fill), seg)
        elif not in_order:
            sel = mask & ~np.isnan(values)
            np.maximum.at(out, ei[sel], values[sel])
        return out

    def any_per_entry(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(n_entries, dtype=bool)
        if in_order and len(seg):
            out[seg_entry] = np.logical_or.reduceat(mask, seg)
        elif not in_order:
            np.logical_or.at(out, ei, mask)
        return out

    in_diff = any_per_entry(is_in & tensor_row & differs)
    out_diff = any_per_entry(is_out & differs)
    any_known = any_per_entry(known)
    cfg_diff = any_per_entry(is_in & config)
    has_out = any_per_entry(is_out & known)
    in_scores = per_entry(is_in & tensor_row, score, -np.inf)
    out_scores = per_entry(is_out, score, -np.inf)
    in_scores[np.isneginf(in_scores)] = np.nan
    out_scores[np.isneginf(out_scores)] = np.nan
    first_row: dict[int, str] = {}
    for i in np.flatnonzero(differs | config).tolist():
        first_row.setdefault(int(ei[i]), npu.names[i])
    differing_args: dict[int, list[str]] = {}
    for i in np.flatnonzero(config & is_in).tolist():
        differing_args.setdefault(int(ei[i]), []).append(npu.names[i].rsplit(".", 1)[-1])

    states: list[CallState | None] = [None] * n_entries
    candidates: list[Origin] = []
    seen_diff = False  # a difference in an earlier call
    last_ok: str | None = None
    phases = [phase_of(name) for name in entries]
    # execution (dump) order; parameter gradients, which the dumper lists beside their module's
    # forward call, last. Calls after the first backward one use activations saved in forward, so
    # once the forward differs anywhere their differences are inherited, not made.
    order = [k for k in range(n_entries) if phases[k] != "parameters_grad"]
    order += [k for k in range(n_entries) if phases[k] == "parameters_grad"]
    inherited = False
    known_l, cfg_l, in_l, out_l, has_out_l = (a.tolist() for a in (any_known, cfg_diff, in_diff, out_diff, has_out))

    def evidence(e: int) -> Evidence:
        return Evidence(metric, _num(in_scores[e]), _num(out_scores[e]), threshold, first_row.get(e))

    for e in order:
        phase = phases[e]
        if phase != "forward" and seen_diff:
            inherited = True
        if not known_l[e] and not cfg_l[e]:
            states[e] = CallState.UNKNOWN
            continue
        name = entries[e]
        origin: Origin | None = None
        if in_l[e] or (inherited and (out_l[e] or cfg_l[e])):
            if not seen_diff and phase != "parameters_grad":
                origin = Origin(name, OriginKind.BOUNDARY, phase, last_ok, evidence(e))
            state = CallState.ORIGIN if origin else CallState.PROPAGATED
        elif cfg_l[e]:
            origin = Origin(name, OriginKind.CONFIGURATION, phase, None, evidence(e),
                            tuple(differing_args.get(e, ())))  # fmt: skip
            state = CallState.ORIGIN
        elif out_l[e]:
            origin = Origin(name, OriginKind.COMPUTATION, phase, None, evidence(e))
            state = CallState.ORIGIN
        else:
            state = CallState.OK
            if has_out_l[e]:
                last_ok = name
        if state is not CallState.OK:
            seen_diff = True
        states[e] = state
        if origin is not None:
            candidates.append(origin)

    origins = _innermost(candidates, parents or {})
    return RootCause(list(entries), [s or CallState.UNKNOWN for s in states], origins, metric, in_scores, out_scores,
                     dict(parents or {}))


def _innermost(origins: list[Origin], parents: dict[str, str | None]) -> list[Origin]:
    """Drop module origins that contain another origin (construct.json gives the parents)."""
    names = {o.entry for o in origins}
    inner_parents: set[str] = set()
    for o in origins:
        parent = parents.get(o.entry)
        guard = 0
        while parent and guard < 1000:
            if parent in names:
                inner_parents.add(parent)
            parent = parents.get(parent)
            guard += 1
    return [o for o in origins if o.entry not in inner_parents or o.kind is not OriginKind.COMPUTATION]


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)
