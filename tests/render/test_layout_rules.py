"""The layout rules are codes in pair/ (`Rule`) and words in render/layout_rules.py: every code has its words."""

from __future__ import annotations

from msprobe_compare.pair.layout_rules import Rule
from msprobe_compare.render.layout_rules import (
    RULE_TEXT,
    disagree_text,
    rank_label,
    row_rule_text,
    rule_counts,
    rule_text,
)


def test_every_rule_has_its_words() -> None:
    assert set(RULE_TEXT) == set(Rule)
    assert rule_text(Rule.SPLIT, 1, None, False).startswith("split along dim 1: Max = max")
    assert "md5" in rule_text(Rule.SPLIT, 0, None, True)
    assert "DISAGREE (rank0 vs rank1)" in rule_text(Rule.REPLICATED, None, "rank0 vs rank1", False)


def test_qualified_rules_count_with_their_family() -> None:
    codes = [Rule.REPLICATED, Rule.NPU_ONLY_PARTIAL, Rule.SPLIT, Rule.NPU_ONLY, Rule.UNPAIRED_RANK0, Rule.REPLICATED]
    assert rule_counts(codes) == "2 replicated, 2 npu_only, 1 split, 1 unpaired"
    assert [c.npu_only for c in codes] == [False, True, False, True, False, False]
    assert [c.partial for c in codes] == [False, True, False, False, False, False]
    assert Rule.NPU_ONLY_RANK0.family is Rule.NPU_ONLY and Rule.LOCAL.family is Rule.LOCAL


def _table(stats: tuple[float, float, float, float]):
    """A one-entry RowTable with one float32 output of shape [4]."""
    from msprobe_compare.load.rows import flatten

    body = {
        "output": [
            {
                "type": "torch.Tensor",
                "dtype": "torch.float32",
                "shape": [4],
                "Max": stats[0],
                "Min": stats[1],
                "Mean": stats[2],
                "Norm": stats[3],
                "requires_grad": False,
            }
        ]
    }
    return flatten(None, [("Functional.x.0.forward", body)])


def test_disagreeing_ranks_and_size_values_in_words() -> None:
    """pair/ keeps the ranks as table columns; the words name them: the ranks combined, the one shown where they
    disagree (the farthest from the bench row), which ranks differ, a size argument's value on each rank."""
    from msprobe_compare.pair import parallel as P

    npu = P.align([_table((1.0, 0.0, 0.5, 1.0)), _table((9.0, 0.0, 4.0, 9.0))], ["rank0", "rank1"])
    bench = P.align([_table((1.0, 0.0, 0.5, 1.0))], ["rank0"])
    match, decisions = P.pair_logical(npu, bench)
    b = P.combine(bench, match, [decisions[0]], is_npu=False)
    c = P.combine(npu, match, decisions, is_npu=True, other_rows=lambda i: b.table.stats[0])
    assert c.rule == [Rule.REPLICATED] and c.ranks == [(0, 1)] and c.disagree == [(0, 1)] and c.shown == [1]
    assert rank_label(c, 0) == "rank0+rank1 (shown: rank1)"
    assert disagree_text(c, 0) == "rank0 vs rank1"
    assert row_rule_text(c, 0, False).startswith("replicated, but the ranks DISAGREE (rank0 vs rank1)")
    c.size_value[0] = 16
    assert rank_label(c, 0) == "rank0+rank1 (shown: rank1) (value 16 on each rank)"
    assert rank_label(b, 0) == "rank0" and disagree_text(b, 0) is None
