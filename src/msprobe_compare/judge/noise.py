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
import math
import re
from typing import Any
from dataclasses import fields, replace

import numpy as np

from msprobe_compare import native
from msprobe_compare.errors import UsageError
from msprobe_compare.load.rows import RowTable, StatKind, is_scalar_dtype, text_codes
from msprobe_compare.measure.tensor_metrics import COSINE_SHORT_ROUNDING, EXCESS_UNITS, UNIT_ROUNDOFF, MetricState
from msprobe_compare.records import dataclass


@functools.cache
def _checked(module: Any) -> bool:
    """Whether a `_noise` module uses our StatKind codes (checked once per module)."""
    return all(getattr(module, f"K_{k.name}", None) == int(k) for k in StatKind if k < StatKind.RAW)


C_NOISE: Any = native.built("_noise")  # the C twins of judge/ call it (noise.py, calls.py, floors.py)
C_USABLE = C_NOISE is not None and _checked(C_NOISE)  # built with our codes


def _native() -> Any:
    """The `_noise` accelerator, None when absent, turned off or built with other codes."""
    return C_NOISE if C_USABLE and native.enabled() else None


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
    # (judge/backward.py): noise-only gains over the peers' reach 2.22 on the cases, backward bugs stand at 13-1818
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
_PRECISIONS = tuple(
    (alias, UNIT_ROUNDOFF[name], round(-math.log2(UNIT_ROUNDOFF[name])) - 1) for alias, name in _ALIASES
)
LOW_PRECISION = 2.0**-12  # a unit roundoff above this (bf16, fp16) is low precision (md5 cannot decide there)

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


@functools.lru_cache(maxsize=4096)
def precision(dtype: str) -> tuple[float, int]:
    """(unit roundoff, mantissa bits) of a dtype text; (0, 0) for integers, bools and anything else exact."""
    low = dtype.lower()
    if "int" in low or "bool" in low or is_scalar_dtype(dtype):
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
    all short binary fractions (a tensor of ones: 1, 1, 1, 8) are no evidence and keep their dtype's. Computed
    anew per call (nothing is kept on the table, which is load/'s)."""
    bits = _per_row(table, 1).astype(np.int8)  # at most 52
    floating = bits[bits > 0]
    low = float(floating.min()) if len(floating) else 0.0
    return coarse_bits(table, bits, int(low)) if low and low < bits.max() else bits


def _py_coarse_bits(table: RowTable, bits: np.ndarray, low: int) -> np.ndarray:
    """A copy of `bits` where each row finer than `low` bits whose numeric statistics are all values of a `low`-bit
    format (no larger than its largest), one of them not a short binary fraction, has `low` bits."""
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
    return out


def _c_coarse_bits(table: RowTable, bits: np.ndarray, low: int) -> np.ndarray:
    """_py_coarse_bits row by row in C (`_noise.coarse_bits`)."""
    out = bits.copy()
    C_NOISE.coarse_bits(np.ascontiguousarray(table.stats[:, :4], dtype=np.float64),
                        np.ascontiguousarray(table.stat_kind[:, :4], dtype=np.int8), out, int(low),
                        float(_MAX_OF_BITS.get(int(low), np.inf)))  # fmt: skip
    return out


coarse_bits = native.twin("_noise", _c_coarse_bits, _py_coarse_bits, C_USABLE)


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
    stat_rows(npu, bench, match, nbits, bbits, nunit, bunit, size, diff, quant, unit, nonfinite, nonfinite_any)
    return RowMeasures(diff, quant, unit, nonfinite, nonfinite_any, STAT_NAMES)


def _py_stat_rows(npu: RowTable, bench: RowTable, match: np.ndarray, nbits: np.ndarray, bbits: np.ndarray | None,
                  nunit: np.ndarray, bunit: np.ndarray | None, size: np.ndarray, *out: np.ndarray) -> None:  # fmt: skip
    """stat_measures' arithmetic into `out` (diff, quant, unit, nonfinite, nonfinite_any), in chunks of STAT_CHUNK
    rows (every measure is per row)."""
    for lo in range(0, len(npu), STAT_CHUNK):
        part = slice(lo, min(len(npu), lo + STAT_CHUNK))
        _stat_chunk(npu, bench, match[part], part, nbits, bbits, nunit, bunit, size, *out)


def _c_stat_rows(npu: RowTable, bench: RowTable, match: np.ndarray, nbits: np.ndarray, bbits: np.ndarray | None,
                 nunit: np.ndarray, bunit: np.ndarray | None, size: np.ndarray, *out: np.ndarray) -> None:  # fmt: skip
    """_py_stat_rows' arithmetic row by row in C, one pass (`_noise.stat_measures`)."""
    c = np.ascontiguousarray
    m = len(bench)
    C_NOISE.stat_measures(c(npu.stats, dtype=np.float64), c(npu.stat_kind, dtype=np.int8),
                          c(bench.stats, dtype=np.float64) if m else np.zeros((0, 4)),
                          c(bench.stat_kind, dtype=np.int8) if m else np.zeros((0, 4), dtype=np.int8),
                          c(match, dtype=np.int64), c(nbits, dtype=np.int8),
                          c(bbits, dtype=np.int8) if bbits is not None else np.zeros(0, dtype=np.int8),
                          c(nunit, dtype=np.float64), c(bunit, dtype=np.float64) if bunit is not None else np.zeros(0),
                          c(size, dtype=np.float64), *out)  # fmt: skip


stat_rows = native.twin("_noise", _c_stat_rows, _py_stat_rows, C_USABLE)


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


def _c_stat_calls(npu: RowTable, bench: RowTable, match: np.ndarray, row_flags: np.ndarray, starts: np.ndarray,
                  run_call: np.ndarray | None, n_calls: int) -> CallMeasures | None:  # fmt: skip
    """`stat_measures` and the analysis's per-call maxima and flags in one pass over the rows, in C
    (`_noise.stat_calls`): no (rows, 3) resolution or per-row unit array is made. `row_flags` (uint8, ROW_*): a
    tensor row, an input, an output, an in-place artefact if it differs; `starts`: where each run of one call's
    rows begins (from row 0), `run_call` the call of each run (None: run t is call t). None for no row."""
    if not len(npu):
        return None
    n, m = len(npu), len(bench)
    nbits, nunit = stat_bits(npu), units(npu)
    c = np.ascontiguousarray
    runs = len(starts)
    diff, nonfinite = np.empty((n, 3)), np.empty(n, dtype=bool)
    per = [np.empty((runs, 3)) for _ in range(4)]
    unit, flags = np.empty(runs), np.empty(runs, dtype=np.uint8)
    C_NOISE.stat_calls(c(npu.stats, dtype=np.float64), c(npu.stat_kind, dtype=np.int8),
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


def _py_stat_calls(npu: RowTable, bench: RowTable, match: np.ndarray, row_flags: np.ndarray, starts: np.ndarray,
                   run_call: np.ndarray | None, n_calls: int) -> CallMeasures | None:  # fmt: skip
    """None: the Python twin of `_c_stat_calls` is rootcause.analyse's numpy sequence (stat_measures, masks,
    `_PerEntry.max`/`any_of`), which runs when this answers None (tests/judge/test_noise_native.py compares them)."""
    return None


stat_calls = native.twin("_noise", _c_stat_calls, _py_stat_calls, C_USABLE)


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
        amax = np.maximum(
            np.maximum(np.abs(nv[:, 0]), np.abs(nv[:, 1])), np.maximum(np.abs(bv[:, 0]), np.abs(bv[:, 1]))
        )
        norm_n, norm_b = np.abs(nv[:, 3]), np.abs(bv[:, 3])
        # the scale of the Mean change: the larger valid Norm, else the largest element (a bound of the RMS)
        scale = np.where(
            norm_a & norm_b_ok, np.maximum(norm_n, norm_b), np.where(norm_a, norm_n, np.where(norm_b_ok, norm_b, amax))
        )
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
