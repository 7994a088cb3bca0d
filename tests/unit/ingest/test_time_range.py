"""Timestamps in every year ODF stores (1-9999, timestamp[ms]) are ingested and shown;
values outside that range are refused with a one-line error."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf.events import AddPushSource, SetVocab
from common.odf.fragments import (
    EventTimeSourceFromPath,
    MergeStrategyAppend,
    ReadStepCsv,
    ReadStepJson,
    ReadStepNdJson,
    ReadStepParquet,
)
from coordinator.cli.output import render_rows
from coordinator.dataset.describe import describe_event
from coordinator.ingest.errors import ReadError
from coordinator.ingest.event_time import event_time_from_path
from coordinator.ingest.push import push_ingest
from coordinator.query.display import table_rows
from tests.unit.ingest.helpers import add_data_events, all_data, new_dataset

SCHEMA = ("t TIMESTAMP", "s STRING")
TIMES = [
    ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
    ("1500-06-01T12:30:00.5+02:00", datetime(1500, 6, 1, 10, 30, 0, 500000, tzinfo=UTC)),
    ("3000-01-01 00:00:00.123456789", datetime(3000, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)),
    ("9999-12-31T23:59:59.999Z", datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
]


def source(read: object) -> AddPushSource:
    return AddPushSource(source_name="src", read=read, merge=MergeStrategyAppend())  # type: ignore[arg-type]


def write_input(tmp_path: Path, kind: str) -> tuple[object, Path]:
    path = tmp_path / f"in.{kind}"
    texts = [t for t, _ in TIMES]
    if kind == "ndjson":
        path.write_text("".join(f'{{"t": "{t}", "s": "{i}"}}\n' for i, t in enumerate(texts)))
        return ReadStepNdJson(schema=SCHEMA), path
    if kind == "json":
        items = ", ".join(f'{{"t": "{t}", "s": "{i}"}}' for i, t in enumerate(texts))
        path.write_text(f'{{"rows": [{items}]}}')
        return ReadStepJson(schema=SCHEMA, sub_path="rows"), path
    if kind == "csv":
        path.write_text("t,s\n" + "".join(f"{t},{i}\n" for i, t in enumerate(texts)))
        return ReadStepCsv(header=True, schema=SCHEMA), path
    values = pa.array([v for _, v in TIMES], pa.timestamp("ms", "UTC"))
    pq.write_table(pa.table({"t": values, "s": [str(i) for i in range(4)]}), path)
    return ReadStepParquet(schema=SCHEMA), path


@pytest.mark.parametrize("kind", ["ndjson", "json", "csv", "parquet"])
def test_years_1_to_9999_are_ingested_and_shown(tmp_path: Path, kind: str) -> None:
    read, path = write_input(tmp_path, kind)
    ds = new_dataset(tmp_path, source(read), SetVocab(event_time_column="t"))
    push_ingest(ds, path, name=path.name)
    data = all_data(ds)
    assert data.schema.field("t").type == pa.timestamp("ms", "UTC")
    assert data.column("t").to_pylist() == [v for _, v in TIMES]
    add_data = add_data_events(ds)[-1]
    assert add_data.new_watermark == datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert "watermark=9999-12-31T23:59:59.999Z" in describe_event(add_data)
    out = io.StringIO()
    render_rows(table_rows(data), data.column_names, "csv", out=out)
    assert [line.split(",")[3] for line in out.getvalue().splitlines()[1:]] == [
        "0001-01-01T00:00:00Z",
        "1500-06-01T10:30:00.500000Z",
        "3000-01-01T00:00:00.123000Z",
        "9999-12-31T23:59:59.999000Z",
    ]


def test_the_fallback_event_time_and_from_path_cover_every_year(tmp_path: Path) -> None:
    path = tmp_path / "a.ndjson"
    path.write_text('{"s": "x"}\n')
    ds = new_dataset(tmp_path, source(ReadStepNdJson(schema=("s STRING",))))
    push_ingest(ds, path, event_time=datetime(1, 1, 1, tzinfo=UTC))
    push_ingest(ds, path, event_time=datetime(9999, 12, 31, tzinfo=UTC))
    assert all_data(ds).column("event_time").to_pylist() == [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, tzinfo=UTC),
    ]
    from_path = EventTimeSourceFromPath(pattern=r"day-(\d{4}-\d{2}-\d{2})\.csv")
    assert event_time_from_path(from_path, "day-0001-01-01.csv") == datetime(1, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (
            '{"t": "2020-01-01T00:00:00Z"}\n{"t": "0001-01-01T00:30:00+01:00"}\n',
            "a.ndjson:2: field 't': TIMESTAMP '0001-01-01T00:30:00+01:00' is outside years 1"
            " to 9999 (UTC)",
        ),
        ('{"t": "+10000-01-01T00:00:00Z"}\n', "a.ndjson:1: field 't': invalid TIMESTAMP"),
    ],
)
def test_times_outside_years_1_to_9999_are_refused(
    tmp_path: Path, content: str, error: str
) -> None:
    ds = new_dataset(tmp_path, source(ReadStepNdJson(schema=("t TIMESTAMP",))))
    head = ds.head()
    path = tmp_path / "a.ndjson"
    path.write_text(content)
    with pytest.raises(ReadError) as e:
        push_ingest(ds, path, name="a.ndjson")
    assert str(e.value) == error or str(e.value).startswith(error)
    assert ds.head() == head


def test_parquet_times_outside_years_1_to_9999_are_refused(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, source(ReadStepParquet(schema=("t TIMESTAMP(3)",))))
    head = ds.head()
    for millis, shown in ((-62135596801000, "0000-12-31 23:59:59"), (253402300800000, "10000")):
        path = tmp_path / "a.parquet"
        pq.write_table(pa.table({"t": pa.array([0, millis], pa.timestamp("ms", "UTC"))}), path)
        with pytest.raises(ReadError, match=f"^a.parquet: column 't': '{shown}.*' is outside"):
            push_ingest(ds, path, name="a.parquet")
    assert ds.head() == head
