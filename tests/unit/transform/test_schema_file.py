"""The Parquet exchange's schema file of an input: an Arrow IPC file with no records."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from common.serde.arrow_schema import encode_arrow_schema
from coordinator.transform.exchange import write_schema_file
from tests.unit.serde.test_arrow_ipc_file import read_back


def test_the_exchange_schema_file_with_and_without_metadata(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("t", pa.timestamp("ms", "UTC")), pa.field("v", pa.string())])
    for name, stored in (
        ("plain", encode_arrow_schema(schema)),
        ("metadata", encode_arrow_schema(schema.with_metadata({"pandas": "{}"}))),
    ):
        out = tmp_path / f"{name}.arrow"
        write_schema_file(stored, out)
        assert read_back(out.read_bytes()).equals(schema, check_metadata=True), name
