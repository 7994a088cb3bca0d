"""A small parser for the subset of the FlatBuffers schema language used in ``fbs/``.

It understands ``include``, ``struct``, ``table``, ``union`` and ``enum`` declarations, fields
with an optional default (``= null``, ``= 0``) and attributes (``(required)``), and ``//``
comments. It exists so that tests can check ``fbs/*.fbs`` against the spec's JSON schemas and
the Python model without needing ``flatc``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from common.odf.errors import ValidationError

SCALARS = frozenset(
    {"bool", "byte", "ubyte", "short", "ushort", "int", "uint", "long", "ulong", "float"}
    | {"double", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}
    | {"float32", "float64"}
)


@dataclass(frozen=True, slots=True)
class FbsField:
    name: str
    type: str
    """As written: ``string``, ``[ubyte]``, ``uint64``, ``Timestamp``, ``[SqlQueryStep]``..."""
    default: str | None = None
    attributes: frozenset[str] = frozenset()

    @property
    def is_vector(self) -> bool:
        return self.type.startswith("[")

    @property
    def element_type(self) -> str:
        """The element type of a vector, or the type itself."""
        return self.type[1:-1] if self.is_vector else self.type

    @property
    def required(self) -> bool:
        return "required" in self.attributes


@dataclass(frozen=True, slots=True)
class FbsTable:
    name: str
    fields: tuple[FbsField, ...]
    is_struct: bool = False

    def field(self, name: str) -> FbsField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")


@dataclass(frozen=True, slots=True)
class FbsUnion:
    name: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FbsEnum:
    name: str
    base: str
    values: tuple[str, ...]


@dataclass(slots=True)
class FbsSchema:
    tables: dict[str, FbsTable] = field(default_factory=dict)
    structs: dict[str, FbsTable] = field(default_factory=dict)
    unions: dict[str, FbsUnion] = field(default_factory=dict)
    enums: dict[str, FbsEnum] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def names(self) -> set[str]:
        return set(self.tables) | set(self.structs) | set(self.unions) | set(self.enums)


_DECL = re.compile(
    r"\b(?P<kind>table|struct|union|enum)\s+(?P<name>\w+)\s*(?::\s*(?P<base>\w+)\s*)?"
    r"\{(?P<body>[^{}]*)\}",
)
_INCLUDE = re.compile(r'\binclude\s+"(?P<path>[^"]+)"\s*;')
_FIELD = re.compile(
    r"^(?P<name>\w+)\s*:\s*(?P<type>\[\s*\w+\s*\]|\w+)\s*"
    r"(?:=\s*(?P<default>[\w.+\-]+)\s*)?(?:\((?P<attrs>[^)]*)\)\s*)?$"
)
_COMMENT = re.compile(r"//[^\n]*")


def parse_fbs(path: Path, schema: FbsSchema | None = None) -> FbsSchema:
    """Parse ``path`` and, recursively, the files it includes."""
    schema = schema if schema is not None else FbsSchema()
    path = path.resolve()
    if path in schema.files:
        return schema
    schema.files.append(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValidationError(f"cannot read schema: {e.strerror}", path=str(path)) from None
    text = _COMMENT.sub(lambda m: " " * len(m.group()), text)
    for m in _INCLUDE.finditer(text):
        parse_fbs(path.parent / m.group("path"), schema)
    rest = _INCLUDE.sub(lambda m: " " * len(m.group()), text)
    for m in _DECL.finditer(text):
        _declare(schema, m, path, _line_of(text, m.start()))
    rest = _DECL.sub(lambda m: " " * len(m.group()), rest)
    leftover = rest.strip()
    if leftover:
        pos = rest.index(leftover[0])
        raise ValidationError(
            f"unexpected text {leftover.split()[0]!r}", path=f"{path}:{_line_of(rest, pos)}"
        )
    return schema


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _declare(schema: FbsSchema, m: re.Match[str], path: Path, line: int) -> None:
    kind, name, body = m.group("kind"), m.group("name"), m.group("body")
    where = f"{path}:{line}"
    if name in schema.names():
        raise ValidationError(f"{name} is declared twice", path=where)
    if kind in ("table", "struct"):
        fields = tuple(_parse_field(s.strip(), where) for s in body.split(";") if s.strip())
        target = schema.tables if kind == "table" else schema.structs
        target[name] = FbsTable(name, fields, is_struct=kind == "struct")
        return
    members = tuple(s.strip() for s in body.split(",") if s.strip())
    if kind == "union":
        schema.unions[name] = FbsUnion(name, members)
    else:
        if not m.group("base"):
            raise ValidationError(f"enum {name} has no underlying type", path=where)
        schema.enums[name] = FbsEnum(name, m.group("base"), members)


def _parse_field(decl: str, where: str) -> FbsField:
    m = _FIELD.match(" ".join(decl.split()))
    if m is None:
        raise ValidationError(f"cannot parse field declaration {decl!r}", path=where)
    attrs = frozenset(a.strip() for a in (m.group("attrs") or "").split(",") if a.strip())
    ftype = m.group("type").replace(" ", "")
    return FbsField(m.group("name"), ftype, m.group("default"), attrs)
