"""The FlatBuffers ``Timestamp`` struct: 16 bytes, little-endian, always UTC.

Layout: ``year: int32``, ``ordinal: uint16`` (day of the year, 1-based), 2 bytes of padding,
``seconds_from_midnight: uint32``, ``nanoseconds: uint32``. Python datetimes carry
microseconds, so ``nanoseconds = microsecond * 1000`` when writing, and nanoseconds that are
not a multiple of 1000 are truncated when reading. A nanoseconds value of 1e9 or more is
chrono's leap-second marker; it is read as the last microsecond of that second.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta

from common.odf.errors import DecodeError, ValidationError

SIZE = 16
_STRUCT = struct.Struct("<iHxxII")
_NANOS_PER_SECOND = 1_000_000_000


def encode_timestamp(value: datetime) -> bytes:
    """The 16 struct bytes of an aware datetime (converted to UTC)."""
    if value.tzinfo is not UTC:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValidationError(
                f"timestamp {value.isoformat()} has no time zone; ODF timestamps must be aware"
            )
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValidationError(
                f"timestamp {value.isoformat()} is outside the representable range in UTC"
            ) from None
    return _STRUCT.pack(
        value.year,
        value.timetuple().tm_yday,
        value.hour * 3600 + value.minute * 60 + value.second,
        value.microsecond * 1000,
    )


def decode_timestamp(data: bytes, pos: int) -> datetime:
    """The UTC datetime held by the struct at ``data[pos:pos + 16]`` (bounds already checked)."""
    year, ordinal, seconds, nanos = _STRUCT.unpack_from(data, pos)
    if not 1 <= year <= 9999:
        raise DecodeError(f"timestamp year {year} is outside 1..9999")
    days_in_year = 366 if _is_leap(year) else 365
    if not 1 <= ordinal <= days_in_year:
        raise DecodeError(f"timestamp day of year {ordinal} is outside 1..{days_in_year}")
    if seconds >= 86_400:
        raise DecodeError(f"timestamp seconds from midnight {seconds} is not below 86400")
    micros = nanos // 1000 if nanos < _NANOS_PER_SECOND else 999_999
    if nanos >= 2 * _NANOS_PER_SECOND:
        raise DecodeError(f"timestamp nanoseconds {nanos} is not below 2e9")
    start = datetime(year, 1, 1, tzinfo=UTC)
    try:
        return start + timedelta(days=ordinal - 1, seconds=seconds, microseconds=micros)
    except OverflowError:
        raise DecodeError(f"timestamp {year}-{ordinal:03d} is outside 1..9999") from None


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
