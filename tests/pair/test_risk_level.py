"""The risk_level note's counting: per distinct API stem, the same as the per-entry rule."""

from __future__ import annotations

from types import SimpleNamespace

from msprobe_compare.pair.risk_level import LOW_RISK_APIS, _api, _low_risk, risk_level_note

NAMES = [
    "Tensor.reshape.0.forward",
    "Tensor.reshape.1.forward",
    "Tensor.reshape.0.backward",
    "Torch.ones_like.3.forward",
    "Functional.linear.0.forward",
    "Functional.a.b.0.forward",
    "Tensor.x.forward",
    "Tensor.a.0.preforward",
    "Module.fc1.Linear.forward.0",
    "Module.fc1.Linear.parameters_grad",
    "Distributed.all_reduce.0.forward",
    "Mint.view.2.backward",
    "Tensor",
    "",
    "Tensor.transpose.7.forward",
]


def _per_entry(entries: list[str]) -> tuple[dict[str, int], int]:
    found: dict[str, int] = {}
    apis = 0
    for entry in entries:
        api = _api(entry)
        if api is None:
            continue
        apis += 1
        if api.split(".", 1)[1] in LOW_RISK_APIS:
            found[api] = found.get(api, 0) + 1
    return found, apis


def test_counts_equal_the_per_entry_rule():
    table = SimpleNamespace(entries=NAMES * 3)
    assert _low_risk(table) == _per_entry(NAMES * 3)
    assert _low_risk(table)[0] == {"Tensor.reshape": 9, "Torch.ones_like": 3, "Mint.view": 3, "Tensor.transpose": 3}


def test_note_names_the_filtered_side():
    full = SimpleNamespace(entries=NAMES)
    filtered = SimpleNamespace(entries=["Functional.linear.0.forward", "Module.fc1.Linear.forward.0"])
    note = risk_level_note(filtered, full)
    assert note and note.startswith("the npu dump holds no low-risk API call (Mint.view, Tensor.reshape")
    assert risk_level_note(full, full) is None


EDGES = [".forward", "..backward", "a.forward", "a.b.backward", "ü.x.0.forward", "x.ü.1.backward", "forward",
         "a.forwards", "Tensor.reshape.backward.0", "Tensor..0.forward", "a.b.c.d.e.forward"]  # fmt: skip


def test_native_stem_counts_equal_the_rsplit_counter():
    from collections import Counter

    from tests.native_helpers import native_module

    fast = native_module("_sharednames")
    many = [f"Tensor.op{k % 700}.{k}.{'forward' if k % 3 else 'backward'}" for k in range(5000)]  # grows its table
    for entries in (NAMES, EDGES, many + EDGES + NAMES, []):
        want = Counter(e.rsplit(".", 2)[0] for e in entries if e.endswith((".forward", ".backward")))
        got = fast.stem_counts(entries)
        assert got == want and list(got) == list(want)  # the same counts, in order of first appearance
    assert fast.stem_counts(["a.0.forward", "\ud800.0.forward"]) is None  # no UTF-8 form: the Counter decides


def test_counts_without_the_native_module(monkeypatch):
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    table = SimpleNamespace(entries=NAMES * 3 + EDGES + ["\ud800.0.forward"])
    assert _low_risk(table) == _per_entry(table.entries)
