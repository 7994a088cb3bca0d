"""Arrow IPC inputs staged as local Parquet files (``engine_spark/staging.py``).

Staging must give the query exactly what ``createDataFrame`` gave it (same values, same Spark
types, same row order), only faster; and the Arrow IPC and Parquet exchanges of the same
records must produce the same output file.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval
from engine_spark.engine import SparkEngine
from engine_spark.staging import STAGED_ROW_GROUP, Staging, arrow_frame, staging_area
from engine_spark.warm_up import one_input_request
from tests.integration.engine.datasets import TS, at, sql

pytestmark = pytest.mark.spark

OLD = datetime(1000, 3, 1, 12, 30, 15, 123000, tzinfo=UTC)
"""Before the Julian-Gregorian cut-over: a Parquet reader that rebases would shift it."""


def every_type() -> pa.Table:
    """Three rows (the last all nulls where possible) of every type an input may have."""
    ns_in_struct = pa.struct([("n", pa.int32()), ("at", pa.timestamp("ns", tz="UTC"))])
    return pa.table(
        {
            "offset": pa.array([0, 1, 2], pa.int64()),
            "u8": pa.array([255, 0, None], pa.uint8()),
            "u64": pa.array([2**63 - 1, 0, None], pa.uint64()),
            "i8": pa.array([-128, 127, None], pa.int8()),
            "i16": pa.array([-1, 1, None], pa.int16()),
            "f32": pa.array([1.5, float("-inf"), None], pa.float32()),
            "f64": pa.array([float("nan"), -0.0, None], pa.float64()),
            "flag": pa.array([True, False, None]),
            "dec": pa.array([Decimal("-12345678.91"), Decimal("0.01"), None], pa.decimal128(10, 2)),
            "wide dec": pa.array([Decimal("1" * 28 + ".0123456789"), Decimal(0), None]),
            "s": pa.array(["é ✓", "", None]),
            "large.s": pa.array(["x" * 1000, "y", None], pa.large_string()),
            "dict": pa.array(["a", "b", None]).dictionary_encode(),
            "bin": pa.array([b"\x00\xff", b"", None], pa.binary()),
            "fixed": pa.array([b"ab", b"cd", None], pa.binary(2)),
            "day": pa.array([date(1, 1, 1), date(9999, 12, 31), None], pa.date32()),
            "ms": pa.array([OLD, at(1), None], TS),
            "ns_berlin": pa.array(
                [-1_500, 1_704_067_200_123_456_789, None], pa.timestamp("ns", tz="Europe/Berlin")
            ),
            "naive": pa.array(
                [datetime(1500, 1, 1), datetime(2024, 1, 1, 1), None], pa.timestamp("us")
            ),
            "ints": pa.array([[1, None, 3], [], None], pa.list_(pa.int32())),
            "strs": pa.array([["a"], [None], None], pa.large_list(pa.large_string())),
            "rec": pa.array([{"n": 1, "at": -1_500}, {"n": None, "at": None}, None], ns_in_struct),
            "recs": pa.array([[{"k": "a", "v": 1.0}], [], None]),
            "tags": pa.array(
                [[("a", 1.0), ("b", None)], [], None], pa.map_(pa.string(), pa.float64())
            ),
        }
    )


def test_staged_inputs_equal_create_data_frame_for_every_type(spark_engine: SparkEngine) -> None:
    session = spark_engine.session
    table = every_type()
    before = arrow_frame(session, table, Staging.OFF)
    with staging_area(True) as staging:
        staged = arrow_frame(session, table, staging)
        assert staging.directory is not None
        (path,) = staging.directory.iterdir()
        assert staged.inputFiles() == [path.as_uri()]
        assert staged.schema.simpleString() == before.schema.simpleString()
        got = staged.toArrow()
    assert not staging.directory.exists()
    want = before.toArrow()
    # Staged columns are nullable like every Parquet input; values and types are the same.
    assert got.schema.equals(pa.schema([f.with_nullable(True) for f in want.schema]))
    # repr: NaN equals itself there (and values keep their exact Python types).
    assert repr(got.to_pylist()) == repr(want.to_pylist())
    assert [r["day"] for r in got.to_pylist()] == [date(1, 1, 1), date(9999, 12, 31), None]
    assert got.column("ms")[0].as_py() == OLD


def test_types_the_parquet_round_trip_cannot_keep_go_through_create_data_frame(
    spark_engine: SparkEngine,
) -> None:
    table = pa.table(
        {
            "offset": pa.array([0, 1], pa.int64()),
            "nothing": pa.nulls(2),
            "Offset": pa.array([5, 6], pa.int64()),
        }
    )
    with staging_area(True) as staging:
        df = arrow_frame(spark_engine.session, table, staging)
        assert df.inputFiles() == []
        assert staging.directory is not None and not any(staging.directory.iterdir())
        assert df.toArrow().column("Offset").to_pylist() == [5, 6]


def test_large_staged_input_keeps_offset_order_across_partitions(
    spark_engine: SparkEngine,
) -> None:
    n = 3 * STAGED_ROW_GROUP + 7
    table = pa.table({"offset": pa.array(range(n), pa.int64()), "v": pa.array(range(n, 0, -1))})
    with staging_area(True) as staging:
        df = arrow_frame(spark_engine.session, table, staging)
        assert df.rdd.getNumPartitions() > 1
        assert df.toArrow().column("offset").to_pylist() == list(range(n))


def _exchange_request(root: Path, data: str, out: str) -> ep.TransformRequest:
    return one_input_request(
        sql(
            "select op, event_time, offset as source_offset, op as source_op, city, tags "
            "from cities where population > 1"
        ),
        "cities",
        (data,),
        root / out,
        system_time=at(100),
        offsets=OffsetInterval(start=1, end=3),
        next_offset=10,
    )


def test_arrow_and_parquet_exchanges_write_identical_outputs(
    spark_engine: SparkEngine, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = pa.table(
        {
            "offset": pa.array([0, 1, 2, 3, 4], pa.int64()),
            "op": pa.array([0, 0, 1, 0, 0], pa.int32()),
            "system_time": pa.array([at(0)] * 5, TS),
            "event_time": pa.array([at(i) for i in range(5)], TS),
            "city": ["A", "B", "C", None, "E"],
            "population": pa.array([5, 6, 7, 8, 9], pa.int64()),
            "tags": pa.array([["x"], [], None, ["y", None], ["z"]]),
        },
        schema=pa.schema(
            [
                pa.field("offset", pa.int64(), nullable=False),
                pa.field("op", pa.int32(), nullable=False),
                pa.field("system_time", TS, nullable=False),
                pa.field("event_time", TS),
                pa.field("city", pa.string()),
                pa.field("population", pa.int64()),
                pa.field("tags", pa.list_(pa.string())),
            ]
        ),
    )
    parquet, arrow = workdir / "in.parquet", workdir / "in.arrow"
    pq.write_table(table, parquet)
    with pa.OSFile(str(arrow), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    staging_root = workdir / "tmp"
    staging_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging_root))

    outputs = {}
    for name, path in (("parquet", parquet), ("arrow", arrow)):
        request = _exchange_request(workdir, str(path), name)
        response = spark_engine.execute_transform(request)
        assert response.new_offset_interval == OffsetInterval(start=10, end=12)
        outputs[name] = pq.read_table(request.new_data_path)

    assert outputs["arrow"].equals(outputs["parquet"])
    assert outputs["arrow"].column("source_offset").to_pylist() == [1, 2, 3]
    assert outputs["arrow"].schema.field("source_offset").nullable
    assert not any(staging_root.iterdir()), "the request's staging directory is removed"
