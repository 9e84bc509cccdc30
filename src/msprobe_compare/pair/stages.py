"""Pipeline stages as one logical run: local layer indices and call counters moved to their global positions.

Each pipeline stage is a process of its own: its layer container counts from 0 (`layers.0` on stage 1 is global layer
`layers.{L0}` when stage 0 holds L0 layers) and its API call counters too (`Functional.linear.0` on stage 1 follows
the last `Functional.linear` call of stage 0). The number of layers per stage is derived from the dumps: for every
container seen on more than one stage (`layers`, `blocks`, `h`, ...) the distinct indices of each stage. Calls are
ordered as one process runs them: the forward calls of stage 0, 1, ..., the backward calls of the last stage down to
stage 0, then what each stage runs after its backward (optimizer updates), in stage order.
"""

from __future__ import annotations

import re

import numpy as np

from msprobe_compare.load.names import Direction, parse_entry
from msprobe_compare.load.rows import phase_codes
from msprobe_compare.pair.shards import Shards

_LAYER = re.compile(r"(?<=\.)([A-Za-z_][A-Za-z0-9_]*)\.(\d+)(?=\.)")


def _containers(entries: list[str]) -> dict[str, set[int]]:
    """Indexed module containers of module entries: {"layers": {0, 1}, ...}."""
    found: dict[str, set[int]] = {}
    for e, phase in zip(entries, phase_codes(entries).tolist()):
        if not parse_entry(e).module_named:
            continue
        body = e.rsplit(".", 2)[0] if phase != Direction.PARAMETERS_GRAD else e
        for m in _LAYER.finditer(body):
            found.setdefault(m.group(1), set()).add(int(m.group(2)))
    return found


def _api_counts(entries: list[str]) -> dict[str, int]:
    """Per API, one more than its highest call counter (the calls it made)."""
    out: dict[str, int] = {}
    for e in entries:
        n = parse_entry(e)
        if n.simple_api:
            out[n.stem] = max(out.get(n.stem, 0), int(n.counter) + 1)
    return out


def global_names(stage_entries: list[list[str]]) -> tuple[list[dict[str, str]], dict[str, list[int]]]:
    """Per stage, entry -> global entry name; and per remapped container the layer offset of each stage."""
    per_stage = [_containers(es) for es in stage_entries]
    shared = {c for c in set().union(*per_stage) if sum(c in s for s in per_stage) > 1}
    layer_offsets: dict[str, list[int]] = {}
    for c in shared:
        offs, total = [], 0
        for s in per_stage:
            offs.append(total)
            total += (max(s[c]) + 1) if c in s else 0
        layer_offsets[c] = offs
    api_offsets: list[dict[str, int]] = []
    running: dict[str, int] = {}
    for es in stage_entries:
        api_offsets.append(dict(running))
        for api, n in _api_counts(es).items():
            running[api] = running.get(api, 0) + n
    maps = []
    for k, es in enumerate(stage_entries):
        mapping = {}
        for e in es:
            parsed = parse_entry(e)
            if parsed.simple_api:
                off = api_offsets[k].get(parsed.stem, 0)
                mapping[e] = parsed.call(parsed.direction, str(int(parsed.counter) + off)) if off else e
            elif parsed.module_named and layer_offsets:

                def shift(match: re.Match[str], k: int = k) -> str:
                    name, idx = match.group(1), int(match.group(2))
                    return f"{name}.{idx + layer_offsets[name][k]}" if name in layer_offsets else match.group(0)

                mapping[e] = _LAYER.sub(shift, e, count=1)
            else:
                mapping[e] = e
        maps.append(mapping)
    return maps, layer_offsets


def _segments(entries: list[str]) -> tuple[list[int], list[int], list[int]]:
    """Entry positions of a stage: forward calls before its first backward call, backward calls, and the calls after
    its last backward call (optimizer updates)."""
    back = np.flatnonzero(phase_codes(entries) == int(Direction.BACKWARD)).tolist()
    if not back:
        return list(range(len(entries))), [], []
    first, last = back[0], back[-1]
    fwd = [k for k in range(first)]
    bwd = [k for k in range(first, last + 1)]
    post = [k for k in range(last + 1, len(entries))]
    return fwd, bwd, post


def merge_stages(stages: list[Shards]) -> Shards:
    """The stages' aligned rows as one Shards: global names, execution order, each stage's ranks its own columns."""
    maps, _ = global_names([s.entries for s in stages])
    widths = [len(s.tables) for s in stages]
    total = sum(widths)
    order: list[tuple[int, int]] = []  # (stage, entry position) in execution order
    segs = [_segments(s.entries) for s in stages]
    for k in range(len(stages)):
        order += [(k, e) for e in segs[k][0]]
    for k in reversed(range(len(stages))):
        order += [(k, e) for e in segs[k][1]]
    for k in range(len(stages)):
        order += [(k, e) for e in segs[k][2]]
    entries: list[str] = []
    names: list[str] = []
    entry_index: list[int] = []
    rows: list[np.ndarray] = []
    hints: list[bool] = []
    stacks: dict[str, list[str]] = {}
    rows_of: list[dict[int, list[int]]] = [{} for _ in stages]  # stage -> entry position -> its rows
    for k, s in enumerate(stages):
        for i in range(len(s)):
            rows_of[k].setdefault(int(s.entry_index[i]), []).append(i)
    col0 = np.cumsum([0, *widths])
    for k, e in order:
        s = stages[k]
        old = s.entries[e]
        new = maps[k][old]
        entries.append(new)
        if old in s.stacks:
            stacks[new] = s.stacks[old]
        for i in rows_of[k].get(e, []):
            name = s.names[i]
            names.append(new + name[len(old) :] if name.startswith(old) else name)
            entry_index.append(len(entries) - 1)
            row = np.full(total, -1, dtype=np.int64)
            row[col0[k] : col0[k + 1]] = s.rows[i]
            rows.append(row)
            hints.append(bool(s.partial_hint[i]))
    tables = [t for s in stages for t in s.tables]
    ranks = [r for s in stages for r in s.ranks]
    renames = {int(col0[k]) + r: maps[k] for k in range(len(stages)) for r in range(widths[k])}
    out = Shards(
        tables,
        ranks,
        names,
        entries,
        np.array(entry_index, dtype=np.int32),
        np.array(rows, dtype=np.int64).reshape(len(names), total),
        np.array(hints, dtype=bool),
        stacks,
        tp=widths[0],
        renames=renames,
    )
    return out
