"""pair/spans.py: runs of rows per entry, and keys worked out once per entry that agree with the per-row rule."""

from __future__ import annotations

from msprobe_compare.pair.spans import entry_spans, keys_by_entry
from pair.helpers import call, table


def _table():
    return table({"Functional.linear.0.forward": call(2, 1), "Tensor.add.1.forward": call(1, 1),
                  "Tensor.sub.0.forward": {"input_args": [], "output": []}, "Torch.cat.0.forward": call(1, 2)})  # fmt: skip


def test_entry_spans():
    # an entry without rows (sub) has no span; spans cover the rows in order
    assert list(entry_spans(_table())) == [(0, 0, 3), (1, 3, 5), (3, 5, 8)]
    assert list(entry_spans(table({}))) == []


def _row_key(name: str) -> str:
    return name.replace(".forward", "").upper()


def test_keys_by_entry_agree_with_the_row_rule():
    t = _table()
    calls: list[str] = []

    def entry_key(entry: str):
        calls.append(entry)
        if entry.startswith("Tensor."):
            return None  # this entry's rows go through row_key
        stem = entry.replace(".forward", "").upper()
        return stem, ".output." if entry.startswith("Torch.") else None

    keys = keys_by_entry(t, entry_key, _row_key)
    assert calls == ["Functional.linear.0.forward", "Tensor.add.1.forward", "Torch.cat.0.forward"]  # once each
    # the prefix keeps the row's own rest; the guard sends cat's outputs through row_key
    assert keys[:3] == ["FUNCTIONAL.LINEAR.0.input.0", "FUNCTIONAL.LINEAR.0.input.1", "FUNCTIONAL.LINEAR.0.output.0"]
    assert keys[3:5] == [_row_key(n) for n in t.names[3:5]]
    assert keys[5:] == ["TORCH.CAT.0.input.0", _row_key(t.names[6]), _row_key(t.names[7])]
    assert keys_by_entry(table({}), entry_key, _row_key) == []
