"""Polling source state encoding (RFC-009 as the reference writes it) and event time sources."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from common.odf.fragments import (
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
    SourceState,
)
from coordinator.ingest.errors import EventTimeError
from coordinator.ingest.event_time import event_time_from_path, fallback_event_time
from coordinator.ingest.source_state import (
    ETag,
    LastModified,
    decode_source_state,
    encode_source_state,
    format_rfc3339,
    parse_rfc3339,
)


def test_etag_state_is_kept_verbatim() -> None:
    state = encode_source_state(ETag('W/"95c5fde"\n'))
    assert state == SourceState(source_name="default", kind="odf/etag", value='W/"95c5fde"\n')
    assert decode_source_state(state) == ETag('W/"95c5fde"\n')


@pytest.mark.parametrize(
    ("time", "text"),
    [
        (datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), "2020-01-02T03:04:05Z"),
        (datetime(2020, 1, 2, 3, 4, 5, 120000, tzinfo=UTC), "2020-01-02T03:04:05.120Z"),
        (datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), "2020-01-02T03:04:05.123456Z"),
    ],
)
def test_last_modified_state_is_rfc3339_utc(time: datetime, text: str) -> None:
    state = encode_source_state(LastModified(time))
    assert (state.kind, state.value, state.source_name) == ("odf/last-modified", text, "default")
    assert decode_source_state(state) == LastModified(time)


def test_unknown_or_unparseable_state_is_ignored() -> None:
    assert decode_source_state(None) is None
    assert decode_source_state(SourceState(source_name="x", kind="odf/other", value="1")) is None
    bad = SourceState(source_name="default", kind="odf/last-modified", value="yesterday")
    assert decode_source_state(bad) is None


def test_rfc3339_parsing() -> None:
    assert parse_rfc3339("2050-01-01T00:00:00+01:00") == datetime(2049, 12, 31, 23, tzinfo=UTC)
    assert parse_rfc3339("2020-01-01T00:00:00.123456789Z").microsecond == 123456
    assert format_rfc3339(parse_rfc3339("2020-01-01 10:00:00z")) == "2020-01-01T10:00:00Z"
    with pytest.raises(ValueError, match="not an RFC 3339"):
        parse_rfc3339("2020-01-01")


def test_from_path_as_in_the_files_glob_test() -> None:
    source = EventTimeSourceFromPath(pattern=r"data-(\d+-\d+-\d+)\.csv")
    assert event_time_from_path(source, "data-2020-10-05.csv") == datetime(2020, 10, 5, tzinfo=UTC)


def test_from_path_formats() -> None:
    with_time = EventTimeSourceFromPath(pattern=r"(\d{8}T\d{4})", timestamp_format="%Y%m%dT%H%M")
    assert event_time_from_path(with_time, "dump-20200102T0930.zip") == datetime(
        2020, 1, 2, 9, 30, tzinfo=UTC
    )
    zoned = EventTimeSourceFromPath(pattern=r"at (.*)$", timestamp_format="%Y-%m-%d %H:%M:%S%:z")
    assert event_time_from_path(zoned, "at 2020-01-02 10:00:00+02:00") == datetime(
        2020, 1, 2, 8, tzinfo=UTC
    )
    fraction = EventTimeSourceFromPath(pattern=r"(\S+)", timestamp_format="%H:%M:%S%.3f")
    assert event_time_from_path(fraction, "12:00:01.250").microsecond == 250000


@pytest.mark.parametrize(
    ("pattern", "fmt", "name", "message"),
    [
        (r"data-(\d+)\.csv", None, "other.csv", "does not match 'other.csv'"),
        (r"data-\d+\.csv", None, "data-1.csv", "has no capture group 1"),
        (
            r"data-(\d+)\.csv",
            None,
            "data-1.csv",
            "cannot parse '1' with timestamp format '%Y-%m-%d'",
        ),
        (r"(", None, "x", "invalid pattern"),
    ],
)
def test_from_path_errors(pattern: str, fmt: str | None, name: str, message: str) -> None:
    source = EventTimeSourceFromPath(pattern=pattern, timestamp_format=fmt)
    with pytest.raises(EventTimeError, match=message):
        event_time_from_path(source, name)


def test_fallback_event_time_by_source_kind() -> None:
    modified = datetime(2021, 1, 1, tzinfo=UTC)
    assert fallback_event_time(None, name="f.csv", modified=modified) == modified
    assert (
        fallback_event_time(EventTimeSourceFromMetadata(), name="f", modified=modified) == modified
    )
    assert fallback_event_time(EventTimeSourceFromSystemTime(), name="f", modified=modified) is None
    path = EventTimeSourceFromPath(pattern=r"(\d{4}-\d{2}-\d{2})")
    assert fallback_event_time(path, name="x-2022-02-03", modified=modified) == datetime(
        2022, 2, 3, tzinfo=UTC
    )
