"""The plain form of the ODF model: JSON-compatible Python values, as in YAML/JSON manifests.

The form is the reference implementation's (kamu-cli's YAML serde at ODF 0.35):

- records are mappings with camelCase keys in model field order; ``None`` fields are omitted
  on output, and a missing or ``null`` key reads as ``None``; unknown keys are errors;
- a union variant is a mapping whose first key is ``kind`` with the variant's tag (RFC-013);
- string enums are their PascalCase names; integers are plain integers (uint64, or int32 when
  the field is marked so); multihashes are multibase base16 text; DatasetIDs are ``did:odf``
  text; timestamps and bytes are text (``common.serde.yaml_scalars``);
- sequences are lists (tuples in the model).

The converter for each model class is derived once from its type hints and cached.
Decoding errors are ``ValidationError``/``DecodeError`` whose ``path`` names the field, such as
``metadata[2].read.separator``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar, overload

from common.odf import unions
from common.odf.errors import DecodeError, ValidationError
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde import yaml_scalars as sc

T = TypeVar("T")

KIND = "kind"
NOT_IN_SPEC = {
    ("FetchStep", "EthereumLogs"): (
        "it is an extension of the reference coordinator, not part of ODF 0.35 (sources here"
        " are Url, FilesGlob, Container, Mqtt)"
    ),
}
"""Kinds other implementations write that ODF 0.35 does not define: refused by name."""
"""The key holding a union variant's tag."""

_UINT64 = (0, (1 << 64) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)


class _Codec(ABC):
    """Converts one model type to and from its plain form."""

    @abstractmethod
    def encode(self, value: Any) -> Any: ...

    @abstractmethod
    def decode(self, value: Any) -> Any: ...


@dataclasses.dataclass(frozen=True)
class _Plain(_Codec):
    """A value that is its own plain form (a string, a boolean)."""

    cls: type
    what: str

    def encode(self, value: Any) -> Any:
        if not isinstance(value, self.cls):
            raise sc.type_error(self.what, value)
        return value

    def decode(self, value: Any) -> Any:
        return self.encode(value)


class _Int(_Codec):
    def __init__(self, bounds: tuple[int, int], label: str) -> None:
        self.low, self.high = bounds
        self.label = label

    def encode(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise sc.type_error(f"an integer ({self.label})", value)
        if not self.low <= value <= self.high:
            raise ValidationError(f"integer {value} is out of range for {self.label}")
        return value

    def decode(self, value: Any) -> Any:
        return self.encode(value)


@dataclasses.dataclass(frozen=True)
class _Text(_Codec):
    """A value whose plain form is text: ``to_text`` on the way out, ``from_text`` back."""

    cls: type
    what: str
    text: str
    to_text: Callable[[Any], str]
    from_text: Callable[[str], Any]

    def encode(self, value: Any) -> Any:
        if not isinstance(value, self.cls):
            raise sc.type_error(self.what, value)
        return self.to_text(value)

    def decode(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise sc.type_error(self.text, value)
        return self.from_text(value)


def _multihash_from_text(value: str) -> Multihash:
    try:
        return Multihash.from_multibase(value)
    except DecodeError as e:
        raise DecodeError(f"invalid multihash {value!r}: {e.reason}") from None


class _Enum(_Codec):
    def __init__(self, cls: type[Enum]) -> None:
        self.cls = cls
        self.names = [str(member.value) for member in cls]
        self.by_spelling = sc.spelling_table((str(m.value), m) for m in cls)

    def encode(self, value: Any) -> Any:
        if not isinstance(value, self.cls):
            raise sc.type_error(f"a {self.cls.__name__}", value)
        return value.value

    def decode(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise sc.type_error(f"a {self.cls.__name__} string", value)
        member = self.by_spelling.get(value)
        if member is None:
            raise ValidationError(
                f"unknown {self.cls.__name__} {value!r}, expected one of: {', '.join(self.names)}"
            )
        return member


class _Optional(_Codec):
    def __init__(self, inner: _Codec) -> None:
        self.inner = inner

    def encode(self, value: Any) -> Any:
        return None if value is None else self.inner.encode(value)

    def decode(self, value: Any) -> Any:
        return None if value is None else self.inner.decode(value)


class _List(_Codec):
    def __init__(self, item: _Codec) -> None:
        self.item = item

    def encode(self, value: Any) -> Any:
        if not isinstance(value, tuple | list):
            raise sc.type_error("a tuple", value)
        return [_at(f"[{i}]", self.item.encode, x) for i, x in enumerate(value)]

    def decode(self, value: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise sc.type_error("a list", value)
        return tuple(_at(f"[{i}]", self.item.decode, x) for i, x in enumerate(value))


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    key: str
    codec: _Codec
    optional: bool


class _Record(_Codec):
    """A dataclass as a mapping; with a ``tag``, a union variant carrying ``kind: <tag>``."""

    def __init__(self, cls: type, tag: str | None) -> None:
        self.cls = cls
        self.tag = tag

    @functools.cached_property
    def fields(self) -> tuple[_Field, ...]:
        hints = typing.get_type_hints(self.cls)
        planned = []
        for f in dataclasses.fields(self.cls):
            codec = _codec_for(hints[f.name], int32=f.metadata.get("fbs") == "int32")
            optional = isinstance(codec, _Optional)
            if isinstance(codec, _Optional):
                codec = codec.inner
            planned.append(_Field(f.name, camel_case(f.name), codec, optional))
        if self.tag is not None and any(f.key == KIND for f in planned):
            raise TypeError(f"union variant {self.cls.__name__} has a field named {KIND!r}")
        return tuple(planned)

    @functools.cached_property
    def keys(self) -> frozenset[str]:
        return frozenset(f.key for f in self.fields) | ({KIND} if self.tag else frozenset())

    def encode(self, value: Any) -> Any:
        if type(value) is not self.cls:
            raise sc.type_error(f"a {self.cls.__name__}", value)
        out: dict[str, Any] = {KIND: self.tag} if self.tag is not None else {}
        for f in self.fields:
            item = getattr(value, f.name)
            if item is None:
                if not f.optional:
                    raise ValidationError("required field is None", path=f.key)
                continue
            out[f.key] = _at(f.key, f.codec.encode, item)
        return out

    def decode(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise sc.type_error("a mapping", value)
        for key in value:
            if not isinstance(key, str):
                raise ValidationError(f"mapping keys must be strings, got {sc.describe(key)}")
            if key not in self.keys:
                raise ValidationError(self._unknown_field_message(), path=key)
        kwargs: dict[str, Any] = {}
        for f in self.fields:
            item = value.get(f.key)
            if item is None:
                if not f.optional:
                    name = self.cls.__name__
                    reason = (
                        f"required field of {name} is null"
                        if f.key in value
                        else f"missing required field of {name}"
                    )
                    raise ValidationError(reason, path=f.key)
                kwargs[f.name] = None
            else:
                kwargs[f.name] = _at(f.key, f.codec.decode, item)
        return self.cls(**kwargs)

    def _unknown_field_message(self) -> str:
        if not self.fields:
            return f"unknown field, {self.cls.__name__} has no fields"
        known = ", ".join(f.key for f in self.fields)
        return f"unknown field of {self.cls.__name__}, expected one of: {known}"


class _Union(_Codec):
    """Variants of a union, told apart by their ``kind`` tag."""

    def __init__(self, union: str, variants: tuple[type, ...]) -> None:
        self.union = union
        self.records = {v: _record_codec(v, unions.tag_of(v)) for v in variants}
        self.tags = [unions.tag_of(v) for v in variants]
        self.by_spelling = sc.spelling_table((unions.tag_of(v), self.records[v]) for v in variants)

    def encode(self, value: Any) -> Any:
        record = self.records.get(type(value))
        if record is None:
            raise sc.type_error(f"a {self.union} ({', '.join(self.tags)})", value)
        return record.encode(value)

    def decode(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise sc.type_error(f"a {self.union} mapping with {KIND!r}", value)
        tag = value.get(KIND)
        if tag is None:
            raise ValidationError(
                f"missing required field, the {self.union} kind: one of {', '.join(self.tags)}",
                path=KIND,
            )
        if not isinstance(tag, str):
            raise sc.type_error(f"a {self.union} kind string", tag).at(KIND)
        record = self.by_spelling.get(tag)
        if record is None:
            known = NOT_IN_SPEC.get((self.union, tag))
            if known is not None:
                raise ValidationError(
                    f"{self.union} kind {tag!r} is not supported: {known}", path=KIND
                )
            raise ValidationError(
                f"unknown {self.union} kind {tag!r}, expected one of: {', '.join(self.tags)}",
                path=KIND,
            )
        return record.decode(value)


def _at(key: str, convert: Any, value: Any) -> Any:
    """``convert(value)`` with any error's path nested under ``key``."""
    try:
        return convert(value)
    except ValidationError as e:
        raise e.at(key) from None


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


@functools.cache
def _record_codec(cls: type, tag: str | None) -> _Record:
    return _Record(cls, tag)


@functools.cache
def _union_codec(union: str, variants: tuple[type, ...]) -> _Union:
    return _Union(union, variants)


_SCALARS: dict[Any, _Codec] = {
    str: _Plain(str, "a string"),
    bool: _Plain(bool, "a boolean"),
    bytes: _Text(bytes, "bytes", "a base64 string", sc.encode_base64, sc.decode_base64),
    datetime: _Text(
        datetime,
        "a datetime",
        "an RFC 3339 timestamp string",
        sc.format_timestamp,
        sc.parse_timestamp,
    ),
    Multihash: _Text(
        Multihash,
        "a Multihash",
        "a multihash string",
        Multihash.to_multibase,
        _multihash_from_text,
    ),
    DatasetID: _Text(
        DatasetID, "a DatasetID", "a did:odf string", DatasetID.to_did, DatasetID.from_did
    ),
}


@functools.cache
def _codec_for(hint: Any, *, int32: bool = False) -> _Codec:
    """The converter for a type hint of the model."""
    if hint is int:
        return _Int(_INT32, "int32") if int32 else _Int(_UINT64, "uint64")
    if hint in _SCALARS:
        return _SCALARS[hint]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _Enum(hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _List(_codec_for(args[0], int32=int32))
    if origin in (types.UnionType, typing.Union):
        members = tuple(a for a in args if a is not type(None))
        inner = (
            _codec_for(members[0], int32=int32) if len(members) == 1 else _variants_codec(members)
        )
        return _Optional(inner) if len(members) < len(args) else inner
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        try:
            return _variants_codec((hint,))
        except KeyError:
            return _record_codec(hint, None)
    raise TypeError(f"no plain form for type {hint!r}")


def _variants_codec(members: tuple[Any, ...]) -> _Union:
    """The codec of union variants; raises KeyError when they are not in one union."""
    names = {unions.union_of(m) for m in members}
    if len(names) != 1:
        raise TypeError(f"{members!r} are not variants of one union")
    return _union_codec(names.pop(), members)


def _target_codec(target: Any) -> _Codec:
    if isinstance(target, str):
        try:
            members = unions.variants(target)
        except KeyError:
            raise ValueError(f"{target!r} is not the name of an ODF union") from None
        return _union_codec(target, members)
    return _codec_for(target)


def to_plain(obj: Any) -> Any:
    """A model object as a JSON-compatible value (camelCase keys, None omitted).

    Union variants carry their ``kind``; lists and tuples are converted item by item.
    """
    if obj is None or isinstance(obj, str | bool | int):
        return obj
    if isinstance(obj, list | tuple):
        return [to_plain(item) for item in obj]
    cls: Any = type(obj)
    return _codec_for(cls).encode(obj)


@overload
def from_plain(target: type[T], value: Any, *, path: str = "") -> T: ...


@overload
def from_plain(target: str | types.UnionType, value: Any, *, path: str = "") -> Any: ...


def from_plain(target: Any, value: Any, *, path: str = "") -> Any:
    """A model object of ``target`` from its plain form.

    ``target`` is a model class, a union type such as ``FetchStep``, or a union's name such
    as ``"MetadataEvent"``. A union variant class (``TransformSql``) is read with its ``kind``
    tag, as ``to_plain`` writes it. Errors' paths are nested under ``path``.
    """
    codec = _target_codec(target)
    try:
        return codec.decode(value)
    except ValidationError as e:
        raise e.at(path) from None
