"""The noise model of one compare: how much two runs may differ from precision alone.

Two runs on different hardware (an NPU and a GPU, bf16 and fp32, fused and unfused kernels) never agree
exactly: every operator differs a little. The root cause (judge/rootcause.py) therefore asks, for each call,
whether its difference stands above the noise it received. This module supplies the pieces (docs/rootcause.md
explains them with the measurements that chose the constants):

- the unit roundoff of each row's dtype and, along execution order, the lowest precision seen so far
  (anything upstream of a call may have rounded its data);
- the quantisation step of the recorded statistics: msprobe computes a bf16/fp16 tensor's Max/Min/Mean/Norm in
  that dtype, so two values can only be told apart to one ulp of the statistic;
- per-row measures that stay meaningful near zero: the relative change of the Norm and the change of the Mean
  relative to the RMS (Norm/sqrt(numel)); in tensor mode the relative L2 error ||a-b||/||b||;
- a robust pairing of calls for the analysis: (enclosing module, API, k-th call of that API inside the module),
  so an extra call on one side (a fused kernel against its unfused parts) shifts nothing outside its module; inside
  one module, the calls of one API are aligned by signature where the counters pair calls that do not look alike.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
from collections.abc import Iterable, Set as AbstractSet
from typing import Any
from dataclasses import fields, replace

import numpy as np

from msprobe_compare import native
from msprobe_compare.errors import UsageError
from msprobe_compare.load.rows import RowTable, State, StatKind, text_codes
from msprobe_compare.measure.tensor_metrics import COSINE_SHORT_ROUNDING, EXCESS_UNITS, UNIT_ROUNDOFF, MetricState
from msprobe_compare.pair.exact import dtype_category
from msprobe_compare.records import dataclass


@dataclass(frozen=True)
class Tolerance:
    """The constants of the rule (docs/rootcause.md: each with the measurement that chose it).

    A call is an `origin` when its difference exceeds `origin` times the noise floor, `suspect` when it exceeds
    `suspect` times the floor but not `origin` times (the data cannot decide), `noise` otherwise. The floor is
    never below `floor_units` unit roundoffs of the lowest precision upstream nor below `min_floor`.
    `--tolerance origin=3,suspect=1.5` overrides them.
    """

    origin: float = 2.0  # statistics: noise-only calls reach 1.6x the running floor on the shared fixtures
    suspect: float = 1.25  # statistics: between suspect and origin the precision cannot decide
    tensor_origin: float = 2.0  # tensor mode: relative L2 error over its floor
    tensor_suspect: float = 1.25
    floor_units: float = 1.0  # the floor is at least this many unit roundoffs of the lowest precision upstream
    min_floor: float = 5e-5  # and at least this (fp32 runs on different hardware; the former fixed 1e-4 / 2)
    extremes: float = 2.0  # Max/Min are single elements, their noise is not averaged: margins x this for them
    # tensor mode: an element is beyond rounding when its relative error exceeds this many unit roundoffs of the
    # coarser dtype (measured in the tensor pass); a suspect whose share of such elements stands `tensor_confirm`
    # times above the share upstream is an origin (two independent measures agree)
    excess_units: float = EXCESS_UNITS
    tensor_confirm: float = 1.6
    # the unit roundoff a matmul-class op (linear, conv, matmul, attention) of an fp32 dump may have run at: TF32
    # (PyTorch's default for cuDNN convolutions on Ampere and later) and Ascend's HF32 keep 10 mantissa bits, and
    # nothing in the dump says so; such an op's outputs are compared with at least `floor_units` of it
    reduced_matmul: float = 2.0**-11
    # a backward call is an origin when its gain exceeds this many times the largest gain of its peers in other layers
    # (judge/backward.py): noise-only gains over the peers' reach 1.89 on the cases, backward bugs stand at 14-1056
    backward_origin: float = 4.0

    @classmethod
    def parse(cls, text: str | None) -> Tolerance:
        """`origin=3,suspect=1.5` (any field, comma separated) over the defaults."""
        if not text:
            return cls()
        names = {f.name for f in fields(cls)}
        values: dict[str, float] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in names:
                raise UsageError(f"--tolerance: expected KEY=VALUE with KEY one of {', '.join(sorted(names))}, "
                                 f"got {part!r}")  # fmt: skip
            try:
                values[key] = float(value)
            except ValueError:
                raise UsageError(f"--tolerance: {key} needs a number, got {value!r}") from None
            if not values[key] > 0:
                raise UsageError(f"--tolerance: {key} must be positive, got {value!r}")
        tol = replace(cls(), **values)
        for origin, suspect in (("origin", "suspect"), ("tensor_origin", "tensor_suspect")):
            if suspect not in values and getattr(tol, suspect) > getattr(tol, origin):  # origin lowered alone
                tol = replace(tol, **{suspect: getattr(tol, origin)})
        if tol.suspect > tol.origin or tol.tensor_suspect > tol.tensor_origin:
            raise UsageError("--tolerance: suspect must not exceed origin")
        return tol


# dtype texts (PyTorch `torch.bfloat16`, MindSpore `BFloat16`), looked for in this order -> UNIT_ROUNDOFF's names
_ALIASES = (("bfloat16", "bfloat16"), ("bf16", "bfloat16"), ("float16", "float16"), ("half", "float16"),
            ("fp16", "float16"), ("float64", "float64"), ("double", "float64"), ("float32", "float32"),
            ("float", "float32"))  # fmt: skip
# unit roundoff (half an ulp of 1) and mantissa bits (u = 2^-(bits + 1)), by dtype text
_PRECISIONS = tuple((alias, UNIT_ROUNDOFF[name], round(-math.log2(UNIT_ROUNDOFF[name])) - 1) for alias, name in _ALIASES)
LOW_PRECISION = 2.0**-12  # a unit roundoff above this (bf16, fp16) is low precision (md5 cannot decide there)

# a floating dtype named as a value (the argument of a cast: MindSpore `Float16`, PyTorch `torch.bfloat16`)
_FLOAT_DTYPE_NAME = re.compile(r"(?:torch\.|mindspore\.)?(?:b?float(?:16|32|64)?|half|double|bf16|fp(?:16|32))",
                               re.I)


# matmul-class APIs and module classes (their last name part, lower case): an fp32 one may run at TF32/HF32
MATMUL_CLASS = re.compile(r"(?:linear|conv(?:_?transpose)?[123]?d?|_*r?matmul_*|mm|bmm|addmm|baddbmm|addbmm|einsum|"
                          r"scaled_dot_product_attention|\w*fusion_attention|\w*flash_attention|dense|batchmatmul|"
                          r"conv2dtranspose|conv[123]dtranspose)", re.I)  # fmt: skip


def matmul_calls(entries: list[str]) -> np.ndarray:
    """Per call: an API or module class of the matmul class (MATMUL_CLASS): `Functional.linear.3.forward`,
    `Module.fc.Linear.forward.0`, `Primitive.matmul.MatMul.2.forward`."""
    out = np.zeros(len(entries), dtype=bool)
    for e, name in enumerate(entries):
        parts = name.split(".")
        if parts[0] in ("Module", "Cell"):
            cls = parts[-3] if parts[-2] in ("forward", "backward") else parts[-2]
        else:
            cls = parts[-3] if len(parts) >= 3 else ""
        out[e] = MATMUL_CLASS.fullmatch(cls) is not None
    return out


def is_float_dtype_name(text: str) -> bool:
    """A text that names a floating dtype: a cast to it is part of the precision the two runs differ in."""
    return _FLOAT_DTYPE_NAME.fullmatch(text.strip().strip("'\"")) is not None


@functools.lru_cache(maxsize=4096)
def precision(dtype: str) -> tuple[float, int]:
    """(unit roundoff, mantissa bits) of a dtype text; (0, 0) for integers, bools and anything else exact."""
    low = dtype.lower()
    if "int" in low or "bool" in low or low.startswith("<class"):
        return 0.0, 0
    for key, unit, bits in _PRECISIONS:
        if key in low:
            return unit, bits
    return 0.0, 0


def _per_row(table: RowTable, k: int) -> np.ndarray:
    """(unit roundoff, mantissa bits)[k] per row, from the table's dtype codes (one pass over the texts per table);
    a fresh array, not kept (the tables live until the reports are written)."""
    distinct, codes = table.dtype_codes
    values = np.array([precision(d)[k] for d in distinct], dtype=np.float64)
    return values[codes]


def units(table: RowTable) -> np.ndarray:
    return _per_row(table, 0)


def stat_bits(table: RowTable) -> np.ndarray:
    """Mantissa bits of each row's recorded statistics: its dtype's, or those of the lowest floating precision of
    the dump where every recorded statistic of a finer row is a value of that format. MindSpore in PyNative
    computes the dumper's statistics inside the cell, under its `to_float(float16)` cast, so a Float32 tensor of a
    mixed-precision run has float16 statistics (its Norm 5.65625 for sqrt(32)); a genuine float32 statistic is a
    float16 value by chance about once in 2^13, all four of a row practically never. Rows whose statistics are
    all short binary fractions (a tensor of ones: 1, 1, 1, 8) are no evidence and keep their dtype's."""
    cached = getattr(table, "_stat_bits", None)
    if cached is not None and len(cached) == len(table.dtype):
        return cached
    bits = _per_row(table, 1).astype(np.int8)  # at most 52: kept on the table, small
    floating = bits[bits > 0]
    low = float(floating.min()) if len(floating) else 0.0
    out = bits
    fast = _native() if low and low < bits.max() else None
    if fast is not None:  # the test below, row by row in C
        out = bits.copy()
        fast.coarse_bits(np.ascontiguousarray(table.stats[:, :4], dtype=np.float64),
                         np.ascontiguousarray(table.stat_kind[:, :4], dtype=np.int8), out, int(low),
                         float(_MAX_OF_BITS.get(int(low), np.inf)))  # fmt: skip
    elif low and low < bits.max():
        finer = np.flatnonzero(bits > low)
        vals = table.stats[finer, :4]
        kinds = table.stat_kind[finer, :4]
        with np.errstate(all="ignore"):
            number = (kinds == StatKind.NUMBER) & np.isfinite(vals)
            mant, exp = np.frexp(np.where(number, vals, 0.0))
            scaled = np.ldexp(mant, int(low) + 1)
            exact = (scaled == np.round(scaled)) & (np.abs(vals) <= _MAX_OF_BITS.get(int(low), np.inf))
            if int(low) == 10:  # float16: below its normal range only multiples of 2^-24
                sub = np.abs(vals) < 2.0**-14
                exact &= ~sub | (np.ldexp(vals, 24) == np.round(np.ldexp(vals, 24)))
            short = np.ldexp(mant, int(low) // 2 + 1)  # a short binary fraction (1, 8, 0.5: constant tensors)
            long = number & (short != np.round(short))
        coarse = _all_cols(exact | ~number) & _any_cols(long)  # round values are no evidence of the format
        out = bits.copy()
        out[finer[coarse]] = int(low)
    try:
        table._stat_bits = out  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return out


_MAX_OF_BITS = {10: 65504.0}  # the largest finite float16 (bfloat16 has float32's range)


def ulp(values: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """One ulp of each value in a float format with `bits` mantissa bits (0 bits: exact, ulp 0)."""
    with np.errstate(all="ignore"):
        _, exp = np.frexp(np.where(np.isfinite(values), values, 0.0))
        step = np.ldexp(1.0, (exp - 1 - bits.astype(np.int64)).astype(np.int32))
    return np.where((bits > 0) & (values != 0), step, 0.0)


@functools.lru_cache(maxsize=65536)
def numel(shape: str) -> float:
    try:
        dims = [int(x) for x in shape.strip("[]()").split(",") if x.strip()]
    except ValueError:
        return 1.0
    return float(np.prod(dims)) if dims else 1.0


@dataclass(frozen=True)
class RowMeasures:
    """Per NPU row, two measures (columns) of the difference, each with the smallest difference the recording can
    show (NaN: not measured)."""

    diff: np.ndarray  # float64 (n, 3)
    quant: np.ndarray  # float64 (n, 3)
    unit: np.ndarray  # unit roundoff of the coarser of the two rows' dtypes
    nonfinite: np.ndarray  # bool: NaN/Inf on one side only
    nonfinite_any: np.ndarray  # bool: NaN/Inf on either side
    names: tuple[str, ...]
    beyond: np.ndarray | None = None  # tensor mode: the fraction of elements beyond rounding (NaN: not measured)
    beyond_tol: np.ndarray | None = None  # and the relative error that counts as beyond


STAT_NAMES: tuple[str, ...] = ("Norm rel. diff", "Mean change / RMS", "Max/Min change / max|x|")
TENSOR_NAMES = ("norm ratio |r-1|", "angular error r*sin", "MaxAbsErr / max|x|")


STAT_CHUNK = 1 << 16  # rows measured at a time: the temporaries stay small and are reused, not faulted in anew


@functools.cache
def _checked(module: Any) -> bool:
    """Whether a `_noise` module uses our StatKind codes (checked once per module)."""
    return all(getattr(module, f"K_{k.name}", None) == int(k) for k in StatKind if k < StatKind.RAW)


def _native() -> Any:
    """The `_noise` accelerator (`native.load`), None when absent, turned off or built with other codes."""
    fast = native.load("_noise")
    return fast if fast is not None and _checked(fast) else None


def stat_measures(npu: RowTable, bench: RowTable, match: np.ndarray) -> RowMeasures:
    """Statistics mode: |dNorm|/Norm and |dMean|/RMS (RMS = Norm/sqrt(numel)), each with one ulp of the recorded
    statistic (msprobe records a bf16 tensor's statistics in bf16) as its resolution. Rows are measured in chunks
    of STAT_CHUNK (every measure is per row)."""
    n = len(npu)
    nbits, nunit = stat_bits(npu), units(npu)
    bbits, bunit = (stat_bits(bench), units(bench)) if len(bench) else (None, None)
    size = row_numel(npu)
    diff, quant, unit = np.empty((n, 3)), np.empty((n, 3)), np.empty(n)
    nonfinite, nonfinite_any = np.empty(n, dtype=bool), np.empty(n, dtype=bool)
    fast = _native()
    if fast is not None:  # the same arithmetic row by row in C, one pass (the numpy code below is its twin)
        c = np.ascontiguousarray
        m = len(bench)
        fast.stat_measures(c(npu.stats, dtype=np.float64), c(npu.stat_kind, dtype=np.int8),
                           c(bench.stats, dtype=np.float64) if m else np.zeros((0, 4)),
                           c(bench.stat_kind, dtype=np.int8) if m else np.zeros((0, 4), dtype=np.int8),
                           c(match, dtype=np.int64), c(nbits, dtype=np.int8),
                           c(bbits, dtype=np.int8) if bbits is not None else np.zeros(0, dtype=np.int8),
                           c(nunit, dtype=np.float64), c(bunit, dtype=np.float64) if bunit is not None else np.zeros(0),
                           c(size, dtype=np.float64), diff, quant, unit, nonfinite, nonfinite_any)  # fmt: skip
        return RowMeasures(diff, quant, unit, nonfinite, nonfinite_any, STAT_NAMES)
    for lo in range(0, n, STAT_CHUNK):
        part = slice(lo, min(n, lo + STAT_CHUNK))
        _stat_chunk(npu, bench, match[part], part, nbits, bbits, nunit, bunit, size, diff, quant, unit, nonfinite,
                    nonfinite_any)  # fmt: skip
    return RowMeasures(diff, quant, unit, nonfinite, nonfinite_any, STAT_NAMES)


@dataclass(frozen=True)
class CallMeasures:
    """Statistics mode, `stat_calls`: per row the measures (NaN where not compared) and the NaN/Inf-on-one-side
    flag; per call the largest input and output difference (-inf: none), the largest resolution of its inputs and
    of all its tensors and the largest unit roundoff of its paired tensors (0: none), and its row flags (CALL_*)."""

    diff: np.ndarray  # float64 (rows, 3)
    nonfinite: np.ndarray  # bool (rows)
    in_d: np.ndarray  # float64 (calls, 3)
    out_d: np.ndarray
    q_in: np.ndarray
    q_all: np.ndarray
    unit: np.ndarray  # float64 (calls)
    flags: np.ndarray  # uint8 (calls)


# stat_calls' row flags, and its call flags (any row of the call), as _noise.c numbers them
ROW_TENSOR, ROW_INPUT, ROW_OUTPUT, ROW_ARTIFACT = 1, 2, 4, 8
CALL_FLAGS = ("nf_in", "nf_out", "nf_in_any", "known", "in_diff", "out_diff", "has_out")


def stat_calls(npu: RowTable, bench: RowTable, match: np.ndarray, row_flags: np.ndarray, starts: np.ndarray,
               run_call: np.ndarray | None, n_calls: int) -> CallMeasures | None:  # fmt: skip
    """`stat_measures` and the analysis's per-call maxima and flags in one pass over the rows, in C (None without
    it): no (rows, 3) resolution or per-row unit array is made. `row_flags` (uint8, ROW_*): a tensor row, an
    input, an output, an in-place artefact if it differs; `starts`: where each run of one call's rows begins
    (from row 0), `run_call` the call of each run (None: run t is call t). rootcause.analyse's numpy sequence
    (stat_measures, masks, `_PerEntry.max`/`any_of`) is its twin."""
    fast = _native()
    if fast is None or not len(npu):
        return None
    n, m = len(npu), len(bench)
    nbits, nunit = stat_bits(npu), units(npu)
    c = np.ascontiguousarray
    runs = len(starts)
    diff, nonfinite = np.empty((n, 3)), np.empty(n, dtype=bool)
    per = [np.empty((runs, 3)) for _ in range(4)]
    unit, flags = np.empty(runs), np.empty(runs, dtype=np.uint8)
    fast.stat_calls(c(npu.stats, dtype=np.float64), c(npu.stat_kind, dtype=np.int8),
                    c(bench.stats, dtype=np.float64) if m else np.zeros((0, 4)),
                    c(bench.stat_kind, dtype=np.int8) if m else np.zeros((0, 4), dtype=np.int8),
                    c(match, dtype=np.int64), c(nbits, dtype=np.int8),
                    c(stat_bits(bench), dtype=np.int8) if m else np.zeros(0, dtype=np.int8),
                    c(nunit, dtype=np.float64), c(units(bench), dtype=np.float64) if m else np.zeros(0),
                    c(row_numel(npu), dtype=np.float64), c(row_flags, dtype=np.uint8), c(starts, dtype=np.intp),
                    diff, nonfinite, *per, unit, flags)  # fmt: skip
    if run_call is not None:  # calls without rows: the fills
        fills = (-np.inf, -np.inf, 0.0, 0.0)
        per = [_scatter(a, run_call, n_calls, fill) for a, fill in zip(per, fills)]
        unit, flags = _scatter(unit, run_call, n_calls, 0.0), _scatter(flags, run_call, n_calls, 0)
    return CallMeasures(diff, nonfinite, per[0], per[1], per[2], per[3], unit, flags)


def _scatter(values: np.ndarray, at: np.ndarray, n: int, fill: float) -> np.ndarray:
    out = np.full((n,) + values.shape[1:], fill, dtype=values.dtype)
    out[at] = values
    return out


def _stat_chunk(npu: RowTable, bench: RowTable, match: np.ndarray, part: slice, nbits_all: np.ndarray,
                bbits_all: np.ndarray | None, nunit: np.ndarray, bunit: np.ndarray | None, size_all: np.ndarray,
                diff_out: np.ndarray, quant_out: np.ndarray, unit_out: np.ndarray, nonfinite_out: np.ndarray,
                nonfinite_any_out: np.ndarray) -> None:  # fmt: skip
    """stat_measures over the NPU rows `part` (`match` is theirs), written into the `_out` arrays."""
    n = len(match)
    hit = match >= 0
    cols = np.where(hit, match, 0)
    bv = bench.stats[cols] if bbits_all is not None else np.zeros((n, 4))
    bk = bench.stat_kind[cols] if bbits_all is not None else np.full((n, 4), StatKind.NONE, dtype=np.int8)
    nv, nk = npu.stats[part], npu.stat_kind[part]
    ok = hit & _all_cols(nk <= StatKind.NAN) & _all_cols(bk <= StatKind.NAN)  # numeric (NaN only where invalid)
    nbits = nbits_all[part]
    bbits = bbits_all[cols] if bbits_all is not None else np.zeros(n)
    unit_out[part] = np.maximum(nunit[part], bunit[cols] if bunit is not None else 0.0)
    size = size_all[part]
    norm_a, norm_b_ok = stat_valid(nv, nk, 3), stat_valid(bv, bk, 3)
    mean_ok = stat_valid(nv, nk, 2) & stat_valid(bv, bk, 2)
    with np.errstate(all="ignore"):
        amax = np.maximum(np.maximum(np.abs(nv[:, 0]), np.abs(nv[:, 1])),
                          np.maximum(np.abs(bv[:, 0]), np.abs(bv[:, 1])))
        norm_n, norm_b = np.abs(nv[:, 3]), np.abs(bv[:, 3])
        # the scale of the Mean change: the larger valid Norm, else the largest element (a bound of the RMS)
        scale = np.where(norm_a & norm_b_ok, np.maximum(norm_n, norm_b),
                         np.where(norm_a, norm_n, np.where(norm_b_ok, norm_b, amax)))
        safe = np.where(scale > 0, scale, 1.0)
        d_norm = np.where(norm_n == norm_b, 0.0, np.abs(norm_n - norm_b) / safe)
        rms = scale / np.sqrt(np.where(norm_a | norm_b_ok, np.maximum(size, 1.0), 1.0))
        safe_rms = np.where(rms > 0, rms, 1.0)
        d_mean = np.where(nv[:, 2] == bv[:, 2], 0.0, np.abs(nv[:, 2] - bv[:, 2]) / safe_rms)
        q_norm = np.maximum(ulp(norm_n, nbits), ulp(norm_b, bbits)) / safe
        q_mean = np.maximum(ulp(nv[:, 2], nbits), ulp(bv[:, 2], bbits)) / safe_rms
        safe_amax = np.where(amax > 0, amax, 1.0)
        d_ext = np.maximum(np.abs(nv[:, 0] - bv[:, 0]), np.abs(nv[:, 1] - bv[:, 1])) / safe_amax
        q_ext = np.maximum(ulp(amax, nbits), ulp(amax, bbits)) / safe_amax
    finite_n = finite_data(nv, nk)
    finite_b = finite_data(bv, bk)
    nonfinite = hit & (finite_n != finite_b)
    nonfinite_any = hit & ~(finite_n & finite_b)
    ok &= ~nonfinite_any
    nonfinite_out[part], nonfinite_any_out[part] = nonfinite, nonfinite_any
    diff, quant = diff_out[part], quant_out[part]  # views: written in place
    # a Norm or Mean the dumper's precision could not hold is unknown for the row; the other measures still judge
    valid = (norm_a & norm_b_ok, mean_ok, np.ones(n, dtype=bool))
    for k, (d, q) in enumerate(((d_norm, q_norm), (d_mean, q_mean), (d_ext, q_ext))):
        diff[:, k] = np.where(ok & valid[k], d, np.nan)
        quant[:, k] = np.where(ok & valid[k], q, np.nan)
    diff[nonfinite] = np.inf


def nonfinite_rows(npu: RowTable, bench: RowTable, match: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per NPU row: a NaN/Inf statistic on one side only, and on either side (unpaired rows: neither); for md5
    dumps, which record the statistics beside the md5."""
    hit = match >= 0
    if not len(bench):
        return np.zeros(len(npu), dtype=bool), np.zeros(len(npu), dtype=bool)
    cols = np.where(hit, match, 0)
    finite_n = finite_data(npu.stats, npu.stat_kind)
    finite_b = finite_data(bench.stats[cols], bench.stat_kind[cols])
    return hit & (finite_n != finite_b), hit & ~(finite_n & finite_b)


def row_numel(table: RowTable) -> np.ndarray:
    """The element count of each row's shape (`numel`), once per distinct shape text."""
    distinct, codes = text_codes(table.shape)
    return np.array([numel(d) for d in distinct], dtype=np.float64)[codes]


def _finite(values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """No NaN statistic and no infinite one (non-numeric cells count as finite)."""
    with np.errstate(invalid="ignore"):
        infinite = (np.abs(values) == np.inf) & (kinds <= StatKind.INT)
    return ~_any_cols((kinds == StatKind.NAN) | infinite)


def finite_data(values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Per row of statistics (Max, Min, Mean, Norm): no NaN/Inf in the data. Max and Min are elements of the
    tensor, so they tell where both are numeric: msprobe computes a bf16/fp16 tensor's Norm and Mean in that dtype,
    and the Norm of finite attention scores masked with -1e4 is inf in fp16. Without a numeric Max and Min, every
    statistic counts (`_finite`)."""
    extremes = (kinds[:, 0] <= StatKind.NAN) & (kinds[:, 1] <= StatKind.NAN)
    with np.errstate(invalid="ignore"):
        by_extremes = ((kinds[:, 0] != StatKind.NAN) & (kinds[:, 1] != StatKind.NAN)
                       & (np.abs(values[:, 0]) != np.inf) & (np.abs(values[:, 1]) != np.inf))  # fmt: skip
    return np.where(extremes, by_extremes, _finite(values, kinds))


def stat_valid(values: np.ndarray, kinds: np.ndarray, c: int) -> np.ndarray:
    """Per row whose data is finite (`finite_data`): statistic `c` (2 Mean, 3 Norm) is a value the data can have:
    not NaN/Inf, and a Norm at least half the largest |element| (below it the dumper's precision under- or
    overflowed: a Norm is never below the largest element)."""
    with np.errstate(invalid="ignore"):
        ok = (kinds[:, c] <= StatKind.INT) & (np.abs(values[:, c]) != np.inf)
        if c == 3:
            largest = np.maximum(np.abs(values[:, 0]), np.abs(values[:, 1]))
            ok &= ~(np.abs(values[:, 3]) < 0.5 * largest)
    return ok


def _all_cols(mask: np.ndarray) -> np.ndarray:
    """mask.all(axis=1) for a few columns, column by column (faster than a reduction along a short axis)."""
    out = mask[:, 0].copy()
    for k in range(1, mask.shape[1]):
        out &= mask[:, k]
    return out


def _any_cols(mask: np.ndarray) -> np.ndarray:
    out = mask[:, 0].copy()
    for k in range(1, mask.shape[1]):
        out |= mask[:, k]
    return out


def tensor_measures(npu: RowTable, bench: RowTable, match: np.ndarray, tensors, table_match: np.ndarray) -> RowMeasures:
    """Tensor mode: the difference a-b split into its part along b (the norm ratio r = |a|/|b|, from the Euclidean
    distance, the Cosine and the bench Norm) and its part across b (r*sin of the angle). Rounding noise is mostly
    across; a scaled or shifted result shows along. Rows whose analysis pairing differs from the table's have no
    tensor metrics and fall back to the statistics measures."""
    stat = stat_measures(npu, bench, match)
    n = len(npu)
    same = (match >= 0) & (match == table_match)
    cols = np.where(match >= 0, match, 0)
    euc, cos, max_abs = tensors.column("euc_dist"), tensors.column("cosine"), tensors.column("max_abs_err")
    bnorm = np.abs(bench.stats[cols, 3]) if len(bench) else np.zeros(n)
    bbits = stat_bits(bench)[cols] if len(bench) else np.zeros(n)
    with np.errstate(all="ignore"):
        e = euc / np.where(bnorm > 0, bnorm, np.nan)
        c = np.clip(cos, -1.0, 1.0)
        r = c + np.sqrt(np.maximum(c * c - 1.0 + e * e, 0.0))
        radial = np.abs(r - 1.0)
        across = r * np.sqrt(np.maximum(1.0 - c * c, 0.0))
        q_radial = ulp(bnorm, bbits) / np.where(bnorm > 0, bnorm, 1.0) + 1e-12  # the Cosine has 12 digits
        # the table's Cosine above 0.9999 has 6 decimals (spec §4.8): both parts move with it over half a unit of
        # its last decimal, the part across by up to sqrt(2 * 5e-7) = 1e-3 near 1. Each part is taken at its
        # smallest over that interval (no more than the recording supports), the spread is its resolution
        half = np.where(c > COSINE_SHORT_ROUNDING, 5e-7, 5e-13)
        lo_radial, lo_across = radial, across
        q_across = np.zeros(n)
        for shifted in (np.clip(c - half, -1.0, 1.0), np.clip(c + half, -1.0, 1.0)):
            r_s = shifted + np.sqrt(np.maximum(shifted * shifted - 1.0 + e * e, 0.0))
            rad_s, acr_s = np.abs(r_s - 1.0), r_s * np.sqrt(np.maximum(1.0 - shifted * shifted, 0.0))
            q_radial = np.maximum(q_radial, np.abs(rad_s - radial))
            q_across = np.maximum(q_across, np.abs(acr_s - across))
            lo_radial, lo_across = np.fmin(lo_radial, rad_s), np.fmin(lo_across, acr_s)
        q_radial, q_across = np.nan_to_num(q_radial), np.nan_to_num(q_across)
        radial, across = lo_radial, lo_across
    have = same & np.isfinite(radial) & np.isfinite(across) & (tensors.states[:, 0] == MetricState.VALUE)
    have |= same & (euc == 0)
    radial = np.where(euc == 0, 0.0, radial)
    across = np.where(euc == 0, 0.0, across)
    nv, bv = npu.stats, bench.stats[cols] if len(bench) else np.zeros((n, 4))
    amax = np.maximum(np.abs(nv[:, :2]).max(axis=1), np.abs(bv[:, :2]).max(axis=1))
    with np.errstate(all="ignore"):
        ext = np.where(max_abs == 0, 0.0, max_abs / np.where(amax > 0, amax, np.nan))
    ext = np.where(np.isfinite(ext), ext, stat.diff[:, 2])
    diff = np.where(have[:, None], np.stack([radial, across, ext], axis=1), stat.diff)
    diff[stat.nonfinite] = np.inf
    # one rounding of each element moves a tensor across by up to one unit roundoff of the coarser dtype, and its
    # largest element by as much
    quant = np.where(have[:, None], np.stack([q_radial, np.maximum(stat.unit, q_across), stat.unit], axis=1),
                     stat.quant)  # fmt: skip
    beyond = getattr(tensors, "beyond", None)
    if beyond is None or len(beyond) != n:
        beyond = tol_beyond = None
    else:
        beyond = np.where(same, beyond, np.nan)
        tol_beyond = np.where(same, tensors.beyond_tol, np.nan)
    return RowMeasures(diff, quant, stat.unit, stat.nonfinite, stat.nonfinite_any, TENSOR_NAMES, beyond, tol_beyond)


# -- robust pairing -------------------------------------------------------------------------------------------



def call_key(name: str) -> str:
    """The call without its counter: `Functional.linear.3.forward` -> `Functional.linear..forward`,
    `Module.a.Linear.forward.0` -> `Module.a.Linear.forward.`."""
    head, _, last = name.rpartition(".")
    if last in ("forward", "backward"):
        stem, _, count = head.rpartition(".")
        if count.isdigit():
            return f"{stem}..{last}"
    elif last.isdigit() and head.endswith((".forward", ".backward")):
        return head + "."
    return name


_API_COUNTER = re.compile(r"\.\d+\.(?=forward$|backward$)", re.M)  # constant replacements: no per-match Python
_MODULE_COUNTER = re.compile(r"(?:(?<=\.forward\.)|(?<=\.backward\.))\d+$", re.M)


def call_keys(names: list[str]) -> list[str]:
    """`call_key` of many names at once (two regex passes over the joined text instead of a call per name)."""
    fast = _native()
    if fast is not None and type(names) is list:  # the same two substitutions name by name, in C
        keys = fast.call_keys(names)
        if keys is not None:
            return keys
    text = "\n".join(names)
    if not names or text.count("\n") != len(names) - 1:
        return [call_key(n) for n in names]
    return _MODULE_COUNTER.sub("", _API_COUNTER.sub("..", text)).split("\n")


class _Groups:
    """Calls of one side grouped by (enclosing module, call without counter), in execution order."""

    def __init__(self, entries: list[str], parents: dict[str, str | None]) -> None:
        self.entries = entries
        self.names = list(zip(map(parents.get, entries), call_keys(entries)))
        ids = {g: i for i, g in enumerate(dict.fromkeys(self.names))}
        self.gid = np.fromiter(map(ids.__getitem__, self.names), dtype=np.int64, count=len(entries))
        self.ids = ids
        order = np.argsort(self.gid, kind="stable")  # calls of a group together, in execution order
        self.count = np.bincount(self.gid, minlength=len(ids)) if len(entries) else np.zeros(0, dtype=np.int64)
        self.start = np.r_[0, np.cumsum(self.count)[:-1]] if len(ids) else np.zeros(0, dtype=np.int64)
        self.rank = np.empty(len(entries), dtype=np.int64)
        self.rank[order] = np.arange(len(entries)) - self.start[self.gid[order]]
        self.order = order


def children(tree: dict[str, str | None], modules: AbstractSet[str | None]) -> list[tuple[str, str | None]]:
    """The (name, parent) items of a construct.json tree whose parent is one of `modules`, in the tree's order
    (in C with `_noise`: one pass over the dict)."""
    fast = _native()
    if fast is not None and type(tree) is dict:
        return fast.children(tree, modules)
    return list(itertools.compress(tree.items(), map(modules.__contains__, tree.values())))


class Names:
    """The positions of one side's entry names, for the analysis's many lookups: a table over the names built once
    (`_join.NameIndex`, in C) or, without it, a dict. `find(keys)`: each key's first position (-1: absent), `get`,
    `in`; `repeated`: how many names repeat an earlier one (none in a dump: they are the keys of its data)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        join = native.load("_join")
        self._index: Any = None
        if join is not None and hasattr(join, "NameIndex") and type(names) is list:
            try:
                self._index = join.NameIndex(names)
            except UnicodeEncodeError:  # a name without a UTF-8 form: the dict
                self._index = None
        if self._index is not None:
            self.repeated = int(self._index.repeated)
        else:
            self._pos: dict[str, int] = {}
            for i, name in enumerate(names):
                self._pos.setdefault(name, i)
            self.repeated = len(names) - len(self._pos)

    def find(self, keys: list[str]) -> np.ndarray:
        out = np.empty(len(keys), dtype=np.int64)
        if self._index is not None:
            self._index.find(keys if type(keys) is list else list(keys), out)
        else:
            out[:] = np.fromiter(map(self._pos.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys))
        return out

    def get(self, name: str) -> int:
        return int(self._index.get(name)) if self._index is not None else self._pos.get(name, -1)

    def __contains__(self, name: object) -> bool:
        return self.get(name) >= 0  # type: ignore[arg-type]

    def places(self, chosen: set[str]) -> list[int]:
        """Every position whose name is one of `chosen`, in order (each place of a repeated name too)."""
        return np.flatnonzero(np.fromiter(map(chosen.__contains__, self.names), dtype=bool,
                                          count=len(self.names))).tolist()  # fmt: skip


class _ThroughOther(Names):
    """One side's `Names` read through the other side's (`other`, whose names occur once each): a name the other
    side has is at `back[its position there]`; the few names of this side only are in a dict (first positions).
    No second table over all the names is built."""

    def __init__(self, names: list[str], other: Names, back: np.ndarray, only: np.ndarray) -> None:
        self.names, self._other, self._back = names, other, back
        self._index = None
        self._pos: dict[str, int] = {}
        for i in only.tolist():
            self._pos.setdefault(names[i], i)
        self.repeated = len(only) - len(self._pos)  # names of both sides occur once here too (_Sides checks)

    def find(self, keys: list[str]) -> np.ndarray:
        keys = keys if type(keys) is list else list(keys)
        at = self._other.find(keys)
        out = np.where(at >= 0, self._back[np.maximum(at, 0)], -1) if len(self._back) else np.full(len(keys), -1)
        miss = np.flatnonzero(at < 0)
        if len(miss) and self._pos:
            get = self._pos.get
            out[miss] = np.fromiter((get(keys[k], -1) for k in miss.tolist()), dtype=np.int64, count=len(miss))
        return out

    def get(self, name: str) -> int:
        at = self._other.get(name)
        return int(self._back[at]) if at >= 0 else self._pos.get(name, -1)


class _Sides:
    """Both sides' entry names for the analysis pairing: each side's `Names` (the NPU side's made when first asked
    for) and each entry's position on the other side (-1: a call of that side only)."""

    def __init__(self, npu: RowTable, bench: RowTable) -> None:
        self._npu_entries = npu.entries
        self.bench = Names(bench.entries)
        self.bench_of_npu = self.bench.find(npu.entries)
        hit = np.flatnonzero(self.bench_of_npu >= 0)
        found = self.bench_of_npu[hit]
        self._unique = not self.bench.repeated and not (np.bincount(found, minlength=1) > 1).any()
        if self._unique:
            # names once on each side that both have: the one lookup read backwards
            self.npu_of_bench = np.full(len(bench.entries), -1, dtype=np.int64)
            self.npu_of_bench[found] = hit
        else:
            self.npu_of_bench = self.npu.find(bench.entries)

    @functools.cached_property
    def npu(self) -> Names:
        if self._unique:  # through the bench side's table and npu_of_bench
            return _ThroughOther(self._npu_entries, self.bench, self.npu_of_bench,
                                 np.flatnonzero(self.bench_of_npu < 0))  # fmt: skip
        return Names(self._npu_entries)

    def only_npu(self) -> set[str]:
        return {self._npu_entries[i] for i in np.flatnonzero(self.bench_of_npu < 0).tolist()}

    def only_bench(self) -> set[str]:
        return {self.bench.names[i] for i in np.flatnonzero(self.npu_of_bench < 0).tolist()}

    def same(self) -> bool:
        """Both sides hold the same names (as sets)."""
        return bool((self.bench_of_npu >= 0).all() and (self.npu_of_bench >= 0).all())


@dataclass(frozen=True)
class TreeDiff:
    """How the two construct.json trees differ: whether they are equal, and the names both hold whose enclosing
    modules differ (in the NPU tree's order). Made once per compare, where the trees are read (`tree_diff`)."""

    equal: bool
    moved: tuple[str, ...]


def tree_diff(npu_parents: dict[str, str | None], bench_parents: dict[str, str | None]) -> TreeDiff:
    """The two trees compared item by item (in C: one pass of hash lookups over the NPU tree's names)."""
    if npu_parents is bench_parents:
        return TreeDiff(True, ())
    moved = itertools.compress(npu_parents, map(operator.ne, npu_parents.values(), map(bench_parents.get, npu_parents)))
    return TreeDiff(npu_parents == bench_parents, tuple(k for k in moved if k in bench_parents))


def tree_beside(raw: bytes, base: dict[str, str | None]) -> tuple[dict[str, str | None], TreeDiff] | None:
    """A construct.json's bytes read beside `base`, the other side's tree, and the two trees' `tree_diff`, in one
    pass in C: the tree is a copy of `base` less the names the file lacks or gives another parent, then those
    (so the names and parents both hold are base's objects, not a second copy of 281,000 of each, and its order
    is base's, then the changed names'; the analysis looks names up, it does not walk the bench tree in order).
    None without C or for a file outside the plain subset the C reader takes (an escape, a list of micro-steps, a
    value that is not a text or null, a name given twice, bytes that are not JSON), which
    dumpjson.read_construct_json then reads or reports."""
    fast = _native()
    if fast is None or type(base) is not dict:
        return None
    got = fast.tree_beside(raw, base)
    if got is None:
        return None
    tree, moved, fresh = got
    if "megatron_micro_step_number" in tree:  # read_construct_json's normalisation: its path only
        return None
    moved = {k for k in moved if tree[k] != base[k]}  # a name given twice: its last parent counts
    diff = TreeDiff(not moved and not fresh and len(tree) == len(base),
                    tuple(k for k in base if k in moved) if moved else ())  # fmt: skip
    return tree, diff


def analysis_pairing(npu: RowTable, bench: RowTable, match: np.ndarray, npu_parents: dict[str, str | None] | None,
                     bench_parents: dict[str, str | None] | None,
                     trees: TreeDiff | None = None) -> tuple[np.ndarray, int, np.ndarray | None]:  # fmt: skip
    """Rows paired by (enclosing module, call, k-th call inside the module) and the row's place in its call.

    Only APIs whose counters were renumbered (an extra call on one side shifts the later ones) or whose calls sit
    under another module pair otherwise than by name; their calls are re-paired. Where a (module, API) group's
    call count differs (a fused kernel on one side, its parts on the other) its calls are aligned by input shapes
    and arguments, and the rest stay unpaired; where the counts agree but the counters pair calls of differing
    signatures (an extra and a missing call inside one module), by signature (`_align_by_signature`). Returns the
    bench row per NPU row (-1: none), the number of calls paired differently from the table, and per NPU call
    whether it is one-sided (None: none is): a call of a re-paired API inside a module call both sides have whose
    (module, API) group the bench lacks, left unpaired. `trees`: the two trees' `tree_diff`, when the caller made
    it already (while the bench side was being read).
    """
    if not npu_parents or not bench_parents or not len(npu) or not len(bench):
        return match, 0, None
    sides = _Sides(npu, bench)
    if sides.same() and (trees.equal if trees is not None else npu_parents == bench_parents):
        out, moved, sided = match, None, None
    else:
        trees = trees if trees is not None else tree_diff(npu_parents, bench_parents)
        out, moved, sided = _repair_renumbered(npu, bench, match, npu_parents, bench_parents, sides, trees.moved)
    out, moved = _align_by_signature(npu, bench, match, out, moved, npu_parents, bench_parents, sides)
    return out, int(np.count_nonzero(moved)) if moved is not None else 0, sided


def analysis_match(npu: RowTable, bench: RowTable, match: np.ndarray, npu_parents: dict[str, str | None] | None,
                   bench_parents: dict[str, str | None] | None,
                   trees: TreeDiff | None = None) -> tuple[np.ndarray, int]:  # fmt: skip
    """`analysis_pairing`'s rows and count of calls paired otherwise than in the table."""
    out, repaired, _ = analysis_pairing(npu, bench, match, npu_parents, bench_parents, trees)
    return out, repaired


def _repair_renumbered(npu: RowTable, bench: RowTable, match: np.ndarray, npu_parents: dict[str, str | None],
                       bench_parents: dict[str, str | None], sides: _Sides,
                       moved: Iterable[str]) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:  # fmt: skip
    """analysis_match for the APIs renumbered between the sides or moved under another module: their calls
    re-paired by (module, API, k-th call). Returns the rows' bench rows and, per NPU call, whether it is paired
    otherwise than in the table (None: no call is) and whether it is one-sided (None: none is)."""
    n_entries = len(npu.entries)
    nset, bset = sides.npu, sides.bench  # membership by name: `in`
    only_n, only_b = sides.only_npu(), sides.only_bench()
    stems = _shifted(only_n, bset) | _shifted(only_b, nset)
    # a call sits under another module where its module call exists on one side only
    odd_modules = {n for n in only_n | only_b if call_key(n).endswith(".")}
    if odd_modules:
        for tree, other in ((npu_parents, bench_parents), (bench_parents, npu_parents)):
            under = children(tree, odd_modules)  # in C, not per item
            stems |= {call_key(k) for k, parent in under if k in nset and k in bset and other.get(k) != parent}
    # an extra call on one side and a missing one on the other of the same API leave the same names on both sides:
    # construct.json then puts a name under another module on each side (`moved`: tree_diff's)
    stems |= {call_key(k) for k in moved if k in nset and k in bset}
    if not stems:
        return match, None, None
    nsub, bsub = _calls_of(nset, stems), _calls_of(bset, stems)
    ng = _Groups([npu.entries[e] for e in nsub], npu_parents)
    bg = _Groups([bench.entries[b] for b in bsub], bench_parents)
    nsub_a, bsub_a = np.asarray(nsub, dtype=np.int64), np.asarray(bsub, dtype=np.int64)
    in_b = np.fromiter(map(bg.ids.get, ng.names, itertools.repeat(-1)), dtype=np.int64, count=len(nsub))
    has = in_b >= 0
    b_count = np.where(has, bg.count[np.maximum(in_b, 0)], -1) if len(bg.count) else np.full(len(nsub), -1)
    even = has & (b_count == ng.count[ng.gid])
    paired = np.full(n_entries, -1, dtype=np.int64)
    paired[nsub_a[even]] = bsub_a[bg.order[bg.start[in_b[even]] + ng.rank[even]]]
    uneven: dict[int, list[int]] = {}
    for k in np.flatnonzero(has & ~even).tolist():
        uneven.setdefault(int(in_b[k]), []).append(int(nsub_a[k]))
    if uneven:
        _align_uneven(npu, bench, bg, bsub_a, uneven, paired)
    # the table's own pairing of the re-paired calls (their first matched row), to see which calls change
    ei = npu.entry_index
    table_pair = _first_pairs(npu, bench, match, nsub_a)
    keep = np.ones(n_entries, dtype=bool)
    names_b = np.array([bench.entries[b] if b >= 0 else None for b in paired[nsub_a].tolist()], dtype=object)
    # a call whose (module, API) group has no counterpart at all keeps the table's pairing by name where its module
    # is renamed on one side; inside a module call both sides have (or at the top), it is one-sided: never paired
    # with a call elsewhere (issue #29), nor with a bench call the re-pairing gives to another NPU call
    one_sided = ~has & np.fromiter((p is None or p in bset for p in map(npu_parents.get, ng.entries)), dtype=bool,
                                   count=len(nsub))  # fmt: skip
    claimed = np.isin(table_pair[nsub_a], paired[nsub_a][paired[nsub_a] >= 0])
    keep[nsub_a] = (~has & ~one_sided & ~claimed) | (has & (names_b == np.array(ng.entries, dtype=object)) &
                                                     (table_pair[nsub_a] == paired[nsub_a]))  # fmt: skip
    out = np.where(keep[ei], match, -1)
    changed = np.flatnonzero(~keep & (paired >= 0)).tolist()
    _pair_rows(npu, bench, out, zip(changed, paired[changed].tolist()))
    sided = np.zeros(n_entries, dtype=bool)
    sided[nsub_a[~has & (one_sided | claimed)]] = True
    return out, ~keep & ((paired >= 0) | (table_pair >= 0)), sided


def _first_pairs(npu: RowTable, bench: RowTable, match: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Per NPU call, the bench call of its first matched row in `match` (-1: none), filled for `calls` only."""
    out = np.full(len(npu.entries), -1, dtype=np.int64)
    ei = npu.entry_index
    if not len(calls):
        return out
    if not _ordered(ei):  # every row looked at
        rows = np.flatnonzero(match >= 0)[::-1]
        out[ei[rows]] = bench.entry_index[match[rows]]  # the first matched row wins
        keep = np.zeros(len(out), dtype=bool)
        keep[calls] = True
        out[~keep] = -1
        return out
    bounds = npu.entry_bounds
    lens = bounds[calls + 1] - bounds[calls]
    seg = np.repeat(np.arange(len(calls)), lens)  # the rows of `calls`, call by call
    rows = np.repeat(bounds[calls] - np.r_[0, np.cumsum(lens)[:-1]], lens) + np.arange(int(lens.sum()))
    hit = match[rows] >= 0
    found, first = np.unique(seg[hit], return_index=True)
    out[calls[found]] = bench.entry_index[match[rows[hit][first]]]
    return out


def _pair_rows(npu: RowTable, bench: RowTable, out: np.ndarray, pairs: Iterable[tuple[int, int]]) -> None:
    """For each (NPU call, bench call) of `pairs`, the call's rows paired in `out` with the bench call's rows of the
    same place (bench call -1: every row unpaired)."""
    ei, bei = npu.entry_index, bench.entry_index
    nstart = npu.entry_bounds if _ordered(ei) else None
    bstart = bench.entry_bounds if _ordered(bei) else None
    for e, b in pairs:
        nrows = range(nstart[e], nstart[e + 1]) if nstart is not None else np.flatnonzero(ei == e).tolist()
        if b < 0:
            out[list(nrows)] = -1
            continue
        brows = range(bstart[b], bstart[b + 1]) if bstart is not None else np.flatnonzero(bei == b).tolist()
        nlen, blen = len(npu.entries[e]), len(bench.entries[b])
        suffix = {bench.names[j][blen:]: j for j in brows}
        for i in nrows:
            out[i] = suffix.get(npu.names[i][nlen:], -1)


SIGNATURE_ROWS = 1 << 17  # rows whose signatures the same-count alignment reads per compare; beyond: counters


def _align_by_signature(npu: RowTable, bench: RowTable, table_match: np.ndarray, out: np.ndarray,
                        moved: np.ndarray | None, npu_parents: dict[str, str | None],
                        bench_parents: dict[str, str | None],
                        sides: _Sides) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """Inside one module, the calls of one API with as many calls on both sides but signatures that do not line
    up by counter (an extra call of the API and a missing one inside the same module leave every name and parent
    as it was, and shift the calls between the two): aligned by signature (`_call_signature`) with a sequence
    alignment, so only the extra call stays unpaired. Looked at only where the pairing so far leaves a row of a
    call unpaired or pairs differing argument values; groups whose signatures agree in order, or whose size
    passes ALIGN_LIMIT or the SIGNATURE_ROWS budget, keep their counters."""
    import difflib

    ei, entries = npu.entry_index, npu.entries
    odd = np.zeros(len(entries), dtype=bool)
    unpaired = np.flatnonzero(out < 0)
    if len(unpaired):
        calls = np.flatnonzero(np.bincount(ei[unpaired], minlength=len(entries))).tolist()
        calls_a = np.asarray(calls, dtype=np.int64)
        odd[calls_a[sides.bench_of_npu[calls_a] >= 0]] = True  # calls the bench side has too
    rows = np.flatnonzero(npu.dtype_mask(_is_arg_dtype) & (out >= 0))
    if len(rows):
        odd[ei[rows[_values_differ(npu, bench, rows, out[rows])]]] = True
    if not odd.any():
        return out, moved
    odd_names = [entries[e] for e in np.flatnonzero(odd).tolist()]
    wanted = set(zip(map(npu_parents.get, odd_names), call_keys(odd_names)))
    ngroups = _members(sides.npu, npu_parents, wanted)
    bgroups = _members(sides.bench, bench_parents, wanted)
    budget = SIGNATURE_ROWS
    nb, bb = npu.entry_bounds, bench.entry_bounds
    for group, es in ngroups.items():
        bs = bgroups.get(group, [])
        if len(es) != len(bs) or len(es) < 2 or len(es) * len(bs) > ALIGN_LIMIT:
            continue  # calls on one side only are the renumbering's (_repair_renumbered)
        budget -= int(nb[es[-1] + 1] - nb[es[0]] + bb[bs[-1] + 1] - bb[bs[0]])
        if budget < 0:
            break
        nsig, bsig = [_call_signature(npu, e) for e in es], [_call_signature(bench, b) for b in bs]
        if nsig == bsig:
            continue
        new = np.full(len(es), -1, dtype=np.int64)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, nsig, bsig, autojunk=False).get_opcodes():
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):  # differing alike: by counter
                new[i1:i2] = bs[j1:j2]
        if (new == np.asarray(bs)).all():
            continue
        if moved is None:
            moved = np.zeros(len(entries), dtype=bool)
        if out is table_match:  # the table's pairing stays as it is
            out = table_match.copy()
        paired = {}
        for e, b in zip(es, new.tolist()):
            table_pair = _first_pair(bench, table_match, nb, e)
            if b == table_pair:
                out[nb[e]: nb[e + 1]] = table_match[nb[e]: nb[e + 1]]
            elif b != _first_pair(bench, out, nb, e):
                paired[e] = b
            moved[e] = b != table_pair
        _pair_rows(npu, bench, out, paired.items())
    return out, moved


def _first_pair(bench: RowTable, match: np.ndarray, bounds: np.ndarray, e: int) -> int:
    """The bench call of NPU call e's first paired row (-1: none)."""
    hits = match[bounds[e]: bounds[e + 1]]
    hits = hits[hits >= 0]
    return int(bench.entry_index[hits[0]]) if len(hits) else -1


def _members(present: Names, parents: dict[str, str | None],
             wanted: set[tuple[str | None, str]]) -> dict[tuple[str | None, str], list[int]]:  # fmt: skip
    """The calls of each wanted (enclosing module, API) group, in execution order: the children of the wanted
    modules in construct.json (filtered in C), those of a wanted group, then their place in the dump."""
    kids = children(parents, {m for m, _ in wanted})
    if not kids:
        return {}
    names = [k for k, _ in kids]
    keys = call_keys(names)
    wanted_keys = {key for _, key in wanted}
    maybe = [i for i, key in enumerate(keys) if key in wanted_keys]  # then the (module, API) pair
    groups = {i: (kids[i][1], keys[i]) for i in maybe}
    keep = [i for i in maybe if groups[i] in wanted]
    if present.repeated:  # a name twice in the dump: every place of it, in order
        calls = present.places({names[i] for i in keep})
        group_of = {names[i]: groups[i] for i in keep}
        pairs = [(e, group_of[present.names[e]]) for e in calls]
    else:
        pos = present.find([names[i] for i in keep]).tolist()
        pairs = sorted((e, groups[i]) for e, i in zip(pos, keep) if e >= 0)
    out: dict[tuple[str | None, str], list[int]] = {}
    for e, group in pairs:
        out.setdefault(group, []).append(e)
    return out


def _is_arg_dtype(dtype: str) -> bool:
    return dtype.startswith("<class")


def _arg_value(value: object) -> object:
    """A non-tensor argument as it counts for a signature: a floating dtype named as a value (a cast's target) is
    the precision the runs differ in, not part of the call's identity."""
    return "<floating dtype>" if isinstance(value, str) and is_float_dtype_name(value) else value


def _values_differ(npu: RowTable, bench: RowTable, rows: np.ndarray, brows: np.ndarray) -> np.ndarray:
    """Per non-tensor argument row paired with bench row `brows`: whether the recorded values differ."""
    nk, bk = npu.stat_kind[rows, 0], bench.stat_kind[brows, 0]
    numeric = (nk <= StatKind.INT) & (bk <= StatKind.INT)
    differ = np.where(numeric, npu.stats[rows, 0] != bench.stats[brows, 0], nk != bk)  # None, NaN: by kind
    raw = np.flatnonzero((nk == StatKind.RAW) & (bk == StatKind.RAW))
    if len(raw):  # bool, str: compared as values, a floating dtype name as any other
        a, b = raw_args(npu)[rows[raw]], raw_args(bench)[brows[raw]]
        ne = np.fromiter(map(operator.ne, a, b), dtype=bool, count=len(raw))
        for k in np.flatnonzero(ne).tolist():
            ne[k] = _arg_value(a[k]) != _arg_value(b[k])
        differ[raw] = ne
    return differ


def raw_args(table: RowTable) -> np.ndarray:
    """Each row's raw value in the first statistic column (object array; None where the row has none): the
    values of bool and str arguments, read from the table once for the analysis's two comparisons of them (the
    pairing's `_values_differ`, rootcause's configuration rows) and kept on the table until `drop_raw_args`."""
    cached = getattr(table, "_raw_args", None)
    if cached is not None and len(cached) == len(table.names):
        return cached
    out = np.empty(len(table.names), dtype=object)
    rows, values = table.raw.first_column()
    out[rows] = values
    try:
        table._raw_args = out  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return out


def drop_raw_args(*tables: RowTable) -> None:
    """Forget the tables' `raw_args` (the analysis is done with them)."""
    for table in tables:
        if getattr(table, "_raw_args", None) is not None:
            table._raw_args = None  # type: ignore[attr-defined]


def _call_signature(table: RowTable, e: int) -> tuple:
    """What identifies a call among the calls of its API in one module: per row, its place (`input.0`,
    `output.1`), shape, dtype kind (float/int/bool: the precision may differ between the sides) and, for
    non-tensor arguments, the value."""
    lo, hi = table.entry_bounds[e], table.entry_bounds[e + 1]
    skip = len(table.entries[e])
    return tuple((table.names[i][skip:], table.shape[i], dtype_category(table.dtype[i]),
                  _arg_value(table.stat_display(i, 0)) if table.dtype[i].startswith("<class") else None)
                 for i in range(lo, hi))  # fmt: skip


def _successor(name: str) -> str | None:
    """The name of the next call of the same API or module (counter + 1), None when the name has no counter."""
    head, _, last = name.rpartition(".")
    if last in ("forward", "backward"):
        stem, _, count = head.rpartition(".")
        return f"{stem}.{int(count) + 1}.{last}" if count.isdigit() else None
    if last.isdigit() and head.endswith((".forward", ".backward")):
        return f"{head}.{int(last) + 1}"
    return None


def _shifted(odd: set[str], other: Names) -> set[str]:
    """APIs renumbered between the sides: a call on one side only whose successor is missing on the other too
    (the counters of one side run further). A call missing in the middle of a run that goes on (the other side
    has its successor) left the later names where they were."""
    out = set()
    for name in odd:
        nxt = _successor(name)
        if nxt is not None and nxt not in other:
            out.add(call_key(name))
    return out


PROBE_MISSES = 256  # counters probed past the last call found (dumps number calls without gaps; tolerate a few)


def _calls_of(present: Names, stems: set[str]) -> list[int]:
    """Positions of the calls whose call_key is in `stems`, in execution order: their names are probed by
    counter (`X.0.forward`, `X.1.forward`, ...) instead of taking every name apart."""
    found: set[int] = set()
    for key in stems:
        if ".." in key:
            stem, direction = key.split("..", 1)
            make = f"{stem}.{{}}.{direction}".format
        elif key.endswith("."):
            make = (key + "{}").format
        else:
            at = present.get(key)
            if at >= 0:
                found.add(at)
            continue
        k, last = 0, -1
        while k - last <= PROBE_MISSES:
            at = present.get(make(k))
            if at >= 0:
                found.add(at)
                last = k
            k += 1
    if not found:
        return []
    if present.repeated:  # a name twice in the dump: every place of it
        return present.places({present.names[e] for e in found})
    return sorted(found)


ALIGN_LIMIT = 1 << 20  # calls^2 of one uneven group above which it stays unpaired (alignment cost)


def _align_uneven(npu: RowTable, bench: RowTable, bg: _Groups, bsub: np.ndarray, uneven: dict[int, list[int]],
                  paired: np.ndarray) -> None:  # fmt: skip
    """Inside a (module, API) group whose call count differs (a fused kernel against its parts): pair the calls
    whose signatures (input shapes and non-tensor arguments) line up in order; the others stay unpaired."""
    import difflib

    bgroups = {g: bsub[bg.order[bg.start[g]: bg.start[g] + bg.count[g]]].tolist() for g in uneven}
    nsig = _signatures(npu, {e for es in uneven.values() for e in es})
    bsig = _signatures(bench, {b for bs in bgroups.values() for b in bs})
    for g, es in uneven.items():
        bs = bgroups[g]
        if not bs or len(es) * len(bs) > ALIGN_LIMIT:
            continue
        sm = difflib.SequenceMatcher(None, [nsig[e] for e in es], [bsig[b] for b in bs], autojunk=False)
        for block in sm.get_matching_blocks():
            for k in range(block.size):
                paired[es[block.a + k]] = bs[block.b + k]


def _signatures(table: RowTable, wanted: set[int]) -> dict[int, tuple]:
    """Per call of `wanted`: its input rows' (place, shape) and non-tensor argument values (dtype left out: one side
    may run in another precision)."""
    out: dict[int, list] = {e: [] for e in wanted}
    ei = table.entry_index
    rows = np.flatnonzero(np.isin(ei, np.fromiter(wanted, dtype=np.int64)) & input_rows(table))
    for i in rows.tolist():
        e = int(ei[i])
        name = table.names[i][len(table.entries[e]):]
        value = table.stat_display(i, 0) if table.dtype[i].startswith("<class") else None
        out[e].append((name, table.shape[i], value))
    return {e: tuple(v) for e, v in out.items()}


def _ordered(ei: np.ndarray) -> bool:
    return not len(ei) or bool(np.all(ei[1:] >= ei[:-1]))


def input_rows(table: RowTable) -> np.ndarray:
    return (table.state == State.INPUT) | (table.state == State.PARAMETERS)
