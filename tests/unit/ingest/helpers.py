"""Builders shared by the ingest tests: real datasets on disk, ledgers as Parquet files."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.odf.events import AddData, MetadataEvent, SetDataSchema
from common.odf.fragments import DatasetKind
from common.odf.snapshot import DatasetSnapshot
from coordinator.dataset import Dataset
from coordinator.ingest.context import data_files
from coordinator.ingest.history import History
from coordinator.ingest.readers.stream import DataStream
from coordinator.workspace import Workspace


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


CREATED = datetime(2000, 1, 1, tzinfo=UTC)
"""When test datasets are created: before every system time the tests write with."""


def new_dataset(tmp_path: Path, *events: MetadataEvent, name: str = "ds") -> Dataset:
    """A root dataset in a fresh workspace under ``tmp_path`` with ``events`` after its Seed."""
    ws = Workspace.init(tmp_path / "ws", exist_ok=True)
    snapshot = DatasetSnapshot(name=name, kind=DatasetKind.ROOT, metadata=tuple(events))
    return ws.create_dataset(snapshot, system_time=CREATED)


def all_data(ds: Dataset) -> pa.Table:
    """Every record of the dataset, in offset order."""
    files = data_files(ds, ds.head())
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")


def rows(table: pa.Table, *columns: str) -> list[tuple[Any, ...]]:
    names = columns or tuple(table.schema.names)
    return [tuple(r[c] for c in names) for r in table.to_pylist()]


def events_of(ds: Dataset) -> list[MetadataEvent]:
    """The dataset's events, oldest first."""
    return [b.event for _, b in reversed(list(ds.iter_blocks()))]


def add_data_events(ds: Dataset) -> list[AddData]:
    return [e for e in events_of(ds) if isinstance(e, AddData)]


def schema_events(ds: Dataset) -> list[SetDataSchema]:
    return [e for e in events_of(ds) if isinstance(e, SetDataSchema)]


def stream(table: pa.Table, max_rows: int = 65536) -> DataStream:
    return DataStream.of_table(table, max_rows)


def ledger_history(tmp_path: Path, ledger: pa.Table) -> History:
    """``ledger`` (op + data columns) stored as one slice with offsets 0.., as history."""
    if ledger.num_rows == 0:
        return History.empty()
    offsets = pa.array(range(ledger.num_rows), pa.int64())
    table = ledger.add_column(0, "offset", offsets)
    path = tmp_path / f"history-{len(list(tmp_path.glob('history-*')))}.parquet"
    pq.write_table(table, path)
    return History([path], table.schema)


def sort_by(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Stable sort, NULLs first, as the writer orders merged records."""
    return table.take(
        pc.sort_indices(table, sort_keys=[(k, "ascending", "at_start") for k in keys])
    )
