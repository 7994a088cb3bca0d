"""Text to DATE and TIMESTAMP columns, as the reference's CSV and JSON readers accept them.

TIMESTAMP: ``2020-01-01`` (midnight), ``2020-01-01T12:00:00`` or with a space (UTC), a
``Z`` or ``±hh[:mm]`` suffix (converted to UTC), fractions up to nanoseconds.
DATE: ``2020-01-01`` and the unpadded ``2020-1-2``; a date-time is truncated to its date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
import pyarrow.compute as pc

_HAS_ZONE = r"\d{2}:\d{2}(?::\d{2}(?:\.\d*)?)?\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$"
_LOOSE_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")


@dataclass(frozen=True, slots=True)
class BadValue(Exception):
    """Value ``value`` at ``index`` of the array cannot be parsed as ``type_name``."""

    index: int
    value: str
    type_name: str


def is_temporal(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(dtype) or pa.types.is_date(dtype))


def parse_temporal(strings: pa.Array, target: pa.DataType) -> pa.Array:
    """``strings`` (utf8, nulls kept) parsed as ``target`` (a timestamp or date type)."""
    if pa.types.is_timestamp(target):
        return parse_timestamps(strings, target)
    return parse_dates(strings, target)


def parse_timestamps(strings: pa.Array, target: pa.DataType) -> pa.Array:
    tz = target.tz or "UTC"
    try:
        return _parse_timestamps_fast(strings, target.unit, tz).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _first_bad(strings, target, "TIMESTAMP") from None


def _parse_timestamps_fast(strings: pa.Array, unit: str, tz: str) -> pa.Array:
    """All with a zone, all without one (one cast each), else split by a regex."""
    aware_type = pa.timestamp(unit, tz)
    for direct in (aware_type, pa.timestamp(unit)):
        try:
            return pc.cast(pc.cast(strings, direct), aware_type)
        except pa.ArrowInvalid:
            pass
    has_zone = pc.match_substring_regex(strings, _HAS_ZONE)
    zoned = pc.cast(pc.if_else(has_zone, strings, None), aware_type)
    naive = pc.cast(pc.if_else(has_zone, None, strings), pa.timestamp(unit))
    return pc.if_else(has_zone, zoned, pc.cast(naive, aware_type))


def parse_dates(strings: pa.Array, target: pa.DataType) -> pa.Array:
    try:
        return pc.cast(strings, target)
    except pa.ArrowInvalid:
        pass
    values: list[date | None] = []
    for i, text in enumerate(strings.to_pylist()):
        if text is None:
            values.append(None)
            continue
        parsed = _parse_one_date(text)
        if parsed is None:
            raise BadValue(i, text, "DATE")
        values.append(parsed)
    return pa.array(values, pa.date32()).cast(target)


def _parse_one_date(text: str) -> date | None:
    m = _LOOSE_DATE.match(text)
    try:
        if m:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        ts = _parse_timestamps_fast(pa.array([text]), "ns", "UTC")
        return ts.cast(pa.date32())[0].as_py()  # type: ignore[no-any-return]
    except (ValueError, pa.ArrowInvalid):
        return None


def _first_bad(strings: pa.Array, target: pa.DataType, type_name: str) -> BadValue:
    """The first value that fails to parse (the slow path, only taken on error)."""
    for i, text in enumerate(strings.to_pylist()):
        if text is None:
            continue
        try:
            _parse_timestamps_fast(pa.array([text]), target.unit, target.tz or "UTC")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return BadValue(i, text, type_name)
    return BadValue(0, str(strings[0]), type_name)
