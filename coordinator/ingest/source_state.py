"""Polling source state (RFC-009) and its encoding as ``AddData.newSourceState``.

Encoded as the reference does: source name ``default``, kind ``odf/etag`` (value verbatim)
or ``odf/last-modified`` (RFC 3339 UTC with ``Z``, fraction digits only when non-zero).
State of an unknown kind, or a value that does not parse, is ignored (treated as none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from common.odf.fragments import SourceState

POLLING_SOURCE_NAME = "default"
KIND_ETAG = "odf/etag"
KIND_LAST_MODIFIED = "odf/last-modified"


@dataclass(frozen=True, slots=True)
class ETag:
    """An opaque version tag: an HTTP ETag, a glob's last file name, a container's etag."""

    value: str


@dataclass(frozen=True, slots=True)
class LastModified:
    """The modification time of the source (HTTP Last-Modified, file mtime)."""

    time: datetime


PollingSourceState = ETag | LastModified


def encode_source_state(state: PollingSourceState) -> SourceState:
    if isinstance(state, ETag):
        return SourceState(source_name=POLLING_SOURCE_NAME, kind=KIND_ETAG, value=state.value)
    return SourceState(
        source_name=POLLING_SOURCE_NAME,
        kind=KIND_LAST_MODIFIED,
        value=format_rfc3339(state.time),
    )


def decode_source_state(state: SourceState | None) -> PollingSourceState | None:
    """The polling state recorded in ``state``; None for absent, unknown or unparseable state."""
    if state is None:
        return None
    if state.kind == KIND_ETAG:
        return ETag(state.value)
    if state.kind == KIND_LAST_MODIFIED:
        try:
            return LastModified(parse_rfc3339(state.value))
        except ValueError:
            return None
    return None


def format_rfc3339(value: datetime) -> str:
    """``2020-01-01T00:00:00Z``; with ``.fff`` or ``.ffffff`` only when the fraction is not 0."""
    value = value.astimezone(UTC)
    base = value.strftime("%Y-%m-%dT%H:%M:%S")
    micros = value.microsecond
    if micros == 0:
        return base + "Z"
    if micros % 1000 == 0:
        return f"{base}.{micros // 1000:03d}Z"
    return f"{base}.{micros:06d}Z"


_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_rfc3339(text: str) -> datetime:
    """An aware UTC datetime from RFC 3339 text; fractions beyond microseconds are truncated."""
    m = _RFC3339.match(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    date, time, fraction, zone = m.groups()
    micros = (fraction or "").ljust(6, "0")[:6]
    offset = "+00:00" if zone in ("Z", "z") else zone
    parsed = datetime.fromisoformat(f"{date}T{time}.{micros}{offset}")
    return parsed.astimezone(UTC)
