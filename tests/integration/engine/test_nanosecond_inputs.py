"""Inputs with nanosecond timestamps (pyarrow's default, e.g. ingested CSV ``TIMESTAMP`` columns).

Spark reads only micro- and millisecond Parquet timestamps; the engine converts nanosecond
columns (truncating to microseconds) before the query sees them, for Parquet and Arrow IPC
inputs, in raw queries and transforms.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval
from tests.integration.engine import client
from tests.integration.engine.datasets import TS, InputDataset, OutputDataset, at, sql

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

NS_UTC = pa.timestamp("ns", tz="UTC")
SEEN_NS = 1_704_067_200_123_456_789
"""2024-01-01T00:00:00.123456789Z."""


def _write(table: pa.Table, path: Path, fmt: str) -> str:
    if fmt == "parquet":
        pq.write_table(table, path)
        assert pq.read_schema(path).field("seen").type == table.schema.field("seen").type
    else:
        with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    return str(path)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_raw_query_reads_nanosecond_timestamps(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path, fmt: str
) -> None:
    table = pa.table(
        {
            "seen": pa.array([SEEN_NS, None, -1_500], NS_UTC),
            "local": pa.array([SEEN_NS, 0, 0], pa.timestamp("ns")),
            "name": ["a", "b", "c"],
        }
    )
    path = _write(table, workdir / "input", fmt)
    output = str(workdir / "out" / "output")
    request = ep.RawQueryRequest(
        input_data_paths=(path,),
        transform=sql(
            "select name, seen, cast(local as string) as local, "
            "unix_micros(seen) as micros from input"
        ),
        output_data_path=output,
    )
    assert client.raw_query(engine_stub, request) == ep.RawQueryResponseSuccess(num_records=3)
    result = pq.read_table(output)
    assert result.schema.field("seen").type == TS
    # -1500 ns is -1 us (truncated toward zero, as pyarrow casts), written as 0 ms.
    assert result.to_pydict() == {
        "name": ["a", "b", "c"],
        "seen": [datetime(2024, 1, 1, 0, 0, 0, 123000, tzinfo=UTC), None, _ms(0)],
        "local": ["2024-01-01 00:00:00.123456", "1970-01-01 00:00:00", "1970-01-01 00:00:00"],
        "micros": [SEEN_NS // 1000, None, -1],
    }


def test_transform_reads_nanosecond_slices_next_to_millisecond_ones(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    """A backlog mixing units: the ms slice and the ns slice are scanned apart, then ordered."""
    src = InputDataset(workdir / "in", "events", pa.schema([("seen", TS), ("n", pa.int64())]))
    src.append([{"event_time": at(0), "seen": at(0), "n": 1}])
    src.data_schema = pa.schema([("seen", NS_UTC), ("n", pa.int64())])
    src.append([{"event_time": at(1), "seen": SEEN_NS, "n": 2}])
    assert pq.read_schema(src.files[0]).field("seen").type == TS
    assert pq.read_schema(src.files[1]).field("seen").type == NS_UTC
    out = OutputDataset(
        workdir / "out", "seen", sql("select event_time, n, unix_micros(seen) as m from events")
    )
    request = out.request([src.take()])
    response = client.transform(engine_stub, request)
    assert response == ep.TransformResponseSuccess(
        new_offset_interval=OffsetInterval(start=0, end=1), new_watermark=None
    )
    result = pq.read_table(request.new_data_path).select(["offset", "event_time", "n", "m"])
    assert result.to_pylist() == [
        {"offset": 0, "event_time": at(0), "n": 1, "m": int(at(0).timestamp()) * 1_000_000},
        {"offset": 1, "event_time": at(1), "n": 2, "m": SEEN_NS // 1000},
    ]


def _ms(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC)
