"""Text forms of ODF scalar values in YAML/JSON manifests.

These are the reference implementation's formats (kamu-cli's YAML serde at ODF 0.35):

- timestamps: RFC 3339 in UTC with a ``Z`` suffix; the fraction of a second is written with 0,
  3 or 6 digits, whichever is the shortest exact one (chrono's ``SecondsFormat::AutoSi``).
  Reading accepts any offset (converted to UTC) and up to nanoseconds, which are truncated to
  microseconds like the FlatBuffers decoder does;
- bytes (``SetDataSchema.schema``): standard base64 with padding;
- string enums and union tags: PascalCase written; PascalCase, camelCase and lowercase read
  (RFC-013), every other spelling rejected, as the reference does.

Every function raises ``ValidationError`` (or ``DecodeError``) with a message and no path; the
caller adds the field path.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

from common.odf.errors import DecodeError, ValidationError

T = TypeVar("T")

_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})"
    r"(?:\.(?P<frac>\d+))?(?:(?P<z>[Zz])|(?P<sign>[+-])(?P<oh>\d{2}):(?P<om>\d{2}))",
)


def describe(value: Any) -> str:
    """A short description of a plain value for error messages: ``integer 1``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def type_error(expected: str, value: Any) -> ValidationError:
    return ValidationError(f"expected {expected}, got {describe(value)}")


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with ``Z``, as the reference writes it."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"timestamp {value.isoformat()} has no time zone")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(
            f"timestamp {value.isoformat()} is outside the representable range in UTC"
        ) from None
    micros = utc.microsecond
    if micros == 0:
        frac = ""
    elif micros % 1000 == 0:
        frac = f".{micros // 1000:03d}"
    else:
        frac = f".{micros:06d}"
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
        f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}{frac}Z"
    )


def parse_timestamp(text: str) -> datetime:
    """An aware UTC datetime from RFC 3339 text."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValidationError(
            f"invalid timestamp {text!r}, expected RFC 3339 such as 2020-01-01T12:00:00Z"
        )
    if match["s"] == "60":
        raise ValidationError(f"invalid timestamp {text!r}: leap seconds are not supported")
    frac = match["frac"] or ""
    if len(frac) > 9:
        raise ValidationError(f"invalid timestamp {text!r}: more than 9 fractional digits")
    if match["z"]:
        tz = UTC
    else:
        offset = timedelta(hours=int(match["oh"]), minutes=int(match["om"]))
        if offset >= timedelta(hours=24):
            raise ValidationError(f"invalid timestamp {text!r}: offset out of range")
        tz = timezone(-offset if match["sign"] == "-" else offset)
    try:
        year, month, day = (int(part) for part in match["date"].split("-"))
        local = datetime(
            year,
            month,
            day,
            int(match["h"]),
            int(match["m"]),
            int(match["s"]),
            int(frac[:6].ljust(6, "0")),
            tzinfo=tz,
        )
        return local.astimezone(UTC)
    except (ValueError, OverflowError) as e:
        raise ValidationError(f"invalid timestamp {text!r}: {e}") from None


def encode_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise DecodeError(f"invalid base64: {e}") from None


def spellings(pascal: str) -> tuple[str, ...]:
    """The accepted spellings of a PascalCase name (RFC-013): itself, camelCase, lowercase."""
    return tuple(dict.fromkeys((pascal, pascal[:1].lower() + pascal[1:], pascal.lower())))


def spelling_table(named: Iterable[tuple[str, T]]) -> dict[str, T]:
    """Map every accepted spelling of each PascalCase name to its item."""
    table: dict[str, T] = {}
    for name, item in named:
        for spelling in spellings(name):
            table[spelling] = item
    return table
