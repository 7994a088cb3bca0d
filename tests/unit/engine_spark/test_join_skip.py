"""When a recomputed join's second query (new left records against kept right ones) can
find no pair and is skipped (``interval_join.may_match``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine_spark.stateful.interval_join import may_match

T0 = datetime(2024, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_kept_right_record_older_than_the_right_bound_cannot_match() -> None:
    # right records match left ones up to 1 ms before them: a right record 12 ms before
    # the oldest new left record cannot match
    assert not may_match((at(10.012), at(20)), (at(10), at(10)), timedelta(minutes=5), MS)
    assert may_match((at(10.001), at(20)), (at(10), at(10)), timedelta(minutes=5), MS)


def test_a_kept_right_record_newer_than_the_left_bound_cannot_match() -> None:
    assert not may_match((at(0), at(1)), (at(400), at(500)), timedelta(minutes=5), MS)
    assert may_match((at(0), at(1)), (at(300), at(500)), timedelta(minutes=5), MS)


def test_nothing_on_either_side_matches_nothing() -> None:
    assert not may_match(None, (at(0), at(1)), MS, MS)
    assert not may_match((at(0), at(1)), None, MS, MS)
