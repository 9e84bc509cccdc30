"""measure/stats.py on small tables: diffs and relative diffs per statistic, their cell kinds, the warning."""

from __future__ import annotations

import math

import numpy as np
import pytest

from msprobe_compare.measure.stats import Cell, gather, stat_diffs
from pair.helpers import table


def _side(*stats: tuple[object, object, object, object]):
    """One call whose outputs carry these (Max, Min, Mean, Norm) statistics."""
    leaves = [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": mx, "Min": mn, "Mean": me,
               "Norm": no} for mx, mn, me, no in stats]  # fmt: skip
    return table({"Torch.add.0.forward": {"input_args": [], "output": leaves}})


def test_diffs_relative_diffs_and_kinds():
    npu = _side((3.0, 1, 0.0, math.nan), (2.0, -1.0, 1.0, 1.0))
    bench = _side((1.0, 1, 0.0, 1.0), (1.0, -1.0, 1.0, 1.0))
    d = stat_diffs(npu, bench, np.array([0, 1]))
    assert d.diff[0, 0] == 2.0 and d.rel[0, 0] == 200.0 and d.diff_kind[0, 0] == Cell.VALUE
    assert d.diff_kind[0, 1] == Cell.INT and d.diff[0, 1] == 0  # both integers
    assert d.rel_kind[0, 1] == Cell.VALUE  # ... but the relative diff is a float
    assert d.diff_kind[0, 2] == Cell.VALUE and d.rel_kind[0, 2] == Cell.NA  # bench 0: no relative diff
    assert d.diff_kind[0, 3] == Cell.NAN and d.rel_kind[0, 3] == Cell.NAN  # a NaN statistic
    assert d.warning.tolist() == [True, False]  # |3 - 1| / 3 > 0.5; |2 - 1| / 2 is not above it
    assert d.diff[1].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_unmatched_and_non_numeric_cells_are_na():
    npu = _side((1.0, None, True, math.inf), (1.0, 1.0, 1.0, 1.0))
    bench = _side((1.0, 0.0, 0.5, math.inf))
    d = stat_diffs(npu, bench, np.array([0, -1]))
    assert d.diff_kind[1].tolist() == [Cell.NA] * 4 and not d.warning[1]  # no bench row
    assert d.diff_kind[0, 1] == Cell.NA and d.diff_kind[0, 2] == Cell.NA  # null and bool statistics
    assert d.diff_kind[0, 3] == Cell.NAN  # inf - inf is NaN
    vals, kinds = gather(bench, np.array([0, -1]))
    assert vals[0, 0] == 1.0 and kinds[1].tolist() == [3, 3, 3, 3]  # StatKind.NONE where unmatched
    assert vals[1].tolist() == [0.0] * 4 and kinds[0].tolist() == bench.stat_kind[0].tolist()
    vals, kinds = gather(bench, np.array([-1, 0, -1]))  # row 0 is what an unmatched row takes before it is cleared
    assert vals[[0, 2]].tolist() == [[0.0] * 4] * 2 and kinds[[0, 2]].tolist() == [[3] * 4] * 2


def test_empty_tables():
    d = stat_diffs(_side(), _side(), np.zeros(0, dtype=np.int64))
    assert d.diff.shape == (0, 4) and d.warning.shape == (0,)


def test_zero_against_tiny_is_a_warning_only_above_the_epsilon():
    npu = _side((0.0, 0.0, 0.0, 0.0), (1e-3, 0.0, 0.0, 0.0))
    bench = _side((1e-12, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))
    d = stat_diffs(npu, bench, np.array([0, 1]))
    # magnitude |N - B| / (|max(N, B)| + 1e-10): 1e-12 / (1e-12 + 1e-10) is small; 1e-3 / (1e-3 + 1e-10) is not
    assert d.warning.tolist() == [False, True]


@pytest.mark.parametrize("use_native", ["1", "0"])
def test_chunks_give_the_values_of_one_pass(use_native: str, monkeypatch):
    """Computed CHUNK_ROWS rows at a time (memory), the diffs are those of all rows at once, bit for bit."""
    import msprobe_compare.measure.stats as stats

    monkeypatch.setenv("MSPROBE_NATIVE", use_native)

    rng = np.random.default_rng(3)
    pool = [0.0, -0.0, 1, 2.5, math.nan, math.inf, -math.inf, None, True, 1e-300, 1.0000001, 7]

    def stat() -> object:
        return (
            pool[rng.integers(len(pool))]
            if rng.random() < 0.4
            else float(rng.standard_normal() * 10.0 ** rng.integers(-8, 8))
        )

    npu = _side((1, 2, 3, 4), *[tuple(stat() for _ in range(4)) for _ in range(49)])
    bench = _side((4, 3, 2, 1), *[tuple(stat() for _ in range(4)) for _ in range(39)])
    match = rng.integers(-1, 40, 50)
    match[0] = 0  # integers against integers
    monkeypatch.setattr(stats, "CHUNK_ROWS", 1 << 30)
    whole = stat_diffs(npu, bench, match)
    for rows in (1, 3, 7):
        monkeypatch.setattr(stats, "CHUNK_ROWS", rows)
        part = stat_diffs(npu, bench, match)
        for name in ("diff", "diff_kind", "rel", "rel_kind", "warning"):
            a, b = getattr(whole, name), getattr(part, name)
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
    assert whole.warning.any() and (whole.diff_kind == Cell.NAN).any() and (whole.diff_kind == Cell.INT).any()


def _plain_diffs(npu, bench, match: np.ndarray) -> dict[str, np.ndarray]:
    """The cell rules of spec §4.5 written plainly over all rows at once (no chunks, no outputs written in place):
    the oracle of stat_diffs' in-place arithmetic."""
    from msprobe_compare.load.rows import StatKind
    from msprobe_compare.measure.stats import _as_reference_reads

    b_num, b_kind = gather(bench, match)
    n_kind = npu.stat_kind
    kinds = (StatKind.NUMBER, StatKind.INT, StatKind.NAN)
    numeric = np.isin(n_kind, kinds) & np.isin(b_kind, kinds) & (match >= 0)[:, None]
    n_num = np.where(n_kind == StatKind.NAN, np.nan, npu.stats)
    b_num[b_kind == StatKind.NAN] = np.nan
    with np.errstate(all="ignore"):
        _as_reference_reads(n_num, b_num, numeric & (n_kind == StatKind.NUMBER) & (b_kind == StatKind.NUMBER))
        diff = n_num - b_num
        rel = np.abs(diff / b_num * 100)
        magnitude = np.abs(diff) / (np.abs(np.maximum(n_num, b_num)) + 1e-10)
    diff_kind = np.full(diff.shape, Cell.NA, dtype=np.int8)
    diff_kind[numeric] = Cell.VALUE
    diff_kind[numeric & (n_kind == StatKind.INT) & (b_kind == StatKind.INT)] = Cell.INT
    diff_kind[numeric & np.isnan(diff)] = Cell.NAN
    rel_kind = np.where(diff_kind == Cell.INT, Cell.VALUE, diff_kind).astype(np.int8)
    rel_kind[(rel_kind == Cell.VALUE) & (b_num == 0)] = Cell.NA
    valued = (diff_kind == Cell.VALUE) | (diff_kind == Cell.INT)
    with np.errstate(invalid="ignore"):
        warning = np.any(valued & (magnitude > 0.5), axis=1)
    return {"diff": diff, "diff_kind": diff_kind, "rel": rel, "rel_kind": rel_kind, "warning": warning}


@pytest.mark.parametrize("use_native", ["1", "0"])
def test_in_place_arithmetic_equals_the_plain_rules(use_native: str, monkeypatch):
    import msprobe_compare.measure.stats as stats

    monkeypatch.setenv("MSPROBE_NATIVE", use_native)  # the cells in C (_legacyparse.stat_cells) or by numpy

    rng = np.random.default_rng(11)
    pool = [0.0, -0.0, 1, 0, -3, 2.5, math.nan, math.inf, -math.inf, None, True, 1e-300, 1.0000001, 7, 2**60]

    def stat() -> object:
        if rng.random() < 0.5:
            return pool[rng.integers(len(pool))]
        return float(rng.standard_normal() * 10.0 ** rng.integers(-8, 8))

    npu = _side(*[tuple(stat() for _ in range(4)) for _ in range(300)])
    bench = _side(*[tuple(stat() for _ in range(4)) for _ in range(200)])
    match = rng.integers(-1, 200, 300)
    monkeypatch.setattr(stats, "CHUNK_ROWS", 64)
    got, want = stat_diffs(npu, bench, match), _plain_diffs(npu, bench, match)
    for name, a in want.items():
        b = getattr(got, name)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
    assert set(np.unique(got.diff_kind).tolist()) == {int(k) for k in Cell}  # every kind of cell occurs
    assert ((got.diff_kind == Cell.INT) & (got.rel_kind == Cell.VALUE)).any()  # rel: integers are values
    assert ((got.diff_kind == Cell.VALUE) & (got.rel_kind == Cell.NA)).any()  # and N/A against a zero
    assert got.warning.any() and not got.warning.all()


def test_native_cells_are_in_use_and_equal_numpy_on_many_rows(monkeypatch):
    """The C cells are taken (codes and thresholds agree) and give numpy's bytes on a table of 20,000 rows."""
    import msprobe_compare.measure.stats as stats
    from tests.native_helpers import native_module

    assert stats._native_cells(native_module("_legacyparse"))
    rng = np.random.default_rng(7)
    base = rng.standard_normal(20_000 * 4) * 10.0 ** rng.integers(-30, 30, 20_000 * 4)
    near = base * (1 + rng.choice([0.0, 1e-12, 1e-6, 1e-4, 0.3, -2.0], base.size))  # cancelling and not
    npu = _side(*map(tuple, base.reshape(-1, 4).tolist()))
    bench = _side(*map(tuple, near.reshape(-1, 4).tolist()))
    npu.stat_kind[::13, 1] = 2  # NaN statistics, null ones, integers
    bench.stat_kind[::17, 2] = 3
    npu.stat_kind[::5, 0] = bench.stat_kind[::5, 0] = 1
    npu.stats[::5, 0], bench.stats[::5, 0] = np.round(npu.stats[::5, 0]), 0.0
    match = np.arange(20_000)
    match[::101] = -1
    got = stat_diffs(npu, bench, match)
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    want = stat_diffs(npu, bench, match)
    for name in ("diff", "diff_kind", "rel", "rel_kind", "warning"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    assert got.warning.any() and (got.diff_kind == Cell.NAN).any() and (got.rel_kind == Cell.NA).any()
