"""``@record``: the frozen, slotted, keyword-only dataclasses of the ODF model, cheap to define.

``dataclass(frozen=True, slots=True, kw_only=True)`` compiles six methods per class with
``exec`` (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``,
``__delattr__``): about 0.5 ms a class, 25 ms for the metadata model alone, paid by every
``odf`` command that reads a block. A record is the same dataclass (``dataclasses.fields``,
``replace``, ``asdict`` and ``is_dataclass`` work on it; mypy checks it as a frozen,
keyword-only dataclass) whose methods are shared functions reading the class's field table,
so defining one compiles nothing. Behaviour is the generated methods': keyword-only
``__init__`` (``TypeError`` for a missing or unknown argument), equality and hashing over the
fields' tuple between instances of the same class, ``Name(field=value, ...)`` repr, and
``FrozenInstanceError`` on assignment or deletion; ``__post_init__`` (no arguments) runs
after ``__init__``. Records have no ``default_factory`` and no ``InitVar`` fields.
``@positional_record`` is the same with positional fields (``dataclass(frozen=True,
slots=True)``), for identities, names and references. A method the class or a base defines
itself (``__eq__``, ``__repr__``, ...) is kept, as a dataclass given ``eq=False`` or
``repr=False`` keeps it.
"""

from __future__ import annotations

import dataclasses
import inspect
from operator import attrgetter
from typing import Any, TypeVar, cast, dataclass_transform

T = TypeVar("T", bound=type)

_MISSING = dataclasses.MISSING


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def record(cls: T) -> T:
    """Make ``cls`` a frozen, slotted, keyword-only dataclass (see the module)."""
    return _make(cls, kw_only=True)


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def positional_record(cls: T) -> T:
    """Make ``cls`` a frozen, slotted dataclass with positional fields (see the module)."""
    return _make(cls, kw_only=False)


def _make(cls: T, *, kw_only: bool) -> T:
    if not cls.__doc__:  # dataclass would make it from inspect.signature: most of its cost
        listed = ", ".join(f"{n}: {a!r}" for n, a in inspect.get_annotations(cls).items())
        cls.__doc__ = f"{cls.__name__}({'*, ' if kw_only else ''}{listed})"
    make = dataclasses.dataclass(slots=True, kw_only=kw_only, init=False, repr=False, eq=False)
    new: Any = make(cls)
    fields = dataclasses.fields(new)
    for f in fields:
        if f.default_factory is not _MISSING:
            raise TypeError(f"record {cls.__name__}: field {f.name} has a default_factory")
    names = tuple(f.name for f in fields)
    tables: dict[str, Any] = {
        "__record_fields__": tuple((f.name, f.default) for f in fields),
        "__record_names__": frozenset(names),
        "__record_key__": _Key(names),
        "__record_kind__": "keyword-only" if kw_only else "positional",
        "__record_post_init__": getattr(new, "__post_init__", None),
    }
    methods: dict[str, Any] = {
        "__init__": _init if kw_only else _init_positional,
        "__repr__": _repr,
        "__eq__": _eq,
        "__hash__": _hash,
        "__setattr__": _setattr,
        "__delattr__": _delattr,
        "__getstate__": _getstate,
        "__setstate__": _setstate,
    }
    for name, value in tables.items():
        setattr(new, name, value)
    for name, value in methods.items():  # a method of the class or a base's is kept
        if getattr(new, name, None) in (getattr(object, name, None), value):
            setattr(new, name, value)
    return cast(T, new)


class _Key:
    """The tuple of a record's field values (not a descriptor: a class attribute as is)."""

    __slots__ = ("_get", "_single")

    def __init__(self, names: tuple[str, ...]) -> None:
        self._get = attrgetter(*names) if names else None
        self._single = len(names) == 1

    def __call__(self, obj: object) -> tuple[Any, ...]:
        get = self._get
        if get is None:
            return ()
        return (get(obj),) if self._single else tuple(get(obj))


def _init(self: Any, **kwargs: Any) -> None:
    cls = type(self)
    setattr_ = object.__setattr__
    get = kwargs.get
    for name, default in cls.__record_fields__:
        value = get(name, default)
        if value is _MISSING:
            raise TypeError(_bad_arguments(cls, kwargs))
        setattr_(self, name, value)
    if not kwargs.keys() <= cls.__record_names__:
        raise TypeError(_bad_arguments(cls, kwargs))
    post_init = cls.__record_post_init__
    if post_init is not None:
        post_init(self)


def _init_positional(self: Any, *args: Any, **kwargs: Any) -> None:
    if args:
        cls = type(self)
        fields = cls.__record_fields__
        if len(args) > len(fields):
            most = len(fields) + 1
            least = 1 + sum(1 for _, default in fields if default is _MISSING)
            takes = f"{most}" if least == most else f"from {least} to {most}"
            raise TypeError(
                f"{cls.__qualname__}.__init__() takes {takes} positional arguments "
                f"but {len(args) + 1} were given"
            )
        for (name, _), value in zip(fields, args, strict=False):
            if name in kwargs:
                raise TypeError(
                    f"{cls.__qualname__}.__init__() got multiple values for argument {name!r}"
                )
            kwargs[name] = value
    _init(self, **kwargs)


def _bad_arguments(cls: Any, given: dict[str, Any]) -> str:
    """What Python says of a dataclass ``__init__`` given unknown or too few arguments."""
    where = f"{cls.__qualname__}.__init__()"
    known = [name for name, _ in cls.__record_fields__]
    unknown = [name for name in given if name not in known]
    if unknown:
        return f"{where} got an unexpected keyword argument {unknown[0]!r}"
    absent = [
        f"'{name}'"
        for name, default in cls.__record_fields__
        if default is _MISSING and name not in given
    ]
    listed = absent[0] if len(absent) == 1 else ", ".join(absent[:-1]) + " and " + absent[-1]
    plural = "argument" if len(absent) == 1 else "arguments"
    kind = cls.__record_kind__
    return f"{where} missing {len(absent)} required {kind} {plural}: {listed}"


def _repr(self: Any) -> str:
    cls = type(self)
    values = cls.__record_key__(self)
    inner = ", ".join(f"{n}={v!r}" for (n, _), v in zip(cls.__record_fields__, values, strict=True))
    return f"{cls.__qualname__}({inner})"


def _eq(self: Any, other: Any) -> Any:
    key = type(self).__record_key__
    if other.__class__ is not self.__class__:
        return NotImplemented
    return key(self) == key(other)


def _hash(self: Any) -> int:
    cls: Any = type(self)
    return hash(cls.__record_key__(self))


def _setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self: Any) -> tuple[Any, ...]:
    cls: Any = type(self)
    state: tuple[Any, ...] = cls.__record_key__(self)
    return state


def _setstate(self: Any, state: tuple[Any, ...]) -> None:
    for (name, _), value in zip(type(self).__record_fields__, state, strict=True):
        object.__setattr__(self, name, value)
