"""Write one compare's files (xlsx, advisor) and its console lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from msprobe_compare.judge.advisor import AdvisorResult
from msprobe_compare.log import Console
from msprobe_compare.model import CompareOutcome
from msprobe_compare.render import table, texts
from msprobe_compare.render.files import atomic_output, free_timestamp
from msprobe_compare.render.flat import write_csv, write_jsonl
from msprobe_compare.render.xlsx import write_xlsx


@dataclass(frozen=True)
class Written:
    """Files one compare produced."""

    xlsx: Path | None
    advisor: Path | None


def advisor_lines(result: AdvisorResult) -> list[str]:
    line = "NA" if result.line is None else str(result.line)
    node = result.node if result.node is not None else "NA"
    return [f"Line: {line}", f"Suspect Nodes: {node}", f"Expert Advice: {texts.ADVICE_TEXT[result.advice]}"]


def write_advisor(path: Path, result: AdvisorResult) -> None:
    with atomic_output(path) as tmp:
        tmp.write_text("".join(line + "\n" for line in advisor_lines(result)), encoding="utf-8")


def log_advisor(console: Console, mode_name: str, result: AdvisorResult) -> None:
    console.info(f"Start analyzing the comparison result: {mode_name}")
    for name in result.unmatched:
        console.warning(f"The tensor name matches but the shape or dtype does not match: {name}")
    if result.line is None:
        console.info("All data from api input/output accuracy reached")
    else:
        console.warning(f"Find {result.node} accuracy not reached, the line is {result.line}")
    console.info("The summary of the expert advice is as follows: ")
    for line in advisor_lines(result):
        console.info(line)


FORMATS = ("xlsx", "csv", "jsonl")


def write_all(
    outcome: CompareOutcome,
    out_dir: Path,
    console: Console,
    *,
    suffix: str,
    coloured: bool,
    formats: tuple[str, ...] = ("xlsx",),
) -> Written:
    """Write the table in each requested format, then the advisor file; one time stamp for all."""
    names = {fmt: f"compare_result{suffix}_{{ts}}.{fmt}" for fmt in formats}
    advisor_name = f"advisor{suffix}_{{ts}}.txt"
    ts = free_timestamp(out_dir, [*names.values(), advisor_name])
    header = table.header(outcome)
    first: Path | None = None
    for fmt, name in names.items():
        path = out_dir / name.format(ts=ts)
        # the coloured style (text booleans, "inf\t") belongs to the coloured xlsx only
        style = table.Style(text_booleans=coloured and fmt == "xlsx")
        rows = table.rows(outcome, style)
        if fmt == "xlsx":
            console.info(f"Saving result excel file in progress. The file path is: {path}.")
        with atomic_output(path) as tmp:
            if fmt == "xlsx":
                write_xlsx(tmp, header, rows, len(outcome), sheet_name="Sheet" if coloured else "Sheet1")
            elif fmt == "csv":
                write_csv(tmp, header, rows)
            else:
                write_jsonl(tmp, header, rows)
        console.info(f"Compare result is {path}")
        first = first or path
    advisor_path = None
    if outcome.advisor is not None:
        log_advisor(console, outcome.mode.value, outcome.advisor)
        advisor_path = out_dir / advisor_name.format(ts=ts)
        write_advisor(advisor_path, outcome.advisor)
        console.info(f"The advisor summary is saved in: {advisor_path}")
    return Written(first, advisor_path)
