"""The words and the file of a module alignment (pair/align.py): the console lines and module_alignment_{ts}.yaml."""

from __future__ import annotations

import json
from typing import Any

SHOWN = 8  # module calls without a counterpart named on the console, per side


def align_lines(al: Any, tables: Any, why: str) -> list[str]:
    """What was aligned, what was not, and why: for the console."""
    merged = empty = 0
    hows: dict[str, int] = {}
    for p in al.pairs:
        hows[p.how] = hows.get(p.how, 0) + 1
        merged += len(p.npu) > 1 or len(p.bench) > 1
        empty += not p.slots
    by = ", ".join(f"{n} by {how}" for how, n in sorted(hows.items(), key=lambda kv: -kv[1]))
    lines = [f"Aligning the module trees ({why}).",
             f"{len(al.pairs)} module boundaries paired ({merged} merged N-to-1; {by}); "
             f"{tables.rows_paired} of {len(tables.npu.table)} npu rows paired."]  # fmt: skip
    if empty:
        lines.append(f"{empty} of them carry no tensor found in both runs; their rows stay unpaired.")
    for side in ("npu", "bench"):
        left = al.unpaired[side]
        wrap = len(al.same_as[side])
        if not left and not wrap:
            continue
        s = al.npu if side == "npu" else al.bench
        names = ", ".join(s.calls[c].path for c in left[:SHOWN]) + (f" (and {len(left) - SHOWN} more)"
                                                                    if len(left) > SHOWN else "")  # fmt: skip
        text = f"{len(left)} {side} module calls have no counterpart (no parameters, descendants or tensors in common"
        text += f" with an unpaired call of the other run): {names}" if left else ")"
        if wrap:
            text += f"; {wrap} wrap a paired call and carry its tensors"
        lines.append(text + ".")
    if al.parted >= 0:
        lines.append(
            f"The runs part at or after {al.npu.table.entries[al.parted]}: pairs after it were found by the "
            "other layers' evidence, the parameters and each run's own dataflow, not by their values."
        )
    return lines


def not_aligned_line(decision: Any, aligned: int, by_name: int) -> str:
    """The trees differ but aligning them pairs no more rows than the names do (dumps of two different models)."""
    return (
        f"The module trees differ ({decision.same_names} of {decision.npu_modules} npu module calls have a "
        f"namesake), but aligning them pairs {aligned} rows where the names pair {by_name}: the rows stay paired "
        "by name (--align on aligns anyway)."
    )


def alignment_yaml(doc: dict[str, Any]) -> str:
    """The alignment as a file `--alignment` reads back: edit a pair's npu/bench (parts joined by ';') or its
    slots, delete wrong pairs; its pairs then win over the ones found."""
    head = (
        "# msprobe-compare module alignment. Pass it back with --alignment FILE: its pairs are taken as they\n"
        "# are (a pair without 'slots' has its tensors paired by the aligner), the rest is aligned as before.\n"
        "# npu / bench: module paths (the n-th call after the first: path#n), merged parts joined by ';'.\n"
    )
    head += "# unpaired / same_as: what was left, and the wrappers of a paired call (not read back).\n"
    head += "# One pair a line (YAML's flow style, which is JSON's syntax).\n"
    lines = [head, "pairs:\n", *_pair_lines(doc["pairs"])] if doc["pairs"] else [head, "pairs: []\n"]
    for key in ("unpaired", "same_as"):
        lines.append(f"{key}:\n")
        lines += [f"  {side}: {json.dumps(value, ensure_ascii=False)}\n" for side, value in doc[key].items()]
    return "".join(lines)


def _pair_lines(pairs: list[dict[str, Any]]) -> list[str]:
    """A line a pair, as json.dumps(..., ensure_ascii=False) writes it: the texts encoded as json does, each distinct
    slots mapping and method encoded once (the later calls of a module repeat their first call's)."""
    enc = json.encoder.encode_basestring  # json.dumps' own text encoder with ensure_ascii=False
    known: dict[Any, str] = {}
    out = []
    for p in pairs:
        slots, how = p["slots"], p["how"]
        key = (how, *slots.items())
        tail = known.get(key)
        if tail is None:
            items = ", ".join(f"{enc(k)}: {enc(v)}" for k, v in slots.items())
            tail = known[key] = f", {enc('how')}: {enc(how)}, {enc('slots')}: {{{items}}}}}\n"
        out.append(f'- {{"npu": {enc(p["npu"])}, "bench": {enc(p["bench"])}{tail}')
    return out
