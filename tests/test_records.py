"""records.dataclass: the classes it makes behave and introspect as `dataclasses.dataclass`'s, on every path."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import pickle
import re
import subprocess
import sys
from dataclasses import field
from pathlib import Path
from typing import Any

import pytest

from msprobe_compare import records

FAST = pytest.mark.skipif(not records.FAST, reason="the one-exec path is taken on CPython 3.11 only")


def _kinds(decorate: Any) -> dict[str, type]:
    """The same class bodies, decorated by `decorate` (a module-level name: pickle finds the classes)."""

    @decorate(frozen=True)
    class Frozen:
        """A frozen record."""

        a: int
        b: str = "x"
        c: list[int] = field(default_factory=list)
        d: float = field(default=1.5, repr=False, compare=False)
        e: int = field(default=0, init=False)
        f: dict[str, int] = field(default_factory=dict, init=False)
        g: int = field(default=3, hash=False)

    @decorate
    class Mutable:
        a: int
        b: Path | None = None
        c: list[int] = field(default_factory=lambda: [1])

        def __post_init__(self) -> None:
            self.a = self.a * 2

    @decorate(frozen=True, eq=False)
    class NoEq:
        x: int

    @decorate(frozen=True)
    class Empty:
        pass

    @decorate(frozen=True)
    class SelfField:
        self: int
        other: int = 2

    @decorate(frozen=True)
    class PostInit:
        """Normalised while made."""

        a: Any

        def __post_init__(self) -> None:
            object.__setattr__(self, "a", str(self.a))

    @decorate(eq=False)
    class MutableNoEq:
        a: int = 1

    return {c.__name__: c for c in (Frozen, Mutable, NoEq, Empty, SelfField, PostInit, MutableNoEq)}


STD = _kinds(dataclasses.dataclass)
OURS = _kinds(records.dataclass)
ARGS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Frozen": ((1,), {"b": "y", "c": [2]}),
    "Mutable": ((3,), {"b": Path("p")}),
    "NoEq": ((1,), {}),
    "Empty": ((), {}),
    "SelfField": ((1,), {"other": 5}),
    "PostInit": ((7,), {}),
    "MutableNoEq": ((), {"a": 4}),
}


def _outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except Exception as exc:  # the exception's type and text must agree too
        return ("raised", type(exc).__name__, str(exc))


def _describe(cls: type) -> dict[str, Any]:
    """Everything one can see of a dataclass and of its instances (objects' addresses left out)."""
    return json.loads(re.sub(r" at 0x[0-9a-f]+", "", json.dumps(_described(cls), default=repr)))


def _described(cls: type) -> dict[str, Any]:
    args, kwargs = ARGS[cls.__name__]
    one, two, other = cls(*args, **kwargs), cls(*args, **kwargs), cls(*args, **kwargs)
    first = dataclasses.fields(cls)[0].name if dataclasses.fields(cls) else "zz"
    own = {name: getattr(cls, name) for name in ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__",
                                                 "__hash__") if name in vars(cls)}  # fmt: skip
    return {
        "doc": cls.__doc__,
        "params": repr(cls.__dataclass_params__),
        "fields": [repr(f) for f in dataclasses.fields(cls)],
        "all_fields": list(cls.__dataclass_fields__),
        "match_args": cls.__match_args__,
        "signature": str(inspect.signature(cls)),
        "init_annotations": cls.__init__.__annotations__,
        "own": {name: getattr(fn, "__qualname__", repr(fn)) for name, fn in own.items()},
        "class_attrs": {k: repr(v) for k, v in vars(cls).items() if not k.startswith("__")},
        "repr": repr(one),
        "eq": (one == two, one != two, one == object(), _outcome(lambda: one.__eq__(5))),
        "hash": _outcome(lambda: hash(one) == hash(two)),
        "is_hashable": cls.__hash__ is not None,
        "set": _outcome(lambda: setattr(other, first, 9)),
        "set_new": _outcome(lambda: setattr(other, "new_attribute", 1)),
        "del": _outcome(lambda: delattr(other, first)),
        "asdict": _outcome(lambda: repr(dataclasses.asdict(one))),
        "astuple": _outcome(lambda: repr(dataclasses.astuple(one))),
        "replace": _outcome(lambda: repr(dataclasses.replace(one))),
        "too_many": _outcome(lambda: cls(*args, *range(9))),
        "missing": _outcome(lambda: repr(cls())),
        "unknown_keyword": _outcome(lambda: cls(*args, nope=1)),
        "init_defaults": repr((cls.__init__.__defaults__, cls.__init__.__kwdefaults__)),
        "vars": repr(vars(one)),
    }


@FAST
@pytest.mark.parametrize("name", sorted(STD))
def test_made_as_the_standard_library_makes_it(name: str) -> None:
    ours, std = OURS[name], STD[name]
    assert dataclasses.is_dataclass(ours)
    assert _describe(ours) == _describe(std)


@FAST
def test_the_fast_path_is_taken() -> None:
    calls = []
    real = dataclasses._create_fn

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(*args, **kwargs)

    dataclasses._create_fn = counting
    try:
        _kinds(records.dataclass)
        assert calls == []  # no method made by the standard library's compile-per-method path
        _kinds(dataclasses.dataclass)
        assert "__init__" in calls
    finally:
        dataclasses._create_fn = real


def test_other_classes_go_to_the_standard_library() -> None:
    @records.dataclass(order=True)
    class Ordered:
        a: int

    @records.dataclass
    class WithClassVar:
        a: int
        b: dataclasses.KW_ONLY  # type: ignore[valid-type]
        c: int = 0

    @records.dataclass(frozen=True)
    class Base:
        a: int

    @records.dataclass(frozen=True)
    class Derived(Base):
        b: int = 1

    assert Ordered(1) < Ordered(2)
    assert WithClassVar(1, c=2).c == 2 and str(inspect.signature(WithClassVar)) == "(a: 'int', *, c: 'int' = 0) -> None"
    assert Derived(1, 2) == Derived(1, 2) and dataclasses.fields(Derived)[0].name == "a"
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @records.dataclass
        class Bad:
            a: int = 0
            b: int


def test_instances_pickle_and_copy() -> None:
    from msprobe_compare.judge.noise import Tolerance

    t = Tolerance.parse(None)
    assert pickle.loads(pickle.dumps(t)) == t and dataclasses.replace(t) == t


_DUMP = """
import dataclasses, inspect, json, sys
import msprobe_compare.records as records
records.FAST = sys.argv[1] == "1"
import pkgutil, importlib, msprobe_compare
out = {}
for info in pkgutil.walk_packages(msprobe_compare.__path__, "msprobe_compare."):
    if info.name.endswith(("distribute", "__main__")):
        continue
    module = importlib.import_module(info.name)
    for name, cls in vars(module).items():
        if isinstance(cls, type) and cls.__module__ == info.name and dataclasses.is_dataclass(cls):
            out[f"{info.name}.{name}"] = {
                "doc": cls.__doc__, "params": repr(cls.__dataclass_params__),
                "fields": [repr(f) for f in dataclasses.fields(cls)], "match_args": cls.__match_args__,
                "signature": str(inspect.signature(cls)), "hash": cls.__hash__ is None,
                "own": sorted(k for k in vars(cls) if k.startswith("__") and callable(getattr(cls, k))),
                "qualnames": sorted(getattr(v, "__qualname__", "") for k, v in vars(cls).items() if callable(v)),
                "attrs": {k: repr(v) for k, v in vars(cls).items() if not k.startswith("__")},
            }
print(json.dumps(out))
"""


@FAST
def test_every_dataclass_of_the_package_is_the_standard_librarys(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}

    def dump(fast: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", _DUMP, fast], env=env, capture_output=True, text=True,
                              timeout=120, check=True)  # fmt: skip
        return json.loads(re.sub(r" at 0x[0-9a-f]+", "", proc.stdout))  # default factories' addresses

    ours, std = dump("1"), dump("0")
    assert len(std) > 40
    assert ours == std
