"""The words of a parallel layout's rules (pair/layout_rules.py gives the codes: `Rule`): the
`Layout Rule` column of runs split differently across cards."""

from __future__ import annotations

from collections import Counter

from msprobe_compare.pair.layout_rules import Rule
from msprobe_compare.pair.parallel import Combined

RULE_TEXT = {
    Rule.REPLICATED: "replicated: every rank holds the whole tensor and the ranks agree",
    Rule.SPLIT: "split along dim {dim}: Max = max, Min = min, Mean = count-weighted mean, Norm = sqrt(sum of Norm^2)",
    Rule.PARTIAL: "partial sum (the ranks' tensors add up, before their all-reduce): Mean = sum of the ranks' means; "
    "Max, Min and Norm of a sum cannot be derived from the ranks' statistics",
    Rule.NPU_ONLY: "npu-only: a call the layout adds (communication, or an identity such as view_as); listed, not "
    "compared",
    Rule.NPU_ONLY_PARTIAL: "npu-only: a communication call the layout adds (its input is a partial sum: Mean = "
    "sum of the ranks' means); listed, not compared",
    Rule.NPU_ONLY_RANK0: "npu-only: a communication call the layout adds; the ranks differ, rank 0's row shown",
    Rule.UNPAIRED_RANK0: "no counterpart; the ranks differ, rank 0's row shown (not combined)",
    Rule.ARGS: "not compared: the other side's call takes a tensor input this one does not (a bias the layout adds "
    "after the all-reduce), so the outputs are different quantities",
    Rule.SINGLE: "one rank holds it (no tensor parallelism here): taken as it is",
    Rule.UNPAIRED: "no counterpart on the other side (the ranks agree)",
    Rule.LOCAL: "rank-local: the ranks hold different values by design (a vocab-parallel lookup's shifted, masked ids, "
    "its rows before the all-reduce); rank 0's row shown, not compared",
    Rule.SIZE_ARG: "a size argument of a sharded call: the ranks' value times the tensor-parallel size (shown) is the "
    "other side's",
    Rule.MISMATCH: "not combined: the ranks' shapes do not add up to the other side's",
}


def rule_text(rule: Rule, dim: int | None, disagree: str | None, md5: bool) -> str:
    """A row's rule in words: its code, split dim, the ranks that disagree, and whether the dump holds md5 only."""
    text = RULE_TEXT[rule].format(dim=dim)
    if rule is Rule.SPLIT and md5:
        text = (
            f"split along dim {dim}: the md5 of the whole tensor cannot be derived from the shards' md5 (not compared)"
        )
    if rule is Rule.PARTIAL and md5:
        text = "partial sum: the md5 of a sum cannot be derived from the ranks' md5 (not compared)"
    if disagree is not None:
        text = f"replicated, but the ranks DISAGREE ({disagree}): a replicated tensor must be equal on every rank"
    return text


def rank_label(c: Combined, i: int) -> str:
    """The ranks combined into row i ("rank0+rank1"), the one shown where they disagree, a size argument's value on
    each rank."""
    ranks = c.shards.ranks
    label = "+".join(ranks[r] for r in c.ranks[i])
    if c.disagree[i] is not None:
        label += f" (shown: {ranks[c.shown[i]]})"
    if i in c.size_value:
        label += f" (value {c.size_value[i]} on each rank)"
    return label


def disagree_text(c: Combined, i: int) -> str | None:
    """Which ranks of a replicated row differ ("rank0 vs rank1, rank3"), None when they agree."""
    cols = c.disagree[i]
    if cols is None:
        return None
    ranks = c.shards.ranks
    return f"{ranks[cols[0]]} vs {', '.join(ranks[r] for r in cols[1:])}"


def row_rule_text(c: Combined, i: int, md5: bool) -> str:
    """Row i's rule in words (`rule_text` of its code, split dim and disagreeing ranks)."""
    return rule_text(c.rule[i], c.split_dim[i], disagree_text(c, i), md5)


def rule_counts(codes: list[Rule]) -> str:
    """How many logical rows each layout rule combined ("40 replicated, 16 split"), the qualified rules counted with
    their family."""
    counts = Counter(code.family.value for code in codes)
    return ", ".join(f"{n} {code}" for code, n in counts.most_common())
