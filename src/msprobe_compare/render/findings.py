"""The root cause per row and as records: what the workbook's Summary sheet, its marked rows and the Python API's
DataFrame and `origins`/`suspects` show, taken from one place so that they agree with the console and the advisor."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from msprobe_compare.judge.gate import RowLevels
from msprobe_compare.judge.highlight import Colour
from msprobe_compare.judge.rootcause import CallState, Origin, RootCause, Suspect
from msprobe_compare.model import CompareOutcome
from msprobe_compare.records import dataclass
from msprobe_compare.render import story


class RowMark(IntEnum):
    """How a row of the table is marked beside its colour: a row of an origin's or a suspect's call."""

    NONE = 0
    ORIGIN = 1
    SUSPECT = 2


LEVELS = ("none", "yellow", "red")  # `level` per row, indexed by judge.highlight.Colour
UNKNOWN = CallState.UNKNOWN.value  # the state of a row when no root cause was computed


@dataclass(frozen=True)
class Finding:
    """An origin or a suspect of the root-cause analysis, with the numbers that decided it.

    `call` is the API or module call (`Functional.gelu.1.forward`); `state` "origin" or "suspect"; `kind` the
    origin's kind (computation, boundary, configuration) or the suspect's reason (below margin, md5 inputs, md5
    outputs); `inputs`/`outputs` the largest measured difference (`metric`) of its inputs and outputs, `floor` the
    noise floor it was compared with, `threshold` the difference above which it counts (`ratio` = difference /
    floor); None where not measured. `row` is the table row that decided (the first differing one for md5 and
    arguments). `rank`: the rank label in a compare of step folders, or the rank of a parallel layout's group that
    diverges alone.
    """

    call: str
    state: str
    kind: str
    phase: str  # forward, backward or parameters_grad
    metric: str
    inputs: float | None
    outputs: float | None
    floor: float | None
    threshold: float
    ratio: float | None
    row: str | None
    npu_dtype: str
    bench_dtype: str
    floor_source: str  # where the noise floor came from, in words
    description: str  # the line the console and the advisor file print
    evidence: str  # the evidence line of the advisor file
    advice: str  # what to check (origin) or what to dump to decide (suspect)
    after: str | None = None  # boundary origins: the last call whose outputs agree
    nonfinite: bool = False  # a NaN/Inf appears here
    unpaired_inputs: int = 0  # origins: input rows without a bench counterpart (not compared)
    rank: str | None = None


def _finding(item: Origin | Suspect) -> Finding:
    ev = item.evidence
    if isinstance(item, Origin):
        state, kind, description, advice = (CallState.ORIGIN.value, item.kind.value, story.origin_description(item),
                                            story.origin_advice(item))  # fmt: skip
    else:
        state, kind, description, advice = (CallState.SUSPECT.value, item.reason.value,
                                            story.suspect_description(item), story.suspect_advice(item))  # fmt: skip
    origin = item if isinstance(item, Origin) else None
    at = origin.on_rank if origin is not None else None
    return Finding(item.entry, state, kind, item.phase, ev.metric, ev.inputs, ev.outputs, ev.floor,
                   float(ev.threshold), ev.ratio, ev.first_row, ev.dtypes[0], ev.dtypes[1],
                   story.floor_source_text(ev.floor_source), description, story.evidence_text(ev), advice,
                   after=origin.after if origin is not None else None,
                   nonfinite=origin.nonfinite if origin is not None else False,
                   unpaired_inputs=origin.unpaired_inputs if origin is not None else 0,
                   rank=at.rank if at is not None else None)  # fmt: skip


def finding_records(rc: RootCause | None) -> tuple[Finding, ...]:
    """The origins in execution order, then the suspects."""
    if rc is None:
        return ()
    items: list[Origin | Suspect] = [*rc.origins, *rc.suspects]
    return tuple(map(_finding, items))


def _entry_codes(outcome: CompareOutcome, names: list[str]) -> np.ndarray:
    """Per row: True where its call is one of `names`."""
    entries = outcome.npu.entries
    wanted = set(names)
    hit = np.fromiter((e in wanted for e in entries), dtype=bool, count=len(entries)) if wanted else None
    if hit is None or not hit.any():
        return np.zeros(len(outcome), dtype=bool)
    return hit[np.asarray(outcome.npu.entry_index, dtype=np.int64)]


def row_marks(outcome: CompareOutcome) -> np.ndarray:
    """int8 RowMark per row: the rows of the origins' calls, else of the suspects' calls."""
    marks = np.zeros(len(outcome), dtype=np.int8)
    rc = outcome.rootcause
    if rc is None or not (rc.origins or rc.suspects):
        return marks
    marks[_entry_codes(outcome, [s.entry for s in rc.suspects])] = RowMark.SUSPECT
    marks[_entry_codes(outcome, [o.entry for o in rc.origins])] = RowMark.ORIGIN
    return marks


def row_states(outcome: CompareOutcome) -> list[str]:
    """Per row, the root-cause state of its call (origin, suspect, propagated, noise, ok, unknown, one-sided)."""
    rc = outcome.rootcause
    n = len(outcome)
    if rc is None or len(rc.states) != len(outcome.npu.entries):
        return [UNKNOWN] * n
    texts = np.array([s.value for s in rc.states] or [UNKNOWN], dtype=object)
    return texts[np.asarray(outcome.npu.entry_index, dtype=np.int64)].tolist() if n else []


def row_levels(outcome: CompareOutcome) -> list[str]:
    """Per row, "red", "yellow" or "none": its colour in the workbook, and where it has none (md5 dumps,
    `--no-highlight`) its level: red for error rows (md5 `Different`, `Accuracy No`), yellow for warning rows."""
    n = len(outcome)
    codes = np.zeros(n, dtype=np.int8)
    levels: RowLevels = outcome.levels
    codes[levels.warning] = Colour.YELLOW
    codes[levels.error] = Colour.RED
    if outcome.marks is not None:
        colour = np.asarray(outcome.marks.colour, dtype=np.int8)
        codes = np.where(colour != Colour.NONE, colour, codes).astype(np.int8)
    return np.array(LEVELS, dtype=object)[codes].tolist() if n else []
