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

The analysis is a sequence of steps, each in its own place: the rows paired for it (`calls.plan_rows`, through
pair/calls.py: by enclosing module, API and k-th call inside the module, so an extra call on one side shifts
nothing outside its module), measured and reduced per call (`calls.measure_calls`, judge/noise.py's measures), the
floors and margins along execution order (`floors.floors_along`), the backward calls against their peers
(judge/backward.py), then the walk here (`_Walk`): calls in execution (dump) order, forward origins first, then
backward, then parameter gradients; a module that is an origin gives way to an API or module inside it (from
construct.json) that is an origin too, so the innermost call is named. docs/rootcause.md has the rule and the
measurements behind each constant.
"""

from __future__ import annotations

import functools
import math
from dataclasses import field, replace
from enum import Enum

import numpy as np

from msprobe_compare.judge import backward, noise
from msprobe_compare.judge.calls import CallTable, RowPlan, _dtype_step, _max_cols, measure_calls, plan_rows
from msprobe_compare.judge.floors import MAX_NOISY_INPUTS, Floors, floors_along
from msprobe_compare.judge.noise import STAT_NAMES, Tolerance
from msprobe_compare.load.names import Direction
from msprobe_compare.load.rows import NONE_DTYPE, PHASES, State
from msprobe_compare.load.mode import Mode
from msprobe_compare.measure.measured import Measured
from msprobe_compare.measure.tensor_metrics import UNIT_ROUNDOFF
from msprobe_compare.pair.calls import TreeDiff
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
    COMBINED = "combined"  # its `units` noisy inputs' largest difference and one rounding, in quadrature
    # inputs: `units` calls with nothing compared ran just before it (from `at`; None: in the bench run): the
    # difference upstream on MAX_NOISY_INPUTS operands and one rounding, in quadrature (floors._unseen)
    UNSEEN = "unseen code"
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
    # boundary: the innermost module call around both `after` and `entry` (construct.json): the calls between them,
    # which the two runs do not share (code that differs, or was not recorded), run inside it
    within: str | None = None

    on_rank: RankAttribution | None = None  # parallel layouts: the one rank of a group that diverges
    # input rows of the call without a bench counterpart in the analysis's pairing: what they hold on the bench side
    # is unknown, so nothing is said of them (render/story.py); `unpaired_nonfinite`: one holds NaN/Inf on the NPU side
    unpaired_inputs: int = 0
    unpaired_nonfinite: bool = False


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


_DTYPE_OF_UNIT = {unit: name for name, unit in UNIT_ROUNDOFF.items()}
_FORWARD, _PARAMETERS_GRAD = int(Direction.FORWARD), int(Direction.PARAMETERS_GRAD)  # numpy compares IntEnums slowly
_WALK_STATES = np.array([CallState.OK, CallState.NOISE, CallState.PROPAGATED, CallState.UNKNOWN], dtype=object)


def analyse(o: Measured, parents: dict[str, str | None] | None = None,
            bench_parents: dict[str, str | None] | None = None,
            tolerance: Tolerance | None = None, trees: TreeDiff | None = None) -> RootCause:  # fmt: skip
    """Classify every call of one compare (module docstring); `parents`/`bench_parents` from construct.json,
    `trees` their `pair.calls.tree_diff` when the caller made it already."""
    tol = tolerance or Tolerance()
    plan = plan_rows(o, parents, bench_parents, trees)
    calls = measure_calls(o, plan, tol)
    fl = floors_along(o.npu, plan, calls, tol, o.bench)
    bwd = None
    if not plan.md5:  # the backward calls' gains over what their inputs explain, against their peers
        bwd = backward.judge(o.npu.entries, o.npu.phase_codes, parents or {}, calls.in_d,
                             calls.first_outputs(o.npu), calls.q_all, fl.ufl, fl.weight,
                             tol.backward_origin)  # fmt: skip
    walk = _Walk(o, plan, calls, fl, bwd, tol)
    states = walk.run()
    return _assemble(o, parents or {}, plan, calls, fl, bwd, tol, walk, states)


def _ancestors(name: str, parents: dict[str, str | None]) -> list[str]:
    out = []
    seen = set()
    parent = parents.get(name.rsplit(";", 1)[-1])  # merged parts (pair/aligned.py): the last one's place
    while parent is not None and parent not in seen:
        seen.add(parent)
        out.append(parent)
        parent = parents.get(parent)
    return out


def _within(origin: Origin, parents: dict[str, str | None]) -> Origin:
    """A boundary origin with the innermost module call around both of its ends."""
    if origin.kind is not OriginKind.BOUNDARY or not origin.after or not parents:
        return origin
    around = set(_ancestors(origin.after, parents))
    for m in _ancestors(origin.entry, parents):
        if m in around:
            return replace(origin, within=m)
    return origin


def _assemble(o: Measured, parents: dict[str, str | None], plan: RowPlan, calls: CallTable, fl: Floors,
              bwd: backward.BackwardJudgement | None, tol: Tolerance, walk: _Walk,
              states: list[CallState]) -> RootCause:  # fmt: skip
    """The RootCause of a finished walk: the innermost origins and suspects, each call's worst input and output
    difference, the floor its outputs were compared with, its ratio, the measures' names."""
    n_entries = len(o.npu.entries)
    origins = [_within(o, parents) for o in _innermost(walk.candidates, parents)]

    def worst(a: np.ndarray) -> np.ndarray:
        return np.where(noise._all_cols(np.isneginf(a)), np.nan, _max_cols(a))

    # the floor each call's outputs were compared with; none for parameter gradients (judged after the backward
    # pass, though the dump lists them beside their module's forward call) and calls without counterpart
    hidden = ~(calls.known | calls.cfg) | fl.grads if n_entries else False  # UNKNOWN: the walk skips these calls
    floors = np.where(hidden, np.nan, _max_cols(fl.floor_out) if n_entries else np.zeros(0))
    lowest = float(calls.unit.max()) if len(calls.unit) else 0.0  # no NaN: the per-call maxima skip them
    shown = list(dict.fromkeys(calls.names))
    metric = "difference: " + (", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else shown[0])
    return RootCause(list(o.npu.entries), states, origins, metric, worst(calls.in_d), worst(calls.out_d), parents,
                     _innermost_suspects(walk.suspects, origins, parents), floors, tol, np.maximum(fl.r_in, fl.r_out),
                     plan.repaired, _DTYPE_OF_UNIT.get(lowest, ""), bwd)  # fmt: skip


class _Walk:
    """The calls in execution order, each given a state. Calls with nothing that can make an origin or suspect (no
    NaN/Inf, no differing argument, below the suspect margin; `quiet`) and calls with nothing compared (`skip`) are
    not walked one by one: their states follow from three switches of the walk (a difference seen, a backward call
    after it, the first origin) and are set together after it (`_settle`). Positions are places in execution
    order (`fl.order`)."""

    def __init__(self, o: Measured, plan: RowPlan, calls: CallTable, fl: Floors,
                 bwd: backward.BackwardJudgement | None, tol: Tolerance) -> None:  # fmt: skip
        self.o, self.plan, self.calls, self.fl, self.bwd, self.tol = o, plan, calls, fl, bwd, tol
        self.entries = o.npu.entries
        self.phase_code = o.npu.phase_codes
        self.ctx = _Context(o, plan, calls, fl, tol)
        self.dtype_step = _dtype_step(o, plan.match, plan.tensor_row, calls.differs, plan.red) if plan.md5 else None
        n = len(self.entries)
        order = fl.order
        s = calls.suspect_margin
        quiet_e = ~(calls.nf_in | calls.nf_out | calls.nf_in_any | calls.cfg | (fl.r_in > s) | (fl.r_out > s))
        quiet_e &= calls.known
        if plan.md5:
            quiet_e[:] = False
        elif bwd is not None:
            quiet_e &= ~bwd.above  # judged in the walk when nothing upstream was an origin
        self.quiet, self.skip = quiet_e[order], (~calls.known & ~calls.cfg)[order]
        self.differs_o = (calls.in_diff | calls.out_diff)[order]
        self.at = np.arange(n)
        # the first quiet call that differs, and per position the next call that is not a forward one (n: none)
        first = self.quiet & self.differs_o
        self.t_diff = int(np.argmax(first)) if first.any() else n  # the first call whose state is not OK
        not_forward = np.r_[np.where(self.phase_code[order] != _FORWARD, self.at, n), n]
        self.next_backward = np.minimum.accumulate(not_forward[::-1])[::-1].tolist()
        # per position, the last quiet call with compared outputs at or before it (-1: none)
        ok_here = np.where(self.quiet & calls.has_out[order], self.at, -1)
        self.quiet_ok = np.maximum.accumulate(ok_here) if n else self.at
        self.t_found = n  # the first origin
        self.last_walked_ok = -1  # the last walked call that is OK or noise and has compared outputs
        self.seen_nf = False  # a NaN/Inf in an earlier call
        self.above = np.zeros(n, dtype=bool)  # per call, inputs above suspect x the first origin's floor
        self.candidates: list[Origin] = []
        self.suspects: list[Suspect] = []

    def run(self) -> list[CallState]:
        """Every call's state, in entry order."""
        walked = np.flatnonzero(~(self.quiet | self.skip)).tolist()
        order_l = self.fl.order.tolist()
        states: list[CallState] = []
        for p in walked:
            e = order_l[p]
            state, origin, suspect = self._decide(p, e)
            self._record(p, e, state, origin, suspect)
            states.append(state)
        return self._settle(walked, states)

    def _decide(self, p: int, e: int) -> tuple[CallState, Origin | None, Suspect | None]:
        """The state of walked call `e` at position `p`, and the origin or suspect it is."""
        c, fl, ctx = self.calls, self.fl, self.ctx
        nfin, nfout, nfany, cfg_e = bool(c.nf_in[e]), bool(c.nf_out[e]), bool(c.nf_in_any[e]), bool(c.cfg[e])
        seen_diff = self.t_diff < p
        inherited = seen_diff and self.next_backward[self.t_diff + 1] <= p
        found = bool(self.candidates)
        rin, rout = float(fl.r_in[e]), float(fl.r_out[e])
        origin_m, suspect_m = c.origin_margin, c.suspect_margin
        if (nfin or nfout) and not self.seen_nf and self.phase_code[e] != _PARAMETERS_GRAD:
            origin = None
            if nfin:
                origin = ctx.origin(e, OriginKind.BOUNDARY, self._last_ok(p), nonfinite=True)
            elif not nfany:  # a NaN/Inf another rank sends, when a collective brings it
                origin = replace(ctx.origin(e, OriginKind.COMPUTATION, None, nonfinite=True),
                                 collective=bool(fl.collective[e]))  # fmt: skip
            return (CallState.ORIGIN if origin else CallState.PROPAGATED), origin, None
        if nfin or nfany:
            return CallState.PROPAGATED, None, None
        if inherited and not found and fl.collective[e] and rout > origin_m and rin <= suspect_m:
            # after the backward pass began (gradients all-reduced): another rank's difference arrives here
            return CallState.ORIGIN, replace(ctx.origin(e, OriginKind.COMPUTATION, None), collective=True), None
        if inherited and not found and self.bwd is not None and self.bwd.above[e]:
            return CallState.ORIGIN, ctx.backward_origin(e, self.bwd), None  # far above its inputs and peers
        if inherited:
            differs_e = bool(self.differs_o[p])
            return ((CallState.PROPAGATED if found else CallState.NOISE) if differs_e or cfg_e
                    else CallState.OK), None, None  # fmt: skip
        if cfg_e and (not found or not self.above[e]):
            return CallState.ORIGIN, ctx.origin(e, OriginKind.CONFIGURATION, None), None
        if found and self.above[e]:
            return CallState.PROPAGATED, None, None
        if self.plan.md5:
            return ctx.md5_state(e, seen_diff, self._last_ok(p), self.dtype_step)
        if found and (rin > suspect_m or rout > suspect_m):
            return CallState.PROPAGATED, None, None  # after an origin a jump may be its error: no data flow recorded
        return self._by_margin(p, e, rin, rout)

    def _by_margin(self, p: int, e: int, rin: float, rout: float) -> tuple[CallState, Origin | None, Suspect | None]:
        """A call before any origin, judged by its differences over its floors."""
        ctx, origin_m, suspect_m = self.ctx, self.calls.origin_margin, self.calls.suspect_margin
        if rin > origin_m:
            return CallState.ORIGIN, ctx.origin(e, OriginKind.BOUNDARY, self._last_ok(p)), None
        if rout > origin_m:
            origin = ctx.origin(e, OriginKind.COMPUTATION, None)
            if self.fl.collective[e] and rin <= suspect_m:  # inputs agree here: another rank's difference arrives
                origin = replace(origin, collective=True)
            return CallState.ORIGIN, origin, None
        if rin > suspect_m or rout > suspect_m:
            boundary = rin > suspect_m and rin >= rout
            if ctx.confirmed(e, boundary):  # tensor mode: the share of elements beyond rounding agrees
                kind = OriginKind.BOUNDARY if boundary else OriginKind.COMPUTATION
                return CallState.ORIGIN, ctx.origin(e, kind, self._last_ok(p) if boundary else None), None
            return CallState.SUSPECT, None, ctx.suspect(e, boundary=boundary)
        return (CallState.NOISE if self.differs_o[p] else CallState.OK), None, None

    def _last_ok(self, p: int) -> str | None:
        """The last call before position `p` whose outputs agree (within noise): where a boundary begins."""
        ok_at = max(int(self.quiet_ok[p - 1]) if p else -1, self.last_walked_ok)
        return self.entries[int(self.fl.order[ok_at])] if ok_at >= 0 else None

    def _record(self, p: int, e: int, state: CallState, origin: Origin | None, suspect: Suspect | None) -> None:
        """The walk's switches after call `e`: the last agreeing call, the first difference, a NaN/Inf seen, the
        first origin (and the calls whose inputs stand above its floor)."""
        c = self.calls
        if state in (CallState.OK, CallState.NOISE) and c.has_out[e]:
            self.last_walked_ok = p
        if state is not CallState.OK and self.t_diff > p:
            self.t_diff = p
        if c.nf_in[e] or c.nf_out[e] or c.nf_in_any[e]:
            self.seen_nf = True
        if origin is not None:
            if not self.candidates:
                first_origin_floor = float(self.fl.floor_out[e].max()) if not self.plan.md5 else 0.5
                self.above = self.fl.worst_in > c.suspect_margin * first_origin_floor
                self.t_found = p
            self.candidates.append(origin)
        if suspect is not None:
            self.suspects.append(suspect)

    def _settle(self, walked: list[int], walked_states: list[CallState]) -> list[CallState]:
        """The quiet calls: OK where nothing differs; after the first origin, propagated where the backward pass
        inherits or the inputs stand above the first origin's floor; else noise. Calls with nothing compared:
        unknown, or one-sided (on one side only inside a module call both sides have)."""
        n = len(self.entries)
        at, quiet = self.at, self.quiet
        inherit_at = self.next_backward[self.t_diff + 1] if self.t_diff < n else n
        code = np.full(n, len(_WALK_STATES) - 1, dtype=np.int8)  # UNKNOWN
        prop = (at > self.t_found) & ((at >= inherit_at) | self.above[self.fl.order])
        code[quiet] = np.where(self.differs_o, np.where(prop, 2, 1), 0)[quiet]
        states_o = _WALK_STATES[code]
        if walked:
            states_o[walked] = walked_states
        by_entry = np.empty(n, dtype=object)
        by_entry[self.fl.order] = states_o
        if self.plan.one_sided is not None:  # unknown for want of a counterpart: say why
            by_entry[self.plan.one_sided & (by_entry == CallState.UNKNOWN)] = CallState.ONE_SIDED
        return by_entry.tolist()


# The analysis runs in this process. A forked child beside measure, judge and the table writer was tried: on the
# 1M-row benchmark the tree's Pss peaked at 1207 MiB forked against 959 MiB in-process, above the 1 GiB goal, for
# about 0.3 s of wall time saved (docs/rootcause.md, Speed). `analyse_later(..., fork=True)` still runs it so;
# nothing asks for it.


def analyse_later(o: Measured, parents: dict[str, str | None] | None = None,
                  bench_parents: dict[str, str | None] | None = None, tolerance: Tolerance | None = None,
                  trees: TreeDiff | None = None, *, fork: bool = False) -> Later[RootCause]:  # fmt: skip
    """`analyse`, in this process, or with `fork` in a forked child while this process measures, judges and writes
    the table; the same RootCause either way. `o` needs its pairing (and, in
    tensor mode, its tensor metrics), not its statistics diffs. The child sends the result without the entry names
    and NPU module tree, which this process holds already."""
    entries = o.npu.entries

    def work() -> RootCause:
        return analyse(o, parents, bench_parents, tolerance, trees)

    def pack(rc: RootCause) -> RootCause:
        return replace(rc, entries=[], parents={})

    def unpack(rc: RootCause) -> RootCause:
        return replace(rc, entries=entries, parents=parents or {})  # the NPU table's list: no copy to touch

    return Later.start(work, what="the root-cause analysis", fork=fork, pack=pack, unpack=unpack)


class _Context:
    """Builds the evidence of an origin or suspect (only for those few calls)."""

    def __init__(self, o: Measured, plan: RowPlan, calls: CallTable, fl: Floors, tol: Tolerance) -> None:
        self.o, self.match, self.diff, self.entries = o, plan.match, calls.diff, o.npu.entries
        self.names, self.nonfinite = calls.names, calls.nonfinite  # the measures' names; per row, NaN/Inf on one side
        self.phases = o.npu.phase_codes  # PHASES index per call
        self.in_d, self.out_d, self.floor_in, self.floor_out = calls.in_d, calls.out_d, fl.floor_in, fl.floor_out
        self.base_in, self.base_out = fl.bases(calls)
        self.c_in, self.c_out = fl.c_in, fl.c_out
        self.prior_src, self.usrc, self.unit, self.margin, self.config = (fl.prior_src, fl.usrc, calls.unit,
                                                                          calls.origin_margin, plan.config)  # fmt: skip
        self.tol, self.weight, self.beyond = tol, fl.weight, fl.beyond
        self.reduced: set[int] = set(fl.reduced.tolist())  # calls whose floor is the reduced-matmul one
        self.noisy = calls.noisy_inputs
        self.unseen_calls, self.unseen_bench, self.order = fl.unseen_calls, fl.unseen_bench, fl.order
        self.starts = o.npu.entry_bounds if plan.red.in_order else None  # rows of entry e: [starts[e], starts[e + 1])

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
            kind = FloorKind.STAT_ULP if self.names == STAT_NAMES else FloorKind.ELEMENT_ROUNDING
            return FloorSource(kind, dtype=dt)
        if k == 4 and not outputs:  # calls nothing compared ran before it: the first of them (NPU side)
            n = int(self.unseen_calls[e])
            place = int(np.flatnonzero(self.order == e)[0])  # its place in execution order (a few calls ask)
            at = None if self.unseen_bench[e] else self.entries[int(self.order[place - n])]
            return FloorSource(FloorKind.UNSEEN, at, _rounding_text(self._source_precision(e)), float(n))
        if k == 4:  # with the rounding as the precision candidate names it
            rounding = self._source_precision(e)
            return FloorSource(FloorKind.COMBINED, rounding.at, _rounding_text(rounding),
                               float(min(self.noisy[e], MAX_NOISY_INPUTS)))  # fmt: skip
        return self._source_precision(e)

    def _source_precision(self, e: int) -> FloorSource:
        """The precision candidate of call e's floor: TF32/HF32, the lowest precision upstream, or the minimum."""
        if int(self.usrc[e]) in self.reduced:  # TF32/HF32 at this matmul or upstream
            at = int(self.usrc[e])
            return FloorSource(FloorKind.REDUCED_MATMUL, self.entries[at] if at != e else None,
                               units=self.tol.floor_units)  # fmt: skip
        u = float(self.unit[self.usrc[e]]) if self.usrc[e] >= 0 else 0.0
        if u and self.tol.floor_units * u >= self.tol.min_floor:
            return FloorSource(FloorKind.LOWEST_PRECISION, self.entries[self.usrc[e]], _DTYPE_OF_UNIT.get(u, ""),
                               self.tol.floor_units)  # fmt: skip
        return FloorSource(FloorKind.MIN_FLOOR)

    def _side_rows(self, e: int, outputs: bool) -> np.ndarray:
        """Call e's output rows (outputs and parameter gradients), or its input rows."""
        rows = self.rows(e)
        state = self.o.npu.state[rows]
        side = (state == State.OUTPUT) | (state == State.PARAMETERS_GRAD)
        return rows[side if outputs else ~side]

    def _row_and_dtypes(self, i: int | None) -> tuple[str | None, tuple[str, str]]:
        """Row i's name and both sides' dtypes (None, ("", "") without a row)."""
        if i is None:
            return None, ("", "")
        npu, bench = self.o.npu, self.o.bench
        j = int(self.match[i])
        return npu.names[i], (npu.dtype[i], bench.dtype[j] if j >= 0 else "")

    def evidence(self, e: int, outputs: bool) -> Evidence:
        c = int(self.c_out[e] if outputs else self.c_in[e])
        sel = self._side_rows(e, outputs)
        vals = self.diff[sel, c] if len(sel) else np.zeros(0)
        largest = int(sel[int(np.nanargmax(vals))]) if len(vals) and not np.isnan(vals).all() else None
        row, dtypes = self._row_and_dtypes(largest)
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
        if found is None or self.beyond is None or not self.beyond.upstream[e]:  # nothing to compare with
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
        return self._unpaired(e, Origin(self.entries[e], kind, PHASES[self.phases[e]], after, ev,
                                        args if kind is OriginKind.CONFIGURATION else (), nonfinite))  # fmt: skip

    def _unpaired(self, e: int, origin: Origin) -> Origin:
        """`origin` with call e's input rows that have no bench counterpart counted (and whether one of them holds
        NaN/Inf on the NPU side): what the bench holds there is unknown. A None argument (no bias) holds no data: a
        side that does not record it at all agrees with it."""
        rows = self._side_rows(e, outputs=False)
        npu = self.o.npu
        alone = [i for i in rows[self.match[rows] < 0].tolist() if npu.dtype[i] != NONE_DTYPE] if len(rows) else []
        if not alone:
            return origin
        finite = noise.finite_data(npu.stats[alone], npu.stat_kind[alone])
        return replace(origin, unpaired_inputs=len(alone), unpaired_nonfinite=bool((~finite).any()))

    def backward_origin(self, e: int, bwd: backward.BackwardJudgement) -> Origin:
        """A backward call whose first output differs more than `backward_origin` times what its incoming gradients
        and its forward call's tensors explain, times the largest gain of its peers in other layers
        (judge/backward.py). The evidence is that first output's difference, the one that decided."""
        c = int(bwd.measure[e])
        sel = self._side_rows(e, outputs=True)
        row, dtypes = self._row_and_dtypes(int(sel[0]) if len(sel) else None)
        floor = float(bwd.floor[e, c])
        ratio = float(bwd.gain[e] / bwd.peer_gain[e])  # the first output's difference over `floor`
        src = FloorSource(FloorKind.BACKWARD_PEERS, units=float(bwd.peer_gain[e]), peers=int(bwd.peers[e]))
        ev = Evidence(self.names[c], _num(self.in_d[e, c]), _num(ratio * floor), float(self.tol.backward_origin * floor),
                      row, floor, src, _num(ratio), dtypes)  # fmt: skip
        return self._unpaired(e, Origin(self.entries[e], OriginKind.COMPUTATION, PHASES[self.phases[e]], None, ev))

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


def _rounding_text(src: FloorSource) -> str:
    """What the one rounding of a combined floor is (FloorSource.dtype of a COMBINED floor)."""
    if src.kind is FloorKind.REDUCED_MATMUL:
        return "TF32/HF32"
    return src.dtype if src.kind is FloorKind.LOWEST_PRECISION else "minimum-floor"


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
