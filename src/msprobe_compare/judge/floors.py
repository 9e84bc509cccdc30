"""The noise floor of each call along execution order (issue #13, #29): the largest difference seen before it (the
noise propagated so far), the resolution of its own rows, the unit roundoff of the lowest precision upstream (at
least `min_floor`; a collective's without it; an fp32 matmul's at least TF32's), and for its outputs its own
inputs' difference; then each call's differences over those floors (its margins). docs/rootcause.md, "The noise
model". The walk (judge/rootcause.py) reads the result (`Floors`).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from msprobe_compare import native
from msprobe_compare.judge import noise
from msprobe_compare.judge.calls import CallTable, RowPlan, _max_cols, _PerEntry
from msprobe_compare.judge.noise import Tolerance
from msprobe_compare.load.names import COLLECTIVE_CALLS, Direction
from msprobe_compare.load.rows import RowTable
from msprobe_compare.records import dataclass


@dataclass(frozen=True)
class Floors:
    """Per call, in entry order unless said: `order` (execution order: forward and backward calls as dumped, then
    parameter gradients), the running floor `prior` (calls, measures) and the call that set it, the precision floor
    `ufl` and the call where that precision first appeared (`usrc`), the matmul calls given TF32's floor
    (`reduced`), the collectives, the measures' weights (Max/Min x `extremes`), the floors of inputs and outputs and
    each call's largest difference over them (`r_in`, `r_out`, with the measure `c_in`, `c_out`), the largest input
    difference (`worst_in`), and tensor mode's shares of elements beyond rounding (`beyond`)."""

    order: np.ndarray
    grads: np.ndarray
    prior: np.ndarray
    prior_src: np.ndarray
    ufl: np.ndarray
    usrc: np.ndarray
    reduced: np.ndarray
    collective: np.ndarray
    weight: np.ndarray
    floor_in: np.ndarray
    floor_out: np.ndarray
    r_in: np.ndarray
    r_out: np.ndarray
    c_in: np.ndarray
    c_out: np.ndarray
    worst_in: np.ndarray
    beyond: _Beyond | None
    combined: np.ndarray  # per call and measure: its noisy inputs' differences and one rounding, in quadrature
    # per call and measure, its inputs' floor where calls that nothing compared ran just before it (`unseen_calls`
    # of them, in execution order; in the bench run where `unseen_bench`, before the calls its inputs are paired
    # with): the upstream difference on MAX_NOISY_INPUTS operands and one rounding (0: none)
    unseen: np.ndarray
    unseen_calls: np.ndarray
    unseen_bench: np.ndarray

    def bases(self, calls: CallTable) -> tuple[tuple, tuple]:
        """The candidates of the input and output floors, in the order the evidence names them: 0 upstream, 1 own
        inputs (outputs only), 2 resolution, 3 precision or minimum, 4 combined: for outputs its noisy inputs and one
        rounding, for inputs the code nothing compared that ran before it (`unseen`)."""
        return ((self.prior, None, calls.q_in, self.ufl, self.unseen),
                (self.prior, _FiniteOrZero(calls.in_d), calls.q_all, self.ufl, self.combined))  # fmt: skip


def floors_along(npu: RowTable, plan: RowPlan, calls: CallTable, tol: Tolerance,
                 bench: RowTable | None = None) -> Floors:  # fmt: skip
    """The floors and margins of every call (Floors); `bench`: the bench side, whose calls that nothing compared
    count for the NPU calls paired after them (`unseen`)."""
    n_entries = len(npu.entries)
    grads, order = execution_order(npu)
    prior, prior_src = running_floor(calls.in_d, calls.out_d, order)
    collective = collective_calls(npu.entries) if n_entries else np.zeros(0, dtype=bool)
    ufl, usrc, unit_o = _precision_floor(calls.unit, order, plan.md5, collective, tol)
    reduced = (_reduced_matmul(npu.entries, calls.in_d, calls.out_d, ufl, tol) if not plan.md5
               else np.zeros(0, dtype=np.intp))  # fmt: skip
    if len(reduced):  # a matmul that ran at TF32/HF32 passes its precision on, as a bf16 op does
        unit = calls.unit.copy()
        unit[reduced] = np.maximum(unit[reduced], tol.reduced_matmul)
        ufl, usrc, unit_o = _precision_floor(unit, order, plan.md5, collective, tol)
    k_cols = calls.diff.shape[1]
    weight = np.ones(k_cols)
    if k_cols == 3:  # Max/Min (the third measure) are single elements: their margins are `extremes` times the others'
        weight[2] = tol.extremes
    combined = _combined(calls, ufl)
    unseen_calls = _unseen_calls(calls.known, order)
    unseen_bench = np.zeros(n_entries, dtype=bool)
    if bench is not None and n_entries:
        in_bench = _bench_unseen_calls(bench, plan)
        unseen_bench = in_bench > unseen_calls
        unseen_calls = np.maximum(unseen_calls, in_bench)
    unseen = _unseen(prior, ufl, unseen_calls)
    floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in = margins(calls.in_d, calls.out_d, prior,
                                                                      np.maximum(calls.q_in, unseen),
                                                                      np.maximum(calls.q_all, combined), ufl,
                                                                      weight)  # fmt: skip
    beyond = None
    m = calls.m
    if m is not None and m.beyond is not None and n_entries:
        upstream = np.empty(n_entries)
        upstream[order] = tol.excess_units * unit_o
        beyond = _beyond_floor(m, plan.red, plan.tin & ~calls.artifact, plan.tout, order, npu.shape, upstream)
    return Floors(order, grads, prior, prior_src, ufl, usrc, reduced, collective, weight, floor_in, floor_out, r_in,
                  r_out, c_in, c_out, worst_in, beyond, combined, unseen, unseen_calls, unseen_bench)  # fmt: skip


# the noisy inputs counted for an output's floor at most (a product of two noisy operands adds their noise; beyond a
# few, concatenations and sums of many carry no more than their largest input's relative noise)
MAX_NOISY_INPUTS = 3


def _combined(calls: CallTable, ufl: np.ndarray) -> np.ndarray:
    """Per call and measure, what its outputs carry when each of its noisy tensor inputs (up to MAX_NOISY_INPUTS)
    differs by its largest input difference and it rounds once more: sqrt(k x in_d^2 + ufl^2) (noise adds in
    quadrature). A bf16 q @ k^T of two noisy operands measured 1.43x its largest input's difference, noise only."""
    k = np.minimum(calls.noisy_inputs, MAX_NOISY_INPUTS).astype(np.float64)
    in_d = np.where(np.isfinite(calls.in_d), calls.in_d, 0.0)
    return np.sqrt(k[:, None] * in_d * in_d + (ufl * ufl)[:, None])


def execution_order(table: RowTable) -> tuple[np.ndarray, np.ndarray]:
    """The table's parameter-gradient calls (bool per call) and its calls in execution order: forward and backward
    calls as dumped, then the parameter gradients."""
    grads = table.phase_codes == int(Direction.PARAMETERS_GRAD)
    return grads, np.r_[np.flatnonzero(~grads), np.flatnonzero(grads)].astype(np.intp)


def _unseen_calls(known: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per call, how many calls with nothing compared (one-sided code, calls without counterpart) ran directly before
    it in execution order, since the last call with something compared."""
    n_entries = len(known)
    if not n_entries:
        return np.zeros(0, dtype=np.intp)
    known_o = known[order]
    pos = np.arange(n_entries)
    last = np.maximum.accumulate(np.where(known_o, pos, -1))  # the last known call at or before each position
    before = np.r_[-1, last[:-1]]  # ... strictly before
    count_o = pos - 1 - before
    count_o[before < 0] = 0  # nothing compared upstream yet: no difference to carry
    out = np.empty(n_entries, dtype=np.intp)
    out[order] = count_o
    return out


def _bench_unseen_calls(bench: RowTable, plan: RowPlan) -> np.ndarray:
    """Per NPU call, the most bench calls with no row paired that ran directly before a bench call one of its tensor
    inputs is paired with (`_unseen_calls` in the bench run's execution order)."""
    match = plan.match
    paired = match >= 0
    known = np.zeros(len(bench.entries), dtype=bool)
    known[bench.entry_index[match[paired]]] = True
    count = _unseen_calls(known, execution_order(bench)[1])
    rows = paired & plan.tin
    per_row = np.zeros(len(match))
    per_row[rows] = count[bench.entry_index[match[rows]]]
    return plan.red.max(rows, per_row, 0.0).astype(np.intp)


def _unseen(prior: np.ndarray, ufl: np.ndarray, unseen_calls: np.ndarray) -> np.ndarray:
    """Per call and measure, the floor of its inputs when code nothing compared ran just before it (`unseen_calls`
    > 0): those calls may have combined the upstream difference (`prior`) from up to MAX_NOISY_INPUTS noisy operands
    and rounded once more, as `_combined` allows a call's outputs, but no row shows it: sqrt(k x prior^2 + ufl^2).
    An input that comes out of such code is judged against what it may carry (a bf16 SiLU x up of other code moved
    its Max by 3.1x the upstream floor, noise only). 0 for the other calls."""
    if not len(ufl):
        return np.zeros(prior.shape)
    p = np.maximum(prior, 0.0)
    out = np.sqrt(MAX_NOISY_INPUTS * p * p + (ufl * ufl)[:, None])
    out[unseen_calls == 0] = 0.0
    return out


def _precision_floor(unit: np.ndarray, order: np.ndarray, md5: bool, collective: np.ndarray,
                     tol: Tolerance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Per call, `floor_units` x the unit roundoff of the lowest precision upstream (at least `min_floor`, but for
    md5 and for collectives: a sum adds one rounding per rank), the call where that precision first appeared, and
    the running unit roundoff in execution order."""
    n_entries = len(unit)
    unit_o = np.maximum.accumulate(unit[order]) if n_entries else unit
    record = unit[order] > np.r_[0.0, unit_o[:-1]] if n_entries else unit  # where a lower precision first appears
    unit_src_o = (np.maximum.accumulate(np.where(record, np.arange(n_entries), -1)) if n_entries
                  else np.zeros(0, dtype=np.intp))  # fmt: skip
    ufl = np.empty(n_entries)
    ufl[order] = np.maximum(tol.floor_units * unit_o, 0.0 if md5 else tol.min_floor)
    if collective.any():
        ufl[order] = np.where(collective[order], tol.floor_units * unit_o, ufl[order])
    usrc = np.empty(n_entries, dtype=np.intp)
    usrc[order] = order[np.maximum(unit_src_o, 0).astype(np.intp)] if n_entries else usrc
    return ufl, usrc, unit_o


def _py_margins(in_d: np.ndarray, out_d: np.ndarray, prior: np.ndarray, q_in: np.ndarray, q_all: np.ndarray,
                ufl: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Per call: the noise floor of its inputs (upstream, resolution, precision) and of its outputs (its own inputs
    too), each (calls, measures); the largest difference over its floor (times the measure's weight) of its inputs
    and of its outputs, and the measure that has it; the largest input difference (NaN: -inf)."""
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


def _c_margins(in_d: np.ndarray, out_d: np.ndarray, prior: np.ndarray, q_in: np.ndarray, q_all: np.ndarray,
               ufl: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """_py_margins in one pass over the calls, in C (`_noise.margins`; no call: the Python twin)."""
    n_entries, k_cols = in_d.shape
    if not n_entries:
        return _py_margins(in_d, out_d, prior, q_in, q_all, ufl, weight)
    c = np.ascontiguousarray
    floor_in, floor_out = np.empty((n_entries, k_cols)), np.empty((n_entries, k_cols))
    r_in, r_out = np.empty(n_entries), np.empty(n_entries)
    c_in, c_out = np.empty(n_entries, dtype=np.int64), np.empty(n_entries, dtype=np.int64)
    worst_in = np.empty(n_entries)
    noise.C_NOISE.margins(*(c(a, dtype=np.float64) for a in (in_d, out_d, prior, q_in, q_all, ufl, weight)),
                          floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in)  # fmt: skip
    return floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in


margins = native.twin("_noise", _c_margins, _py_margins, noise.C_USABLE)


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


def _py_running_floor(in_d: np.ndarray, out_d: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per call and measure, the largest finite input or output difference of the calls before it in execution
    order (`order`; 0 for the first) and the call that set it (the last to reach that value; -1: none above 0)."""
    n_entries, k_cols = in_d.shape
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


def _c_running_floor(in_d: np.ndarray, out_d: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_py_running_floor in one pass in execution order, in C (`_noise.running_floor`; no call: the Python twin)."""
    n_entries, k_cols = in_d.shape
    if not n_entries:
        return _py_running_floor(in_d, out_d, order)
    prior, prior_src = np.empty((n_entries, k_cols)), np.empty((n_entries, k_cols), dtype=np.int64)
    noise.C_NOISE.running_floor(np.ascontiguousarray(in_d, dtype=np.float64),
                                np.ascontiguousarray(out_d, dtype=np.float64),
                                np.ascontiguousarray(order, dtype=np.intp), prior, prior_src)  # fmt: skip
    return prior, prior_src


running_floor = native.twin("_noise", _c_running_floor, _py_running_floor, noise.C_USABLE)


def collective_calls(entries: list[str]) -> np.ndarray:
    """Per call: a collective call (load/names.py COLLECTIVE_CALLS), whose outputs carry the other ranks' data."""
    if not {"D", "C", "P"} & set(map(operator.itemgetter(0), filter(None, entries))):  # none can be one
        return np.zeros(len(entries), dtype=bool)
    starts = operator.methodcaller("startswith", COLLECTIVE_CALLS)
    return np.fromiter(map(starts, entries), dtype=bool, count=len(entries))


# the difference an fp32 matmul adds beyond its inputs' that says it ran at TF32/HF32: 1/16 of TF32's unit roundoff
# (3e-5). fp32 accumulation-order noise stays below about sqrt(K) x 2^-24 (8e-6 for K = 16,384 terms); TF32-style
# convolutions and linears of the cases add 2e-5 to 3.5e-4 (the Max/Min measure; docs/rootcause.md)
REDUCED_EVIDENCE = 1 / 16


def _reduced_matmul(entries: list[str], in_d: np.ndarray, out_d: np.ndarray, ufl: np.ndarray,
                    tol: Tolerance) -> np.ndarray:  # fmt: skip
    """The matmul-class calls (noise.matmul_calls) of a precision finer than TF32's whose outputs differ by more
    than REDUCED_EVIDENCE x `reduced_matmul` and more than their inputs: they ran at TF32/HF32 (an fp32 dump does
    not say so), and their unit roundoff is TF32's from there on. Only those calls' names are read."""
    if not len(entries):
        return np.zeros(0, dtype=np.intp)
    out = _max_cols(np.where(np.isfinite(out_d), out_d, 0.0))
    ins = _max_cols(np.where(np.isfinite(in_d), in_d, 0.0))
    floor = tol.floor_units * tol.reduced_matmul
    above = np.flatnonzero((out > REDUCED_EVIDENCE * floor) & (out > ins) & (ufl < floor))
    if not len(above):
        return above
    return above[noise.matmul_calls([entries[e] for e in above.tolist()])]


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
