"""A small transaction the engine runs once at start-up, before it reports SERVING."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf import engine_protocol as ep
from common.odf.fragments import (
    DatasetVocabulary,
    OffsetInterval,
    Transform,
    TransformSql,
    Watermark,
)
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
    return one_input_request(
        TransformSql(engine="spark", query=_QUERY),
        "warm.up",
        (str(path),),
        directory / "out",
        system_time=_T0,
        offsets=OffsetInterval(start=0, end=n - 1),
        watermark=_T0,
    )


def one_input_request(
    transform: Transform,
    alias: str,
    data_paths: Sequence[str],
    out_dir: Path,
    *,
    system_time: datetime,
    offsets: OffsetInterval | None,
    schema_file: str | None = None,
    watermark: datetime | None = None,
    next_offset: int = 0,
    prev_checkpoint_path: str | None = None,
) -> ep.TransformRequest:
    """A request to transform the slice files of one input (query alias and dataset alias
    ``alias``; schema from ``schema_file``, else the first file) into ``out_dir``'s ``data``
    and ``checkpoint``: the warm-up's shape, which benchmarks and tests use too."""
    vocab = DatasetVocabulary()
    return ep.TransformRequest(
        dataset_id=DatasetID.new_seeded(f"{alias}.out".encode()),
        dataset_alias=f"{alias}.out",
        system_time=system_time,
        vocab=vocab,
        transform=transform,
        query_inputs=(
            ep.TransformRequestInput(
                dataset_id=DatasetID.new_seeded(alias.encode()),
                dataset_alias=alias,
                query_alias=alias,
                vocab=vocab,
                offset_interval=offsets,
                data_paths=tuple(data_paths),
                schema_file=schema_file or data_paths[0],
                explicit_watermarks=(
                    ()
                    if watermark is None
                    else (Watermark(system_time=system_time, event_time=watermark),)
                ),
            ),
        ),
        next_offset=next_offset,
        prev_checkpoint_path=prev_checkpoint_path,
        new_checkpoint_path=str(out_dir / "checkpoint"),
        new_data_path=str(out_dir / "data"),
    )
