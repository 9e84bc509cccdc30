"""Root cause: the operator where accuracy first breaks, told apart from precision noise.

Once one operator goes wrong, every operator after it inherits the error, so a table full of red says little.
And two runs on different hardware never agree exactly: every operator differs a little (bf16 rounding, another
accumulation order, a fused kernel). So each API/module call is measured against the noise it received
(judge/noise.py: the lowest precision upstream, the resolution of the recorded statistics, and the largest
difference seen so far in execution order: the noise floor) and classified:

- `origin`: its outputs differ clearly more than the floor explains (computation), or a non-tensor argument
  differs (configuration), or its inputs jump above everything upstream (boundary: something the dump did not
  record changed the data between two calls), or a NaN/Inf appears;
- `suspect`: it stands above the floor, but by less than the margin that precision can support (a statistics
  dump at 1-2x the floor): named with the dump that would decide;
- `propagated`: its inputs carry an origin's error;
- `noise`: it differs, within what precision explains;
- `ok`: nothing differs.

Calls are paired for this by (enclosing module, API, k-th call inside the module), so an extra call on one side
shifts nothing outside its module. Calls are walked in execution (dump) order; forward origins rank first, then
backward, then parameter gradients. A module that is an origin gives way to an API or module inside it (from
construct.json) that is an origin too, so the innermost call is named. docs/rootcause.md has the rule and the
measurements behind each constant.
"""

from __future__ import annotations

import functools
import math
import operator
import os
from dataclasses import field, replace
from enum import Enum

import numpy as np

from msprobe_compare.judge import backward, noise
from msprobe_compare.judge.noise import Tolerance
from msprobe_compare.load.rows import PHASES, RowTable, State, StatKind, name_flags
from msprobe_compare.load.mode import Mode
from msprobe_compare.measure.measured import Measured
from msprobe_compare.measure.tensor_metrics import UNIT_ROUNDOFF
from msprobe_compare.records import dataclass
from msprobe_compare.runtime import Later


class CallState(Enum):
    OK = "ok"
    ORIGIN = "origin"
    PROPAGATED = "propagated"
    UNKNOWN = "unknown"  # nothing comparable (unmatched rows only)
    NOISE = "noise"  # differs within what precision explains
    SUSPECT = "suspect"  # above the floor, not by a margin the precision supports
    ONE_SIDED = "one-sided"  # a call on one side only, inside a module call both sides have: never paired elsewhere


class OriginKind(Enum):
    COMPUTATION = "computation"
    BOUNDARY = "boundary"
    CONFIGURATION = "configuration"


class FloorKind(Enum):
    """Where a noise floor came from (render/story.floor_source_text says it)."""

    UPSTREAM = "upstream"  # the largest difference upstream, at `at` (None: not located)
    OWN_INPUTS = "own inputs"
    STAT_ULP = "stat ulp"  # one ulp of the recorded statistics of `dtype`
    ELEMENT_ROUNDING = "element rounding"  # one rounding of each element (tensor measures) in `dtype`
    LOWEST_PRECISION = "lowest precision"  # `units` unit roundoffs of `dtype`, the lowest precision upstream (`at`)
    MIN_FLOOR = "min floor"  # --tolerance min_floor
    REDUCED_MATMUL = "reduced matmul"  # `units` x the unit roundoff TF32/HF32 matmuls may run at (reduced_matmul)
    # a backward call: its incoming gradients' and its forward call's differences, times `units`, the largest gain
    # of its `peers` comparable backward calls (judge/backward.py)
    BACKWARD_PEERS = "backward peers"


@dataclass(frozen=True)
class FloorSource:
    kind: FloorKind
    at: str | None = None  # the call it came from
    dtype: str = ""  # "" where the dtype is not known
    units: float = 1.0
    peers: int = 0  # BACKWARD_PEERS: how many calls it was compared with


@dataclass(frozen=True)
class ArgDiff:
    """A non-tensor argument that differs: its path inside the call and both sides' cell texts."""

    path: str
    npu: str
    bench: str


@dataclass(frozen=True)
class Evidence:
    """What decided: the measured difference, the noise floor it was compared with and where that floor came
    from, the threshold, the dtypes of the deciding row."""

    metric: str
    inputs: float | None  # worst measured difference of the inputs
    outputs: float | None  # of the outputs
    threshold: float
    first_row: str | None  # the deciding row (the first differing row for md5 and arguments)
    floor: float | None = None
    floor_source: FloorSource | None = None
    ratio: float | None = None  # measured difference / floor
    dtypes: tuple[str, str] = ("", "")  # NPU, bench dtype of the deciding row
    args: tuple[ArgDiff, ...] = ()  # differing arguments
    # tensor mode: (share of elements beyond rounding, the share upstream it was compared with, the relative error
    # that counts as beyond); None when not measured
    beyond: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class RankAttribution:
    """Under a parallel layout, the rank an origin was seen on (layouts.attribute_origins); render/ says it."""

    rank: str  # e.g. "rank1"
    alone: bool  # True: the only rank that holds the call; False: the only one of its group that diverges
    local_name: str | None = None  # alone: the rank's own name of the call, when it differs
    others: tuple[str, ...] = ()  # not alone: the other ranks of the group
    seen_at: str | None = None  # not alone: the later reduction where the others first see it


@dataclass(frozen=True)
class Origin:
    entry: str
    kind: OriginKind
    phase: str  # "forward" | "backward" | "parameters_grad"
    after: str | None  # boundary: the last call whose outputs agree (within noise)
    evidence: Evidence
    differing_args: tuple[str, ...] = ()  # configuration: the non-tensor arguments that differ
    nonfinite: bool = False  # a NaN/Inf appears here
    # a collective (all_reduce, all_gather, ...) whose inputs agree on this rank and whose outputs differ: another
    # rank's difference arrives here (render/ names the rank whose origin comes earlier, across step folders)
    collective: bool = False

    on_rank: RankAttribution | None = None  # parallel layouts: the one rank of a group that diverges


class SuspectReason(Enum):
    """Why a call is a suspect (render/story.suspect_reason_text says it)."""

    BELOW_MARGIN = "below margin"  # above the floor by less than the margin (`where`: inputs or outputs)
    MD5_INPUTS = "md5 inputs"  # its inputs' md5 differ under low precision
    MD5_OUTPUTS = "md5 outputs"  # its outputs' md5 differ, inputs agree, under low precision


@dataclass(frozen=True)
class Suspect:
    """A call above the noise floor by less than the margin precision can support: the data cannot decide."""

    entry: str
    phase: str
    reason: SuspectReason
    evidence: Evidence
    mode: Mode  # what to dump to decide depends on it
    where: str = "outputs"  # BELOW_MARGIN: "inputs" or "outputs"
    margin: float = 0.0  # BELOW_MARGIN: the margin over the floor an origin needs


@dataclass
class RootCause:
    entries: list[str]
    states: list[CallState]
    origins: list[Origin] = field(default_factory=list)
    metric: str = ""
    in_scores: np.ndarray | None = None  # per entry, worst input measure (NaN when none)
    out_scores: np.ndarray | None = None
    parents: dict[str, str | None] = field(default_factory=dict)  # module tree from construct.json
    suspects: list[Suspect] = field(default_factory=list)
    floors: np.ndarray | None = None  # per entry, the noise floor its outputs were compared with (NaN: none)
    tolerance: Tolerance = field(default_factory=Tolerance)
    ratios: np.ndarray | None = None  # per entry, the larger of input and output difference over its floor
    repaired: int = 0  # calls the analysis paired differently from the result table (module-local pairing)
    lowest_precision: str = ""  # the coarsest floating dtype seen ("" when none)
    backward: backward.BackwardJudgement | None = None  # the backward calls' gains over their own floors and peers

    @property
    def first(self) -> Origin | None:
        return self.origins[0] if self.origins else None

    @functools.cached_property
    def compared_calls(self) -> int:
        """Calls with at least one compared row (the others have no bench counterpart); counted once."""
        return len(self.states) - self.states.count(CallState.UNKNOWN) - self.one_sided

    @functools.cached_property
    def one_sided(self) -> int:
        """Calls on one side only inside module calls both sides have (left unpaired); counted once."""
        return self.states.count(CallState.ONE_SIDED)


# collective calls: their outputs carry the other ranks' data (docs/rootcause.md, Collectives)
COLLECTIVE_APIS = ("Distributed.", "Communication.comm.", "Primitive.all_reduce.", "Primitive.all_gather.",
                   "Primitive.reduce_scatter.", "Primitive.broadcast.", "Primitive.all_to_all.",
                   "Primitive.neighbor_exchange.", "Primitive.reduce.")  # fmt: skip


def collective_calls(entries: list[str]) -> np.ndarray:
    """Per call: a collective communication call (COLLECTIVE_APIS), whose outputs carry the other ranks' data."""
    return np.fromiter((e.startswith(COLLECTIVE_APIS) for e in entries), dtype=bool, count=len(entries))


def inplace_artifacts(o: Measured, differs: np.ndarray, match: np.ndarray | None = None) -> np.ndarray:
    """Rows of `differs` that are input rows of in-place APIs (`add_`, ...) recorded after the write on one side.

    The dumper can hash or measure an in-place call's input after the call has overwritten it; that
    side's input then equals its own output. Such a row says nothing about the data, so it is not
    counted as a difference.
    """
    npu, bench = o.npu, o.bench
    match = o.match if match is None else match
    out = np.zeros(len(npu), dtype=bool)
    inplace = _inplace_entries(npu.entries)
    candidates = differs & (npu.state == State.INPUT)
    candidates &= inplace[npu.entry_index] if len(npu.entries) else candidates
    if not candidates.any():
        return out
    outputs = np.flatnonzero(npu.state == State.OUTPUT)
    entries, first = np.unique(npu.entry_index[outputs], return_index=True)
    first_out = dict(zip(entries.tolist(), outputs[first].tolist()))
    for i in np.flatnonzero(candidates).tolist():
        k = first_out.get(int(npu.entry_index[i]))
        if k is None:
            continue
        j, jk = int(match[i]), int(match[k])
        if j < 0 or jk < 0:
            continue
        out[i] = _same_value(npu, i, npu, k) or _same_value(bench, j, bench, jk)
    return out


def _inplace_entries(entries: list[str]) -> np.ndarray:
    """Per entry: a call of an in-place API (`add_`); computed once per entry list (`rows.name_flags`)."""
    return name_flags(entries)[3]


def _same_value(a: RowTable, i: int, b: RowTable, j: int) -> bool:
    if a.md5[i] is not None and a.md5[i] == b.md5[j]:
        return True
    return bool(np.all(a.stat_kind[i] == StatKind.NUMBER) and np.array_equal(a.stats[i], b.stats[j]))


def _stat_calls(o: Measured, match: np.ndarray, tensor_row: np.ndarray, is_in: np.ndarray, is_out: np.ndarray,
                red: _PerEntry) -> noise.CallMeasures | None:  # fmt: skip
    """Statistics mode: `noise.stat_calls` over the rows in entry order (None without C or out of order)."""
    if not red.in_order or not len(red.seg):
        return None
    flags = tensor_row.view(np.uint8) * np.uint8(noise.ROW_TENSOR)
    flags |= is_in.view(np.uint8) * np.uint8(noise.ROW_INPUT)
    flags |= is_out.view(np.uint8) * np.uint8(noise.ROW_OUTPUT)
    artifacts = _inplace_candidates(o, match)
    if artifacts is not None:
        flags |= artifacts.view(np.uint8) * np.uint8(noise.ROW_ARTIFACT)
    return noise.stat_calls(o.npu, o.bench, match, flags, red.seg, None if red.every else red.seg_entry, red.n)


def _inplace_candidates(o: Measured, match: np.ndarray) -> np.ndarray | None:
    """The rows `inplace_artifacts` gives when every input row of an in-place call differs: each is an artefact if
    it differs (None: no such row)."""
    npu = o.npu
    if not len(npu.entries):
        return None
    inplace = _inplace_entries(npu.entries)
    if not inplace.any():
        return None
    rows = (npu.state == State.INPUT) & inplace[npu.entry_index]
    return inplace_artifacts(o, rows, match) if rows.any() else None


def _is_scalar(dtype: str) -> bool:
    return dtype.startswith("<class")


def _config_rows(o: Measured, scalar: np.ndarray, match: np.ndarray) -> np.ndarray:
    """Non-tensor argument rows whose values differ (a `dim`, a `p`, an `eps`)."""
    npu, bench = o.npu, o.bench
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
    both_raw = (kn == StatKind.RAW) & (kb == StatKind.RAW)
    if both_raw.any():  # text, bool, ...: compared as Python compares them, all at once
        at = np.flatnonzero(both_raw)
        a_raw, b_raw = noise.raw_args(npu)[rows[at]], noise.raw_args(bench)[cols[at]]
        differs[at] = np.fromiter(map(operator.ne, a_raw, b_raw), dtype=bool, count=len(at))
    for k in np.flatnonzero(raw & ~(both_raw & ~differs)).tolist():  # one side raw, or raw values that differ
        a, b = npu.stat_display(int(rows[k]), 0), bench.stat_display(int(cols[k]), 0)
        # the target of a cast, float16 on one side and float32 on the other, is the precision the runs differ
        # in (measured by the noise model), not a configuration difference
        differs[k] = a != b and not (noise.is_float_dtype_name(str(a)) and noise.is_float_dtype_name(str(b)))
    out[rows] = differs
    return out


def _max_cols(a: np.ndarray) -> np.ndarray:
    """a.max(axis=1) for a few columns, column by column (a reduction along a short axis is slow); NaN propagates
    as there."""
    out = a[:, 0].copy()
    for k in range(1, a.shape[1]):
        np.maximum(out, a[:, k], out=out)
    return out


def _in_entry_order(ei: np.ndarray) -> bool:
    return not len(ei) or bool(np.all(ei[1:] >= ei[:-1]))


class _PerEntry:
    """Reductions of row columns to one value per call: over contiguous row segments when rows come in entry
    order (the builder appends them so), else through the unbuffered ufunc.at path."""

    def __init__(self, ei: np.ndarray, n_entries: int) -> None:
        self.ei, self.n = ei, n_entries
        self.in_order = _in_entry_order(ei)
        self.seg = np.flatnonzero(np.r_[True, ei[1:] != ei[:-1]]) if len(ei) else np.zeros(0, dtype=np.intp)
        self.seg_entry = ei[self.seg]
        self.every = self.in_order and len(self.seg) == n_entries  # each call has rows: run t is call t

    def max(self, mask: np.ndarray, values: np.ndarray, fill: float = -np.inf) -> np.ndarray:
        """Per entry max of `values` (1-d or 2-d) over rows of `mask`, NaN ignored; `fill` where none."""
        shape = (self.n,) + values.shape[1:]
        fast = noise._native() if self.in_order and len(self.seg) else None
        if fast is not None:  # every column in one pass over the rows, in C (the numpy code below is its twin)
            runs = np.empty((len(self.seg),) + values.shape[1:])
            fast.seg_max(np.ascontiguousarray(values, dtype=np.float64), np.ascontiguousarray(mask, dtype=bool),
                         np.ascontiguousarray(self.seg, dtype=np.intp), float(fill), runs)  # fmt: skip
            if self.every:
                return runs
            out = np.full(shape, fill)
            out[self.seg_entry] = runs
            return out
        out = np.full(shape, fill)
        if values.ndim == 2 and self.in_order:  # column by column: reduceat along a contiguous axis is faster
            for c in range(values.shape[1]):
                out[:, c] = self.max(mask, values[:, c], fill)
            return out
        m = mask if values.ndim == 1 else mask[:, None]
        vals = np.where(m & ~np.isnan(values), values, fill)
        if self.in_order and len(self.seg):
            out[self.seg_entry] = np.maximum.reduceat(vals, self.seg, axis=0)
        elif not self.in_order and len(self.ei):
            np.maximum.at(out, self.ei, vals)
        out += 0.0  # a zero maximum is +0: which zero a reduction keeps among -0 and +0 depends on its order
        return out

    def any_of(self, *masks: np.ndarray) -> list[np.ndarray]:
        """`any` of up to 8 masks at once: packed into the bits of one byte per row, one reduction."""
        assert len(masks) <= 8
        packed = np.zeros(len(self.ei), dtype=np.uint8)
        for bit, mask in enumerate(masks):
            packed |= mask.view(np.uint8) << np.uint8(bit)
        out = np.zeros(self.n, dtype=np.uint8)
        if self.in_order and len(self.seg):
            out[self.seg_entry] = np.bitwise_or.reduceat(packed, self.seg)
        elif not self.in_order and len(self.ei):
            np.bitwise_or.at(out, self.ei, packed)
        return [(out & np.uint8(1 << bit)) != 0 for bit in range(len(masks))]

    def any(self, mask: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        if self.in_order and len(self.seg):
            out[self.seg_entry] = np.logical_or.reduceat(mask, self.seg)
        elif not self.in_order and len(self.ei):
            np.logical_or.at(out, self.ei, mask)
        return out


_DTYPE_OF_UNIT = {unit: name for name, unit in UNIT_ROUNDOFF.items()}
_WALK_STATES = np.array([CallState.OK, CallState.NOISE, CallState.PROPAGATED, CallState.UNKNOWN], dtype=object)


def margins(in_d: np.ndarray, out_d: np.ndarray, prior: np.ndarray, q_in: np.ndarray, q_all: np.ndarray,
            ufl: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Per call: the noise floor of its inputs (upstream, resolution, precision) and of its outputs (its own inputs
    too), each (calls, measures); the largest difference over its floor (times the measure's weight) of its inputs
    and of its outputs, and the measure that has it; the largest input difference (NaN: -inf)."""
    n_entries, k_cols = in_d.shape
    fast = noise._native() if n_entries else None
    if fast is not None:  # one pass over the calls, in C (the numpy code below is its twin)
        c = np.ascontiguousarray
        floor_in, floor_out = np.empty((n_entries, k_cols)), np.empty((n_entries, k_cols))
        r_in, r_out = np.empty(n_entries), np.empty(n_entries)
        c_in, c_out = np.empty(n_entries, dtype=np.int64), np.empty(n_entries, dtype=np.int64)
        worst_in = np.empty(n_entries)
        fast.margins(*(c(a, dtype=np.float64) for a in (in_d, out_d, prior, q_in, q_all, ufl, weight)),
                     floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in)  # fmt: skip
        return floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in
    floor_in = np.maximum(np.maximum(np.maximum(prior, 0.0), q_in), ufl[:, None])  # (calls, measures)
    floor_out = np.maximum(np.maximum(np.maximum(prior, finite_or_zero(in_d)), q_all), ufl[:, None])
    with np.errstate(all="ignore"):
        r_in_c = np.where(in_d > 0, in_d / np.where(floor_in > 0, floor_in * weight, np.inf), 0.0)
        r_out_c = np.where(out_d > 0, out_d / np.where(floor_out > 0, floor_out * weight, np.inf), 0.0)
    r_in_c[~np.isfinite(in_d)] = 0.0
    r_out_c[~np.isfinite(out_d)] = 0.0
    c_in, c_out = r_in_c.argmax(axis=1), r_out_c.argmax(axis=1)
    worst_in = _max_cols(np.where(np.isfinite(in_d), in_d, np.where(in_d > 0, np.inf, -np.inf)))
    return floor_in, floor_out, _max_cols(r_in_c), _max_cols(r_out_c), c_in, c_out, worst_in


def finite_or_zero(a: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(a), a, 0.0)


class _FiniteOrZero:
    """`finite_or_zero(values)` read element by element (the evidence asks for a few calls only)."""

    ndim = 2

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __getitem__(self, at: tuple[int, int]) -> float:
        v = float(self.values[at])
        return v if math.isfinite(v) else 0.0


def running_floor(in_d: np.ndarray, out_d: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per call and measure, the largest finite input or output difference of the calls before it in execution
    order (`order`; 0 for the first) and the call that set it (the last to reach that value; -1: none above 0)."""
    n_entries, k_cols = in_d.shape
    fast = noise._native() if n_entries else None
    if fast is not None:  # one pass in execution order, in C (the numpy code below is its twin)
        prior, prior_src = np.empty((n_entries, k_cols)), np.empty((n_entries, k_cols), dtype=np.int64)
        fast.running_floor(np.ascontiguousarray(in_d, dtype=np.float64), np.ascontiguousarray(out_d, dtype=np.float64),
                           np.ascontiguousarray(order, dtype=np.intp), prior, prior_src)  # fmt: skip
        return prior, prior_src
    seen = np.maximum(finite_or_zero(in_d), finite_or_zero(out_d))[order]  # (calls, measures) in execution order
    cum = np.maximum.accumulate(seen, axis=0) if n_entries else seen
    prior_o = np.vstack([np.zeros((1, k_cols)), cum[:-1]]) if n_entries else cum
    pos = np.arange(n_entries)[:, None]
    setter = (np.maximum.accumulate(np.where((seen >= cum) & (seen > 0), pos, -1), axis=0) if n_entries
              else np.zeros(seen.shape, dtype=np.intp))  # fmt: skip
    prior_src_o = np.vstack([np.full((1, k_cols), -1), setter[:-1]]) if n_entries else setter
    del seen, cum, setter
    prior = np.empty_like(prior_o)
    prior[order] = prior_o
    prior_src = np.empty_like(prior_src_o)
    prior_src[order] = np.where(prior_src_o >= 0, order[np.maximum(prior_src_o, 0)], -1)
    return prior, prior_src


def _md5_measures(o: Measured, match: np.ndarray, tensor_row: np.ndarray) -> noise.RowMeasures:
    npu, bench = o.npu, o.bench
    n = len(npu)
    hit = match >= 0
    b_md5 = [bench.md5[j] if j >= 0 else None for j in match.tolist()]
    differs = np.fromiter((h and a != b for h, a, b in zip(hit.tolist(), npu.md5, b_md5)), dtype=bool, count=n)
    diff = np.where(hit & tensor_row, differs.astype(float), np.nan)
    unit = np.maximum(noise.units(npu), noise.units(bench)[np.where(hit, match, 0)] if len(bench) else 0.0)
    nonfinite, nonfinite_any = noise.nonfinite_rows(npu, bench, match)  # md5 dumps record the statistics too
    return noise.RowMeasures(diff[:, None], np.zeros((n, 1)), unit, nonfinite, nonfinite_any, ("md5 differs",))


def _first_outputs(npu: RowTable, diff: np.ndarray, phase_code: np.ndarray) -> np.ndarray:
    """Per backward call, the measures of its first output row (`output.0`: the gradient of its forward call's first
    input, the one the network passes on; NaN where it has none or it is not measured); -inf for the other calls.
    A backward call's other outputs are parameter gradients, sums over the batch whose cancellation varies from
    layer to layer (a BatchNorm bias gradient), judged through this one."""
    out = np.full((len(npu.entries), diff.shape[1]), -np.inf)
    rows = np.flatnonzero(npu.state == State.OUTPUT)
    if not len(rows):
        return out
    calls, first = np.unique(npu.entry_index[rows], return_index=True)
    keep = phase_code[calls] == PHASES.index("backward")
    out[calls[keep]] = diff[rows[first[keep]]]
    return out


def _reduced_matmul(entries: list[str], out_d: np.ndarray, ufl: np.ndarray, tol: Tolerance,
                    margin: float) -> np.ndarray:  # fmt: skip
    """The matmul-class calls (noise.matmul_calls) whose outputs stand above `margin` times their precision floor:
    their floor raised to `floor_units` x `reduced_matmul` in place (an fp32 matmul may have run at TF32/HF32).
    Only those calls' names are read. Returns them."""
    if not len(entries):
        return np.zeros(0, dtype=np.intp)
    with np.errstate(invalid="ignore"):
        above = np.flatnonzero(_max_cols(np.where(np.isfinite(out_d), out_d, 0.0)) > margin * ufl)
    floor = tol.floor_units * tol.reduced_matmul
    above = above[ufl[above] < floor]
    if not len(above):
        return above
    hit = above[noise.matmul_calls([entries[e] for e in above.tolist()])]
    ufl[hit] = floor
    return hit


def md5_by_statistics(o: Measured, match: np.ndarray, tensor_row: np.ndarray) -> bool:
    """An md5 dump whose tensor rows (most of the paired ones) carry numeric statistics on both sides: judged as a
    statistics dump. md5 cannot tell rounding from a bug under bf16/fp16, nor in fp32, where a matmul may have run
    at TF32/HF32 unseen (every matmul's md5 then differs)."""
    npu, bench = o.npu, o.bench
    paired = tensor_row & (match >= 0)
    if not paired.any() or not len(bench):
        return False
    cols = match[paired]
    numeric = (npu.stat_kind[paired] <= StatKind.NAN).all(axis=1) & (bench.stat_kind[cols] <= StatKind.NAN).all(axis=1)
    return bool(numeric.mean() > 0.5)


def analyse(o: Measured, parents: dict[str, str | None] | None = None,
            bench_parents: dict[str, str | None] | None = None,
            tolerance: Tolerance | None = None, trees: noise.TreeDiff | None = None) -> RootCause:  # fmt: skip
    """Classify every call of one compare (module docstring); `parents`/`bench_parents` from construct.json,
    `trees` their `noise.tree_diff` when the caller made it already."""
    tol = tolerance or Tolerance()
    npu, bench = o.npu, o.bench
    entries = npu.entries
    n_entries = len(entries)
    match, repaired, one_sided = noise.analysis_pairing(npu, bench, o.match, parents, bench_parents, trees)
    scalar = npu.dtype_mask(_is_scalar)
    tensor_row = ~scalar & ~npu.dtype_mask("None".__eq__)
    # an md5 dump is judged by the statistics it records beside the md5 (issue #29): under bf16/fp16 every call
    # differs from the first rounded one, and an fp32 matmul may have run at TF32; md5 alone decides without them
    md5 = o.mode is Mode.MD5 and not md5_by_statistics(o, match, tensor_row)
    config = _config_rows(o, scalar, match)
    is_in = (npu.state == State.INPUT) | (npu.state == State.PARAMETERS)
    is_out = (npu.state == State.OUTPUT) | (npu.state == State.PARAMETERS_GRAD)
    ei = npu.entry_index
    red = _PerEntry(ei, n_entries)
    m: noise.RowMeasures | None = None
    fused: noise.CallMeasures | None = None
    if md5:
        m = _md5_measures(o, match, tensor_row)
        origin_margin, suspect_margin = 0.5, 0.5
    elif o.mode is Mode.ALL and o.tensors is not None:
        m = noise.tensor_measures(npu, bench, match, o.tensors, o.match)
        origin_margin, suspect_margin = tol.tensor_origin, tol.tensor_suspect
    else:
        fused = _stat_calls(o, match, tensor_row, is_in, is_out, red)
        m = noise.stat_measures(npu, bench, match) if fused is None else None
        origin_margin, suspect_margin = tol.origin, tol.suspect
    tin, tout = is_in & tensor_row, is_out & tensor_row
    if fused is not None:  # statistics mode in C: the rows measured and reduced per call in one pass
        diff, nonfinite, names = fused.diff, fused.nonfinite, noise.STAT_NAMES
        in_d, out_d, q_in, q_all, unit = fused.in_d, fused.out_d, fused.q_in, fused.q_all, fused.unit
        nf_in, nf_out, nf_in_any, known, in_diff, out_diff, has_out = (
            (fused.flags & np.uint8(1 << bit)) != 0 for bit in range(len(noise.CALL_FLAGS)))  # fmt: skip
        cfg = red.any(is_in & config)
        differs = artifact = np.zeros(0, dtype=bool)  # md5 and tensor mode only
    else:  # the numpy sequence stat_calls is the twin of, and the md5 and tensor modes
        assert m is not None
        diff, nonfinite, names = m.diff, m.nonfinite, m.names  # the measures' own array, masked in place
        diff[~tensor_row] = np.nan
        differs = noise._any_cols(diff > 0)  # NaN compares False
        artifact = inplace_artifacts(o, differs, match)
        diff[artifact] = np.nan
        differs &= ~artifact
        in_d = red.max(tin, diff)  # (calls, measures), -inf: no measured input
        out_d = red.max(tout, diff)
        quant = m.quant
        quant[np.isnan(diff)] = np.nan
        q_in = red.max(tin, quant, 0.0)
        q_all = red.max(tensor_row, quant, 0.0)
        unit = red.max(tensor_row & (match >= 0), m.unit, 0.0)
        measured = ~noise._all_cols(np.isnan(diff))
        nf_in, nf_out, nf_in_any, known, cfg, in_diff, out_diff, has_out = red.any_of(
            tin & m.nonfinite & ~artifact, tout & m.nonfinite, tin & m.nonfinite_any & ~artifact, measured,
            is_in & config, tin & differs, tout & differs, tout & measured)  # fmt: skip

    phase_code = npu.phase_codes  # PHASES index per call
    # execution (dump) order; parameter gradients, which the dumper lists beside their module's forward call, last
    grads = phase_code == PHASES.index("parameters_grad")
    order = np.r_[np.flatnonzero(~grads), np.flatnonzero(grads)].astype(np.intp)

    # the noise floor along execution order: the largest finite difference seen before each call, at least the
    # resolution of its own rows and the unit roundoff of the lowest precision upstream
    prior, prior_src = running_floor(in_d, out_d, order)
    k_cols = diff.shape[1]
    unit_o = np.maximum.accumulate(unit[order]) if n_entries else unit
    record = unit[order] > np.r_[0.0, unit_o[:-1]] if n_entries else unit  # where a lower precision first appears
    unit_src_o = (np.maximum.accumulate(np.where(record, np.arange(n_entries), -1)) if n_entries
                  else np.zeros(0, dtype=np.intp))  # fmt: skip
    u_floor = np.maximum(tol.floor_units * unit_o, 0.0 if md5 else tol.min_floor)
    ufl = np.empty(n_entries)
    ufl[order] = u_floor
    # a collective adds no computation of its own beyond a sum (one rounding per rank): its floor is the precision's,
    # not `min_floor`, so the first collective that carries another rank's small difference stands out
    collective = collective_calls(entries) if n_entries else np.zeros(0, dtype=bool)
    if collective.any():
        ufl[order] = np.where(collective[order], tol.floor_units * unit_o, u_floor)
    reduced = _reduced_matmul(entries, out_d, ufl, tol, suspect_margin) if not md5 else np.zeros(0, dtype=np.intp)
    usrc = np.empty(n_entries, dtype=np.intp)
    usrc[order] = order[np.maximum(unit_src_o, 0).astype(np.intp)] if n_entries else usrc
    # candidates per component: 0 prior (upstream), 1 own inputs (outputs only), 2 resolution, 3 precision/min
    base_in, base_out = (prior, None, q_in, ufl), (prior, _FiniteOrZero(in_d), q_all, ufl)
    # Max/Min (the third measure) are single elements: their margins are `extremes` times the others'
    weight = np.ones(k_cols)
    if k_cols == 3:
        weight[2] = tol.extremes
    floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in = margins(in_d, out_d, prior, q_in, q_all, ufl, weight)
    bwd = backward.judge(entries, phase_code, parents or {}, in_d, _first_outputs(npu, diff, phase_code), q_all, ufl,
                         weight, tol.backward_origin) if not md5 else None  # fmt: skip
    beyond = None
    if m is not None and m.beyond is not None and n_entries:
        upstream = np.empty(n_entries)
        upstream[order] = tol.excess_units * unit_o
        beyond = _beyond_floor(m, red, tin & ~artifact, tout, order, npu.shape, upstream)

    first_origin_floor = math.inf
    candidates: list[Origin] = []
    suspects: list[Suspect] = []
    seen_nf = False  # a NaN/Inf in an earlier call
    above = np.zeros(n_entries, dtype=bool)  # per call, worst_in > suspect_margin * first_origin_floor (first origin)
    ctx = _Context(o, match, diff, names, nonfinite, red, entries, phase_code, in_d, out_d, floor_in, floor_out,
                   base_in, base_out, c_in, c_out, prior_src, usrc, unit, origin_margin, config, tol, weight,
                   beyond, reduced)  # fmt: skip
    dtype_step = _dtype_step(o, match, tensor_row, differs, red) if md5 else None
    # calls with nothing that can make an origin or suspect (no NaN/Inf, no differing argument, below the suspect
    # margin) and calls with nothing compared: their state follows from three switches of the walk alone (a
    # difference seen, a backward call after it, the first origin), so they are decided together after the walk
    # over the others. Positions below are places in execution order (`order`).
    quiet_e = ~(nf_in | nf_out | nf_in_any | cfg | (r_in > suspect_margin) | (r_out > suspect_margin)) & known
    if md5:
        quiet_e[:] = False
    elif bwd is not None:
        quiet_e &= ~bwd.above  # judged in the walk when nothing upstream was an origin
    quiet, skip = quiet_e[order], (~known & ~cfg)[order]
    differs_o = (in_diff | out_diff)[order]
    at = np.arange(n_entries)
    # the first quiet call that differs, and per position the next call that is not a forward one (n: none)
    first_quiet_diff = int(np.argmax(quiet & differs_o)) if (quiet & differs_o).any() else n_entries
    not_forward = np.r_[np.where(phase_code[order] != PHASES.index("forward"), at, n_entries), n_entries]
    next_backward = np.minimum.accumulate(not_forward[::-1])[::-1].tolist()
    # per position, the last quiet call with compared outputs at or before it (-1: none)
    quiet_ok = np.maximum.accumulate(np.where(quiet & has_out[order], at, -1)) if n_entries else at
    walked = np.flatnonzero(~(quiet | skip)).tolist()
    t_diff = first_quiet_diff  # the first call whose state is not OK
    t_found = n_entries  # the first origin
    last_walked_ok = -1  # the last walked call that is OK or noise and has compared outputs
    walked_states: list[CallState] = []
    order_l = order.tolist()
    for p in walked:
        e = order_l[p]
        nfin, nfout, nfany, cfg_e = bool(nf_in[e]), bool(nf_out[e]), bool(nf_in_any[e]), bool(cfg[e])
        seen_diff = t_diff < p
        inherited = seen_diff and next_backward[t_diff + 1] <= p
        ok_at = max(int(quiet_ok[p - 1]) if p else -1, last_walked_ok)
        last_ok = entries[order_l[ok_at]] if ok_at >= 0 else None
        phase = PHASES[phase_code[e]]
        differs_e = bool(differs_o[p])
        rin, rout = float(r_in[e]), float(r_out[e])
        origin: Origin | None = None
        suspect: Suspect | None = None
        found = bool(candidates)
        if (nfin or nfout) and not seen_nf and phase != "parameters_grad":
            if nfin:
                origin = ctx.origin(e, OriginKind.BOUNDARY, last_ok, nonfinite=True)
            elif not nfany:
                origin = ctx.origin(e, OriginKind.COMPUTATION, None, nonfinite=True)
                origin = replace(origin, collective=bool(collective[e]))  # a NaN/Inf another rank sends
            state = CallState.ORIGIN if origin else CallState.PROPAGATED
        elif nfin or nfany:
            state = CallState.PROPAGATED
        elif inherited and not found and collective[e] and rout > origin_margin and rin <= suspect_margin:
            # after the backward pass began (gradients all-reduced): another rank's difference arrives here
            origin = replace(ctx.origin(e, OriginKind.COMPUTATION, None), collective=True)
            state = CallState.ORIGIN
        elif inherited and not found and bwd is not None and bwd.above[e]:
            origin = ctx.backward_origin(e, bwd)  # a backward call far above what its inputs and peers explain
            state = CallState.ORIGIN
        elif inherited:
            state = (CallState.PROPAGATED if found else CallState.NOISE) if differs_e or cfg_e else CallState.OK
        elif cfg_e and (not found or not above[e]):
            origin = ctx.origin(e, OriginKind.CONFIGURATION, None)
            state = CallState.ORIGIN
        elif found and above[e]:
            state = CallState.PROPAGATED
        elif md5:
            state, origin, suspect = ctx.md5_state(e, seen_diff, last_ok, dtype_step)
        elif found and (rin > suspect_margin or rout > suspect_margin):
            state = CallState.PROPAGATED  # after an origin a jump may be its error: data flow is not recorded
        elif rin > origin_margin:
            origin = ctx.origin(e, OriginKind.BOUNDARY, last_ok)
            state = CallState.ORIGIN
        elif rout > origin_margin:
            origin = ctx.origin(e, OriginKind.COMPUTATION, None)
            if collective[e] and rin <= suspect_margin:  # inputs agree here: another rank's difference arrives
                origin = replace(origin, collective=True)
            state = CallState.ORIGIN
        elif rin > suspect_margin or rout > suspect_margin:
            boundary = rin > suspect_margin and rin >= rout
            if ctx.confirmed(e, boundary):  # tensor mode: the share of elements beyond rounding agrees
                origin = ctx.origin(e, OriginKind.BOUNDARY if boundary else OriginKind.COMPUTATION,
                                    last_ok if boundary else None)  # fmt: skip
                state = CallState.ORIGIN
            else:
                suspect = ctx.suspect(e, boundary=boundary)
                state = CallState.SUSPECT
        elif differs_e:
            state = CallState.NOISE
        else:
            state = CallState.OK
        if state in (CallState.OK, CallState.NOISE) and has_out[e]:
            last_walked_ok = p
        if state is not CallState.OK and t_diff > p:
            t_diff = p
        if nfin or nfout or nfany:
            seen_nf = True
        walked_states.append(state)
        if origin is not None:
            if not candidates:
                first_origin_floor = float(floor_out[e].max()) if not md5 else 0.5
                above = worst_in > suspect_margin * first_origin_floor
                t_found = p
            candidates.append(origin)
        if suspect is not None:
            suspects.append(suspect)
    # the quiet calls: OK where nothing differs; after the first origin, propagated where the backward pass
    # inherits or the inputs stand above the first origin's floor; else noise. Calls with nothing compared: unknown
    inherit_at = next_backward[t_diff + 1] if t_diff < n_entries else n_entries
    code = np.full(n_entries, len(_WALK_STATES) - 1, dtype=np.int8)  # UNKNOWN
    prop = (at > t_found) & ((at >= inherit_at) | above[order])
    code[quiet] = np.where(differs_o, np.where(prop, 2, 1), 0)[quiet]
    states_o = _WALK_STATES[code]
    if walked:
        states_o[walked] = walked_states
    by_entry = np.empty(n_entries, dtype=object)
    by_entry[order] = states_o
    if one_sided is not None:  # unknown for want of a counterpart: say why
        by_entry[one_sided & (by_entry == CallState.UNKNOWN)] = CallState.ONE_SIDED
    states: list[CallState] = by_entry.tolist()

    origins = _innermost(candidates, parents or {})

    def worst(a: np.ndarray) -> np.ndarray:
        return np.where(noise._all_cols(np.isneginf(a)), np.nan, _max_cols(a))

    # the floor each call's outputs were compared with; none for parameter gradients (judged after the backward
    # pass, though the dump lists them beside their module's forward call) and calls without counterpart
    hidden = ~(known | cfg) | grads if n_entries else False  # UNKNOWN: the walk skips exactly these calls
    floors = np.where(hidden, np.nan, _max_cols(floor_out) if n_entries else np.zeros(0))
    lowest = float(unit.max()) if len(unit) else 0.0  # no NaN: the per-call maxima skip them
    shown = list(dict.fromkeys(names))
    metric = "difference: " + (", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else shown[0])
    noise.drop_raw_args(npu, bench)  # 8 bytes per row and side, of no use after the analysis
    return RootCause(list(entries), states, origins, metric, worst(in_d), worst(out_d), parents or {},
                     _innermost_suspects(suspects, origins, parents or {}), floors, tol, np.maximum(r_in, r_out),
                     repaired, _DTYPE_OF_UNIT.get(lowest, ""), bwd)  # fmt: skip


# The analysis runs in this process by default. A forked child beside measure, judge and the table writer costs
# a second copy of the pages it touches: on the 1M-row benchmark the tree's Pss peaked at 1207 MiB forked against
# 959 MiB in-process, above the 1 GiB goal, for about 0.3 s of wall time saved (docs/rootcause.md, Speed).
# FORK_ENV="1" forks it from FORK_MIN_ROWS rows on, for bench/rootcause_ab.py --fork.
FORK_ENV = "MSPROBE_BENCH_FORK_ROOTCAUSE"
FORK_MIN_ROWS = 131072


def analyse_later(o: Measured, parents: dict[str, str | None] | None = None,
                  bench_parents: dict[str, str | None] | None = None, tolerance: Tolerance | None = None,
                  trees: noise.TreeDiff | None = None, *, fork: bool | None = None) -> Later[RootCause]:  # fmt: skip
    """`analyse`, in this process when asked for (`fork` None: unless FORK_ENV is "1" and the compare has at least
    FORK_MIN_ROWS rows), or in a forked child while this process measures, judges and writes the table; the same
    RootCause either way. `o` needs its pairing (and, in tensor mode, its tensor metrics), not its statistics diffs.
    The child sends the result without the entry names and NPU module tree, which this process holds already."""
    entries = o.npu.entries

    def work() -> RootCause:
        return analyse(o, parents, bench_parents, tolerance, trees)

    def pack(rc: RootCause) -> RootCause:
        return replace(rc, entries=[], parents={})

    def unpack(rc: RootCause) -> RootCause:
        return replace(rc, entries=entries, parents=parents or {})  # the NPU table's list: no copy to touch

    if fork is None:
        fork = os.environ.get(FORK_ENV) == "1" and len(o.npu) >= FORK_MIN_ROWS
    return Later.start(work, what="the root-cause analysis", fork=fork, pack=pack, unpack=unpack)


@dataclass(frozen=True)
class _Beyond:
    """Per call, the share of elements beyond rounding (tensor mode) of its inputs and outputs, the floor each is
    compared with (the largest share upstream, for outputs also its own inputs', at least one element), and the
    relative error that counted as beyond."""

    inputs: np.ndarray
    outputs: np.ndarray
    floor_in: np.ndarray
    floor_out: np.ndarray
    tol: np.ndarray
    upstream: np.ndarray  # bool: some share was measured upstream (the first low-precision op has only its own)


def _beyond_floor(m: noise.RowMeasures, red: _PerEntry, tin: np.ndarray, tout: np.ndarray, order: np.ndarray,
                  shapes: list[str], upstream: np.ndarray) -> _Beyond:  # fmt: skip
    """`upstream`: per call, the tolerance the lowest precision upstream asks for (excess_units x its unit
    roundoff); a row measured at a finer one (an fp32 op downstream of bf16 ones) counts the upstream rounding
    as beyond, and is left out."""
    share = m.beyond
    assert share is not None and m.beyond_tol is not None
    with np.errstate(invalid="ignore"):
        measured = ~np.isnan(share) & (m.beyond_tol >= upstream[red.ei] * (1 - 1e-9))
    ex_in = np.maximum(red.max(tin & measured, share), 0.0)  # 0: none measured
    ex_out = np.maximum(red.max(tout & measured, share), 0.0)
    seen = np.maximum(ex_in, ex_out)[order]
    prior_o = np.r_[0.0, np.maximum.accumulate(seen)[:-1]]
    prior = np.empty_like(prior_o)
    prior[order] = prior_o
    # one element of the call's largest share unit (its smallest measured tensor): a share cannot be finer
    size = np.fromiter(map(noise.numel, shapes), dtype=np.float64, count=len(share)) if len(share) else share
    one = red.max((tin | tout) & measured, 1.0 / np.maximum(size, 1.0), 0.0)
    floor_in = np.maximum(prior, one)
    floor_out = np.maximum(floor_in, ex_in)
    tol = red.max((tin | tout) & measured, m.beyond_tol, 0.0)
    return _Beyond(ex_in, ex_out, floor_in, floor_out, tol, prior > 0)


def _dtype_step(o: Measured, match: np.ndarray, tensor_row: np.ndarray, differs: np.ndarray,
                red: _PerEntry) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """md5, per call: whether an output's dtype differs between the sides (its md5 must differ), and whether an
    input whose dtype is the same on both sides differs (MindSpore's `to_float(float16)` casts a cell's inputs, so
    the first call's inputs are Float16 against Float32: their md5 must differ too, which is no evidence)."""
    npu, bench = o.npu, o.bench
    hit = match >= 0
    b_dtype = [bench.dtype[j] if j >= 0 else "" for j in match.tolist()]
    other = np.fromiter((h and a != b for h, a, b in zip(hit.tolist(), npu.dtype, b_dtype)), dtype=bool,
                        count=len(npu))  # fmt: skip
    inputs = (npu.state == State.INPUT) | (npu.state == State.PARAMETERS)
    return (red.any(other & tensor_row & ((npu.state == State.OUTPUT) | (npu.state == State.PARAMETERS_GRAD))),
            red.any(~other & tensor_row & inputs & differs))


class _Context:
    """Builds the evidence of an origin or suspect (only for those few calls)."""

    def __init__(self, o, match, diff, names, nonfinite, red, entries, phases, in_d, out_d, floor_in, floor_out,
                 base_in, base_out, c_in, c_out, prior_src, usrc, unit, margin, config, tol, weight,
                 beyond=None, reduced: np.ndarray | None = None) -> None:  # fmt: skip
        self.o, self.match, self.diff, self.entries = o, match, diff, entries
        self.names, self.nonfinite = names, nonfinite  # the measures' names; per row, NaN/Inf on one side only
        self.phases = phases  # PHASES index per call
        self.in_d, self.out_d, self.floor_in, self.floor_out = in_d, out_d, floor_in, floor_out
        self.base_in, self.base_out, self.c_in, self.c_out = base_in, base_out, c_in, c_out
        self.prior_src, self.usrc, self.unit, self.margin, self.config = prior_src, usrc, unit, margin, config
        self.tol, self.weight, self.beyond = tol, weight, beyond
        self.reduced: set[int] = set(reduced.tolist()) if reduced is not None else set()  # the reduced-matmul floor's
        self.starts = o.npu.entry_bounds if red.in_order else None  # rows of entry e: [starts[e], starts[e + 1])

    def rows(self, e: int) -> np.ndarray:
        if self.starts is not None:
            return np.arange(self.starts[e], self.starts[e + 1])
        return np.flatnonzero(self.o.npu.entry_index == e)

    def _source(self, e: int, c: int, outputs: bool) -> FloorSource:
        base = self.base_out if outputs else self.base_in  # the floor's candidates, the first largest decides
        k = int(np.argmax([0.0 if b is None else float(b[e] if b.ndim == 1 else b[e, c]) for b in base]))
        if k == 0:
            src = int(self.prior_src[e, c])
            return FloorSource(FloorKind.UPSTREAM, self.entries[src] if src >= 0 else None)
        if k == 1:
            return FloorSource(FloorKind.OWN_INPUTS)
        if k == 2:
            dt = _DTYPE_OF_UNIT.get(float(self.unit[e]), "")
            kind = FloorKind.STAT_ULP if self.names[0].startswith("Norm") else FloorKind.ELEMENT_ROUNDING
            return FloorSource(kind, dtype=dt)
        if e in self.reduced:
            return FloorSource(FloorKind.REDUCED_MATMUL, units=self.tol.floor_units)
        u = float(self.unit[self.usrc[e]]) if self.usrc[e] >= 0 else 0.0
        if u and self.tol.floor_units * u >= self.tol.min_floor:
            return FloorSource(FloorKind.LOWEST_PRECISION, self.entries[self.usrc[e]], _DTYPE_OF_UNIT.get(u, ""),
                               self.tol.floor_units)  # fmt: skip
        return FloorSource(FloorKind.MIN_FLOOR)

    def evidence(self, e: int, outputs: bool) -> Evidence:
        npu, bench = self.o.npu, self.o.bench
        c = int(self.c_out[e] if outputs else self.c_in[e])
        rows = self.rows(e)
        state = npu.state[rows]
        side = (state == State.OUTPUT) | (state == State.PARAMETERS_GRAD)
        sel = rows[side if outputs else ~side]
        vals = self.diff[sel, c] if len(sel) else np.zeros(0)
        row = None
        dtypes = ("", "")
        if len(vals) and not np.isnan(vals).all():
            i = int(sel[int(np.nanargmax(vals))])
            j = int(self.match[i])
            row = npu.names[i]
            dtypes = (npu.dtype[i], bench.dtype[j] if j >= 0 else "")
        floor = float((self.floor_out if outputs else self.floor_in)[e, c])
        value = float((self.out_d if outputs else self.in_d)[e, c])
        ins, outs = self.in_d[e, c], self.out_d[e, c]
        return Evidence(self.names[c], _num(ins), _num(outs), float(self.margin * self.weight[c] * floor), row, floor,
                        self._source(e, c, outputs), _num(value / floor) if floor > 0 else None, dtypes,
                        beyond=self._beyond(e, outputs))  # fmt: skip

    def _beyond(self, e: int, outputs: bool) -> tuple[float, float, float] | None:
        b = self.beyond
        if b is None or not b.tol[e] > 0:
            return None
        share = (b.outputs if outputs else b.inputs)[e]
        return float(share), float((b.floor_out if outputs else b.floor_in)[e]), float(b.tol[e])

    def confirmed(self, e: int, boundary: bool) -> bool:
        """A suspect whose share of elements beyond rounding (inputs for a boundary, else outputs) stands above
        `tensor_confirm` times the share upstream: two independent measures agree, it is an origin."""
        found = self._beyond(e, outputs=not boundary)
        if found is None or not self.beyond.upstream[e]:  # nothing to compare with: the resolution is no floor
            return False
        return found[0] > self.tol.tensor_confirm * found[1]

    def origin(self, e: int, kind: OriginKind, after: str | None, nonfinite: bool = False) -> Origin:
        ev = self.evidence(e, outputs=kind is OriginKind.COMPUTATION)
        args: tuple[str, ...] = ()
        if kind is OriginKind.CONFIGURATION or (self.config[self.rows(e)].any()):
            npu, bench = self.o.npu, self.o.bench
            rows = [int(i) for i in self.rows(e) if self.config[i]]
            args = tuple(npu.names[i].rsplit(".", 1)[-1] for i in rows)
            shown = tuple(ArgDiff(npu.names[i][len(self.entries[e]) + 1:], npu.stat_display(i, 0),
                                  bench.stat_display(int(self.match[i]), 0)) for i in rows)  # fmt: skip
            ev = Evidence(ev.metric, ev.inputs, ev.outputs, ev.threshold, npu.names[rows[0]] if rows else ev.first_row,
                          ev.floor, ev.floor_source, None, ev.dtypes, shown, ev.beyond)  # fmt: skip
        if nonfinite:
            ev = Evidence(ev.metric, ev.inputs, ev.outputs, ev.threshold, self._nonfinite_row(e) or ev.first_row,
                          ev.floor, ev.floor_source, None, ev.dtypes, beyond=ev.beyond)  # fmt: skip
        return Origin(self.entries[e], kind, PHASES[self.phases[e]], after, ev, args if kind is OriginKind.CONFIGURATION
                      else (), nonfinite)  # fmt: skip

    def backward_origin(self, e: int, bwd: backward.BackwardJudgement) -> Origin:
        """A backward call whose output gradients differ more than `origin` times what its incoming gradients and
        its forward call's tensors explain, and more than its peers in other layers do (judge/backward.py)."""
        c = int(bwd.measure[e])
        ev = self.evidence(e, outputs=True)
        floor = float(bwd.floor[e, c])
        value = float(self.out_d[e, c])
        src = FloorSource(FloorKind.BACKWARD_PEERS, units=float(bwd.peer_gain[e]), peers=int(bwd.peers[e]))
        ev = Evidence(self.names[c], _num(self.in_d[e, c]), _num(value), float(self.tol.backward_origin * floor),
                      self._deciding_row(e, c, True) or ev.first_row, floor, src,
                      _num(value / floor) if floor > 0 else None, ev.dtypes, beyond=ev.beyond)  # fmt: skip
        return Origin(self.entries[e], OriginKind.COMPUTATION, PHASES[self.phases[e]], None, ev)

    def _deciding_row(self, e: int, c: int, outputs: bool) -> str | None:
        rows = self.rows(e)
        state = self.o.npu.state[rows]
        side = (state == State.OUTPUT) | (state == State.PARAMETERS_GRAD)
        sel = rows[side if outputs else ~side]
        vals = self.diff[sel, c] if len(sel) else np.zeros(0)
        if not len(vals) or np.isnan(vals).all():
            return None
        return self.o.npu.names[int(sel[int(np.nanargmax(vals))])]

    def _nonfinite_row(self, e: int) -> str | None:
        for i in self.rows(e).tolist():
            if self.nonfinite[i]:
                return self.o.npu.names[i]
        return None

    def suspect(self, e: int, boundary: bool) -> Suspect:
        ev = self.evidence(e, outputs=not boundary)
        where = "inputs" if boundary else "outputs"
        margin = ev.threshold / ev.floor if ev.floor else self.margin
        return Suspect(self.entries[e], PHASES[self.phases[e]], SuspectReason.BELOW_MARGIN, ev, self.o.mode, where,
                       float(margin))  # fmt: skip

    def md5_state(self, e: int, seen_diff: bool, last_ok: str | None, dtype_step) -> tuple:
        in_diff = bool(np.nan_to_num(self.in_d[e], nan=0.0, neginf=0.0).max() > 0)
        out_diff = bool(np.nan_to_num(self.out_d[e], nan=0.0, neginf=0.0).max() > 0)
        low = float(self.unit[self.usrc[e]]) > noise.LOW_PRECISION if self.usrc[e] >= 0 else False
        out_step, in_same_dtype = dtype_step
        if in_diff:
            if seen_diff or not in_same_dtype[e]:  # no evidence: only inputs of another dtype differ
                return CallState.NOISE, None, None
            if low:
                return CallState.SUSPECT, None, self._md5_suspect(e, SuspectReason.MD5_INPUTS)
            return CallState.ORIGIN, self.origin(e, OriginKind.BOUNDARY, last_ok), None
        if out_diff:
            if out_step[e]:
                return CallState.NOISE, None, None
            if low:
                return CallState.SUSPECT, None, self._md5_suspect(e, SuspectReason.MD5_OUTPUTS)
            return CallState.ORIGIN, self.origin(e, OriginKind.COMPUTATION, None), None
        return CallState.OK, None, None

    def _md5_suspect(self, e: int, reason: SuspectReason) -> Suspect:
        ev = self.evidence(e, outputs=True)
        return Suspect(self.entries[e], PHASES[self.phases[e]], reason, ev, Mode.MD5)


def _innermost_suspects(suspects: list[Suspect], origins: list[Origin],
                        parents: dict[str, str | None]) -> list[Suspect]:  # fmt: skip
    """A module suspect that contains another suspect gives way to it; suspects that are origins are dropped."""
    names = {s.entry for s in suspects}
    origin_names = {o.entry for o in origins}
    outer: set[str] = set()
    for s in suspects:
        parent, guard = parents.get(s.entry), 0
        while parent and guard < 1000:
            if parent in names:
                outer.add(parent)
            parent, guard = parents.get(parent), guard + 1
    return [s for s in suspects if s.entry not in outer and s.entry not in origin_names]



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


def _num(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or (math.isinf(x) and x < 0) else float(x)
