"""`dataclass`, as the standard library's, without compiling four of its six methods per class (start-up speed).

CPython 3.11's `dataclasses` writes the source of each generated method (`__init__`, `__repr__`, `__eq__`, a frozen
class's `__setattr__` and `__delattr__`, `__hash__`) and compiles it; parsing those texts was about a fifth of the
instructions of a small compare (some forty classes per run). Here the standard library does everything except the
methods (fields, defaults as class attributes, `__match_args__`, abstract methods); `__init__` is compiled from a
short text (its defaults and annotations are set on the function afterwards, so `inspect.signature` and the class's
`__doc__` are those of dataclasses); the other methods are closures over the field names that do what the generated
texts do: the same attribute reads in the same order (`operator.attrgetter`), the same comparisons, hash, repr
text and errors.

That path is taken only on CPython 3.11 (checked against its dataclasses) and for the plain classes this package
declares: no dataclass base, no ClassVar/InitVar/KW_ONLY annotation, no kw_only, slots, order or unsafe_hash, no
method of its own among those generated. Anything else, and every other Python, goes to `dataclasses.dataclass`.
tests/test_records.py builds classes both ways and requires them to behave and introspect alike.
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

FAST = sys.version_info[:2] == (3, 11) and hasattr(dataclasses, "_recursive_repr")  # tests may turn it off
_OWN = ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__", "__hash__", "__match_args__")
_SPECIAL = ("ClassVar", "InitVar", "KW_ONLY")


def _dataclass(cls: type | None = None, /, *, init: bool = True, repr: bool = True, eq: bool = True,
              order: bool = False, unsafe_hash: bool = False, frozen: bool = False, match_args: bool = True,
              kw_only: bool = False, slots: bool = False, weakref_slot: bool = False) -> Any:  # fmt: skip
    """`dataclasses.dataclass` (same arguments, same classes)."""
    options = dict(init=init, repr=repr, eq=eq, order=order, unsafe_hash=unsafe_hash, frozen=frozen,
                   match_args=match_args, kw_only=kw_only, slots=slots, weakref_slot=weakref_slot)  # fmt: skip

    def wrap(c: type) -> type:
        if FAST and init and repr and match_args and not (order or unsafe_hash or kw_only or slots or weakref_slot) \
                and _plain(c):  # fmt: skip
            return _process(c, eq, frozen)
        return dataclasses.dataclass(c, **options)

    return wrap if cls is None else wrap(cls)


if TYPE_CHECKING:  # type checkers see the standard library's decorator: these are its classes
    from dataclasses import dataclass
else:
    dataclass = _dataclass


def _plain(cls: type) -> bool:
    """A class this path reproduces exactly."""
    if any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:]):
        return False
    own = cls.__dict__
    if any(name in own for name in _OWN):
        return False
    for annotation in own.get("__annotations__", {}).values():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if any(word in text for word in _SPECIAL):
            return False
    return not any(isinstance(v, dataclasses.Field) and v.kw_only is True for v in own.values())


def _process(cls: type, eq: bool, frozen: bool) -> type:
    had_doc = bool(cls.__doc__)
    if not had_doc:
        cls.__doc__ = "-"  # the standard library's signature text is made below, once the class has its __init__
    # fields, defaults as class attributes, __match_args__, abstract methods; no method and no compiling
    dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False)
    params_type = dataclasses._DataclassParams  # type: ignore[attr-defined]
    cls.__dataclass_params__ = params_type(True, True, eq, False, False, frozen)  # type: ignore[attr-defined]
    module = sys.modules.get(cls.__module__)
    module_globals = module.__dict__ if module is not None else {}
    fields = list(cls.__dataclass_fields__.values())  # type: ignore[attr-defined]
    _set_method(cls, _init(cls, fields, frozen, module_globals))
    shown = [f.name for f in fields if f.repr]
    _set_method(cls, dataclasses._recursive_repr(_repr(shown, _getter(shown))))  # type: ignore[attr-defined]
    if eq:
        _set_method(cls, _eq(_getter([f.name for f in fields if f.compare])))
    if frozen:
        names = tuple(f.name for f in fields)
        _set_method(cls, _frozen_setattr(cls, names))
        _set_method(cls, _frozen_delattr(cls, names))
    if eq and frozen:
        _set_method(cls, _hash(_getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])))
    elif eq:
        cls.__hash__ = None  # type: ignore[assignment]
    if not had_doc:
        try:
            text_sig = str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            text_sig = ""
        cls.__doc__ = cls.__name__ + text_sig
    return cls


def _set_method(cls: type, fn: Any) -> None:
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    setattr(cls, fn.__name__, fn)


def _init(cls: type, fields: list[dataclasses.Field[Any]], frozen: bool, module_globals: dict[str, Any]) -> Any:
    """dataclasses' `__init__`: the same parameters, defaults, annotations and assignments."""
    missing = dataclasses.MISSING
    self_name = "__dataclass_self__" if "self" in cls.__dataclass_fields__ else "self"  # type: ignore[attr-defined]
    cells: dict[str, Any] = {"_HAS_DEFAULT_FACTORY": dataclasses._HAS_DEFAULT_FACTORY,  # type: ignore[attr-defined]
                             "__dataclass_builtins_object__": object}  # fmt: skip
    seen_default = False
    params, defaults, annotations, body = [self_name], [], {}, []
    for f in fields:
        if f.init:
            if f.default is not missing:
                defaults.append(f.default)
            elif f.default_factory is not missing:
                defaults.append(cells["_HAS_DEFAULT_FACTORY"])
            if f.default is not missing or f.default_factory is not missing:
                seen_default = True
            elif seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            params.append(f.name)
            annotations[f.name] = f.type
        if f.default_factory is not missing:
            cells[f"_dflt_{f.name}"] = f.default_factory
            value = f"_dflt_{f.name}()"
            if f.init:
                value = f"{value} if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}"
        elif f.init:
            value = f.name
        else:
            continue  # read from the class attribute holding the default
        body.append(f"__dataclass_builtins_object__.__setattr__({self_name},{f.name!r},{value})" if frozen
                    else f"{self_name}.{f.name}={value}")  # fmt: skip
    if hasattr(cls, "__post_init__"):
        body.append(f"{self_name}.__post_init__()")
    annotations["return"] = None
    lines = "".join(f"  {line}\n" for line in body or ["pass"])
    source = f"def __create_fn__({', '.join(cells)}):\n def __init__({','.join(params)}):\n{lines} return __init__"
    namespace: dict[str, Any] = {}
    # compiled without this module's `from __future__ import annotations`, as dataclasses' texts are
    exec(compile(source, "<string>", "exec", dont_inherit=True), module_globals, namespace)
    init = namespace["__create_fn__"](**cells)
    init.__defaults__ = tuple(defaults) or None
    init.__annotations__ = annotations
    return init


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The attributes `names` of an object as a tuple, read in order (dataclasses' `(self.a,self.b,)`)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return operator.attrgetter(*names)


def _repr(names: list[str], values: Callable[[Any], tuple[Any, ...]]) -> Any:
    def __repr__(self: Any) -> str:
        return self.__class__.__qualname__ + "(" + ", ".join([f"{n}={v!r}" for n, v in zip(names, values(self))]) + ")"

    return __repr__


def _eq(values: Callable[[Any], tuple[Any, ...]]) -> Any:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(values: Callable[[Any], tuple[Any, ...]]) -> Any:
    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _frozen_setattr(cls: type, names: tuple[str, ...]) -> Any:
    error = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]  # cls is a class

    return __setattr__


def _frozen_delattr(cls: type, names: tuple[str, ...]) -> Any:
    error = dataclasses.FrozenInstanceError

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]  # cls is a class

    return __delattr__
