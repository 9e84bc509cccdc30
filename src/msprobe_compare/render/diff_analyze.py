"""`-da/--diff_analyze`: the origins of each rank as `diff_analyze_{ts}.json`, in the reference's layout
(spec §7.3): {"rank_<N>": [{"op_name", "data_info": {"input": {row: stats}, "output": {...}}, "stack_info"}]}.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


from msprobe_compare.judge.rootcause import Origin, Suspect
from msprobe_compare.load.rows import State
from msprobe_compare.model import CompareOutcome, Mode
from msprobe_compare.render import story, table
from msprobe_compare.render.files import new_output
from msprobe_compare.render.story import item_description

STAT_KEYS = tuple(table.NPU_STATS)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "Nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def origin_items(outcome: CompareOutcome) -> list[dict[str, Any]]:
    """One item per origin (ranked), with the NPU statistics of its input and output rows."""
    rc = outcome.rootcause
    if rc is None or not (rc.origins or rc.suspects):
        return []
    npu = outcome.npu
    starts = npu.entry_bounds
    items = []
    found: list[Origin | Suspect] = [*rc.origins, *rc.suspects]
    position = _positions(npu.entries, [item.entry for item in found])
    for origin in found:
        e = position[origin.entry]
        info: dict[str, dict[str, Any]] = {"input": {}, "output": {}}
        for i in range(int(starts[e]), int(starts[e + 1])):
            side = "output" if npu.state[i] in (State.OUTPUT, State.PARAMETERS_GRAD) else "input"
            if outcome.mode is Mode.MD5:
                info[side][npu.names[i]] = {"NPU MD5": npu.md5[i] or "N/A"}
            else:
                info[side][npu.names[i]] = {k: _json_safe(npu.stat_display(i, c)) for c, k in enumerate(STAT_KEYS)}
        items.append(
            {
                "op_name": origin.entry,
                "data_info": info,
                "stack_info": npu.stacks.get(origin.entry, []),
                "root_cause": _verdict(origin),
            }
        )
    return items


def _positions(entries: list[str], wanted: list[str]) -> dict[str, int]:
    """The index of the first entry of each wanted name in `entries` (every name is one of them), as the report's
    console line finds it: searched for a few names (a scan that stops there), else through an index of all."""
    if len(wanted) > 8:
        return dict(zip(reversed(entries), range(len(entries) - 1, -1, -1)))  # the first place wins
    return {name: entries.index(name) for name in wanted}


def _verdict(item: Origin | Suspect) -> dict[str, Any]:
    """Our extension of the reference's layout: origin or suspect, and the evidence (judge.rootcause.Evidence)."""
    ev = item.evidence
    out: dict[str, Any] = {"state": "suspect" if isinstance(item, Suspect) else "origin",
                           "kind": item.kind.value if isinstance(item, Origin) else None,
                           "description": item_description(item)}  # fmt: skip
    out["evidence"] = {"metric": ev.metric, "inputs": _json_safe(ev.inputs), "outputs": _json_safe(ev.outputs),
                       "noise_floor": _json_safe(ev.floor), "floor_source": story.floor_source_text(ev.floor_source),
                       "threshold": _json_safe(ev.threshold), "ratio": _json_safe(ev.ratio),
                       "dtypes": list(ev.dtypes), "arguments": [story.arg_text(a) for a in ev.args], "row": ev.first_row,
                       "text": story.evidence_text(ev)}  # fmt: skip
    if isinstance(item, Suspect):
        out["to_decide"] = story.suspect_advice(item)
    return out


def rank_key(label: str) -> str:
    """`rank3` -> `rank_3`; a plain `rank` (or any other label) stays as it is."""
    return f"rank_{label[4:]}" if label.startswith("rank") and label[4:].isdigit() else label


def write_diff_analyze(out_dir: Path, per_rank: dict[str, list[dict[str, Any]]]) -> Path:
    name = "diff_analyze_{ts}.json"
    with new_output(out_dir, name) as (path, tmp):
        tmp.write_text(json.dumps({rank_key(k): v for k, v in per_rank.items()}, indent=1, ensure_ascii=False))
    return path
