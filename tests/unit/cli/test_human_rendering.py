"""One rendering for people: times, counts, booleans and hashes in tables (``common.humanize``,
``coordinator.cli.output``)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, timezone

import pytest

from common.humanize import human_time, human_value, plural
from common.odf.multihash import Multihash
from coordinator.cli.output import render_rows, short_hashes


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2026, 11, 28, 9, 41, 13, tzinfo=UTC), "2026-11-28T09:41:13Z"),
        (datetime(2026, 11, 28, 9, 41, 13, 250000, tzinfo=UTC), "2026-11-28T09:41:13.250Z"),
        (datetime(2026, 11, 28, 9, 41, 13, 250001, tzinfo=UTC), "2026-11-28T09:41:13.250001Z"),
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),
        (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), "9999-12-31T23:59:59.999Z"),
        (
            datetime(2026, 11, 28, 10, 41, 13, tzinfo=timezone(timedelta(hours=1))),
            "2026-11-28T09:41:13Z",
        ),
        (datetime(2026, 11, 28, 9, 41, 13), "2026-11-28T09:41:13"),  # no zone: none invented
    ],
)
def test_human_time(value: datetime, text: str) -> None:
    assert human_time(value) == text


def test_nanoseconds_of_a_pandas_timestamp() -> None:
    pd = pytest.importorskip("pandas")
    assert human_time(pd.Timestamp("2026-11-28T09:41:13.000000001Z")) == (
        "2026-11-28T09:41:13.000000001Z"
    )


def test_plurals_and_values() -> None:
    assert [plural(n, "record") for n in (0, 1, 2)] == ["0 records", "1 record", "2 records"]
    assert (
        plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
    )
    assert [human_value(v) for v in (True, False, None, 1.5)] == ["true", "false", "", "1.5"]


def test_short_hashes_are_the_shortest_unique_prefixes() -> None:
    a = "f1620" + "ab" * 32
    b = "f1620" + "ab" * 5 + "cd" * 27
    assert short_hashes([a, a]) == [a[:13], a[:13]]
    assert short_hashes([a, b]) == [a[:16], b[:16]]  # distinct from the 16th character on
    assert short_hashes([a, ""]) == [a[:13], ""]


def test_a_table_shows_people_values_and_a_machine_format_exact_ones() -> None:
    h = Multihash(0x16, bytes(range(32)))
    when = datetime(2026, 11, 28, 9, 41, 13, 250000, tzinfo=UTC)
    rows = [{"hash": h, "at": when, "ok": True}]
    table = io.StringIO()
    render_rows(rows, ("hash", "at", "ok"), "table", out=table)
    assert table.getvalue().splitlines()[1].split() == [
        str(h)[:13],
        "2026-11-28T09:41:13.250Z",
        "true",
    ]
    wide = io.StringIO()
    render_rows(rows, ("hash", "at", "ok"), "table", out=wide, wide=True)
    assert str(h) in wide.getvalue()
    csv = io.StringIO()
    render_rows(rows, ("hash", "at", "ok"), "csv", out=csv)
    assert csv.getvalue().splitlines()[1] == f"{h},2026-11-28T09:41:13.250000Z,true"
