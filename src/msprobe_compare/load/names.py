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

# the communication calls of a parallel layout (their counters and operands differ between layouts), and those of
# them that sum the ranks' tensors; matched at the start of an entry name
LAYOUT_CALLS = ("Distributed.all_reduce.", "Distributed.reduce_scatter", "Distributed.all_gather",
                "Distributed.broadcast.", "Distributed.reduce.", "Distributed.send.", "Distributed.recv.",
                "Distributed.isend.", "Distributed.irecv.", "Distributed.batch_isend_irecv.",
                "Distributed._all_gather_base", "Distributed._reduce_scatter_base",
                "Communication.", "Primitive.all_reduce.", "Primitive.all_gather.", "Primitive.reduce_scatter.",
                "Primitive.broadcast.", "Primitive.send.", "Primitive.receive.", "Mint.distributed.")  # fmt: skip
SUM_REDUCTIONS = ("Distributed.all_reduce.", "Distributed.reduce_scatter", "Distributed._reduce_scatter_base",
                  "Communication.comm.all_reduce", "Distributed.reduce.", "Primitive.all_reduce.",
                  "Primitive.reduce_scatter.")  # fmt: skip


def is_layout_call(entry: str) -> bool:
    """A communication call of a parallel layout (all-reduce, all-gather, send, ...)."""
    return entry.startswith(LAYOUT_CALLS)


def is_sum_reduction(entry: str) -> bool:
    """A communication call that sums the ranks' tensors (all-reduce, reduce-scatter, reduce)."""
    return entry.startswith(SUM_REDUCTIONS)
