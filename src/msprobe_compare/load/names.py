"""Dump entry names, parsed once into fields for every stage, and the API prefixes, one table.

`Functional.linear.3.forward` is an API call (prefix `Functional`, op `linear`, counter 3, direction forward);
`Module.x.o_proj.Linear.forward.0` and `Cell.*` are module calls (path `x.o_proj`, class `Linear`, direction, counter
after it); `Module.x.Linear.parameters_grad` (26.x: `.parameters_grad.<n>`) holds a module's parameter gradients.
A row's name is its entry's name and a slot key (`input.0`, `output.1`, `parameters.weight`, `weight` of a
parameters_grad entry). Each use of the prefixes picks its set from here.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import NamedTuple

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

# collective calls: their outputs carry the other ranks' data (the root cause's floors; docs/rootcause.md, Collectives)
COLLECTIVE_CALLS = ("Distributed.", "Communication.comm.", "Primitive.all_reduce.", "Primitive.all_gather.",
                    "Primitive.reduce_scatter.", "Primitive.broadcast.", "Primitive.all_to_all.",
                    "Primitive.neighbor_exchange.", "Primitive.reduce.")  # fmt: skip


def is_layout_call(entry: str) -> bool:
    """A communication call of a parallel layout (all-reduce, all-gather, send, ...)."""
    return entry.startswith(LAYOUT_CALLS)


def is_sum_reduction(entry: str) -> bool:
    """A communication call that sums the ranks' tensors (all-reduce, reduce-scatter, reduce)."""
    return entry.startswith(SUM_REDUCTIONS)


class Kind(IntEnum):
    """What an entry is a call of."""

    OTHER = 0  # no dumper's call name (a debug entry, a renamed or hand-made one)
    API = 1  # `Prefix.op.N.direction`, Prefix in API_PREFIXES
    MODULE = 2  # `Module.path.Class.direction.N` (`Cell.` for MindSpore), or a module's parameters_grad


class Direction(IntEnum):
    """The call direction; its value is the index of its word in PHASES (load/rows.py's phase codes)."""

    FORWARD = 0
    BACKWARD = 1
    PARAMETERS_GRAD = 2
    NONE = 3  # the name says no direction


PHASES = ("forward", "backward", "parameters_grad")  # the words of the directions, by code
MODULE_PREFIXES = ("Module", "Cell")
_DIRECTIONS = {"forward": Direction.FORWARD, "backward": Direction.BACKWARD}
_WORDS = ("forward", "backward", "parameters_grad", "")


class EntryName(NamedTuple):
    """A dump entry's name in fields. `stem` is the name less its counter and direction (`Functional.linear`,
    `Module.x.Linear`); `counter` the call counter's digits ("" when the name has none); `counter_first` whether the
    counter comes before the direction (API calls: `.3.forward`) or after it (modules: `.forward.0`)."""

    text: str
    kind: Kind
    prefix: str  # the first part: "Functional", "Module", ...
    stem: str
    direction: Direction
    counter: str
    counter_first: bool

    @property
    def op(self) -> str:
        """An API call's op (`linear`, `Distributed.all_reduce`'s `all_reduce`); a module's path and class."""
        return self.stem[len(self.prefix) + 1 :]

    @property
    def module_path(self) -> str:
        """A module call's path (`x.o_proj` of `Module.x.o_proj.Linear.forward.0`; "" for top-level and APIs)."""
        return self.op.rpartition(".")[0] if self.kind is Kind.MODULE else ""

    @property
    def module_class(self) -> str:
        """A module call's class (`Linear`); "" for an API call."""
        return self.op.rpartition(".")[2] if self.kind is Kind.MODULE else ""

    @property
    def module_named(self) -> bool:
        """The name starts with `Module.` or `Cell.`, whatever follows (a module's entry of any dumper)."""
        return self.prefix in MODULE_PREFIXES and len(self.text) > len(self.prefix)

    @property
    def simple_api(self) -> bool:
        """An API call whose op is one part, or one part and a capitalised class (`Distributed.all_reduce`,
        `Primitive.Add.Sub`): the shape of every dumper's API names, which counters and call keys rely on."""
        if self.kind is not Kind.API or not self.counter_first:
            return False
        parts = self.op.split(".")
        return 0 < len(parts[0]) and (len(parts) == 1 or (len(parts) == 2 and "A" <= parts[1][:1] <= "Z"))

    def call(self, direction: Direction, counter: str | None = None) -> str:
        """This call's name in another direction (the backward of a forward call), or with another counter."""
        word = _WORDS[direction]
        count = self.counter if counter is None else counter
        if self.counter_first:
            return f"{self.stem}.{count}.{word}"
        return f"{self.stem}.{word}.{count}" if count else f"{self.stem}.{word}"


def parse_entry(text: str) -> EntryName:
    """The fields of an entry name (see `EntryName`); any text parses (Kind.OTHER, Direction.NONE at worst)."""
    parts = text.split(".")
    prefix = parts[0]
    n = len(parts)
    last = parts[-1]
    direction = Direction.NONE
    counter, counter_first, stem_parts = "", False, n
    if last in _DIRECTIONS and n > 2 and parts[-2].isdecimal():
        direction, counter, counter_first, stem_parts = _DIRECTIONS[last], parts[-2], True, n - 2
    elif last.isdecimal() and n > 2 and parts[-2] in _DIRECTIONS:
        direction, counter, stem_parts = _DIRECTIONS[parts[-2]], last, n - 2
    elif last == "parameters_grad" and n > 1:
        direction, stem_parts = Direction.PARAMETERS_GRAD, n - 1
    elif last.isdigit() and last.isascii() and n > 2 and parts[-2] == "parameters_grad":  # as rows.is_param_grad
        direction, counter, stem_parts = Direction.PARAMETERS_GRAD, last, n - 2
    elif last in _DIRECTIONS and n > 1:  # a module call without a counter (older dumpers)
        direction, stem_parts = _DIRECTIONS[last], n - 1
    kind = Kind.OTHER
    if direction is not Direction.NONE and stem_parts > 1:
        if prefix in MODULE_PREFIXES and not counter_first:
            kind = Kind.MODULE
        elif prefix in API_PREFIXES and counter_first:
            kind = Kind.API
    stem = ".".join(parts[:stem_parts]) if stem_parts < n else text
    return EntryName(text, kind, prefix, stem, direction, counter, counter_first)


def parse_entries(entries: list[str]) -> list[EntryName]:
    """`parse_entry` of each name (a table's entries: RowTable.entry_names keeps them)."""
    return list(map(parse_entry, entries))


def slot_key(row_name: str, entry: str) -> str:
    """A row's slot within its entry: `input.0`, `output.1`, `parameters.weight` (the row name less the entry's)."""
    return row_name[len(entry) + 1 :] if row_name.startswith(entry) and len(row_name) > len(entry) else ""
