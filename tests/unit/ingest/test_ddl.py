"""DDL schema strings to Arrow, as the reference maps them (plus TIMESTAMP(p))."""

from __future__ import annotations

import pyarrow as pa
import pytest

from coordinator.ingest.ddl import parse_ddl_schema
from coordinator.ingest.errors import SchemaError

UTC_NS = pa.timestamp("ns", "UTC")


@pytest.mark.parametrize(
    ("ddl", "dtype"),
    [
        ("BOOLEAN", pa.bool_()),
        ("bool", pa.bool_()),
        ("TINYINT", pa.int8()),
        ("SMALLINT", pa.int16()),
        ("INT", pa.int32()),
        ("INTEGER", pa.int32()),
        ("BIGINT", pa.int64()),
        ("INT UNSIGNED", pa.uint32()),
        ("BIGINT UNSIGNED", pa.uint64()),
        ("FLOAT", pa.float32()),
        ("REAL", pa.float32()),
        ("DOUBLE", pa.float64()),
        ("STRING", pa.string()),
        ("VARCHAR", pa.string()),
        ("VARCHAR(20)", pa.string()),
        ("TEXT", pa.string()),
        ("CHAR(3)", pa.string()),
        ("DATE", pa.date32()),
        ("TIMESTAMP", UTC_NS),
        ("TIMESTAMP WITH TIME ZONE", UTC_NS),
        ("TIMESTAMP(3)", pa.timestamp("ms", "UTC")),
        ("TIMESTAMP(6)", pa.timestamp("us", "UTC")),
        ("TIME", pa.time64("ns")),
        ("DECIMAL(10,2)", pa.decimal128(10, 2)),
        ("DECIMAL", pa.decimal128(38, 10)),
        ("NUMERIC(5)", pa.decimal128(5, 0)),
        ("DECIMAL(40,2)", pa.decimal256(40, 2)),
        ("BYTEA", pa.binary()),
        ("INT[]", pa.list_(pa.int32())),
        ("ARRAY<INT>", pa.list_(pa.int32())),
        ("ARRAY<ARRAY<STRING>>", pa.list_(pa.list_(pa.string()))),
        ("INTERVAL", pa.month_day_nano_interval()),
    ],
)
def test_type_mapping(ddl: str, dtype: pa.DataType) -> None:
    schema = parse_ddl_schema([f"c {ddl}"])
    assert schema.field("c").type == dtype
    assert schema.field("c").nullable


def test_names_nullability_and_order() -> None:
    schema = parse_ddl_schema(
        ["City STRING NOT NULL", '"City Name" string null', "population bigint", '"a""b" INT']
    )
    assert schema.names == ["city", "City Name", "population", 'a"b']
    assert [f.nullable for f in schema] == [False, True, True, True]


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["id UUID"], "unsupported type UUID for column 'id'"),
        (["s STRUCT<a INT>"], "unsupported type STRUCT"),
        (["t TIMESTAMP(2)"], "TIMESTAMP precision must be 0, 3, 6 or 9"),
        (["a INT", "A BIGINT"], "duplicate column 'a'"),
        (["a"], "expected a type for column 'a'"),
        (["a INT NOT"], "expected NULL"),
        (["a INT; drop"], "unexpected character ';'"),
        (["d DECIMAL(5,9)"], "scale 9 exceeds its precision 5"),
    ],
)
def test_errors_name_the_problem(columns: list[str], message: str) -> None:
    with pytest.raises(SchemaError, match=message) as e:
        parse_ddl_schema(columns, path="read.schema")
    assert str(e.value).startswith("read.schema: ")
    assert "\n" not in str(e.value)
