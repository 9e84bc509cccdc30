"""`merge_result`: gather chosen APIs' metrics of several ranks' results into one workbook (spec §7.2).

Each sheet is one compare index (e.g. `Max diff`); its rows are the NPU Names that belong to the
configured APIs, its columns the ranks. Cells the rank has no number for (`N/A`, `unsupported`,
`Nan`) show that row's `NPU:<NPU max>  Bench:<Bench max>` instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


from msprobe_compare.errors import InputError
from msprobe_compare.load.dumpjson import check_input_file
from msprobe_compare.log import Console
from msprobe_compare.pair.mapping_file import load_yaml
from msprobe_compare.render import table
from msprobe_compare.render.files import new_output
from msprobe_compare.render.summary_sheet import SHEET_NAME as SUMMARY_SHEET
from msprobe_compare.render.xlsx import write_workbook
from msprobe_compare.records import dataclass

RESULT_NAME = re.compile(r"^compare_result_(rank\d+(?:-rank\d+)?)_(\d{14})\.xlsx$")
SINGLE_RANK_NAME = re.compile(r"^compare_result_rank_\d{14}\.xlsx$")
SUMMARY_INDEX = [*table.STAT_DIFFS, *table.STAT_RELATIVE, "Requires_grad Consistent"]
REAL_INDEX = [*table.METRIC_HEADERS, "Requires_grad Consistent"]
NO_NUMBER = ("N/A", "unsupported", "Nan")


@dataclass(frozen=True)
class MergeConfig:
    apis: list[str]
    indices: list[str] | None  # None: every index of the mode


@dataclass
class RankTable:
    rank: str
    mode: str  # "summary" | "all"
    rows: dict[str, dict[str, Any]]  # NPU Name -> column -> value


def read_merge_config(path: Path) -> MergeConfig:
    doc = load_yaml(path, "merge config")
    if (not isinstance(doc, dict) or not isinstance(doc.get("api"), list) or not doc["api"]
            or not all(isinstance(a, (str, int, float)) and not (isinstance(a, int) and a.bit_length() >= 64)
                       for a in doc["api"])):  # fmt: skip
        raise InputError("needs a non-empty 'api' list of API names (e.g. api: [Functional.linear])", path)
    indices = doc.get("compare_index")
    if indices is not None and (not isinstance(indices, list) or not all(isinstance(x, str) for x in indices)):
        raise InputError("'compare_index' must be a list of column names", path)
    return MergeConfig([str(a) for a in doc["api"]], indices or None)


def _mode(header: list[str], path: Path) -> str:
    base = [h for h in header if h not in (table.STACK, table.DATA_NAME)]
    if base == table.SUMMARY:
        return "summary"
    if base == table.REAL:
        return "all"
    if base == table.MD5:
        raise InputError("is an md5 result; merge_result takes statistics or real-data results", path)
    raise InputError("is not a compare result (unexpected header)", path)


def read_rank_table(path: Path, rank: str) -> RankTable:
    import openpyxl  # only merge_result reads workbooks

    check_input_file(path, "compare result")  # a regular file, not a link or a FIFO (which would block)
    try:
        wb = openpyxl.load_workbook(path, read_only=True)
    except Exception as exc:  # openpyxl raises many types for broken files
        raise InputError(f"cannot be read as xlsx ({exc})", path) from None
    header: list[str] | None = None
    rows: dict[str, dict[str, Any]] = {}
    for ws in wb.worksheets:
        if ws.title == SUMMARY_SHEET:  # the answer beside the table, not rows of it
            continue
        it = ws.iter_rows(values_only=True)
        head = next(it, None)
        if head is None:
            continue
        header = header or [str(h) for h in head if h is not None]
        for values in it:
            record = dict(zip(header, values))
            name = record.get("NPU Name")
            if name is not None:
                rows.setdefault(str(name), record)
    wb.close()
    if header is None:
        raise InputError("is empty", path)
    return RankTable(rank, _mode(header, path), rows)


def find_results(in_dir: Path, console: Console) -> list[tuple[str, Path]]:
    if not in_dir.is_dir():
        raise InputError("is not a directory of compare results", in_dir)
    found: list[tuple[str, Path]] = []
    for path in sorted(in_dir.glob("*.xlsx")):
        if SINGLE_RANK_NAME.match(path.name):
            console.warning(f"Single rank compare result do not need to be merged: {path.name}")
            continue
        m = RESULT_NAME.match(path.name)
        if not m:
            raise InputError(f"'{path.name}' is not named compare_result_rank<N>_<timestamp>.xlsx", in_dir)
        found.append((m.group(1), path))
    if len(found) < 2:
        raise InputError("holds fewer than 2 rank results (compare_result_rank<N>_<ts>.xlsx): nothing to merge",
                         in_dir)  # fmt: skip
    found.sort(key=lambda item: [int(x) for x in re.findall(r"\d+", item[0])])
    return found


def _cell(record: dict[str, Any] | None, column: str) -> Any:
    if record is None:
        return ""
    value = record.get(column)
    if isinstance(value, str) and value.rstrip("\t") in NO_NUMBER:
        return f"NPU:{record.get('NPU max')}  Bench:{record.get('Bench max')}"
    if isinstance(value, str):
        return value.rstrip("\t")
    return "" if value is None else value


def merge(tables: list[RankTable], cfg: MergeConfig, source: Path) -> list[tuple[str, list[str], list[list[Any]]]]:
    modes = {t.mode for t in tables}
    if len(modes) != 1:
        raise InputError("mixes statistics and real-data results; merge results of one mode", source)
    mode = modes.pop()
    allowed = SUMMARY_INDEX if mode == "summary" else REAL_INDEX
    indices = cfg.indices or allowed
    bad = [x for x in indices if x not in allowed]
    if bad:
        raise InputError(f"compare_index {bad} not available for {mode} results; choose from {allowed}", source)
    names: dict[str, None] = {}
    for t in tables:
        for name in t.rows:
            if any(f"{api}." in name for api in cfg.apis):
                names.setdefault(name, None)
    header = ["NPU Name"] + [t.rank for t in tables]
    return [(index, header, [[name] + [_cell(t.rows.get(name), index) for t in tables] for name in names])
            for index in indices]  # fmt: skip


def merge_results(in_dir: Path, out_dir: Path, config_path: Path, console: Console) -> Path:
    cfg = read_merge_config(config_path)
    console.stage("reading the rank results")
    tables = [read_rank_table(path, rank) for rank, path in find_results(in_dir, console)]
    console.stage("merging")
    sheets = merge(tables, cfg, in_dir)
    name = "multi_ranks_compare_merge_{ts}.xlsx"
    console.stage("writing")
    with new_output(out_dir, name) as (path, tmp):
        write_workbook(tmp, [(index, header, [list(c) for c in zip(*rows)] if rows else [[] for _ in header])
                             for index, header, rows in sheets])  # fmt: skip
    console.info(f"The merged compare result is saved in: {path}")
    return path
