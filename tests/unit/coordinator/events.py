"""Builders of realistic events for the coordinator tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf.events import AddData, Seed, SetDataSchema
from common.odf.fragments import DatasetKind, DataSlice, OffsetInterval, SourceState
from common.odf.identity import DatasetID
from common.odf.multihash import ARROW0_SHA3_256, Multihash
from common.serde.arrow_schema import encode_arrow_schema

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)

SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64()),
        pa.field("op", pa.int32(), nullable=False),
        pa.field("system_time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("event_time", pa.timestamp("ms", tz="UTC")),
        pa.field("city", pa.string()),
        pa.field("population", pa.int64()),
    ]
)


def seed(name: bytes = b"test", kind: DatasetKind = DatasetKind.ROOT) -> Seed:
    return Seed(dataset_id=DatasetID.new_seeded(name), dataset_kind=kind)


def set_schema(schema: pa.Schema = SCHEMA) -> SetDataSchema:
    return SetDataSchema(schema=encode_arrow_schema(schema))


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def slice_of(
    start: int, end: int, physical: Multihash, size: int, logical: bytes = b"l"
) -> DataSlice:
    return DataSlice(
        logical_hash=Multihash(ARROW0_SHA3_256, logical.ljust(32, b"\0")),
        physical_hash=physical,
        offset_interval=OffsetInterval(start=start, end=end),
        size=size,
    )


def watermark_only(prev_offset: int | None, watermark: datetime) -> AddData:
    return AddData(prev_offset=prev_offset, new_watermark=watermark)


def source_state(value: str, name: str = "default") -> SourceState:
    return SourceState(source_name=name, kind="odf/etag", value=value)


def write_slice(directory: Path, start: int, count: int, *, name: str = "data") -> Path:
    """A Parquet data slice with offsets ``start .. start+count-1`` in ``directory``."""
    offsets = list(range(start, start + count))
    table = pa.table(
        {
            "offset": pa.array(offsets, pa.int64()),
            "op": pa.array([0] * count, pa.int32()),
            "system_time": pa.array([T0] * count, pa.timestamp("ms", tz="UTC")),
            "event_time": pa.array(
                [T0 + timedelta(minutes=o) for o in offsets], pa.timestamp("ms", tz="UTC")
            ),
            "city": pa.array([f"city-{o}" for o in offsets]),
            "population": pa.array([1000 + o for o in offsets], pa.int64()),
        },
        schema=SCHEMA,
    )
    path = directory / name
    pq.write_table(table, path)
    return path


def add_data_for(path: Path, prev_offset: int | None, start: int, count: int) -> AddData:
    """An AddData whose newData describes the Parquet file ``path``."""
    from common.hashing import physical_hash_file

    return AddData(
        prev_offset=prev_offset,
        new_data=slice_of(start, start + count - 1, physical_hash_file(path), path.stat().st_size),
        new_watermark=T0 + timedelta(minutes=start + count - 1),
    )
