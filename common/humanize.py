"""Values as a person reads them: one time format, counted nouns, booleans as typed.

Every human-readable rendering (tables on a terminal or a pipe, the one-line reports of
``ingest``, ``pull``, ``log``, ``verify``...) writes times, counts and booleans through
these functions, so they look the same everywhere. Machine formats (``-o json|csv|yaml``,
exports) keep the exact values and never come here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any


def human_time(value: datetime) -> str:
    """RFC 3339 in UTC with ``Z`` (``2026-11-28T09:41:13Z``); a fraction of a second only when
    there is one, in milliseconds, microseconds or nanoseconds as needed (``.250``, not
    ``.250000``). A time without a zone (a naive column) is shown as it is, without ``Z``."""
    aware = value.tzinfo is not None
    if aware:
        value = value.astimezone(UTC)
    text = f"{value.year:04d}-{value:%m-%dT%H:%M:%S}"
    nanos = value.microsecond * 1000 + int(getattr(value, "nanosecond", 0))  # pandas.Timestamp
    if nanos:
        digits = f"{nanos:09d}"
        while digits.endswith("000"):  # .250, .250001, .250000001
            digits = digits[:-3]
        text += f".{digits}"
    return text + ("Z" if aware else "")


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 record``, ``0 records``, ``2 records`` (``nouns``: an irregular plural)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def human_value(value: Any) -> str:
    """A scalar as a table cell shows it: times by ``human_time``, booleans as typed in the
    spec and SQL (``true``/``false``), ``None`` empty, anything else as ``str``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return human_time(value)
    return str(value)


def human_cell(value: Any) -> str:
    """A table cell: lists and maps as compact JSON (``plain`` values), the rest as
    ``human_value`` shows it."""
    if isinstance(value, list | dict):
        import json

        return json.dumps(plain(value), ensure_ascii=False)
    if isinstance(value, Enum):
        return str(value.value)
    return human_value(value)


def plain(value: Any) -> Any:
    """``value`` for the machine formats (JSON, YAML, CSV): datetimes as RFC 3339 text with
    every digit, enums as their values, other non-JSON scalars (decimals, dates, bytes...) as
    strings, tuples as lists."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        return value.value
    return str(value)
