"""Case values (pure): type names to Arrow types, times, and canonical forms for comparing.

Times in cases are ISO 8601 (``2024-01-01T00:05:00Z``) or a time of day on the case's date
(``"00:05"``, ``"00:05:30"``, ``"00:05:30.250"``), always UTC; a day-only ``2024-01-03`` is
midnight or a DATE. Values compare by canonical form: timestamps as
``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (any unit or zone), dates as ``YYYY-MM-DD``, decimals and
floats by value.

Expected values may be wildcards (``<any>``, ``<not-null>``, ``<any TYPE>``): a string that
starts with ``<`` is a wildcard, and a literal string starting with ``<`` is written with one
more ``<`` (``"<<b>"`` is the string ``<b>``), so a wildcard never clashes with a real value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

from common.odf.errors import OdfError

OPS = {"+A": 0, "-R": 1, "-C": 2, "+C": 3}
"""RFC-015 operation types by their changelog names (cases may use either form)."""

_INTS = tuple(f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64))
_ALIASES = ("string", "bool", *_INTS, "float32", "float64")
"""Type names of cases that are pyarrow's names of the type too."""
_SCALARS: dict[str, pa.DataType] = {
    **{name: pa.type_for_alias(name) for name in _ALIASES},
    "date": pa.date32(),
    **{f"timestamp-{unit}": pa.timestamp(unit, tz="UTC") for unit in ("s", "ms", "us", "ns")},
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_LIST = re.compile(r"list<(.+)>")
_TIME_OF_DAY = re.compile(r"\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?")


class CaseValueError(OdfError):
    """A value in a case that cannot be read as its column's type."""


@dataclass(frozen=True, slots=True)
class Wildcard:
    """An expected value standing for a set of values (never equal to a value): any value
    (``nullable``), any but null, or any non-null value in a column of the named ``type``."""

    nullable: bool = True
    type: str | None = None
    column_type: str | None = None
    """The column's type in the engine's output, once compared (a ``type`` checks it)."""

    def matches(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return self.type is None or self.column_type == self.type

    def bound(self, t: pa.DataType) -> Wildcard:
        return Wildcard(self.nullable, self.type, type_name(t))

    def __str__(self) -> str:
        if self.type is not None:
            return f"<any {self.type}>"
        return "<any>" if self.nullable else "<not-null>"


def expected_value(value: Any) -> Any:
    """An expected record's value: a wildcard, a ``<<``-escaped literal, or the value."""
    if not isinstance(value, str) or not value.startswith("<"):
        return value
    if value.startswith("<<"):
        return value[1:]
    if value == "<any>":
        return Wildcard()
    if value == "<not-null>":
        return Wildcard(nullable=False)
    if value.startswith("<any ") and value.endswith(">"):
        name = value[5:-1].strip()
        arrow_type(name)
        return Wildcard(nullable=False, type=name)
    raise CaseValueError(
        f"not a wildcard: {value!r} (<any>, <not-null>, <any TYPE>; a literal string starting"
        " with '<' is written with one more '<')"
    )


def arrow_type(name: str) -> pa.DataType:
    if name in _SCALARS:
        return _SCALARS[name]
    if m := _DECIMAL.fullmatch(name):
        return pa.decimal128(int(m[1]), int(m[2]))
    if m := _LIST.fullmatch(name):
        return pa.list_(arrow_type(m[1]))
    raise CaseValueError(f"unknown type {name!r}")


def type_name(t: pa.DataType) -> str:
    """The case type name of an Arrow type (timestamps of any zone by unit)."""
    if pa.types.is_timestamp(t):
        return f"timestamp-{t.unit}"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{type_name(t.value_type)}>"
    if pa.types.is_large_string(t):
        return "string"
    for name, scalar in _SCALARS.items():
        if scalar == t:
            return name
    return str(t)


def parse_time(text: str, day: str) -> datetime:
    """A case time: ISO 8601 (UTC unless it says otherwise) or a time of day on ``day``."""
    s = str(text)
    if _TIME_OF_DAY.fullmatch(s):
        s = f"{day}T{s}"
    try:
        value = datetime.fromisoformat(s)
    except ValueError:
        raise CaseValueError(f"not a time: {text!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_date(text: Any) -> date:
    if isinstance(text, date) and not isinstance(text, datetime):
        return text
    try:
        return date.fromisoformat(str(text))
    except ValueError:
        raise CaseValueError(f"not a date: {text!r}") from None


def parse_op(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return value
    if isinstance(value, str) and value in OPS:
        return OPS[value]
    raise CaseValueError(f"not an operation type (0..3 or +A/-R/-C/+C): {value!r}")


def to_arrow_value(value: Any, t: pa.DataType, day: str) -> Any:
    """A case value as what ``pa.array`` takes for type ``t``."""
    if value is None:
        return None
    if pa.types.is_timestamp(t):
        return parse_time(value, day)
    if pa.types.is_date(t):
        return parse_date(value)
    if pa.types.is_decimal(t):
        return Decimal(str(value))
    if pa.types.is_list(t):
        if not isinstance(value, list):
            raise CaseValueError(f"not a list: {value!r}")
        return [to_arrow_value(v, t.value_type, day) for v in value]
    return value


def canonical(value: Any, t: pa.DataType | None, day: str) -> Any:
    """A comparable, printable form of ``value``: an engine's value (from Arrow) or a case's
    value read as the engine's column type ``t``."""
    if value is None:
        return None
    if isinstance(value, datetime):
        v = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return v.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if v.microsecond else "%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, date):
        return value.isoformat()
    if t is not None and pa.types.is_timestamp(t) and isinstance(value, str):
        try:
            return canonical(parse_time(value, day), None, day)
        except CaseValueError:
            return value
    if t is not None and pa.types.is_date(t) and isinstance(value, str):
        try:
            return parse_date(value).isoformat()
        except CaseValueError:
            return value
    if t is not None and pa.types.is_decimal(t) and isinstance(value, str):
        try:
            return _number(float(Decimal(value)))
        except ArithmeticError:
            return value
    if isinstance(value, Decimal):
        return _number(float(value))
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if t is not None and (pa.types.is_floating(t) or pa.types.is_decimal(t)):
            return _number(float(value))
        return value
    if isinstance(value, list):
        inner = t.value_type if t is not None and pa.types.is_list(t) else None
        return [canonical(v, inner, day) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v, None, day) for k, v in value.items()}
    return value


def _number(x: float) -> float | int:
    r = round(x, 9)
    return int(r) if r == int(r) and abs(r) < 2**53 else r
