"""The data writer on real datasets: the reference's writer tests, schema and commit rules."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.hashing import logical_hash_parquet, physical_hash_file
from common.odf.events import AddPushSource, SetVocab
from common.odf.fragments import (
    MergeStrategy,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    ReadStepCsv,
    SourceState,
)
from common.serde.arrow_schema import decode_arrow_schema
from coordinator.dataset import Dataset
from coordinator.ingest import ordering
from coordinator.ingest.context import chain_context, commit_staged
from coordinator.ingest.errors import BadInputSchemaError
from coordinator.ingest.system_columns import Op
from coordinator.ingest.writer import IncompatibleSchemaError, WriteOptions, stage_write
from tests.unit.ingest.helpers import (
    add_data_events,
    all_data,
    events_of,
    new_dataset,
    rows,
    schema_events,
    stream,
    utc,
)

CITY_POP = pa.schema([("city", pa.string()), ("population", pa.int64())])
SNAPSHOT = MergeStrategySnapshot(primary_key=("city",))
SOURCE = AddPushSource(
    source_name="src",
    read=ReadStepCsv(schema=("city STRING", "population BIGINT")),
    merge=MergeStrategyAppend(),
)


def table(schema: pa.Schema, *records: tuple[Any, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in records], schema)


def append(
    ds: Dataset, data: pa.Table | None, *, day: int = 1, source_state: SourceState | None = None
) -> bool:
    """``write`` with Append at system time 2030-01-``day`` (event time 2000-01-01 for
    records without one)."""
    return write(
        ds,
        MergeStrategyAppend(),
        data,
        system_time=utc(2030, 1, day),
        event_time=utc(2000, 1, 1),
        source_state=source_state,
    )


def write(
    ds: Dataset,
    strategy: MergeStrategy,
    data: pa.Table | None,
    *,
    system_time: datetime,
    event_time: datetime,
    source_state: SourceState | None = None,
    max_rows: int = 65536,
) -> bool:
    """Stage and commit one write; False when there was nothing to commit."""
    state, context = chain_context(ds)
    options = WriteOptions(
        system_time=system_time, fallback_event_time=event_time, new_source_state=source_state
    )
    with ds.staging_dir() as staging:
        data_stream = None if data is None else stream(data, max_rows)
        staged = stage_write(context, strategy, data_stream, options, staging)
        if staged is None:
            return False
        commit_staged(ds, state, staged, system_time)
    return True


def test_happy_path_snapshot(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    abc = [("A", 1000), ("B", 2000), ("C", 3000)]
    assert write(
        ds,
        SNAPSHOT,
        table(CITY_POP, *abc),
        system_time=utc(2010, 1, 1, 12),
        event_time=utc(2000, 1, 1, 12),
    )
    assert rows(all_data(ds)) == [
        (i, 0, utc(2010, 1, 1, 12), utc(2000, 1, 1, 12), c, p) for i, (c, p) in enumerate(abc)
    ]
    assert len(schema_events(ds)) == 1
    assert add_data_events(ds)[-1].new_watermark == utc(2000, 1, 1, 12)

    abcd = table(CITY_POP, *abc, ("D", 4000))
    assert write(
        ds, SNAPSHOT, abcd, system_time=utc(2010, 1, 2, 12), event_time=utc(2000, 1, 2, 12)
    )
    assert rows(all_data(ds))[3:] == [(3, 0, utc(2010, 1, 2, 12), utc(2000, 1, 2, 12), "D", 4000)]
    assert len(schema_events(ds)) == 1
    last = add_data_events(ds)[-1]
    assert last.new_watermark == utc(2000, 1, 2, 12)
    assert last.prev_offset == 2
    assert last.new_data is not None and last.new_data.offset_interval.start == 3

    head = ds.head()
    assert not write(
        ds, SNAPSHOT, abcd, system_time=utc(2010, 1, 3, 12), event_time=utc(2000, 1, 3, 12)
    )
    assert ds.head() == head

    state = SourceState(source_name="default", kind="odf/etag", value="123")
    assert write(
        ds,
        SNAPSHOT,
        abcd,
        system_time=utc(2010, 1, 4, 12),
        event_time=utc(2000, 1, 4, 12),
        source_state=state,
    )
    last = add_data_events(ds)[-1]
    assert last.new_data is None
    assert last.new_watermark == utc(2000, 1, 2, 12)
    assert last.new_source_state == state
    assert last.prev_offset == 3


def test_append_orders_by_event_time_and_keeps_dates(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    schema = pa.schema(
        [("event_time", pa.date32()), ("city", pa.string()), ("population", pa.int64())]
    )
    data = table(
        schema,
        (date(2021, 1, 1), "A", 1000),
        (date(2023, 1, 1), "B", 2000),
        (date(2022, 1, 1), "C", 3000),
    )
    assert write(
        ds, MergeStrategyAppend(), data, system_time=utc(2010, 1, 1), event_time=utc(2000, 1, 1)
    )
    out = all_data(ds)
    assert rows(out, "offset", "event_time", "city") == [
        (0, date(2021, 1, 1), "A"),
        (1, date(2022, 1, 1), "C"),
        (2, date(2023, 1, 1), "B"),
    ]
    assert out.schema.field("event_time").type == pa.date32()
    assert add_data_events(ds)[-1].new_watermark == utc(2023, 1, 1)


def test_snapshot_orders_by_primary_key_then_operation(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    first = table(CITY_POP, ("C", 3000), ("A", 1000), ("D", 4000), ("B", 2000))
    write(ds, SNAPSHOT, first, system_time=utc(2010, 1, 1, 12), event_time=utc(2000, 1, 1, 12))
    assert rows(all_data(ds), "offset", "city") == [(0, "A"), (1, "B"), (2, "C"), (3, "D")]

    second = table(CITY_POP, ("C", 3000), ("B", 4000), ("D", 5000))
    write(ds, SNAPSHOT, second, system_time=utc(2010, 1, 2, 12), event_time=utc(2000, 1, 2, 12))
    t1, t2, s2 = utc(2000, 1, 1, 12), utc(2000, 1, 2, 12), utc(2010, 1, 2, 12)
    assert rows(all_data(ds))[4:] == [
        (4, Op.RETRACT, s2, t1, "A", 1000),
        (5, Op.CORRECT_FROM, s2, t1, "B", 2000),
        (6, Op.CORRECT_TO, s2, t2, "B", 4000),
        (7, Op.CORRECT_FROM, s2, t1, "D", 4000),
        (8, Op.CORRECT_TO, s2, t2, "D", 5000),
    ]
    assert add_data_events(ds)[-1].new_watermark == t2


def test_output_schema_parquet_layout_and_hashes(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    schema = pa.schema([("city", pa.string()), ("when", pa.timestamp("ns")), ("n", pa.int32())])
    data = table(schema, ("A", datetime(2020, 1, 1, 0, 0, 0, 999), 1), ("B", None, 2))
    write(ds, MergeStrategyAppend(), data, system_time=utc(2010, 1, 1), event_time=utc(2000, 1, 1))
    (event,) = add_data_events(ds)
    assert event.new_data is not None
    path = ds.data_path(event.new_data.physical_hash)
    expected = pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=True),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", pa.timestamp("ms", "UTC"), nullable=False),
            pa.field("event_time", pa.timestamp("ms", "UTC"), nullable=True),
            pa.field("city", pa.string()),
            pa.field("when", pa.timestamp("ms", "UTC")),
            pa.field("n", pa.int32()),
        ]
    )
    file = pq.ParquetFile(path)
    assert file.schema_arrow.remove_metadata().equals(expected, check_metadata=False)
    assert decode_arrow_schema(schema_events(ds)[0].schema).equals(expected)
    assert file.metadata.num_row_groups == 1
    group = file.metadata.row_group(0)
    for i in range(3):
        assert group.column(i).compression == "SNAPPY"
    for i in (1, 2):
        assert "RLE_DICTIONARY" in group.column(i).encodings
    assert rows(file.read(), "event_time", "when")[0] == (utc(2000, 1, 1), utc(2020, 1, 1))
    assert event.new_data.logical_hash == logical_hash_parquet(path)
    assert event.new_data.physical_hash == physical_hash_file(path)
    assert event.new_data.size == path.stat().st_size


def test_unsorted_input_is_sorted_stably_through_spilled_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ordering, "RUN_BYTES", 2000)
    ds = new_dataset(tmp_path, SOURCE)
    schema = pa.schema([("event_time", pa.timestamp("ms", "UTC")), ("n", pa.int64())])
    # In order for the first 300 records (written straight to the file), then shuffled.
    keys = list(range(300)) + [(i * 7919) % 50 for i in range(700)]
    data = table(schema, *((utc(2020, 1, 1, 0, k % 60), i) for i, k in enumerate(keys)))
    write(
        ds,
        MergeStrategyLedger(primary_key=("n",)),
        data,
        system_time=utc(2030, 1, 1),
        event_time=utc(2000, 1, 1),
        max_rows=64,
    )
    out = all_data(ds)
    expected = sorted(range(1000), key=lambda i: (keys[i] % 60, i))
    assert out.column("n").to_pylist() == expected
    assert out.column("offset").to_pylist() == list(range(1000))
    (event,) = add_data_events(ds)
    assert event.new_data is not None
    assert event.new_data.logical_hash == logical_hash_parquet(
        ds.data_path(event.new_data.physical_hash)
    )
    assert not list(tmp_path.rglob("*.arrow")) and not list(tmp_path.rglob("*.run"))


def test_null_event_times_get_the_fallback(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    schema = pa.schema([("event_time", pa.date32()), ("city", pa.string())])
    data = table(schema, (date(2020, 5, 5), "A"), (None, "B"))
    write(
        ds,
        MergeStrategyAppend(),
        data,
        system_time=utc(2030, 1, 1),
        event_time=utc(2021, 3, 4, 23, 59),
    )
    assert rows(all_data(ds), "event_time", "city") == [
        (date(2020, 5, 5), "A"),
        (date(2021, 3, 4), "B"),
    ]


def test_custom_vocabulary(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE, SetVocab(event_time_column="date", offset_column="idx"))
    schema = pa.schema([("date", pa.timestamp("s")), ("city", pa.string())])
    append(ds, table(schema, (datetime(2020, 1, 1), "A")))
    out = all_data(ds)
    assert out.schema.names == ["idx", "op", "system_time", "date", "city"]
    assert add_data_events(ds)[-1].new_watermark == utc(2020, 1, 1)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            pa.schema([("offset", pa.int64()), ("city", pa.string())]),
            "column 'offset', which is a system column",
        ),
        (pa.schema([("op", pa.int32())]), "'op', which is a system column"),
        (
            pa.schema([("event_time", pa.string())]),
            "event time column 'event_time' must be a DATE or TIMESTAMP",
        ),
    ],
)
def test_bad_input_schema(tmp_path: Path, schema: pa.Schema, message: str) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    head = ds.head()
    with pytest.raises(BadInputSchemaError, match=message):
        append(ds, schema.empty_table())
    assert ds.head() == head


def test_added_column_writes_a_new_schema_and_other_changes_fail(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    append(ds, table(CITY_POP, ("A", 1)))
    wider = CITY_POP.append(pa.field("area", pa.float64()))
    append(ds, table(wider, ("B", 2, 1.5)), day=2)
    assert [decode_arrow_schema(e.schema).names[-1] for e in schema_events(ds)] == [
        "population",
        "area",
    ]
    assert rows(all_data(ds), "city", "area") == [("A", None), ("B", 1.5)]

    head = ds.head()
    changed = pa.schema(
        [("city", pa.string()), ("population", pa.string()), ("area", pa.float64())]
    )
    with pytest.raises(IncompatibleSchemaError, match="column 'population' changed type"):
        append(ds, table(changed, ("C", "3", 1.0)), day=3)
    assert ds.head() == head


def test_nullability_alone_is_not_a_schema_change(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    strict = pa.schema([pa.field("city", pa.string(), nullable=False), ("population", pa.int64())])
    append(ds, table(strict, ("A", 1)))
    append(ds, table(CITY_POP, ("B", 2)), day=2)
    assert len(schema_events(ds)) == 1
    assert all_data(ds).num_rows == 2


def test_no_data_commits_only_a_changed_source_state(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE)
    state = SourceState(source_name="default", kind="odf/etag", value="1")
    assert not append(ds, None)
    assert append(ds, None, source_state=state)
    assert not append(ds, None, day=2, source_state=state)
    assert schema_events(ds) == []  # no data frame, no schema
    # A data frame with zero records still establishes the schema when a commit happens.
    state2 = SourceState(source_name="default", kind="odf/etag", value="2")
    assert append(ds, CITY_POP.empty_table(), day=3, source_state=state2)
    assert len(schema_events(ds)) == 1
    assert [type(e).__name__ for e in events_of(ds)][-2:] == ["SetDataSchema", "AddData"]
    assert add_data_events(ds)[-1].new_data is None
