"""msprobe 26.x dumps only the APIs of its default `risk_level` and leaves out low-risk ones (views, reshapes,
casts, tensor creation: `Tensor.reshape`, `Tensor.transpose`, `Torch.ones_like`, ...). Compared with a dump that
has them (8.3.x, or 26.x with `risk_level` set to all), their rows are unmatched although the model did not change:
the compare says so once.

The side "looks filtered" when the other side has entries of such APIs and it has none of them at all, while it
does hold API entries. The names below are ours: common view, shape, cast and creation operations.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from msprobe_compare import native
from msprobe_compare.load.names import RISK_LEVEL_PREFIXES
from msprobe_compare.load.rows import RowTable

LOW_RISK_APIS = frozenset(
    "reshape view view_as flatten unflatten squeeze unsqueeze expand expand_as transpose permute t contiguous "
    "chunk split unbind stack cat clone detach to float half bfloat16 int long bool type_as "
    "ones ones_like zeros zeros_like empty empty_like full full_like arange".split()
)
API_PREFIXES = frozenset(RISK_LEVEL_PREFIXES)
SHOWN = 5


def _api(entry: str) -> str | None:
    """`Tensor.reshape.3.forward` -> `Tensor.reshape`; None for modules and other entries."""
    parts = entry.split(".")
    if len(parts) >= 4 and parts[0] in API_PREFIXES and parts[-1] in ("forward", "backward"):
        return f"{parts[0]}.{parts[1]}"
    return None


_C: Any = native.built("_sharednames")


def _py_stem_counts(entries: list[str]) -> dict[str, int]:
    """{entry less its call index and direction: count} of the entries ending with .forward or .backward."""
    return Counter(e.rsplit(".", 2)[0] for e in entries if e.endswith((".forward", ".backward")))


def _c_stem_counts(entries: list[str]) -> dict[str, int]:
    """_py_stem_counts in one pass in C (`_sharednames.stem_counts`; a list only, texts with a UTF-8 form)."""
    stems = _C.stem_counts(entries) if type(entries) is list else None
    return _py_stem_counts(entries) if stems is None else stems


stem_counts = native.twin("_sharednames", _c_stem_counts, _py_stem_counts)


def _low_risk(table: RowTable) -> tuple[dict[str, int], int]:
    """({low-risk API: entries}, API entries in all); each distinct `API.name` stem (the entry less its call index
    and direction) is looked at once: the stems are counted in one pass (`stem_counts`)."""
    stems = stem_counts(table.entries)
    found: dict[str, int] = {}
    apis = 0
    for stem, count in stems.items():
        api = _api(stem + ".0.forward")  # the same rule as for a whole entry name
        if api is None:
            continue
        apis += count
        if api.split(".", 1)[1] in LOW_RISK_APIS:
            found[api] = found.get(api, 0) + count
    return found, apis


def risk_level_note(npu: RowTable, bench: RowTable) -> str | None:
    """The one line to print when one side looks dumped with 26.x's default risk_level, else None."""
    (npu_low, npu_apis), (bench_low, bench_apis) = _low_risk(npu), _low_risk(bench)
    for side, low, apis, other, other_low in (("npu", npu_low, npu_apis, "bench", bench_low),
                                              ("bench", bench_low, bench_apis, "npu", npu_low)):  # fmt: skip
        if not low and apis and other_low:
            names = sorted(other_low)
            shown = ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
            return (f"the {side} dump holds no low-risk API call ({shown}: {sum(other_low.values())} on the "
                    f"{other} side); it was probably dumped by msprobe 26.x with its default risk_level, which "
                    f"leaves them out: those {other} calls have no counterpart, which is not a change of the model "
                    "(dump with risk_level set to all to compare them)")  # fmt: skip
    return None
