"""Staging of Arrow IPC inputs: which tables are staged, their values, the directory's life."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    DayTimeIntervalType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from engine_spark.staging import spark_values, stageable, stages_locally, staging_area


def test_only_local_masters_stage() -> None:
    assert stages_locally("local[2]") and stages_locally("local[*]")
    assert not stages_locally("spark://spark:7077")
    assert not stages_locally("yarn")


def struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, t) for name, t in fields])  # type: ignore[arg-type]


def test_stageable_types_round_trip_through_parquet_exactly() -> None:
    nested = struct(
        ("tags", MapType(StringType(), ArrayType(struct(("at", TimestampType()))))),
        ("n", LongType()),
    )
    assert stageable(nested)
    assert not stageable(struct())
    assert not stageable(struct(("a", LongType()), ("A", LongType())))
    assert not stageable(struct(("x", ArrayType(struct(("a", LongType()), ("A", LongType()))))))
    for odd in (NullType(), DayTimeIntervalType(), TimestampNTZType(), struct()):
        assert not stageable(struct(("n", LongType()), ("odd", odd)))


def test_spark_values_are_what_create_data_frame_sends() -> None:
    rec = pa.struct([("at", pa.timestamp("ns", tz="UTC"))])
    table = pa.table(
        {
            "naive": pa.array([datetime(2024, 1, 1, 1)], pa.timestamp("us")),
            "rec": pa.array([{"at": -1_500}], rec),
            "s": pa.array(["x"], pa.string()),
        },
        schema=pa.schema(
            [
                pa.field("naive", pa.timestamp("us"), nullable=False),
                pa.field("rec", rec),
                pa.field("s", pa.string(), nullable=False),
            ]
        ),
    )
    schema = struct(
        ("naive", TimestampType()), ("rec", struct(("at", TimestampType()))), ("s", StringType())
    )
    values = spark_values(table, schema)
    assert values.schema == pa.schema(
        [
            pa.field("naive", pa.timestamp("us", tz="UTC")),
            pa.field("rec", pa.struct([("at", pa.timestamp("us", tz="UTC"))])),
            pa.field("s", pa.string()),
        ]
    )
    # Naive timestamps are taken as UTC; nested nanoseconds are floored (as PySpark does).
    assert values.column("naive")[0].as_py() == datetime(2024, 1, 1, 1, tzinfo=UTC)
    assert values.column("rec")[0].as_py() == {
        "at": datetime(1969, 12, 31, 23, 59, 59, 999998, tzinfo=UTC)
    }


def test_staging_directory_is_removed_even_when_the_request_fails() -> None:
    with pytest.raises(RuntimeError), staging_area(True) as staging:
        path = staging.write(pa.table({"a": [1]}))
        assert staging.directory is not None and path.startswith(str(staging.directory))
        raise RuntimeError("query failed")
    assert staging.directory is not None and not staging.directory.exists()
    with staging_area(False) as off:
        assert off.directory is None
        with pytest.raises(ValueError):
            off.write(pa.table({"a": [1]}))
