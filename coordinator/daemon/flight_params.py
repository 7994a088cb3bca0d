"""Parameters of Flight SQL prepared statements: the ``?`` markers of a query, and the query
with the values a client bound (``DoPut`` of one Arrow row) put in their place as typed Spark
SQL literals.

Values never reach the SQL as text the client wrote: each one is rendered by ``literal`` from
its Arrow value (strings and binaries as hexadecimal bytes, numbers, dates and times through
Python's own formatting, cast to their type), so no value can end a literal or start a clause;
the engine's sandbox then vets the final query as any other.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa

MAX_BIND_BYTES = 1 << 20
"""The most bytes of Arrow data one ``DoPut`` binding parameters may carry."""


class ParameterError(ValueError):
    """Parameters that do not fit the query (count, rows, types)."""


def markers(query: str) -> list[int]:
    """The offsets of the ``?`` parameter markers of ``query``: those outside string literals
    (``'...'``, ``"..."``, with backslash escapes as Spark reads them; none in
    raw ``r'...'``), quoted identifiers
    (`` `...` ``) and comments (``--`` to the line's end, ``/* ... */``, nested)."""
    found: list[int] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in "'\"":
            escapes = not _raw_prefix(query, i)
            i += 1
            while i < n and query[i] != c:
                i += 2 if escapes and query[i] == "\\" else 1
            i += 1
        elif c == "`":
            i += 1
            while i < n:
                if query[i] == "`":
                    if query.startswith("``", i):  # a doubled backtick is one in the name
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif query.startswith("--", i):
            end = query.find("\n", i)
            i = n if end < 0 else end + 1
        elif query.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if query.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif query.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            if c == "?":
                found.append(i)
            i += 1
    return found


def _raw_prefix(query: str, quote: int) -> bool:
    """Whether the string literal opening at ``quote`` is raw (``r'...'``: no escapes)."""
    if quote == 0 or query[quote - 1] not in "rR":
        return False
    before = query[quote - 2] if quote >= 2 else " "
    return not (before.isalnum() or before in "_`")


def parameter_schema(count: int) -> pa.Schema:
    """The schema reported for a query's ``count`` markers: their types are those of the
    values bound (the query fixes none), hence ``null`` here."""
    return pa.schema([pa.field(f"${i + 1}", pa.null()) for i in range(count)])


def bind(query: str, values: pa.Table) -> str:
    """``query`` with the row of ``values`` in place of its markers, in order."""
    places = markers(query)
    if values.num_rows != 1:
        raise ParameterError(
            f"parameters: expected one row of values, got {values.num_rows}"
            " (run the statement once per row)"
        )
    if values.num_columns != len(places):
        raise ParameterError(
            f"parameters: the query has {len(places)} '?' markers,"
            f" {values.num_columns} values were bound"
        )
    parts: list[str] = []
    start = 0
    for place, column in zip(places, values.columns, strict=True):
        parts.append(query[start:place])
        parts.append(literal(column[0], column.type))
        start = place + 1
    parts.append(query[start:])
    return "".join(parts)


def literal(scalar: pa.Scalar, kind: pa.DataType) -> str:
    """The Spark SQL literal of one Arrow value (a refusal for types without one here)."""
    if not scalar.is_valid:
        return "NULL"
    value: Any = scalar.as_py()
    if pa.types.is_boolean(kind):
        return "TRUE" if value else "FALSE"
    if pa.types.is_integer(kind):
        return f"CAST({int(value)} AS {_integer(kind)})"
    if pa.types.is_floating(kind):
        name = "FLOAT" if pa.types.is_float32(kind) or pa.types.is_float16(kind) else "DOUBLE"
        number = float(value)
        text = "NaN" if math.isnan(number) else repr(number).replace("inf", "Infinity")
        return f"CAST('{text}' AS {name})"
    if pa.types.is_decimal(kind):
        exact = decimal.Decimal(value)
        return f"CAST('{exact:f}' AS DECIMAL({kind.precision},{kind.scale}))"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return f"CAST(X'{str(value).encode('utf-8').hex()}' AS STRING)"
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return f"X'{bytes(value).hex()}'"
    if pa.types.is_date(kind):
        assert isinstance(value, dt.date)
        return f"DATE '{value.isoformat()}'"
    if pa.types.is_timestamp(kind):
        return _timestamp(scalar, kind)
    raise ParameterError(f"parameters: values of type {kind} cannot be bound")


def _integer(kind: pa.DataType) -> str:
    if kind.bit_width <= 8 and pa.types.is_signed_integer(kind):
        return "TINYINT"
    if kind.bit_width <= 16 and pa.types.is_signed_integer(kind):
        return "SMALLINT"
    if kind.bit_width <= 16 or (kind.bit_width <= 32 and pa.types.is_signed_integer(kind)):
        return "INT"
    if kind.bit_width <= 32 or pa.types.is_signed_integer(kind):
        return "BIGINT"
    return "DECIMAL(20,0)"  # uint64


def _timestamp(scalar: pa.Scalar, kind: pa.TimestampType) -> str:
    """A timestamp to the microsecond (Spark's precision); nanoseconds beyond are refused
    rather than rounded."""
    micros = pa.scalar(scalar.value, pa.int64()).as_py()
    scale = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}[kind.unit]
    if kind.unit == "ns":
        if micros % 1_000:
            raise ParameterError("parameters: Spark keeps timestamps to the microsecond")
        micros //= 1_000
    else:
        micros *= scale
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    text = moment.isoformat(sep=" ")
    if kind.tz is None:
        return f"TIMESTAMP_NTZ '{text}'"
    return f"TIMESTAMP '{text}+00:00'"  # Arrow's zoned timestamps count from UTC
