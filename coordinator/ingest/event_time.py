"""Where the fallback event time of a fetched file comes from (``EventTimeSource``).

The fallback event time fills the event-time column of rows that have none (see
``writer``). ``None`` means "use the system time of the ingest".

``FromPath.timestampFormat`` is strftime syntax as in the reference (chrono, default
``%Y-%m-%d``); the chrono spellings ``%.f``/``%.3f``/``%.6f`` and ``%:z`` are accepted. A
format without a zone is read as UTC. Unlike the reference, time fields of a format without
``%z`` are honoured rather than dropped (the reference falls back to a date-only parse).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from common.odf.fragments import (
    EventTimeSource,
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
)
from coordinator.ingest.errors import EventTimeError

DEFAULT_TIMESTAMP_FORMAT = "%Y-%m-%d"
_CHRONO_FRACTION = re.compile(r"%\.[369]?f")


def fallback_event_time(
    source: EventTimeSource | None,
    *,
    name: str,
    modified: datetime | None,
    path: str = "fetch.eventTime",
) -> datetime | None:
    """The event time for data fetched from ``name`` (a file name or URL path) last modified
    at ``modified``; None when the system time should be used."""
    if source is None or isinstance(source, EventTimeSourceFromMetadata):
        return modified
    if isinstance(source, EventTimeSourceFromSystemTime):
        return None
    return event_time_from_path(source, name, path=path)


def event_time_from_path(
    source: EventTimeSourceFromPath, name: str, *, path: str = "fetch.eventTime"
) -> datetime:
    """Group 1 of ``source.pattern`` searched in ``name``, parsed with the timestamp format."""
    try:
        regex = re.compile(source.pattern)
    except re.error as e:
        raise EventTimeError(f"invalid pattern {source.pattern!r}: {e}", path=path) from None
    m = regex.search(name)
    if m is None:
        raise EventTimeError(f"pattern {source.pattern!r} does not match {name!r}", path=path)
    if regex.groups < 1 or m.group(1) is None:
        raise EventTimeError(
            f"pattern {source.pattern!r} has no capture group 1 to take the time from",
            path=path,
        )
    fmt = source.timestamp_format or DEFAULT_TIMESTAMP_FORMAT
    return parse_timestamp(m.group(1), fmt, path=path)


def parse_timestamp(text: str, chrono_format: str, *, path: str = "timestampFormat") -> datetime:
    """``text`` parsed with a chrono/strftime format; naive results are taken as UTC."""
    fmt = _CHRONO_FRACTION.sub(".%f", chrono_format).replace("%:z", "%z")
    try:
        parsed = datetime.strptime(text, fmt)
    except ValueError as e:
        raise EventTimeError(
            f"cannot parse {text!r} with timestamp format {chrono_format!r}: {e}", path=path
        ) from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
