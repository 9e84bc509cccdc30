"""The API prefixes of dump entry names, one table for every stage: `Functional.linear.3.forward` is an API call of
prefix `Functional`; `Module.x.Linear.forward.0` and `Cell.*` are modules. Each use picks its set from here."""

from __future__ import annotations

import re

# every prefix the dumpers write for an API call (PyTorch, MindSpore, torch_npu, communication)
API_PREFIXES = ("Functional", "Tensor", "Torch", "Distributed", "NPU", "Aten", "Jit", "Mint", "MintFunctional",
                "Primitive", "Communication", "Ops")  # fmt: skip
COMMUNICATION_PREFIXES = ("Distributed", "Communication")  # calls that belong to a parallel layout
RISK_LEVEL_PREFIXES = ("Tensor", "Torch", "Functional", "Mint", "MintFunctional")  # what 26.x's risk_level counts


def api_call_pattern(prefixes: tuple[str, ...]) -> re.Pattern[str]:
    """`Prefix.api[.Class].N.forward|backward` of the given prefixes: groups (prefix.api[.Class], N, direction)."""
    return re.compile(rf"^((?:{'|'.join(prefixes)})\.[^.]+(?:\.[A-Z][^.]*)?)\.(\d+)\.(forward|backward)$")
