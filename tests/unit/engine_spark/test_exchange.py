"""Data exchange: formats recognised by content, Arrow IPC memory-mapped, atomic writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from engine_spark.errors import InputDataError
from engine_spark.exchange import (
    ARROW_BATCH_BYTES,
    DataFormat,
    detect_format,
    output_format,
    read_table,
    write_table,
)
from engine_spark.schema_mapping import spark_input_table

TABLE = pa.table({"a": pa.array([1, 2], pa.uint64()), "s": pa.array(["x", "y"], pa.large_string())})


def test_formats_are_recognised_by_content_not_name(tmp_path: Path) -> None:
    pq.write_table(TABLE, tmp_path / "f1620abc")
    with (
        pa.OSFile(str(tmp_path / "file.parquet"), "wb") as sink,
        ipc.new_file(sink, TABLE.schema) as w,
    ):
        w.write_table(TABLE)
    with pa.OSFile(str(tmp_path / "stream"), "wb") as sink, ipc.new_stream(sink, TABLE.schema) as w:
        w.write_table(TABLE)
    assert detect_format(str(tmp_path / "f1620abc")) is DataFormat.PARQUET
    assert detect_format(str(tmp_path / "file.parquet")) is DataFormat.ARROW_FILE
    assert detect_format(str(tmp_path / "stream")) is DataFormat.ARROW_STREAM
    for name in ("f1620abc", "file.parquet", "stream"):
        assert read_table(str(tmp_path / name)).equals(TABLE)


def test_unknown_or_missing_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "junk").write_bytes(b"hello world")
    with pytest.raises(InputDataError, match="junk: not a Parquet or Arrow IPC file"):
        detect_format(str(tmp_path / "junk"))
    with pytest.raises(InputDataError, match="missing: cannot open"):
        detect_format(str(tmp_path / "missing"))


def test_output_format_follows_the_path_and_writes_one_plain_file(tmp_path: Path) -> None:
    assert output_format("/opt/engine/out/data") is DataFormat.PARQUET
    assert output_format("/out/data.arrow") is DataFormat.ARROW_FILE
    write_table(TABLE, str(tmp_path / "out" / "data.arrow"))
    write_table(TABLE, str(tmp_path / "out" / "data"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["data", "data.arrow"]
    assert detect_format(str(tmp_path / "out" / "data.arrow")) is DataFormat.ARROW_FILE
    assert pq.read_table(tmp_path / "out" / "data").equals(TABLE)


def test_arrow_results_are_cut_into_batches_a_flight_client_takes_whole(tmp_path: Path) -> None:
    rows = 400_000
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "name": pa.array([f"name-{i % 1000}" for i in range(rows)]),
        }
    )
    path = tmp_path / "result.arrow"
    write_table(table, str(path))
    reader = ipc.open_file(pa.memory_map(str(path)))
    batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    assert len(batches) > 1
    assert all(b.nbytes <= ARROW_BATCH_BYTES * 1.05 for b in batches)
    assert reader.read_all().equals(table)


def test_spark_input_types() -> None:
    out = spark_input_table(TABLE)
    assert out.schema == pa.schema([("a", pa.int64()), ("s", pa.string())])
    assert out.column("a").to_pylist() == [1, 2]
