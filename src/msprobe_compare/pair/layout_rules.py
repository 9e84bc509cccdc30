"""A parallel layout's decisions per logical row: how both sides' shards add up (`Decision`: the split dim of each
side and the logical shape) and the rule that combined the row (`Rule`, a code; render/layout_rules.py gives its
words). pair/parallel.py combines the rows by them."""

from __future__ import annotations

from enum import Enum

import numpy as np

from msprobe_compare.load.names import (
    COMMUNICATION_PREFIXES,
    PHASES,
    Direction,
    EntryName,
    is_layout_call,
    parse_entries,
    parse_entry,
)
from msprobe_compare.load.parallel_layout import plain_class_name
from msprobe_compare.load.rows import RowTable, State, is_inplace
from msprobe_compare.pair.shards import Shards, agree_mask, stat_key, state_of
from msprobe_compare.records import dataclass


class Rule(str, Enum):
    """How a logical row was made from the ranks' rows. The value is the rule's code (tests' truths name it);
    `render/layout_rules.py` gives its words."""

    REPLICATED = "replicated"  # every rank holds the whole tensor and the ranks agree
    SPLIT = "split"  # the shards add up along one dim
    PARTIAL = "partial_sum"  # the ranks' tensors add up (before their all-reduce)
    NPU_ONLY = "npu_only"  # a call the layout adds: listed, not compared
    NPU_ONLY_PARTIAL = "npu_only/partial_sum"  # such a call's row holding a partial sum
    NPU_ONLY_RANK0 = "npu_only/rank0"  # such a call's row whose ranks differ: rank 0's row shown
    UNPAIRED = "unpaired"  # no counterpart on the other side (the ranks agree)
    UNPAIRED_RANK0 = "unpaired/rank0"  # no counterpart, the ranks differ: rank 0's row shown
    MISMATCH = "not_combined"  # a counterpart, but the shapes do not add up
    SIZE_ARG = "size_argument"  # an integer argument scaled by the layout
    LOCAL = "rank_local"  # the ranks hold different values by design
    ARGS = "other_arguments"  # the other side's call takes a tensor input this one does not
    SINGLE = "single"  # one rank holds the row (no tensor parallelism on this side, or a stage's own rank)

    @property
    def family(self) -> Rule:
        """The rule without its qualifier (NPU_ONLY_PARTIAL -> NPU_ONLY)."""
        return _FAMILY.get(self, self)

    @property
    def npu_only(self) -> bool:
        """A row of a call the layout adds (listed, not flagged)."""
        return self.family is Rule.NPU_ONLY

    @property
    def partial(self) -> bool:
        """The row holds the sum of the ranks' tensors (PARTIAL, or an added call's partial row)."""
        return self is Rule.PARTIAL or self is Rule.NPU_ONLY_PARTIAL


_FAMILY = {Rule.NPU_ONLY_PARTIAL: Rule.NPU_ONLY, Rule.NPU_ONLY_RANK0: Rule.NPU_ONLY,
           Rule.UNPAIRED_RANK0: Rule.UNPAIRED}  # fmt: skip


def _combined(shapes: list[tuple[int, ...] | None], dim: int | None) -> tuple[int, ...] | None:
    """The logical shape of shards: the shared shape (dim None) or the sum along `dim`; None when they do not fit."""
    present = [s for s in shapes if s is not None]
    if not present or len(present) != len(shapes):
        return None
    first = present[0]
    if any(len(s) != len(first) for s in present):
        return None
    if dim is None:
        return first if all(s == first for s in present) else None
    if dim >= len(first):
        return None
    if any(s[:dim] + s[dim + 1 :] != first[:dim] + first[dim + 1 :] for s in present):
        return None
    return first[:dim] + (sum(s[dim] for s in present),) + first[dim + 1 :]


def decide_shapes(npu: list[tuple[int, ...] | None], bench: list[tuple[int, ...] | None]
                  ) -> tuple[int | None, int | None, tuple[int, ...]] | None:  # fmt: skip
    """(npu split dim or None, bench split dim or None, logical shape) such that both sides' shards add up to the
    same logical shape; whole on both sides first, then one split dim. None when no reading fits."""
    whole_n, whole_b = _combined(npu, None), _combined(bench, None)
    if whole_n is not None and whole_n == whole_b:
        return None, None, whole_n
    rank = len(next((s for s in npu if s is not None), ()) or ())
    for d in range(rank):
        split_n = _combined(npu, d) if len(npu) > 1 else whole_n
        split_b = _combined(bench, d) if len(bench) > 1 else whole_b
        if split_n is not None and split_n == split_b:
            return (d if len(npu) > 1 else None), (d if len(bench) > 1 else None), split_n
        if split_n is not None and split_n == whole_b:
            return (d if len(npu) > 1 else None), None, split_n
        if whole_n is not None and whole_n == split_b:
            return None, (d if len(bench) > 1 else None), whole_n
    return None


def _shape_text(shape: tuple[int, ...]) -> str:
    return str(list(shape))


@dataclass
class Decision:
    dim_npu: int | None
    dim_bench: int | None
    shape: str | None  # the logical shape text; None: the shapes do not add up


def _keyed(n: EntryName) -> bool:
    """An API call that module_local_keys keys: a dumper's API name, not a communication call."""
    return n.simple_api and n.prefix not in COMMUNICATION_PREFIXES


def module_local_keys(entries: list[str], parents: dict[str, str | None] | None) -> dict[str, str]:
    """API calls keyed by their module and their place among that module's calls of the same API
    (`Module.x.o_proj.Linear.forward.0|Tensor.__add__|0|forward`), from construct.json's parents. A call the layout
    adds inside a module (Megatron's bias add after the all-reduce) then shifts no counter outside that module.
    Calls without a recorded parent keep their names."""
    if not parents:
        return {}
    keys: dict[str, str] = {}
    base: dict[str, str] = {}  # forward call -> its key less the direction
    seen: dict[tuple[str, str], int] = {}
    names = parse_entries(entries)
    for n in names:
        e = n.text
        if not _keyed(n) or n.direction is not Direction.FORWARD or e not in parents or is_layout_call(e):
            continue
        parent = parents[e]
        scope = plain_class_name(parent) if parent else ""
        k = seen.get((scope, n.stem), 0)
        seen[(scope, n.stem)] = k + 1
        base[e] = f"{scope}|{n.stem}|{k}|"
        keys[e] = base[e] + PHASES[Direction.FORWARD]
    for n in names:
        if _keyed(n) and n.direction is Direction.BACKWARD:
            fwd = base.get(n.call(Direction.FORWARD))
            if fwd is not None:
                keys[n.text] = fwd + PHASES[Direction.BACKWARD]
    return keys


def _row_key(side: Shards, i: int, keys: dict[str, str]) -> str:
    name = side.names[i]
    entry = side.entries[side.entry_index[i]]
    key = keys.get(entry)
    if key is not None and name.startswith(entry):
        return key + name[len(entry) :]
    return plain_class_name(name)


def pair_logical(npu: Shards, bench: Shards, npu_keys: dict[str, str] | None = None,
                 bench_keys: dict[str, str] | None = None) -> tuple[np.ndarray, list[Decision | None]]:  # fmt: skip
    """For each npu logical row, the bench logical row with the same plain name (or the same call key, see
    `module_local_keys`, when both sides have them) and the decision how both sides' shards add up (-1 / None when
    unpaired)."""
    if not (npu_keys and bench_keys):
        npu_keys = bench_keys = {}
    index: dict[str, int] = {}
    for j in range(len(bench)):
        index.setdefault(_row_key(bench, j, bench_keys), j)
    match = np.full(len(npu), -1, dtype=np.int64)
    decisions: list[Decision | None] = [None] * len(npu)
    for i in range(len(npu)):
        if is_layout_call(npu.entries[npu.entry_index[i]]):
            continue  # communication calls belong to a layout: their counters and operands differ between layouts
        j = index.get(_row_key(npu, i, npu_keys), -1)
        if j < 0:
            continue
        match[i] = j
        texts = {npu.tables[r].shape[k] for r, k in enumerate(npu.rows[i].tolist()) if k >= 0}
        texts |= {bench.tables[r].shape[k] for r, k in enumerate(bench.rows[j].tolist()) if k >= 0}
        if len(texts) == 1:  # the same shape text everywhere (also scalars and None leaves)
            decisions[i] = Decision(None, None, texts.pop())
            continue
        found = decide_shapes(npu.shapes(i), bench.shapes(j))
        decisions[i] = (Decision(found[0], found[1], _shape_text(found[2])) if found is not None else
                        Decision(None, None, None))  # fmt: skip
    return match, decisions


def alone_decisions(side: Shards) -> list[Decision | None]:
    """How one side's shards add up without the other side to match (runs of different code, whose call names do
    not pair: pair/align.py aligns the combined tables afterwards). Ranks that agree hold the whole tensor; a row
    feeding a sum-reduction is a partial sum; shards that differ are split: parameters of a row-parallel class
    along their input dim (1), other parameters along dim 0, activations along the last dim. The statistics of a
    concatenation do not depend on the dim; its shape text is the guess. Rows missing on some rank: None."""
    agrees = agree_mask(side)
    out: list[Decision | None] = []
    group = side.group
    for i in range(len(side)):
        present = [(r, int(j)) for r, j in enumerate(side.rows[i].tolist()) if j >= 0]
        texts = {side.tables[r].shape[j] for r, j in present}
        if len(present) < group:
            out.append(None)
            continue
        if len(present) == 1 or agrees[i] or side.partial_hint[i]:  # whole (a partial sum: rule_for_whole says)
            out.append(Decision(None, None, texts.pop() if len(texts) == 1 else None))
            continue
        shapes = side.shapes(i)
        first = shapes[0]
        if first is None or not first:
            out.append(Decision(None, None, None))
            continue
        dim = len(first) - 1
        if state_of(side, i) in (State.PARAMETERS, State.PARAMETERS_GRAD):
            dim = 1 if "RowParallel" in side.entries[side.entry_index[i]] and len(first) > 1 else 0
        differ = [d for d in range(len(first)) if any(s is not None and len(s) == len(first) and s[d] != first[d]
                                                     for s in shapes)]  # fmt: skip
        if len(differ) == 1:  # uneven shards show their dim
            dim = differ[0]
        got = _combined(shapes, dim)
        out.append(Decision(dim, dim, _shape_text(got)) if got is not None else Decision(None, None, None))
    return out


def rule_for_whole(side: Shards, i: int, rows: list[int], tables: list[RowTable], split_input: bool) -> Rule:
    if len(rows) == 1:
        return Rule.SINGLE
    if agree_mask(side)[i]:
        return Rule.REPLICATED
    if side.partial_hint[i] or split_input:
        return Rule.PARTIAL
    return Rule.REPLICATED  # the ranks disagree where they must not


def inplace_input(side: Shards, i: int) -> bool:
    """An input row of an in-place API (`add_`): the dumper may record it after the write, on some ranks only."""
    if state_of(side, i) != State.INPUT:
        return False
    return is_inplace(side.entries[side.entry_index[i]])


def _is_index(dtype: str) -> bool:
    base = dtype.removeprefix("torch.").lower()
    return base.startswith(("int", "uint", "long", "bool"))


def local_calls(side: Shards, decisions: list[Decision | None], is_npu: bool) -> set[int]:
    """Entries of calls that read rank-local indices: an integer input that differs between the ranks of a call with
    a split row (a vocab-parallel lookup shifts the token ids into the rank's vocabulary range and masks the
    others), and the backward call of such a call. Their whole-shaped rows that differ between the ranks are rank-
    local: not compared."""
    split_entries = {int(side.entry_index[i]) for i, d in enumerate(decisions)
                     if d is not None and d.shape is not None and side_dim(d, is_npu) is not None}  # fmt: skip
    out: set[int] = set()
    for i in range(len(side)):
        e = int(side.entry_index[i])
        if e not in split_entries or e in out or state_of(side, i) != State.INPUT:
            continue
        present = [r for r in range(len(side.tables)) if side.rows[i, r] >= 0]
        tables = [side.tables[r] for r in present]
        rows = [int(side.rows[i, r]) for r in present]
        if len(rows) > 1 and _is_index(tables[0].dtype[rows[0]]) and not agree_mask(side)[i]:
            out.add(e)
    position = {name: k for k, name in enumerate(side.entries)}
    for e in list(out):
        n = parse_entry(side.entries[e])
        if n.direction is Direction.FORWARD and (n.counter_first or not n.counter):  # `...forward` at the end
            back = position.get(n.call(Direction.BACKWARD))
            if back is not None:
                out.add(back)
    return out


def added_calls(side: Shards, decisions: list[Decision | None]) -> set[int]:
    """Entries the layout adds: no row has a counterpart, and the call communicates (all-reduce, ...) or is an
    identity on every rank (each output row equals an input row: view_as and the like of the copy-to-region
    functions)."""
    paired = np.zeros(len(side.entries), dtype=bool)
    for i, dec in enumerate(decisions):
        if dec is not None:
            paired[side.entry_index[i]] = True
    out: set[int] = set()
    order = np.argsort(side.entry_index, kind="stable")
    bounds = np.searchsorted(side.entry_index[order], np.arange(len(side.entries) + 1))
    for e in np.flatnonzero(~paired).tolist():
        if is_layout_call(side.entries[e]):
            out.add(e)
            continue
        rows = order[bounds[e] : bounds[e + 1]]
        identity = True
        for r, t in enumerate(side.tables):
            if not np.any(side.rows[rows, r] >= 0):
                continue  # a rank of another pipeline stage
            ins = {stat_key(t, int(j)) for j in side.rows[rows, r] if j >= 0 and t.state[j] == State.INPUT}
            outs = [stat_key(t, int(j)) for j in side.rows[rows, r] if j >= 0 and t.state[j] == State.OUTPUT]
            if not outs or any(key is None or key not in ins for key in outs):
                identity = False
                break
        if identity:
            out.add(e)
    return out


def side_dim(dec: Decision, is_npu: bool) -> int | None:
    return dec.dim_npu if is_npu else dec.dim_bench
