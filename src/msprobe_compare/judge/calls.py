"""The analysis's calls measured (issue #13, #29): the rows of one compare paired for the analysis (pair/calls.py),
measured against their bench rows (judge/noise.py) and reduced to one value per call and measure: the largest
difference of its inputs and of its outputs, their resolutions, the coarsest unit roundoff, and what kind of row it
has (NaN/Inf on one side, a differing non-tensor argument, compared outputs). The walk (judge/rootcause.py) reads
this table and the floors along execution order (judge/floors.py).
"""

from __future__ import annotations

import operator

import numpy as np

from msprobe_compare import native
from msprobe_compare.judge import noise
from msprobe_compare.judge.noise import Tolerance
from msprobe_compare.load.mode import Mode
from msprobe_compare.load.names import Direction
from msprobe_compare.load.rows import NONE_DTYPE, RowTable, State, StatKind, is_scalar_dtype, name_flags
from msprobe_compare.measure.measured import Measured
from msprobe_compare.pair.calls import RawArgs, TreeDiff, analysis_pairing, is_float_dtype_name
from msprobe_compare.records import dataclass


@dataclass(frozen=True)
class RowPlan:
    """The analysis's rows of one compare: their pairing (`pair.calls.analysis_pairing`), which are tensors, inputs,
    outputs and differing non-tensor arguments, whether md5 alone decides, and the per-call reductions."""

    match: np.ndarray  # the bench row of each NPU row (-1: none)
    repaired: int  # calls paired otherwise than in the result table
    one_sided: np.ndarray | None  # per call (None: none is)
    tensor_row: np.ndarray
    is_in: np.ndarray  # inputs and parameters
    is_out: np.ndarray  # outputs and parameter gradients
    config: np.ndarray  # non-tensor argument rows whose values differ
    md5: bool  # md5 decides (an md5 dump without statistics)
    red: _PerEntry

    @property
    def tin(self) -> np.ndarray:
        return self.is_in & self.tensor_row

    @property
    def tout(self) -> np.ndarray:
        return self.is_out & self.tensor_row


def plan_rows(o: Measured, parents: dict[str, str | None] | None, bench_parents: dict[str, str | None] | None,
              trees: TreeDiff | None) -> RowPlan:  # fmt: skip
    """The rows paired for the analysis and classified (RowPlan)."""
    npu = o.npu
    raw = RawArgs(npu, o.bench)
    pairing = analysis_pairing(npu, o.bench, o.match, parents, bench_parents, trees, raw)
    scalar = npu.dtype_mask(_is_scalar)
    tensor_row = ~scalar & ~npu.dtype_mask(NONE_DTYPE.__eq__)
    # an md5 dump is judged by the statistics it records beside the md5 (issue #29): under bf16/fp16 every call
    # differs from the first rounded one, and an fp32 matmul may have run at TF32; md5 alone decides without them
    md5 = o.mode is Mode.MD5 and not md5_by_statistics(o, pairing.match, tensor_row)
    return RowPlan(
        pairing.match,
        pairing.repaired,
        pairing.one_sided,
        tensor_row,
        (npu.state == State.INPUT) | (npu.state == State.PARAMETERS),
        (npu.state == State.OUTPUT) | (npu.state == State.PARAMETERS_GRAD),
        _config_rows(o, scalar, pairing.match, raw),
        md5,
        _PerEntry(npu.entry_index, len(npu.entries)),
    )


@dataclass(frozen=True)
class CallTable:
    """Per row the measures (`diff`, NaN where not compared) and the NaN/Inf-on-one-side flag; per call the largest
    input and output difference (-inf: none), the largest resolution of its inputs and of all its tensors and the
    coarsest unit roundoff (0: none), its flags, and the margins of the mode. `m`: the row measures where they were
    made as arrays (md5, tensor mode, or statistics without C); `differs`/`artifact`: per row, md5 and tensor mode."""

    diff: np.ndarray
    names: tuple[str, ...]
    nonfinite: np.ndarray
    in_d: np.ndarray
    out_d: np.ndarray
    q_in: np.ndarray
    q_all: np.ndarray
    unit: np.ndarray
    nf_in: np.ndarray
    nf_out: np.ndarray
    nf_in_any: np.ndarray
    known: np.ndarray
    cfg: np.ndarray
    in_diff: np.ndarray
    out_diff: np.ndarray
    has_out: np.ndarray
    origin_margin: float
    suspect_margin: float
    m: noise.RowMeasures | None
    differs: np.ndarray
    artifact: np.ndarray
    noisy_inputs: np.ndarray  # per call, how many of its tensor inputs differ (their noise adds up in its outputs)

    def first_outputs(self, npu: RowTable) -> np.ndarray:
        """`_first_outputs` of this table's rows: per backward call, the measures of its first output row."""
        return _first_outputs(npu, self.diff, npu.phase_codes)


def measure_calls(o: Measured, plan: RowPlan, tol: Tolerance) -> CallTable:
    """Each row measured by the mode's measures (md5, tensor, statistics) and reduced per call (CallTable)."""
    npu, bench, match = o.npu, o.bench, plan.match
    if plan.md5:
        return _reduce_rows(o, plan, _md5_measures(o, match, plan.tensor_row), 0.5, 0.5)
    if o.mode is Mode.ALL and o.tensors is not None:
        m = noise.tensor_measures(npu, bench, match, o.tensors, o.match)
        return _reduce_rows(o, plan, m, tol.tensor_origin, tol.tensor_suspect)
    fused = _stat_calls(o, match, plan.tensor_row, plan.is_in, plan.is_out, plan.red)
    if fused is None:  # the numpy sequence stat_calls is the twin of
        return _reduce_rows(o, plan, noise.stat_measures(npu, bench, match), tol.origin, tol.suspect)
    flags = ((fused.flags & np.uint8(1 << bit)) != 0 for bit in range(len(noise.CALL_FLAGS)))
    nf_in, nf_out, nf_in_any, known, in_diff, out_diff, has_out = flags
    none = np.zeros(0, dtype=bool)  # md5 and tensor mode only
    noisy = _count(plan, plan.tin & noise._any_cols(fused.diff > 0))
    return CallTable(fused.diff, noise.STAT_NAMES, fused.nonfinite, fused.in_d, fused.out_d, fused.q_in, fused.q_all,
                     fused.unit, nf_in, nf_out, nf_in_any, known, plan.red.any(plan.is_in & plan.config), in_diff,
                     out_diff, has_out, tol.origin, tol.suspect, None, none, none, noisy)  # fmt: skip


def _count(plan: RowPlan, rows: np.ndarray) -> np.ndarray:
    """Per call, how many of `rows` it has."""
    return np.bincount(plan.red.ei[rows], minlength=plan.red.n)


def _reduce_rows(o: Measured, plan: RowPlan, m: noise.RowMeasures, origin_margin: float,
                 suspect_margin: float) -> CallTable:  # fmt: skip
    """The row measures `m` reduced per call, in-place artefacts left out (`m`'s arrays are masked in place)."""
    red, tensor_row, match = plan.red, plan.tensor_row, plan.match
    tin, tout = plan.tin, plan.tout
    diff = m.diff
    diff[~tensor_row] = np.nan
    differs = noise._any_cols(diff > 0)  # NaN compares False
    artifact = inplace_artifacts(o, differs, match)
    diff[artifact] = np.nan
    differs &= ~artifact
    quant = m.quant
    quant[np.isnan(diff)] = np.nan
    measured = ~noise._all_cols(np.isnan(diff))
    nf_in, nf_out, nf_in_any, known, cfg, in_diff, out_diff, has_out = red.any_of(
        tin & m.nonfinite & ~artifact, tout & m.nonfinite, tin & m.nonfinite_any & ~artifact, measured,
        plan.is_in & plan.config, tin & differs, tout & differs, tout & measured)  # fmt: skip
    return CallTable(diff, m.names, m.nonfinite, red.max(tin, diff), red.max(tout, diff), red.max(tin, quant, 0.0),
                     red.max(tensor_row, quant, 0.0), red.max(tensor_row & (match >= 0), m.unit, 0.0), nf_in, nf_out,
                     nf_in_any, known, cfg, in_diff, out_diff, has_out, origin_margin, suspect_margin, m, differs,
                     artifact, _count(plan, tin & differs))  # fmt: skip


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
    return is_scalar_dtype(dtype)


def _config_rows(o: Measured, scalar: np.ndarray, match: np.ndarray, raw_values: RawArgs) -> np.ndarray:
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
        a_raw, b_raw = raw_values.npu[rows[at]], raw_values.bench[cols[at]]
        differs[at] = np.fromiter(map(operator.ne, a_raw, b_raw), dtype=bool, count=len(at))
    for k in np.flatnonzero(raw & ~(both_raw & ~differs)).tolist():  # one side raw, or raw values that differ
        a, b = npu.stat_display(int(rows[k]), 0), bench.stat_display(int(cols[k]), 0)
        # the target of a cast, float16 on one side and float32 on the other, is the precision the runs differ
        # in (measured by the noise model), not a configuration difference
        differs[k] = a != b and not (is_float_dtype_name(str(a)) and is_float_dtype_name(str(b)))
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
        """Per entry max of `values` (1-d or 2-d) over rows of `mask`, NaN ignored; `fill` where none (`seg_max`)."""
        return seg_max(self, mask, values, fill)

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


def _py_seg_max(red: _PerEntry, mask: np.ndarray, values: np.ndarray, fill: float) -> np.ndarray:
    """`_PerEntry.max`: per entry the max of `values` (1-d or 2-d) over rows of `mask`, NaN ignored, `fill` where
    none; a zero maximum is +0."""
    out = np.full((red.n,) + values.shape[1:], fill)
    if values.ndim == 2 and red.in_order:  # column by column: reduceat along a contiguous axis is faster
        for c in range(values.shape[1]):
            out[:, c] = _py_seg_max(red, mask, values[:, c], fill)
        return out
    m = mask if values.ndim == 1 else mask[:, None]
    vals = np.where(m & ~np.isnan(values), values, fill)
    if red.in_order and len(red.seg):
        out[red.seg_entry] = np.maximum.reduceat(vals, red.seg, axis=0)
    elif not red.in_order and len(red.ei):
        np.maximum.at(out, red.ei, vals)
    out += 0.0  # a zero maximum is +0: which zero a reduction keeps among -0 and +0 depends on its order
    return out


def _c_seg_max(red: _PerEntry, mask: np.ndarray, values: np.ndarray, fill: float) -> np.ndarray:
    """_py_seg_max with every column in one pass over the rows, in C (`_noise.seg_max`; rows in entry order)."""
    if not (red.in_order and len(red.seg)):
        return _py_seg_max(red, mask, values, fill)
    runs = np.empty((len(red.seg),) + values.shape[1:])
    noise.C_NOISE.seg_max(np.ascontiguousarray(values, dtype=np.float64), np.ascontiguousarray(mask, dtype=bool),
                          np.ascontiguousarray(red.seg, dtype=np.intp), float(fill), runs)  # fmt: skip
    if red.every:
        return runs
    out = np.full((red.n,) + values.shape[1:], fill)
    out[red.seg_entry] = runs
    return out


seg_max = native.twin("_noise", _c_seg_max, _py_seg_max, noise.C_USABLE)


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
    input, the one the network passes on; NaN where it has none or it is not measured), per parameter-gradient entry
    those of its first parameter (the weight's); -inf for the other calls. A backward call's other outputs are
    parameter gradients, and a bias gradient is a sum over the batch whose cancellation varies from layer to layer
    (a BatchNorm bias gradient)."""
    out = np.full((len(npu.entries), diff.shape[1]), -np.inf)
    rows = np.flatnonzero((npu.state == State.OUTPUT) | (npu.state == State.PARAMETERS_GRAD))
    if not len(rows):
        return out
    calls, first = np.unique(npu.entry_index[rows], return_index=True)
    keep = np.isin(phase_code[calls], (int(Direction.BACKWARD), int(Direction.PARAMETERS_GRAD)))
    out[calls[keep]] = diff[rows[first[keep]]]
    return out


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
    return (
        red.any(other & tensor_row & ((npu.state == State.OUTPUT) | (npu.state == State.PARAMETERS_GRAD))),
        red.any(~other & tensor_row & inputs & differs),
    )
