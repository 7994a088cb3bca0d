"""Watermark rules and the checkpoint format (pure)."""

from __future__ import annotations

import io
import tarfile
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from common.odf.fragments import Watermark
from common.odf.identity import DatasetID
from engine_spark.checkpoint import (
    EngineCheckpoint,
    TemporalState,
    decode_checkpoint,
    encode_checkpoint,
)
from engine_spark.errors import InputDataError
from engine_spark.watermark import (
    input_watermark,
    is_late,
    off_millisecond_key,
    output_watermark,
    spark_eviction_watermark,
    spark_late_watermark,
    spark_output_margin,
    window_bound,
)


def t(h: int) -> datetime:
    return datetime(2024, 1, 1, h, tzinfo=UTC)


def wm(h: int) -> Watermark:
    return Watermark(system_time=t(0), event_time=t(h))


def test_input_watermark_is_the_newest_and_never_moves_back() -> None:
    assert input_watermark([wm(3), wm(5), wm(4)], None) == t(5)
    assert input_watermark([wm(3)], t(6)) == t(6)
    assert input_watermark([], t(2)) == t(2)
    assert input_watermark([], None) is None


def test_output_watermark_is_the_minimum_and_monotonic() -> None:
    assert output_watermark([t(4), t(2), None], None) == t(2)
    assert output_watermark([t(4), t(2)], t(3)) == t(3)
    assert output_watermark([None], t(3)) == t(3)
    assert output_watermark([None, None], None) is None


def test_output_watermark_lags_exactly() -> None:
    assert output_watermark([t(4), t(3)], None, timedelta(hours=1)) == t(2)
    assert output_watermark([t(4)], t(3), timedelta(hours=2)) == t(3)
    # down to the millisecond the output's rows are written in
    lag = timedelta(hours=1) - timedelta(microseconds=1)
    assert output_watermark([t(4)], None, lag) == t(3)
    assert output_watermark([t(4) - timedelta(microseconds=1)], None, timedelta(0)) == (
        t(4) - timedelta(milliseconds=1)
    )


H, DAY, MICRO = timedelta(hours=1), timedelta(days=1), timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("watermark", "width", "slide", "offset", "by_start", "by_end"),
    [
        # daily tumbling windows: on a window's start the watermark is the bound itself
        (datetime(2000, 1, 8, tzinfo=UTC), DAY, DAY, 0 * H, datetime(2000, 1, 8, tzinfo=UTC), None),
        (
            datetime(2000, 1, 7, 1, tzinfo=UTC),
            DAY,
            DAY,
            0 * H,
            datetime(2000, 1, 7, tzinfo=UTC),
            None,
        ),
        (t(1) - MICRO, H, H, 0 * H, t(0), t(1)),  # the last microsecond of an hour
        (t(1), H, H, 0 * H, t(1), t(2)),
        # two hours sliding by one: the earliest window still open started an hour before
        (t(3), 2 * H, H, 0 * H, t(2), t(4)),
        (t(3) + H / 2, 2 * H, H, 0 * H, t(2), t(4)),
        # a day sliding by six hours from 01:00
        (t(1), DAY, 6 * H, H, t(1) - 18 * H, t(7)),
        (t(2), DAY, 6 * H, H, t(1) - 18 * H, t(7)),
        (t(7), DAY, 6 * H, H, t(7) - DAY + 6 * H, t(13)),
    ],
)
def test_a_window_aggregations_output_watermark_is_the_earliest_window_still_to_come(
    watermark: datetime,
    width: timedelta,
    slide: timedelta,
    offset: timedelta,
    by_start: datetime,
    by_end: datetime | None,
) -> None:
    """Every window still to come ends after the watermark (a record at the watermark is on
    time and opens the window containing it): by start, the first grid start after
    ``watermark - width``; by end, that window's end would be a bound after the watermark, but
    the watermark itself is what the reference engines pass through, so it is returned."""
    grid = {"width": width, "slide": slide, "offset": offset}
    assert window_bound(watermark, **grid, by_end=False) == by_start
    assert (by_end or by_start + width) > watermark
    assert window_bound(watermark, **grid, by_end=True) == watermark
    # exact: the window starting there is still open, the one a slide before is closed
    assert by_start + width > watermark >= by_start - slide + width


def test_a_record_is_late_only_before_the_watermark() -> None:
    us = timedelta(microseconds=1)
    assert not is_late(t(2), t(2))
    assert is_late(t(2) - us, t(2))
    assert not is_late(t(3), t(2))
    table = pa.table({"e": pa.array([t(1), t(2), t(3), None], pa.timestamp("us", tz="UTC"))})
    late = is_late(pc.field("e"), pa.scalar(t(2), table.schema.field("e").type))
    assert table.filter(late).column("e").to_pylist() == [t(1)]
    assert table.filter(~late).column("e").to_pylist() == [t(2), t(3)]


A, B = DatasetID.new_seeded(b"a"), DatasetID.new_seeded(b"b")


MS = timedelta(milliseconds=1)
US = timedelta(microseconds=1)
T = datetime(2024, 1, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("watermark", "late", "windows", "points"),
    [
        (T, T - MS, T, T - MS),  # on a whole millisecond
        (T + 500 * US, T, T, T),  # inside one
        (T + US, T, T, T),
    ],
)
def test_spark_watermarks_follow_the_odf_rules(
    watermark: datetime, late: datetime, windows: datetime, points: datetime
) -> None:
    """Spark drops a record at or below its late watermark, so it gets the last millisecond
    strictly below the ODF one (a record at it is on time); it closes a window ending at or
    below its eviction watermark (window ends are whole milliseconds), and a point key at or
    below it (the key at the watermark stays open)."""
    assert spark_late_watermark(watermark) == late
    assert not is_late(watermark, watermark) and is_late(watermark - US, watermark)
    assert spark_eviction_watermark(watermark, points=False) == windows
    assert spark_eviction_watermark(watermark, points=True) == points
    assert points < watermark  # Spark closes keys <= points: the key at the watermark stays
    assert spark_output_margin(watermark, points=False) == timedelta(0)
    # a key off a whole millisecond held between Spark's eviction watermark and the ODF one
    held = watermark - US
    assert spark_output_margin(watermark, points=True, off_millisecond=held) == (
        watermark - points - US
    )
    # none held there: Spark's eviction is exact
    assert spark_output_margin(watermark, points=True) == timedelta(0)
    assert spark_output_margin(watermark, points=True, off_millisecond=points) == timedelta(0)


def test_an_off_millisecond_key_is_kept_until_spark_evicts_it() -> None:
    key = T + 500 * US
    assert off_millisecond_key(None, None, T) is None
    assert off_millisecond_key(key, None, T) == key  # above the eviction watermark: held
    assert off_millisecond_key(key - US, key, T) == key  # the newer one
    assert off_millisecond_key(None, key, T + MS) is None  # evicted


def test_checkpoint_round_trips_and_is_deterministic() -> None:
    one = EngineCheckpoint(input_watermarks={A: t(1), B: t(2)}, output_watermark=t(1))
    other = EngineCheckpoint(input_watermarks={B: t(2), A: t(1)}, output_watermark=t(1))
    data = encode_checkpoint(one)
    assert data == encode_checkpoint(other)
    assert decode_checkpoint(data) == one
    assert b'"watermark":"2024-01-01T01:00:00.000000Z"' in data


def test_reference_spark_checkpoint_tar_is_read() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        content = b"2024-01-01T05:00:00.123456789Z"
        info = tarfile.TarInfo(f"{A.to_did()[len('did:odf:') :]}.watermark")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    state = decode_checkpoint(buf.getvalue())
    assert state.input_watermarks == {A: t(5).replace(microsecond=123456)}


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"garbage", "not an engine checkpoint"),
        (b'{"format": "other"}', "checkpoint format"),
        (b'{"format": "odf-py/engine-spark/checkpoint", "version": 9}', "version 9"),
        (
            b'{"format": "odf-py/engine-spark/checkpoint", "version": 1, '
            b'"inputs": [{"datasetId": "did:odf:zz", "watermark": "x"}]}',
            "inputs[0]",
        ),
    ],
)
def test_bad_checkpoints_are_named(data: bytes, words: str) -> None:
    with pytest.raises(InputDataError, match=r".*") as info:
        decode_checkpoint(data, path="/in/cp")
    assert words in str(info.value)
    assert str(info.value).startswith("/in/cp")


def test_checkpoint_with_temporal_tables_is_a_deterministic_tar() -> None:
    state = TemporalState(primary_key=("k",), parquet=b"PAR1 fake PAR1")
    one = EngineCheckpoint(
        input_watermarks={A: t(1)},
        temporal_tables={"rates": state, "b": TemporalState(primary_key=("x", "y"), parquet=b"")},
    )
    data = encode_checkpoint(one)
    assert tarfile.is_tarfile(io.BytesIO(data))
    assert data == encode_checkpoint(one)
    assert decode_checkpoint(data) == one
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getnames() == [
            "checkpoint.json",
            "temporal/0000.parquet",
            "temporal/0001.parquet",
        ]
        assert {m.mtime for m in tar.getmembers()} == {0}
