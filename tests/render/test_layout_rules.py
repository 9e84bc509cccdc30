"""The layout rules are codes in pair/ (`Rule`) and words in render/layout_rules.py: every code has its words."""

from __future__ import annotations

from msprobe_compare.pair.layout_rules import Rule
from msprobe_compare.render.layout_rules import RULE_TEXT, rule_counts, rule_text


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
