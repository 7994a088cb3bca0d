"""DDL schema strings of read steps (``schema: ["city STRING NOT NULL", ...]``) to Arrow.

Follows the reference (a SQL ``CREATE TABLE`` column list planned by DataFusion):
unquoted names are lower-cased, ``"quoted"`` names keep their case and spaces, ``NOT NULL``
makes a field non-nullable, and every timestamp is labelled ``UTC``. Unlike the reference,
``TIMESTAMP(p)`` (the spec's own example) is accepted: p = 0, 3, 6, 9 select s, ms, us, ns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from coordinator.ingest.errors import SchemaError

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<quoted>"(?:[^"]|"")*")
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<number>\d+)
      | (?P<punct>[(),<>\[\]])
    )""",
    re.VERBOSE,
)

_SIMPLE: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "BOOL": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "REAL": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "TEXT": pa.string(),
    "DATE": pa.date32(),
    "TIME": pa.time64("ns"),
    "BYTEA": pa.binary(),
    "INTERVAL": pa.month_day_nano_interval(),
}
_UNSIGNED: dict[str, pa.DataType] = {
    "TINYINT": pa.uint8(),
    "SMALLINT": pa.uint16(),
    "INT": pa.uint32(),
    "INTEGER": pa.uint32(),
    "BIGINT": pa.uint64(),
}
_TIMESTAMP_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    pos: int


def parse_ddl_schema(columns: Sequence[str], *, path: str = "schema") -> pa.Schema:
    """The Arrow schema described by a read step's ``schema`` entries (joined with ", ")."""
    text = ", ".join(columns)
    try:
        parser = _Parser(text)
        fields = parser.column_list()
    except SchemaError as e:
        raise SchemaError(f"{e.reason} in {text!r}", path=path) from None
    names = [f.name for f in fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SchemaError(f"duplicate column {duplicates[0]!r} in {text!r}", path=path)
    return pa.schema(fields)


def parse_read_schema(columns: Sequence[str]) -> pa.Schema:
    """A read step's ``schema`` as the readers use it: ``parse_ddl_schema``, with top-level
    nanosecond timestamps read as microseconds. The data writer stores milliseconds (ODF's
    ``timestamp[ms]``), so nothing kept is lost, and every year from 1 to 9999 fits
    (nanoseconds since 1970 in an int64 only cover 1677-2262)."""
    schema = parse_ddl_schema(columns, path="read.schema")
    return pa.schema([_widened(f) for f in schema], metadata=schema.metadata)


def _widened(field: pa.Field) -> pa.Field:
    dtype = field.type
    if pa.types.is_timestamp(dtype) and dtype.unit == "ns":
        return field.with_type(pa.timestamp("us", tz=dtype.tz))
    return field


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            bad = text[pos:].lstrip()[:1]
            raise SchemaError(f"unexpected character {bad!r} at position {pos}")
        tokens.append(_Token(m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)))
        pos = m.end()
    return tokens


class _Parser:
    """Recursive descent over ``name type [NOT NULL | NULL] (, ...)*``."""

    def __init__(self, text: str) -> None:
        self._tokens = _tokenize(text)
        self._i = 0

    def column_list(self) -> list[pa.Field]:
        fields = [self._column()]
        while self._accept(","):
            fields.append(self._column())
        if self._peek() is not None:
            raise SchemaError(f"unexpected {self._peek_text()!r}")
        return fields

    def _column(self) -> pa.Field:
        name = self._identifier()
        dtype = self._type(name)
        nullable = True
        if self._accept_word("NOT"):
            self._expect_word("NULL")
            nullable = False
        else:
            self._accept_word("NULL")
        return pa.field(name, dtype, nullable=nullable)

    def _identifier(self) -> str:
        tok = self._next("a column name")
        if tok.kind == "quoted":
            return tok.text[1:-1].replace('""', '"')
        if tok.kind == "word":
            return tok.text.lower()
        raise SchemaError(f"expected a column name, got {tok.text!r}")

    def _type(self, column: str) -> pa.DataType:
        tok = self._next(f"a type for column {column!r}")
        if tok.kind != "word":
            raise SchemaError(f"expected a type for column {column!r}, got {tok.text!r}")
        word = tok.text.upper()
        dtype = self._base_type(word, column)
        while self._accept("["):
            self._expect("]")
            dtype = pa.list_(dtype)
        return dtype

    def _base_type(self, word: str, column: str) -> pa.DataType:
        if word in _UNSIGNED and self._accept_word("UNSIGNED"):
            return _UNSIGNED[word]
        if word == "DOUBLE":
            self._accept_word("PRECISION")
        if word in _SIMPLE:
            return _SIMPLE[word]
        if word in ("VARCHAR", "CHAR", "CHARACTER"):
            self._accept_word("VARYING")
            self._optional_args(1)
            return pa.string()
        if word in ("DECIMAL", "NUMERIC"):
            return _decimal(self._optional_args(2))
        if word == "TIMESTAMP":
            return self._timestamp()
        if word == "ARRAY":
            self._expect("<")
            item = self._type(column)
            self._expect(">")
            return pa.list_(item)
        raise SchemaError(f"unsupported type {word} for column {column!r}")

    def _timestamp(self) -> pa.DataType:
        args = self._optional_args(1)
        unit = "ns"
        if args:
            if args[0] not in _TIMESTAMP_UNITS:
                raise SchemaError(f"TIMESTAMP precision must be 0, 3, 6 or 9, got {args[0]}")
            unit = _TIMESTAMP_UNITS[args[0]]
        if self._accept_word("WITH") or self._accept_word("WITHOUT"):
            self._expect_word("TIME")
            self._expect_word("ZONE")
        return pa.timestamp(unit, tz="UTC")

    def _optional_args(self, most: int) -> list[int]:
        if not self._accept("("):
            return []
        args = [self._number()]
        while self._accept(","):
            args.append(self._number())
        self._expect(")")
        if len(args) > most:
            raise SchemaError(f"expected at most {most} type arguments, got {len(args)}")
        return args

    def _number(self) -> int:
        tok = self._next("a number")
        if tok.kind != "number":
            raise SchemaError(f"expected a number, got {tok.text!r}")
        return int(tok.text)

    # --- token helpers ------------------------------------------------------------------------

    def _peek(self) -> _Token | None:
        return self._tokens[self._i] if self._i < len(self._tokens) else None

    def _peek_text(self) -> str:
        tok = self._peek()
        return tok.text if tok else "end of input"

    def _next(self, what: str) -> _Token:
        tok = self._peek()
        if tok is None:
            raise SchemaError(f"expected {what}, got end of input")
        self._i += 1
        return tok

    def _accept(self, text: str, kind: str = "punct") -> bool:
        """Move past the next token if it is ``text`` of ``kind`` (a word: in any case)."""
        tok = self._peek()
        if tok is not None and tok.kind == kind and tok.text.upper() == text:
            self._i += 1
            return True
        return False

    def _expect(self, text: str, kind: str = "punct") -> None:
        if not self._accept(text, kind):
            wanted = repr(text) if kind == "punct" else text
            raise SchemaError(f"expected {wanted}, got {self._peek_text()!r}")

    def _accept_word(self, word: str) -> bool:
        return self._accept(word, "word")

    def _expect_word(self, word: str) -> None:
        self._expect(word, "word")


def _decimal(args: list[int]) -> pa.DataType:
    precision, scale = (38, 10) if not args else (args[0], args[1] if len(args) > 1 else 0)
    if not 1 <= precision <= 76:
        raise SchemaError(f"DECIMAL precision must be 1..76, got {precision}")
    if scale > precision:
        raise SchemaError(f"DECIMAL scale {scale} exceeds its precision {precision}")
    if precision > 38:
        return pa.decimal256(precision, scale)
    return pa.decimal128(precision, scale)
