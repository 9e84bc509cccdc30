"""The module alignment file's pair lines (render/alignment.py): each one what json.dumps(..., ensure_ascii=False)
writes for the pair, texts that need escapes and repeated slot mappings included, and YAML reads them back."""

from __future__ import annotations

import json

import yaml

from msprobe_compare.render.alignment import alignment_yaml


def test_pair_lines_are_json_dumps_lines_and_read_back() -> None:
    slots = {"output.0": "output.0", 'in"put\\0': "é\u2028\t"}
    pairs = [
        {"npu": "layers.0.attn.q;layers.0.attn.k", "bench": 'qkv "x"\n', "how": "parameters", "slots": slots},
        {"npu": "a", "bench": "b", "how": "value", "slots": {}},
        {"npu": "a#1", "bench": "b#1", "how": "repeat", "slots": dict(slots)},
        {"npu": "a#2", "bench": "b#2", "how": "value", "slots": dict(slots)},  # the same slots, another method
    ]
    doc = {"pairs": pairs, "unpaired": {"npu": ["z"], "bench": []}, "same_as": {"npu": {}, "bench": {"w": "b"}}}
    text = alignment_yaml(doc)
    lines = [line for line in text.split("\n") if line.startswith("- ")]  # (U+2028 is no line break here)
    assert lines == [f"- {json.dumps(p, ensure_ascii=False)}" for p in pairs]
    assert yaml.safe_load(text) == doc
