"""param_grad_keys: `parameters_grad` and `parameters_grad.0` spellings pair, only the NPU compare keys change."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from msprobe_compare.pair.param_grad import param_grad_keys

BARE = ["Functional.linear.0.forward", "Module.fc1.Linear.parameters_grad", "Tensor.add.0.backward",
        "Module.fc2.Linear.parameters_grad"]  # fmt: skip
ZERO = ["Functional.linear.0.forward", "Module.fc1.Linear.parameters_grad.0", "Tensor.add.0.backward",
        "Module.fc2.Linear.parameters_grad.0"]  # fmt: skip


def _table(entries: list[str]) -> SimpleNamespace:
    """Two rows per entry: `{entry}.weight` and `{entry}.bias` for gradients, `.input.0`/`.output.0` otherwise."""
    names, index = [], []
    for e, entry in enumerate(entries):
        grad = "parameters_grad" in entry
        names += [f"{entry}.weight", f"{entry}.bias"] if grad else [f"{entry}.input.0", f"{entry}.output.0"]
        index += [e, e]
    return SimpleNamespace(entries=entries, names=names, entry_index=np.array(index, dtype=np.int32))


def test_bare_npu_names_take_the_bench_side_counter():
    keys = param_grad_keys(_table(BARE), _table(ZERO), None)
    assert keys == [n.replace("parameters_grad.", "parameters_grad.0.") for n in _table(BARE).names]
    assert keys[2:4] == ["Module.fc1.Linear.parameters_grad.0.weight", "Module.fc1.Linear.parameters_grad.0.bias"]


def test_counted_npu_names_lose_it_against_bare_bench_names():
    keys = param_grad_keys(_table(ZERO), _table(BARE), None)
    assert keys == _table(BARE).names


def test_given_keys_are_rewritten_and_none_stays():
    npu = _table(BARE)
    given = [n.upper() if k % 3 else None for k, n in enumerate(npu.names)]
    given[2] = "Module.fc1.Linear.parameters_grad.weight"
    keys = param_grad_keys(npu, _table(ZERO), given)
    assert keys[2] == "Module.fc1.Linear.parameters_grad.0.weight"
    assert [k for k in range(len(given)) if keys[k] != given[k]] == [2]  # upper-cased keys do not hold the text


def test_same_spelling_or_both_spellings_change_nothing():
    keys = ["k"] * 8
    assert param_grad_keys(_table(BARE), _table(BARE), keys) is keys
    assert param_grad_keys(_table(ZERO), _table(ZERO), None) is None
    assert param_grad_keys(_table(BARE), _table(BARE[:2] + ZERO[2:]), None) is None  # the bench side has both
    assert param_grad_keys(_table(BARE[:2]), _table(["Tensor.parameters_grad_x.0.forward"]), None) is None


def test_native_search_finds_the_entries_the_substring_test_finds():
    from tests.native_helpers import native_module

    fast = native_module("_sharednames")
    texts = ["", "p", "parameters_grad", "xparameters_gra", "a.parameters_grad.0", "pparameters_grad",
             "parameters_gradparameters_grad", "ü.parameters_grad", "parameters_grä", "pp" * 40] * 3  # fmt: skip
    for needle in ("parameters_grad", "p", "ü", "", "zz"):
        got = np.frombuffer(fast.containing(texts, needle), dtype=np.int64).tolist()
        assert got == [i for i, t in enumerate(texts) if needle in t], needle
    assert fast.containing(["a", "\ud800parameters_grad"], "parameters_grad") is None  # the Python search decides


def test_the_same_keys_without_the_native_module(monkeypatch):
    native_keys = param_grad_keys(_table(BARE), _table(ZERO), None)
    odd = _table(BARE + ["\ud800.parameters_grad"])  # no UTF-8 form: the native search hands it back
    odd_keys = param_grad_keys(odd, _table(ZERO), None)
    assert odd_keys is not None and odd_keys[-1] == "\ud800.parameters_grad.0.bias"
    monkeypatch.setenv("MSPROBE_NATIVE", "0")
    assert param_grad_keys(_table(BARE), _table(ZERO), None) == native_keys
    assert param_grad_keys(odd, _table(ZERO), None) == odd_keys
