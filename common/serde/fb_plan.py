"""How each model class maps onto a FlatBuffers table: the per-class field plan.

The plan is derived once per class from the dataclass's type hints and cached. It is the
single place where Python types are mapped to FlatBuffers field kinds; the writer
(``fb_writer``) and the reader (``fb_reader``) both follow it.

Mapping (ODF 0.35 conventions, see ``fbs/odf.fbs``):

- ``str`` -> ``string``; ``bytes`` -> ``[ubyte]`` (raw); ``Multihash`` / ``DatasetID`` ->
  ``[ubyte]`` holding their binary form;
- ``int`` -> ``uint64``, or ``int32`` when the field metadata says ``{"fbs": "int32"}``;
  ``bool`` -> ``bool``; an ``Enum`` -> an ``int32`` enum whose code is the member's index;
- ``datetime`` -> the 16-byte ``Timestamp`` struct;
- a dataclass -> a table, unless it is a variant registered in ``common.odf.unions``, in
  which case the field is a union (two slots: the ``_type`` byte, then the value);
- ``tuple[X, ...]`` -> a vector; a vector of union values is a vector of wrapper tables
  (``PrepStepWrapper``);
- ``X | None`` -> an optional field; everything else is required.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from datetime import datetime
from typing import Any

from common.odf import unions
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.odf.record import positional_record


class Kind(enum.IntEnum):
    """The FlatBuffers shape of one field."""

    STRING = 1
    BYTES = 2
    MULTIHASH = 3
    DATASET_ID = 4
    STRING_VEC = 5
    TABLE = 6
    TABLE_VEC = 7
    UNION = 8
    UNION_VEC = 9
    U64 = 10
    I32 = 11
    BOOL = 12
    ENUM = 13
    TIMESTAMP = 14


OUT_OF_LINE = frozenset(
    {
        Kind.STRING,
        Kind.BYTES,
        Kind.MULTIHASH,
        Kind.DATASET_ID,
        Kind.STRING_VEC,
        Kind.TABLE,
        Kind.TABLE_VEC,
        Kind.UNION,
        Kind.UNION_VEC,
    }
)
"""Kinds written before the table (phase 1) and referenced by a uoffset."""

WRAPPER_SUFFIX = "Wrapper"
"""A vector of unions ``[U]`` is stored as ``[UWrapper]``, ``table UWrapper { value: U; }``."""


@positional_record
class FieldPlan:
    """One dataclass field and how it is stored."""

    name: str
    slot: int
    """Field index in the table (a union uses ``slot`` for its type and ``slot + 1``)."""
    kind: Kind
    optional: bool
    target: type | None = None
    """The table class (TABLE, TABLE_VEC) or the enum class (ENUM)."""
    union: str | None = None
    """The union's name (UNION, UNION_VEC)."""

    @property
    def voffset(self) -> int:
        """Byte offset of this field's (first) slot in the vtable."""
        return 4 + 2 * self.slot

    @property
    def value_voffset(self) -> int:
        """Vtable offset of the value: the second slot for a union, else the only one."""
        return self.voffset + 2 if self.kind is Kind.UNION else self.voffset

    @property
    def variants(self) -> tuple[type, ...]:
        assert self.union is not None
        return unions.variants(self.union)

    @property
    def enum_members(self) -> tuple[enum.Enum, ...]:
        assert self.target is not None and issubclass(self.target, enum.Enum)
        return tuple(self.target)


@positional_record
class TablePlan:
    """A dataclass stored as a FlatBuffers table."""

    cls: type
    fields: tuple[FieldPlan, ...]
    num_slots: int

    @property
    def name(self) -> str:
        return self.cls.__name__


class PlanError(TypeError):
    """The model uses a Python type that has no FlatBuffers mapping (a programming error)."""


_PLANS: dict[type, TablePlan] = {}


def plan_of(cls: type) -> TablePlan:
    """The (cached) table plan of dataclass ``cls``."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _build_plan(cls)
        _PLANS[cls] = plan
    return plan


def _build_plan(cls: type) -> TablePlan:
    if not dataclasses.is_dataclass(cls):
        raise PlanError(f"{cls.__name__} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields: list[FieldPlan] = []
    slot = 0
    for f in dataclasses.fields(cls):
        fp = _field_plan(cls, f, hints[f.name], slot)
        fields.append(fp)
        slot += 2 if fp.kind is Kind.UNION else 1
    return TablePlan(cls=cls, fields=tuple(fields), num_slots=slot)


def _split_optional(hint: Any) -> tuple[tuple[Any, ...], bool]:
    """The non-None members of ``hint`` and whether None was one of them."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        rest = tuple(a for a in args if a is not type(None))
        return rest, len(rest) != len(args)
    return (hint,), False


def _union_name(members: tuple[Any, ...], where: str) -> str | None:
    """The registered union the members form, or None if they are not union variants."""
    names = {unions.union_of(m) if _is_variant(m) else None for m in members}
    if len(names) != 1:
        raise PlanError(f"{where}: {members} do not form one registered union")
    return names.pop()


def _is_variant(t: Any) -> bool:
    try:
        unions.union_of(t)
    except (KeyError, TypeError):
        return False
    return True


def _field_plan(cls: type, f: dataclasses.Field[Any], hint: Any, slot: int) -> FieldPlan:
    where = f"{cls.__name__}.{f.name}"
    members, optional = _split_optional(hint)
    if len(members) > 1 or _is_variant(members[0]):
        union = _union_name(members, where)
        return FieldPlan(f.name, slot, Kind.UNION, optional, union=union)
    t = members[0]
    if typing.get_origin(t) is tuple:
        return _vector_plan(where, f.name, slot, optional, typing.get_args(t))
    simple = _SIMPLE.get(t)
    if simple is Kind.U64 and f.metadata.get("fbs") == "int32":
        simple = Kind.I32
    if simple is not None:
        return FieldPlan(f.name, slot, simple, optional)
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return FieldPlan(f.name, slot, Kind.ENUM, optional, target=t)
    if isinstance(t, type) and dataclasses.is_dataclass(t):
        return FieldPlan(f.name, slot, Kind.TABLE, optional, target=t)
    raise PlanError(f"{where}: no FlatBuffers mapping for {hint!r}")


def _vector_plan(
    where: str, name: str, slot: int, optional: bool, args: tuple[Any, ...]
) -> FieldPlan:
    if len(args) != 2 or args[1] is not Ellipsis:
        raise PlanError(f"{where}: only homogeneous tuple[X, ...] vectors are supported")
    elem = args[0]
    if elem is str:
        return FieldPlan(name, slot, Kind.STRING_VEC, optional)
    members, elem_optional = _split_optional(elem)
    if elem_optional:
        raise PlanError(f"{where}: vector elements cannot be optional")
    if len(members) > 1:
        return FieldPlan(name, slot, Kind.UNION_VEC, optional, union=_union_name(members, where))
    if isinstance(elem, type) and dataclasses.is_dataclass(elem) and not _is_variant(elem):
        return FieldPlan(name, slot, Kind.TABLE_VEC, optional, target=elem)
    raise PlanError(f"{where}: no FlatBuffers mapping for a vector of {elem!r}")


_SIMPLE: dict[Any, Kind] = {
    str: Kind.STRING,
    bytes: Kind.BYTES,
    Multihash: Kind.MULTIHASH,
    DatasetID: Kind.DATASET_ID,
    bool: Kind.BOOL,
    int: Kind.U64,
    datetime: Kind.TIMESTAMP,
}
