"""Runs split differently across cards: layouts, unsharding rules, combined statistics, rank-qualified origins."""

from __future__ import annotations

import csv
import json
import math
import shutil

import numpy as np
import pytest

import msprobe_compare
from conftest import DATA, extract_archive
from msprobe_compare import api
from msprobe_compare.errors import OptionError
from msprobe_compare.layouts import combine_replica, plan_layouts
from msprobe_compare.load.parallel_layout import ParallelLayout, detect_layouts, parse_layout, plain_class_name
from msprobe_compare.load.rows import StatKind, flatten
from msprobe_compare.pair import parallel as P

CASES = DATA / "parallel"
SAME = CASES / "shared" / "tp_mlp_same_stat"
BUG = CASES / "shared" / "tp_block_fc1scale1p1_rank1_stat"


# -- layouts ------------------------------------------------------------------------------------------------------


def computed(text: str) -> str:
    """The root cause names a computation origin "inputs agree, outputs differ", or, when its inputs carried noise,
    "outputs differ beyond the noise its inputs carry": one wording for the assertions."""
    return text.replace("outputs differ beyond the noise its inputs carry", "inputs agree, outputs differ")


def test_parse_layout_text_and_object():
    assert parse_layout("tp=2,pp=2,dp=2") == ParallelLayout(2, 2, 2)
    assert parse_layout({"tp": 4}) == ParallelLayout(tp=4)
    custom = parse_layout("tp=2, dp=2, order=tp-pp-dp, pp=2")
    assert custom.order == ("tp", "pp", "dp") and custom.text() == "tp=2,pp=2,dp=2,order=tp-pp-dp"
    assert parse_layout("TP=2,order=tp-cp-ep-dp-pp").order == ("tp", "dp", "pp")  # cp/ep: size 1, ignored
    for bad in ("tp=0", "tp=two", "xp=2", "order=tp-dp", "tp"):
        with pytest.raises(OptionError):
            parse_layout(bad)


def test_megatron_rank_order():
    layout = ParallelLayout(tp=2, pp=2, dp=2)
    # consecutive ranks form a TP group, then DP, then pipeline stages (Megatron's tp-cp-ep-dp-pp)
    assert layout.groups() == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
    assert layout.coords(5) == {"tp": 1, "dp": 0, "pp": 1}
    other = ParallelLayout(tp=2, pp=2, dp=2, order=("tp", "pp", "dp"))
    assert other.groups()[0] == [[0, 1], [2, 3]]


def test_parallel_class_names_map_to_plain_ones():
    assert (
        plain_class_name("Module.blocks.0.mlp.fc1.ColumnParallelLinear.forward.0.output.0")
        == "Module.blocks.0.mlp.fc1.Linear.forward.0.output.0"
    )
    assert (
        plain_class_name("Module.fc2.RowParallelLinear.parameters_grad.weight")
        == "Module.fc2.Linear.parameters_grad.weight"
    )
    assert (
        plain_class_name("Module.emb.VocabParallelEmbedding.backward.0.input.0")
        == "Module.emb.Embedding.backward.0.input.0"
    )
    assert plain_class_name("Cell.fc1.ColumnParallelLinear.forward.0.output.0") == "Cell.fc1.Linear.forward.0.output.0"
    assert plain_class_name("Functional.linear.0.forward.output.0") == "Functional.linear.0.forward.output.0"


def test_detection_from_shapes():
    npu = {"a": "[4, 8, 64]", "b": "[4, 8, 32]"}
    bench = {"a": "[4, 8, 128]", "b": "[4, 8, 32]"}
    n, b = detect_layouts(2, 1, npu, bench, 1, 1, False, False)
    assert (n.tp, n.dp, b.tp) == (2, 1, 1) and "2 times smaller on the npu side" in n.source
    n, b = detect_layouts(4, 1, npu, bench, 1, 1, True, False)  # DP=2 x TP=2 against one process
    assert (n.tp, n.dp, b.world) == (2, 2, 1)
    n, b = detect_layouts(2, 4, {"a": "[4, 8, 64]"}, {"a": "[4, 8, 32]"}, 1, 1, True, True)  # TP=2 vs TP=4
    assert (n.tp, b.tp) == (2, 4)
    assert detect_layouts(2, 3, npu, npu, 1, 1, False, False) is None  # nothing says how: pair by number
    # Megatron at TP=1 split into 2 pipeline stages: its parallel classes do not make it tensor-parallel
    n, b = detect_layouts(2, 1, {}, {}, 2, 1, True, False)
    assert (n.tp, n.pp, n.dp, b.world) == (1, 2, 1, 1)
    n, b = detect_layouts(4, 1, {}, {}, 2, 1, True, False)  # with 4 ranks the classes still say TP=2
    assert (n.tp, n.pp, n.dp) == (2, 2, 1)


# -- combining statistics -----------------------------------------------------------------------------------------


def _table(rows):
    """A one-entry RowTable of tensor output rows [(shape, (max, min, mean, norm))]."""
    body = {
        "output": [
            {
                "type": "torch.Tensor",
                "dtype": "torch.float32",
                "shape": shape,
                "Max": float(s[0]),
                "Min": float(s[1]),
                "Mean": float(s[2]),
                "Norm": float(s[3]),
                "requires_grad": False,
            }
            for shape, s in rows
        ]
    }
    return flatten(None, [("Functional.x.0.forward", body)])


def test_split_statistics_combine_exactly():
    rng = np.random.default_rng(0)
    whole = rng.standard_normal((4, 6)).astype(np.float64)
    parts = [whole[:, :2], whole[:, 2:]]  # uneven shards
    tables = [_table([(list(p.shape), (p.max(), p.min(), p.mean(), np.linalg.norm(p)))]) for p in parts]
    vals, kinds = P.combine_split(tables, [0, 0], [p.shape for p in parts])
    assert np.all(kinds == StatKind.NUMBER)
    assert vals[0] == whole.max() and vals[1] == whole.min()
    assert math.isclose(vals[2], whole.mean(), rel_tol=1e-12) and math.isclose(
        vals[3], np.linalg.norm(whole), rel_tol=1e-12
    )


def test_partial_sums_combine_only_the_mean():
    a, b = np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.0])
    tables = [_table([([3], (x.max(), x.min(), x.mean(), np.linalg.norm(x)))]) for x in (a, b)]
    vals, kinds = P.combine_partial(tables, [0, 0])
    assert kinds.tolist() == [StatKind.NONE, StatKind.NUMBER, StatKind.NONE, StatKind.NONE][:0] or kinds.tolist() == [
        StatKind.NONE,
        StatKind.NONE,
        StatKind.NUMBER,
        StatKind.NONE,
    ]
    assert math.isclose(vals[2], (a + b).mean())


def test_shapes_decide_the_reading():
    assert P.decide_shapes([(4, 8, 64), (4, 8, 64)], [(4, 8, 128)]) == (2, None, (4, 8, 128))
    assert P.decide_shapes([(4, 8, 32), (4, 8, 32)], [(4, 8, 32)]) == (None, None, (4, 8, 32))
    assert P.decide_shapes([(4, 8, 64), (4, 8, 64)], [(4, 8, 32)] * 4) == (2, 2, (4, 8, 128))  # TP=2 vs TP=4
    assert P.decide_shapes([(3, 5), (3, 5)], [(4, 5)]) is None


# -- the shared fixtures ------------------------------------------------------------------------------------------


def _combined(case):
    plan = plan_layouts(case / "npu/step0", case / "bench/step0", None, None)
    assert plan is not None
    heads = plan.npu_dumps[0].header, plan.bench_dumps[0].header
    return plan, combine_replica(plan, 0, lambda n, b: api.detect_mode(*heads, n.has_md5, b.has_md5))


@pytest.mark.parametrize("case", [SAME, BUG], ids=lambda c: c.name)
def test_every_sharded_row_is_combined_as_truth_says(case):
    truth = json.loads((case / "TRUTH.json").read_text())
    plan, (npu, bench, match, _) = _combined(case)
    assert (plan.npu.tp, plan.npu.dp, plan.npu.pp, plan.bench.world) == (2, 1, 1, 1)
    position = {name: i for i, name in enumerate(npu.table.names)}
    for name, t in truth["sharding"].items():
        # TRUTH names a parameter gradient `...parameters_grad.weight.0`; our row is `...parameters_grad.weight`
        i = position[name] if name in position else position[name.removesuffix(".0")]
        t = {**t, "bench": t["bench"] if ".parameters_grad." not in t["bench"] else t["bench"].removesuffix(".0")}
        assert npu.rule[i] == t["layout"], name
        if t["layout"] == "split":
            assert npu.split_dim[i] == t["split_dim"], name
        assert match[i] >= 0 and bench.table.names[match[i]] == t["bench"], name
        assert npu.disagree[i] is None, name
    entries = {
        npu.table.entries[npu.table.entry_index[i]] for i, rule in enumerate(npu.rule) if rule.startswith("npu_only")
    }
    assert entries == set(truth["npu_only_entries"])


@pytest.mark.parametrize("case", [SAME, BUG], ids=lambda c: c.name)
def test_combined_statistics_equal_the_single_run(case):
    """Split rows: all four statistics; partial sums: the Mean; within float rounding (TP changes summation order)."""
    truth = json.loads((case / "TRUTH.json").read_text())
    _, (npu, bench, match, _) = _combined(case)
    bug_rows = set()
    if truth["origin"]:  # rows after the bug differ by design: check only rows before it
        first = npu.table.entries.index("Functional.linear.10.forward")
        entries = npu.table.entries
        bug_rows = {
            i
            for i in range(len(npu.table))
            if npu.table.entry_index[i] >= first or entries[npu.table.entry_index[i]].endswith("parameters_grad")
        }  # gradients come after it
    checked = 0
    for i, rule in enumerate(npu.rule):
        if rule not in ("split", "partial_sum") or i in bug_rows:
            continue
        j = match[i]
        cols = [2] if rule == "partial_sum" else [0, 1, 2, 3]
        assert np.all(npu.table.stat_kind[i, [0, 1, 3]] == StatKind.NONE) or rule == "split"
        for c in cols:
            a, b = npu.table.stats[i, c], bench.table.stats[j, c]
            scale = max(abs(b), bench.table.stats[j, 3] / math.sqrt(max(1, np.prod(eval(bench.table.shape[j])))))
            assert abs(a - b) <= 1e-5 * scale, (npu.table.names[i], c, a, b)
        checked += 1
    assert checked > 20


def _rows(run, pattern="compare_result_dp0_*.csv"):
    with open(run.one(pattern), newline="") as f:
        return list(csv.DictReader(f))


def test_same_computation_gives_no_origin(run_cli):
    run = run_cli(SAME, "pytorch", "--format", "csv,html")
    assert run.code == 0, run.out
    assert "npu layout: tp=2,pp=1,dp=1 (detected from 2 npu and 1 bench rank(s)" in run.out
    assert "bench layout: tp=1,pp=1,dp=1" in run.out
    assert "Root cause: no origin" in run.out and "not paired" not in run.out
    rows = _rows(run)
    by_name = {r["NPU Name"]: r for r in rows}
    fc1 = by_name["Module.blocks.0.mlp.fc1.ColumnParallelLinear.forward.0.output.0"]
    assert fc1["Bench Name"] == "Module.blocks.0.mlp.fc1.Linear.forward.0.output.0"
    assert fc1["NPU Tensor Shape"] == fc1["Bench Tensor Shape"] == "[4, 8, 128]"
    assert fc1["NPU Ranks"] == "rank0+rank1" and fc1["Layout Rule"].startswith("split along dim 2")
    partial = by_name["Functional.linear.1.forward.output.0"]
    assert partial["NPU max"] == "None" and "cannot be derived" in partial["Layout Rule"]
    only = by_name["Distributed.all_reduce.0.forward.output.0"]
    assert only["Layout Rule"].startswith("npu-only") and only["colour"] == ""
    page = run.one("compare_report_dp0_*.html").read_text()
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]  # the report says what was compared
    assert title.startswith("msprobe-compare: ") and "rank0 vs " in title and title.endswith(" dp0")
    assert run.one("advisor_dp0_*.txt").is_file()


def test_bug_on_one_rank_names_the_rank(run_cli):
    run = run_cli(BUG, "pytorch", "--format", "csv", "-da")
    assert run.code == 0, run.out
    assert (
        "Root cause: rank1:Functional.linear.10.forward: inputs agree, outputs differ (only rank1 diverges; "
        "rank0 first sees it at Distributed.all_reduce.3.forward)" in computed(run.out)
    )
    advisor = run.one("advisor_dp0_*.txt").read_text()
    assert "1. [computation, forward] rank1:Functional.linear.10.forward" in advisor
    analyze = json.loads(run.one("diff_analyze_*.json").read_text())
    assert analyze["dp0"][0]["op_name"] == "Functional.linear.10.forward"


def test_layouts_given_on_the_command_line_and_in_compare_json(run_cli, tmp_path):
    run = run_cli(SAME, "pytorch", "--format", "csv", "--npu-layout", "tp=2", "--bench-layout", "tp=1")
    assert run.code == 0 and "npu layout: tp=2,pp=1,dp=1 (given)" in run.out
    run = run_cli(SAME, "pytorch", "--npu-layout", "tp=4", out_dir=tmp_path / "bad")
    assert run.code == 1 and "needs 4 rank(s)" in run.out
    case = tmp_path / "case"
    shutil.copytree(SAME, case)
    doc = json.loads((case / "compare.json").read_text())
    (case / "compare.json").write_text(json.dumps({**doc, "npu_parallel": {"tp": 2}, "bench_parallel": "tp=1"}))
    run = run_cli(case, "pytorch", "--format", "csv", out_dir=tmp_path / "json")
    assert run.code == 0 and "npu layout: tp=2,pp=1,dp=1 (given)" in run.out
    (case / "compare.json").write_text(json.dumps({**doc, "npu_parallel": "tp=x"}))
    run = run_cli(case, "pytorch", out_dir=tmp_path / "json2")
    assert run.code == 1 and "npu_parallel" in run.out


def test_python_api(tmp_path):
    result = msprobe_compare.compare(BUG / "npu/step0", BUG / "bench/step0", tmp_path, formats="csv")
    assert list(result.ranks) == ["dp0"] and result.ok
    assert result.first_origin.startswith("dp0: rank1:Functional.linear.10.forward")
    assert "Layout Rule" in result.ranks["dp0"].columns


# -- own dumps: TP=2 vs 1 and vs 4 with attention and a vocab-parallel embedding, PP=2, DP=2 x TP=2, md5 ----------

OWN = CASES / "own"


def _compare(tmp_path, npu, bench, **options):
    return msprobe_compare.compare(OWN / npu / "step0", OWN / bench / "step0", tmp_path / f"{npu}_{bench}",
                                   formats="csv", **options)  # fmt: skip


@pytest.mark.parametrize("npu, bench", [("n2", "b1"), ("n2", "b4"), ("p2", "b1"), ("d2t2same", "b1")])
def test_own_same_computation_gives_no_origin(tmp_path, npu, bench):
    result = _compare(tmp_path, npu, bench)
    assert result.ok and list(result.ranks) == (["dp0", "dp1"] if npu.startswith("d2") else ["dp0"])
    assert result.first_origin is None and result.errors == 0


@pytest.mark.parametrize("npu, bench, origin", [
    ("n2bug", "b1", "rank1:Functional.linear.10.forward: inputs agree, outputs differ (only rank1 diverges; rank0 "
                    "first sees it at Distributed.all_reduce.4.forward)"),
    ("n2bug", "b4", "rank1:Functional.linear.10.forward: inputs agree, outputs differ (only rank1 diverges"),
    ("p2bug", "b1", "rank1:Functional.linear.10.forward: inputs agree, outputs differ (on rank1, whose dump calls it "
                    "Functional.linear.4.forward)"),
])  # fmt: skip
def test_own_bug_names_the_rank(tmp_path, npu, bench, origin):
    result = _compare(tmp_path, npu, bench)
    assert computed(result.first_origin).startswith(f"dp0: {origin}")


def test_a_bias_added_after_the_all_reduce(tmp_path):
    """Megatron's row-parallel layer adds its bias after the all-reduce: one more Tensor.__add__ per layer (calls are
    paired by their module and their place in it, so later adds keep their partners) and an F.linear without the
    bias (its output is another quantity than the bench F.linear's: not compared)."""
    result = _compare(tmp_path, "n2rbbug", "b1rb")
    assert computed(result.first_origin).startswith(
        "dp0: rank1:Functional.linear.10.forward: inputs agree, outputs differ"
    )
    cols = result.ranks["dp0"].columns
    k = cols["NPU Name"].index("Functional.linear.3.forward.output.0")  # o_proj's F.linear, without the bias
    assert cols["Layout Rule"][k].startswith("not compared: the other side's call takes a tensor input")
    residual = cols["NPU Name"].index("Tensor.__add__.1.forward.output.0")  # after o_proj's own bias add
    assert cols["Bench Name"][residual] == "Tensor.__add__.0.forward.output.0"


def test_data_parallel_replicas_compare_with_their_bench_replicas(tmp_path):
    result = _compare(tmp_path, "d2t2bug", "bd2")
    assert list(result.ranks) == ["dp0", "dp1"] and result.ok
    assert computed(result.ranks["dp1"].first_origin).startswith("rank3:Functional.linear.10.forward: inputs agree")
    # replica 0 sees rank 3's bug only through the data-parallel all-reduce of the gradients (after the backward):
    # a jump at the gradients' div_ (the former rule's boundary origin there). The noise-aware rule keeps the
    # backward's own differences as its floor, and that jump stays below its origin margin (2x the floor),
    # so replica 0 names no origin; it must never name another op
    dp0 = result.ranks["dp0"].first_origin
    assert dp0 is None or "before rank1:Tensor.div_.0.forward's input" in dp0
    assert set(result.ranks["dp1"].columns["NPU Ranks"]) >= {"rank2+rank3"}


def test_own_combined_statistics_equal_the_single_run(tmp_path):
    for npu, bench in (("n2", "b1"), ("p2", "b1")):
        plan = plan_layouts(OWN / npu / "step0", OWN / bench / "step0", None, None)
        heads = plan.npu_dumps[0].header, plan.bench_dumps[0].header
        c, b, match, _ = combine_replica(plan, 0, lambda n, bb: api.detect_mode(*heads, n.has_md5, bb.has_md5))
        compared = 0
        for i, rule in enumerate(c.rule):
            j = match[i]
            if j < 0 or rule not in ("split", "partial_sum", "replicated", "single"):
                continue
            cols = [2] if rule == "partial_sum" else [0, 1, 2, 3]
            for col in cols:
                if c.table.stat_kind[i, col] != StatKind.NUMBER:
                    continue
                x, y = c.table.stats[i, col], b.table.stats[j, col]
                typical = b.table.stats[j, 3] / math.sqrt(max(1, np.prod(eval(b.table.shape[j]) or [1])))
                assert abs(x - y) <= 1e-4 * max(abs(y), typical) + 1e-7, (npu, c.table.names[i], col, x, y)
            compared += 1
        assert compared > 300
        # every bench row of a call that is not communication has its npu row (pipeline stages at global positions)
        paired = set(match[match >= 0].tolist())
        lost = [
            n
            for k, n in enumerate(b.table.names)
            if k not in paired and not n.startswith("Distributed.") and b.table.dtype[k] != "None"
        ]
        # the vocab-parallel lookup: its shifted ids and rows before the all-reduce are rank-local, and the plain
        # embedding passes padding_idx, max_norm, ... that the sharded one does not
        lost = [n for n in lost if not n.startswith("Functional.embedding.0.")]
        assert not lost, lost


def test_tp2_against_tp4_unshards_both_sides(tmp_path):
    plan = plan_layouts(OWN / "n2" / "step0", OWN / "b4" / "step0", None, None)
    assert (plan.npu.tp, plan.bench.tp) == (2, 4)
    heads = plan.npu_dumps[0].header, plan.bench_dumps[0].header
    c, b, match, _ = combine_replica(plan, 0, lambda n, bb: api.detect_mode(*heads, n.has_md5, bb.has_md5))
    i = c.table.names.index("Module.layers.0.mlp.fc1.ColumnParallelLinear.forward.0.output.0")
    assert c.rule[i] == b.rule[match[i]] == "split" and c.table.shape[i] == b.table.shape[match[i]] == "[4, 8, 128]"
    # the vocabulary ranges differ between the layouts: the masking calls hold rank-dependent values on both sides
    k = c.table.names.index("Tensor.__lt__.0.forward.input.1")
    assert c.rule[k] == "rank_local" and match[k] < 0 or c.rule[k] == "rank_local"


def test_md5_compares_replicated_rows_only(tmp_path):
    result = _compare(tmp_path, "n2md5", "b1md5")
    rules = result.ranks["dp0"].columns["Layout Rule"]
    results = result.ranks["dp0"].columns["Result"]
    split = [r for rule, r in zip(rules, results) if rule.startswith("split")]
    assert split and set(split) == {"N/A"}  # not compared: the md5 of a whole tensor is not derivable from shards
    assert any(rule.startswith("split along dim") and "md5" in rule for rule in rules)
    before = [r for rule, r in zip(rules, results) if rule.startswith("replicated")][:10]
    assert set(before) == {"pass"}


@pytest.fixture(scope="module")
def tensor_dumps(tmp_path_factory):
    return extract_archive(OWN / "tensor_tp2_vs_tp1.tar.xz", tmp_path_factory.mktemp("tensor_dumps"))


def test_real_data_shards_are_concatenated_then_measured(tensor_dumps, tmp_path):
    result = msprobe_compare.compare(tensor_dumps / "n2t/step0", tensor_dumps / "b1t/step0", tmp_path / "same",
                                     formats="csv")  # fmt: skip
    cols = result.ranks["dp0"].columns
    split = [k for k, rule in enumerate(cols["Layout Rule"]) if rule.startswith("split")]
    assert len(split) > 100
    for k in split:  # the concatenated shards are the single run's tensor, within float32 rounding
        assert cols["Cosine"][k] > 0.99999 and cols["MaxAbsErr"][k] < 1e-5, cols["NPU Name"][k]
    fused = cols["NPU Name"].index("Torch.matmul.1.backward.output.0")  # [B*H/2, S, S] per rank: interleaved
    assert "interleave" in cols["Layout Rule"][fused] and cols["Cosine"][fused] > 0.99999
    partial = cols["NPU Name"].index("Functional.linear.3.forward.output.0")  # o_proj before its all-reduce
    assert cols["Layout Rule"][partial].startswith("partial sum") and cols["Cosine"][partial] > 0.99999
    assert not list(tmp_path.glob("same/.combined_tensors_*"))  # the combined tensors are removed afterwards
    # the same computation: no origin (a bias gradient's fp32 reordering under TP stays within the noise floor)
    assert result.first_origin is None and result.errors == 0
    bug = msprobe_compare.compare(tensor_dumps / "n2tbug/step0", tensor_dumps / "b1t/step0", tmp_path / "bug",
                                  formats="csv")  # fmt: skip
    assert computed(bug.first_origin).startswith("dp0: rank1:Functional.linear.4.forward: inputs agree, outputs differ")


def test_mindspore_cells_with_parallel_wrappers(run_cli, tmp_path):
    """The shared TP case as a MindSpore dump would name it: Cell.* entries, bench layers as Dense."""
    case = tmp_path / "ms"
    shutil.copytree(BUG, case)
    for path in case.glob("*/step0/*/*.json"):
        text = path.read_text().replace('"Module.', '"Cell.')
        text = text.replace('"framework": "pytorch"', '"framework": "mindspore"')
        if "/bench/" in str(path):
            text = text.replace(".Linear.", ".Dense.")
        path.write_text(text)
    run = run_cli(case, "mindspore", "--format", "csv")
    assert run.code == 0, run.out
    assert "Root cause: rank1:Functional.linear.10.forward: inputs agree, outputs differ (only rank1" in computed(
        run.out
    )
    rows = {r["NPU Name"]: r for r in _rows(run)}
    fc1 = rows["Cell.blocks.0.mlp.fc1.ColumnParallelLinear.forward.0.output.0"]
    assert fc1["Bench Name"] == "Cell.blocks.0.mlp.fc1.Dense.forward.0.output.0"
    assert fc1["Layout Rule"].startswith("split along dim 2")


def test_equal_layouts_keep_the_rank_by_rank_compare(run_cli):
    """Equal layouts (given or not) never reach the layout code: ranks are paired by number, files per rank."""
    case = DATA / "pytorch" / "dist_same_stat"
    run = run_cli(case, "pytorch", "--format", "csv", "--npu-layout", "dp=2", "--bench-layout", "dp=2")
    assert run.code == 0, run.out
    assert "rank pairing: npu rank0 <-> bench rank0, npu rank1 <-> bench rank1" in run.out
    assert "layout:" not in run.out and len(run.files("compare_result_rank*_*.csv")) == 2


def test_html_report_carries_the_layout_columns(run_cli):
    import base64
    import re
    import zlib

    run = run_cli(SAME, "pytorch", "--format", "html")
    page = run.one("compare_report_dp0_*.html").read_text()
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]  # what was compared, and the replica
    assert title.startswith("msprobe-compare: ") and title.endswith(" dp0")
    m = re.search(r'id="payload" data-encoding="(\w+)">([^<]*)</script>', page)
    data = base64.b64decode(m.group(2))
    data = zlib.decompress(data) if m.group(1) == "zlib" else data
    assert b"Layout Rule" in data and b"NPU Ranks" in data and b"split along dim 2" in data


def test_a_nan_on_one_rank_keeps_its_nan_in_the_rank_qualified_origin(tmp_path):
    """A NaN that appears on one TP rank: the origin is qualified by that rank and still says a NaN/Inf appears."""
    run = tmp_path / "n2nan"
    shutil.copytree(OWN / "n2", run)
    dump = run / "step0" / "rank1" / "dump.json"
    data = json.loads(dump.read_text())
    out = data["data"]["Functional.linear.10.forward"]["output"][0]
    out["Max"] = out["Mean"] = out["Norm"] = float("nan")
    dump.write_text(json.dumps(data, indent=1))
    result = msprobe_compare.compare(run / "step0", OWN / "b1" / "step0", tmp_path / "out", formats="csv")
    text = computed(result.first_origin)
    assert text.startswith("dp0: rank1:Functional.linear.10.forward: NaN/Inf appears in its outputs"), text
