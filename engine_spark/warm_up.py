"""A small transaction the engine runs once at start-up, before it reports SERVING."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, OffsetInterval, TransformSql, Watermark
from common.odf.identity import DatasetID

WARM_UP_ROWS = 2_000
_T0 = datetime(2000, 1, 1, tzinfo=UTC)
_QUERY = "select event_time, name, value * 2 as doubled from `warm.up` where value % 3 <> 0"


def warm_up_request(directory: Path) -> ep.TransformRequest:
    """Write a Parquet input slice into ``directory`` and return a transform request over it."""
    path = directory / "input"
    n = WARM_UP_ROWS
    stamp = pa.timestamp("ms", tz="UTC")
    pq.write_table(
        pa.table(
            {
                "offset": pa.array(range(n), pa.int64()),
                "op": pa.array([0] * n, pa.int32()),
                "system_time": pa.array([_T0] * n, stamp),
                "event_time": pa.array([_T0 + timedelta(seconds=i) for i in range(n)], stamp),
                "name": [f"n{i % 50}" for i in range(n)],
                "value": pa.array(range(n), pa.int64()),
            }
        ),
        path,
    )
    vocab = DatasetVocabulary()
    return ep.TransformRequest(
        dataset_id=DatasetID.new_seeded(b"warm-up-out"),
        dataset_alias="warm.up.out",
        system_time=_T0,
        vocab=vocab,
        transform=TransformSql(engine="spark", query=_QUERY),
        query_inputs=(
            ep.TransformRequestInput(
                dataset_id=DatasetID.new_seeded(b"warm-up-in"),
                dataset_alias="warm.up",
                query_alias="warm.up",
                vocab=vocab,
                offset_interval=OffsetInterval(start=0, end=n - 1),
                data_paths=(str(path),),
                schema_file=str(path),
                explicit_watermarks=(Watermark(system_time=_T0, event_time=_T0),),
            ),
        ),
        next_offset=0,
        new_checkpoint_path=str(directory / "out" / "checkpoint"),
        new_data_path=str(directory / "out" / "data"),
    )
