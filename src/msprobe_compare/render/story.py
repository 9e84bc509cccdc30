"""The run-level sentences of one compare: row counts, the unmatched warning, the root-cause headline and the
label of the reference's advisor rule. The console, the advisor file and the HTML report all take them from here,
so they tell one story."""

from __future__ import annotations

from pathlib import Path

from msprobe_compare.judge.advisor import Advice, AdvisorResult, advice_for
from msprobe_compare.judge.gate import GATE_LEVELS, LevelCounts
from msprobe_compare.judge.floors import MAX_NOISY_INPUTS
from msprobe_compare.judge.rootcause import (
    ArgDiff,
    CallState,
    Evidence,
    FloorKind,
    FloorSource,
    Origin,
    OriginKind,
    RootCause,
    Suspect,
    SuspectReason,
)
from msprobe_compare.load.mode import Mode
from msprobe_compare.render import texts
from msprobe_compare.records import dataclass

# what the reference's advisor reads, per mode (its first-failing-row rule)
ADVISOR_COLUMN = {Mode.SUMMARY: "Result", Mode.MD5: "Result", Mode.ALL: "Accuracy Reached or Not"}
_RULE = "the first failing row in table order ({column} column). It need not be where accuracy first breaks"
ADVISOR_NOTE_MARK = "Note: the three entries above"  # first words of the advisor file's note
FAIL_ON_UNMATCHED = "--fail-on unmatched"  # the gate named where most rows are unmatched


@dataclass(frozen=True)
class Headline:
    """The root-cause headline: `state` is "origin", "suspect" (no origin the precision can support, a suspect),
    "none" (compared, no origin), "partial" (no origin among the compared calls, some calls not compared) or
    "nothing" (no call could be compared)."""

    state: str
    text: str

    @property
    def is_warning(self) -> bool:
        return self.state in ("origin", "nothing", "suspect")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def headline(rc: RootCause | None, counts: LevelCounts) -> Headline | None:
    if rc is None:
        return None
    uncompared = len(rc.entries) - rc.compared_calls
    if counts.nothing_compared or rc.compared_calls == 0:
        return Headline("nothing", f"nothing compared: none of the {_plural(counts.rows, 'NPU row')} has a bench "
                                   "counterpart, so no call could be judged")  # fmt: skip
    if rc.first is not None:
        ev = rc.first.evidence
        why = (
            f"; {ev.metric} {ev.outputs if rc.first.kind is OriginKind.COMPUTATION else ev.inputs:.3g} = "
            f"{ev.ratio:.3g}x the noise floor {ev.floor:.3g}"
            if ev.ratio is not None and ev.floor
            else ""
        )
        return Headline("origin", f"{origin_description(rc.first)} ({rc.first.kind.value}; "
                                  f"{len(rc.origins)} origin(s) in all{why})")  # fmt: skip
    if rc.suspects:
        return Headline("suspect", suspect_text(rc))
    noisy = has_noise(rc)
    if uncompared and counts.unmatched == 0 and counts.layout_only:
        return Headline("none", f"no origin; every compared call agrees within tolerance (the "
                                f"{_plural(uncompared, 'call')} the parallel layout adds have no counterpart, as "
                                "expected).")  # fmt: skip
    if uncompared:
        sided = (f", {_plural(rc.one_sided, 'call')} of them on the NPU side only inside modules both sides run "
                 "(one-sided)") if rc.one_sided else ""  # fmt: skip
        return Headline("partial", f"no origin among the {_plural(rc.compared_calls, 'compared call')}; "
                                   f"{_plural(uncompared, 'call')} could not be compared (no bench counterpart"
                                   f"{sided})")  # fmt: skip
    if noisy:
        n = sum(s is CallState.NOISE for s in rc.states)
        low = f" (lowest precision {rc.lowest_precision})" if rc.lowest_precision else ""
        return Headline("none", f"no origin; {_plural(n, 'call')} differ within the noise floor{low}, "
                                "none above it.")  # fmt: skip
    return Headline("none", "no origin; every compared call agrees within tolerance.")


def has_noise(rc: RootCause) -> bool:
    return any(s is CallState.NOISE for s in rc.states)


def suspect_text(rc: RootCause) -> str:
    """No origin, a suspect: which call, by how much, and what would decide."""
    x = rc.suspects[0]
    ev = x.evidence
    more = f" (and {len(rc.suspects) - 1} more)" if len(rc.suspects) > 1 else ""
    ratio = f"{ev.ratio:.3g}x" if ev.ratio is not None else "above"
    floor = f" {ev.floor:.3g}" if ev.floor is not None else ""
    return (
        f"no origin the precision can support; suspect{more}: {x.entry} ({ev.metric} {ratio} the noise "
        f"floor{floor}, origin needs {ev.threshold / ev.floor if ev.floor else 0:.3g}x). To decide: {suspect_advice(x)}"
    )


def noise_model_line(rc: RootCause) -> str:
    """The noise model behind the section, for people to check the thresholds."""
    tol = rc.tolerance
    low = rc.lowest_precision or "none"
    repaired = (f"; {_plural(rc.repaired, 'call')} paired by enclosing module and call signature for the "
                "analysis (not as in the table)") if rc.repaired else ""  # fmt: skip
    return (
        f"Noise model: lowest precision {low}; noise floor = the largest difference upstream, at least 1 ulp of "
        f"recorded low-precision statistics and {tol.floor_units:g} unit roundoff of the lowest precision "
        f"upstream (min {tol.min_floor:g}); origin above {tol.origin:g}x the floor, suspect above "
        f"{tol.suspect:g}x (Max/Min x{tol.extremes:g}){repaired}. See docs/rootcause.md; "
        "--tolerance overrides."
    )


def count_line(counts: LevelCounts) -> str:
    """`Rows: 103 NPU rows, 100 matched, 3 without a bench counterpart; 4 error, 2 warning.`"""
    text = f"Rows: {_plural(counts.rows, 'NPU row')}, {counts.matched:,} matched"
    if counts.unmatched:
        text += f", {counts.unmatched:,} without a bench counterpart"
    if counts.layout_only:
        text += f", {counts.layout_only:,} of calls the parallel layout adds (no counterpart expected)"
    text += f"; {counts.errors:,} error, {counts.warnings:,} warning"
    if counts.excluded:
        text += f"; {excluded_text(counts)}"
    if counts.no_row_entries:
        n = counts.no_row_entries
        text += f"; {n:,} dump entr{'y' if n == 1 else 'ies'} yielded no row (named above)"
    return text + "."


def excluded_text(counts: LevelCounts) -> str:
    names = ", ".join(counts.excluded_names)
    more = (
        f" and {counts.excluded - len(counts.excluded_names)} more"
        if counts.excluded > len(counts.excluded_names)
        else ""
    )
    return (f"{_plural(counts.excluded, 'row')} not counted (inputs of in-place APIs that the dumper recorded "
            f"after the write: {names}{more})")  # fmt: skip


def unmatched_warning(counts: LevelCounts, bench_path: Path | None, aligned: bool = False) -> str | None:
    """A warning when most NPU rows have no bench counterpart (a wrong bench_path, another model or level); for runs
    of different code (aligned module trees) what those rows are."""
    if not counts.mostly_unmatched:
        return None
    where = f"bench_path ({bench_path})" if bench_path is not None else "bench_path"
    share = 100 * counts.unmatched / counts.rows
    gate = f"; {FAIL_ON_UNMATCHED} makes such a compare fail (exit code 3)"
    if aligned:
        return (f"{counts.unmatched:,} of {_plural(counts.rows, 'NPU row')} ({share:.0f}%) have no bench counterpart: "
                "the runs execute different code, compared at the module boundaries they share; the calls inside "
                "modules whose code differs are one-sided (the module alignment file lists the pairs)"
                f"{gate}")  # fmt: skip
    return (
        f"{counts.unmatched:,} of {_plural(counts.rows, 'NPU row')} ({share:.0f}%) have no bench counterpart: "
        f"check that {where} is a dump of the same model, level and step; unmatched rows are not agreement{gate}"
    )


def advisor_rule(mode: Mode) -> str:
    return (
        f"The reference tool's advisor rule follows: {_RULE.format(column=ADVISOR_COLUMN[mode])}: see 'Root "
        "cause' for that."
    )


def advisor_contradiction(result: AdvisorResult, counts: LevelCounts, mode: Mode,
                          rc: RootCause | None = None) -> str | None:  # fmt: skip
    """When the reference's rule finds no failing row but the run says otherwise (rows at error level, nothing or
    little compared, an origin: `advisor_objections`), say so."""
    if result.line is not None:
        return None
    if counts.errors:
        return (
            f"The reference rule reads only the {ADVISOR_COLUMN[mode]} column: "
            f"{_plural(counts.errors, 'row')} are at error level (red) all the same."
        )
    objections = advisor_objections(result, counts, rc)
    if not objections:
        return None
    return (
        f"The reference rule reads only the {ADVISOR_COLUMN[mode]} column of the rows with a bench counterpart: "
        f"{'; '.join(objections)}."
    )


def advisor_note(mode: Mode, result: AdvisorResult, counts: LevelCounts, rc: RootCause | None = None) -> list[str]:
    """Lines of the advisor file between the reference's three entries and the root-cause section."""
    lines = [
        f"{ADVISOR_NOTE_MARK} follow the reference tool's rule: {_RULE.format(column=ADVISOR_COLUMN[mode])}: "
        "see Root cause below."
    ]
    extra = advisor_contradiction(result, counts, mode, rc)
    if extra:
        lines.append(extra)
    lines.append(count_line(counts))
    return lines


def gate_line(levels: frozenset[str], counts: LevelCounts, hits: int) -> str:
    """The `--fail-on` verdict with its evidence."""
    order = [lv for lv in GATE_LEVELS if lv in levels]
    head = f"--fail-on {','.join(order)}: "
    evidence = (f"{counts.errors:,} error row(s), {counts.warnings:,} warning row(s), "
                f"{counts.unmatched:,} unmatched of {counts.rows:,}")  # fmt: skip
    if counts.excluded:
        evidence += f"; {counts.excluded:,} excluded (in-place inputs recorded after the write)"
    if hits and counts.rows and counts.nothing_compared:
        return head + f"failed: nothing could be compared ({evidence})"
    if hits:
        return head + f"failed ({evidence})"
    hint = "; unmatched rows are not gated (add ',unmatched')" if counts.unmatched and "unmatched" not in levels else ""
    return head + f"passed ({evidence}){hint}"


def advisor_lines(result: AdvisorResult) -> list[str]:
    """The reference's three advisor entries, as its advisor file has them (parity)."""
    line = "NA" if result.line is None else str(result.line)
    node = result.node if result.node is not None else "NA"
    return [f"Line: {line}", f"Suspect Nodes: {node}", f"Expert Advice: {texts.ADVICE_TEXT[result.advice]}"]


def advisor_objections(result: AdvisorResult, counts: LevelCounts, rc: RootCause | None) -> list[str]:
    """Where the rest of the run contradicts the reference rule's "all data meets the accuracy requirements" (which
    reads one column of the matched rows only): rows at error level, nothing compared, most rows unmatched, an
    origin. Empty when the rule found a failing row or nothing contradicts it."""
    if result.line is not None or result.advice is not Advice.ALL_PASS:
        return []
    found = []
    if counts.rows and counts.nothing_compared:
        found.append(f"nothing could be compared (none of the {_plural(counts.rows, 'NPU row')} has a bench "
                     "counterpart)")  # fmt: skip
    elif counts.mostly_unmatched:
        found.append(f"{counts.unmatched:,} of {_plural(counts.rows, 'NPU row')} have no bench counterpart")
    if counts.errors:
        found.append(f"{_plural(counts.errors, 'row')} {'is' if counts.errors == 1 else 'are'} at error level (red)")
    if rc is not None and rc.origins:
        found.append(f"the root cause finds {_plural(len(rc.origins), 'origin')}")
    return found


def advisor_shown_lines(result: AdvisorResult, counts: LevelCounts, mode: Mode, rc: RootCause | None) -> list[str]:
    """The reference's three entries as the console and the HTML report show them: its "All data in comparison
    result meets the accuracy requirements." becomes what the rule found and what contradicts it, where something
    does (`advisor_objections`); the advisor file keeps the reference's words (parity)."""
    lines = advisor_lines(result)
    objections = advisor_objections(result, counts, rc)
    if objections:
        lines[-1] = (
            f"Expert Advice: no row fails the reference rule ({ADVISOR_COLUMN[mode]} column), but "
            f"{'; '.join(objections)}: see Root cause."
        )
    return lines


def origin_advice(origin: Origin) -> str:
    if origin.kind is OriginKind.BOUNDARY:
        after = f"{origin.after}'s output" if origin.after else "the start of the dump"
        return (f"The data changed between two recorded calls: code the dump did not record (an in-place edit, "
                f"a hook, an op that is not hooked) changed it after {after} and before {origin.entry} read it. "
                "Dump that region at level mix or L1, and look for in-place writes.")  # fmt: skip
    if origin.kind is OriginKind.CONFIGURATION:
        return (f"The call was made with different arguments ({', '.join(origin.differing_args)}): check the "
                "code or configuration that passes them.")  # fmt: skip
    return texts.ADVICE_TEXT[advice_for(origin.entry + ".output")]


def origin_description(o: Origin) -> str:
    """One line naming an origin and what was seen there."""
    at = o.on_rank
    entry = f"{at.rank}:{o.entry}" if at is not None else o.entry
    if o.kind is OriginKind.BOUNDARY:
        before = f"after {o.after}'s output, " if o.after else ""
        what = " (a NaN/Inf appears)" if o.nonfinite else ""
        inside = f"inside {o.within}, " if o.within else ""
        text = f"{inside}{before}before {entry}'s input{what}"
    elif o.kind is OriginKind.CONFIGURATION:
        text = f"{entry}: non-tensor arguments differ ({', '.join(o.differing_args)})"
    elif o.collective:
        what = "a NaN/Inf appears in its outputs" if o.nonfinite else "outputs differ"
        text = f"{entry}: {_inputs_agree(o)} on this rank, {what}: the collective brings another rank's difference"
    elif o.nonfinite:
        text = f"{entry}: NaN/Inf appears in its outputs, {_inputs_finite(o)}"
    elif not o.evidence.inputs:
        text = f"{entry}: {_inputs_agree(o)}, outputs differ"
    else:
        text = f"{entry}: outputs differ beyond the noise its inputs carry"
        if o.unpaired_inputs:
            text += f" ({_unpaired(o)}, not compared)"
    if at is None:
        return text
    if at.alone:
        return text + f" (on {at.rank}" + (f", whose dump calls it {at.local_name}" if at.local_name else "") + ")"
    seen = (f"; {', '.join(at.others)} first {'sees' if len(at.others) == 1 else 'see'} it at {at.seen_at}"
            if at.seen_at else "")  # fmt: skip
    return text + f" (only {at.rank} diverges{seen})"


def _unpaired(o: Origin) -> str:
    """The inputs of an origin that have no bench counterpart: nothing is known of them on the bench side."""
    return f"{_plural(o.unpaired_inputs, 'input')} without a bench counterpart"


def _inputs_agree(o: Origin) -> str:
    """What the compared inputs of an origin show (never a claim about inputs that could not be compared)."""
    if not o.unpaired_inputs:
        return "inputs agree"
    if o.evidence.inputs is None:
        n = o.unpaired_inputs
        return f"its {'input has' if n == 1 else f'{n} inputs have'} no bench counterpart (not compared)"
    return f"its compared inputs agree ({_unpaired(o)})"


def _inputs_finite(o: Origin) -> str:
    """What is known of an origin's inputs when a NaN/Inf appears in its outputs."""
    if not o.unpaired_inputs:
        return "its inputs are finite"
    if o.unpaired_nonfinite:
        return (f"but its NPU inputs hold NaN/Inf already ({_unpaired(o)}): it may arrive from upstream, where the "
                "bench side was not recorded")  # fmt: skip
    return f"its NPU inputs are finite ({_unpaired(o)})"


def item_description(item: Origin | Suspect) -> str:
    """An origin's or a suspect's line."""
    return origin_description(item) if isinstance(item, Origin) else suspect_description(item)


# -- the root cause's evidence and suspects, in words ---------------------------------------------------------------
def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def floor_source_text(src: FloorSource | None) -> str:
    """Where a noise floor came from."""
    if src is None:
        return ""
    if src.kind is FloorKind.UPSTREAM:
        return f"largest difference upstream, at {src.at}" if src.at is not None else "upstream"
    if src.kind is FloorKind.OWN_INPUTS:
        return "its own inputs"
    if src.kind is FloorKind.STAT_ULP:
        return f"1 ulp of the recorded {src.dtype or 'its dtype'} statistics"
    if src.kind is FloorKind.ELEMENT_ROUNDING:
        return f"one {src.dtype or 'its dtype'} rounding of each element"
    if src.kind is FloorKind.LOWEST_PRECISION:
        times = f"{src.units:g} x " if src.units != 1 else ""
        return f"{times}unit roundoff of {src.dtype or 'low precision'}, the lowest precision upstream (from {src.at})"
    if src.kind is FloorKind.COMBINED:
        inputs = "its differing input" if src.units == 1 else f"its {src.units:g} differing inputs"
        return f"{inputs} and one {src.dtype} rounding, added in quadrature"
    if src.kind is FloorKind.UNSEEN:
        calls = "1 call" if src.units == 1 else f"{src.units:g} calls"
        where = f"from {src.at}" if src.at is not None else "in the bench run"
        return (f"{calls} nothing compared ran before it ({where}): the difference upstream on up to "
                f"{MAX_NOISY_INPUTS} operands and one {src.dtype} rounding, added in quadrature")  # fmt: skip
    if src.kind is FloorKind.REDUCED_MATMUL:
        times = f"{src.units:g} x " if src.units != 1 else ""
        return f"{times}unit roundoff of TF32/HF32 (10 mantissa bits), which an fp32 matmul or convolution may run at"
    if src.kind is FloorKind.BACKWARD_PEERS:
        return (f"its incoming gradients and its forward call's tensors, x{src.units:.3g}: the largest gain of "
                f"{src.peers} comparable backward calls in other layers")  # fmt: skip
    return "minimum floor (--tolerance min_floor)"


def arg_text(a: ArgDiff) -> str:
    """A differing argument: "input.4: 0.01 vs 1e-05"."""
    return f"{a.path}: {a.npu} vs {a.bench}"


def evidence_text(ev: Evidence) -> str:
    """One line, the same in the advisor file, -da and the HTML report."""
    parts = [f"{ev.metric}: inputs {_fmt(ev.inputs)}, outputs {_fmt(ev.outputs)}"]
    if ev.floor is not None:
        parts.append(f"noise floor {_fmt(ev.floor)} ({floor_source_text(ev.floor_source)})")
        parts.append(f"threshold {_fmt(ev.threshold)}")
        if ev.ratio is not None:
            parts.append(f"{_fmt(ev.ratio)}x the floor")
    else:
        parts.append(f"differs above {ev.threshold:g}")
    if ev.beyond is not None:
        share, floor, tol = ev.beyond
        parts.append(f"elements with relative error above {tol:.3g}: {share:.3g} (upstream {floor:.3g})")
    if any(ev.dtypes):
        parts.append(f"dtype {ev.dtypes[0] or '?'} vs {ev.dtypes[1] or '?'}")
    if ev.args:
        parts.append("arguments " + "; ".join(map(arg_text, ev.args)))
    parts.append(f"first differing row: {ev.first_row or 'n/a'}")
    return "; ".join(parts)


def suspect_reason_text(x: Suspect) -> str:
    """Why the data cannot decide."""
    if x.reason is SuspectReason.BELOW_MARGIN:
        return (f"its {x.where} stand {_fmt(x.evidence.ratio)}x above the noise floor, not above the {x.margin:g}x "
                "that the precision of the dump supports")  # fmt: skip
    what = "its inputs' md5 differ" if x.reason is SuspectReason.MD5_INPUTS else "its outputs' md5 differ, inputs agree"
    return f"{what}; md5 cannot tell low-precision rounding from a bug"


def suspect_description(x: Suspect) -> str:
    return f"{x.entry}: {suspect_reason_text(x)}"


def suspect_advice(x: Suspect) -> str:
    """What to dump to decide a suspect."""
    scope = f'scope: ["{x.entry}"]'
    if x.mode is Mode.ALL:
        return (f"Dump {x.entry} again with task: tensor at a higher precision on both sides (or the bench in fp32) "
                "to see whether the difference exceeds the rounding.")  # fmt: skip
    return (
        f"Dump that call at task: statistics with precision: high ({scope}), or as a tensor dump "
        "(task: tensor): tensor metrics separate a bug from rounding where statistics cannot."
    )
