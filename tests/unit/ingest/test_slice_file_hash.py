"""The slice file hashes its bytes while writing them: the same hash as a read of the file."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.hashing import logical_hash, logical_hash_parquet, physical_hash_file
from common.odf.fragments import DatasetVocabulary
from coordinator.ingest import slice_file as slice_file_module
from coordinator.ingest.slice_file import HashingFile, SliceFile
from coordinator.ingest.system_columns import OP_TYPE, output_schema

VOCAB = DatasetVocabulary()
EVENT_TIME = pa.field("event_time", pa.timestamp("ms", tz="UTC"))
MERGED = pa.schema([pa.field("op", OP_TYPE), EVENT_TIME, pa.field("city", pa.string())])


def merged_batch(start: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([0] * n, OP_TYPE),
            pa.array(range(start * 1000, (start + n) * 1000, 1000), EVENT_TIME.type),
            pa.array([f"city-{i}" for i in range(start, start + n)]),
        ],
        schema=MERGED,
    )


def new_slice(path: Path) -> SliceFile:
    return SliceFile(
        path,
        merged=MERGED,
        output=output_schema(MERGED, VOCAB, EVENT_TIME),
        vocab=VOCAB,
        start_offset=10,
        system_time=datetime(2030, 1, 1, tzinfo=UTC),
    )


def test_hashing_file_hashes_what_it_writes(tmp_path: Path) -> None:
    path = tmp_path / "out"
    sink = HashingFile(path)
    table = pa.table({"a": list(range(1000)), "b": [str(i) for i in range(1000)]})
    with pq.ParquetWriter(sink, table.schema, compression="snappy") as writer:
        writer.write_table(table, row_group_size=300)
    sink.close()
    assert sink.physical_hash() == physical_hash_file(path)
    pq.write_table(table, tmp_path / "direct", compression="snappy", row_group_size=300)
    assert path.read_bytes() == (tmp_path / "direct").read_bytes()


def test_slice_stats_name_the_file_written(tmp_path: Path) -> None:
    slice_file = new_slice(tmp_path / "slice")
    slice_file.write(merged_batch(0, 500))
    slice_file.write(merged_batch(500, 700))
    stats = slice_file.close()
    assert stats is not None
    assert stats.physical_hash == physical_hash_file(tmp_path / "slice")
    assert stats.size == (tmp_path / "slice").stat().st_size
    assert (stats.offset_start, stats.offset_end, stats.num_records) == (10, 1209, 1200)


def test_a_slice_written_again_after_take_back_hashes_only_the_new_file(tmp_path: Path) -> None:
    slice_file = new_slice(tmp_path / "slice")
    slice_file.write(merged_batch(0, 300))
    taken = list(slice_file.take_back())
    for batch in reversed(taken):
        slice_file.write(batch)
    slice_file.write(merged_batch(300, 100))
    stats = slice_file.close()
    assert stats is not None and stats.num_records == 400
    assert stats.physical_hash == physical_hash_file(tmp_path / "slice")


def test_an_empty_slice_leaves_no_file(tmp_path: Path) -> None:
    assert new_slice(tmp_path / "slice").close() is None
    assert not (tmp_path / "slice").exists()


def test_struct_nulls_inside_valid_rows_record_the_hash_of_the_file(tmp_path: Path) -> None:
    """Such rows hash what the reference's reader leaves in their slots, which only a read
    of the file tells: the slice records the file's logical hash, not a guess."""
    n = 2_000
    values = pa.array([None if i % 3 == 0 else i for i in range(n)], pa.int64())
    place = pa.StructArray.from_arrays(
        [values], names=["zip"], mask=pa.array([i % 7 == 0 for i in range(n)])
    )
    merged = pa.schema([*MERGED, pa.field("place", place.type)])
    slice_file = SliceFile(
        tmp_path / "slice",
        merged=merged,
        output=output_schema(merged, VOCAB, EVENT_TIME),
        vocab=VOCAB,
        start_offset=0,
        system_time=datetime(2030, 1, 1, tzinfo=UTC),
    )
    batch = merged_batch(0, n)
    slice_file.write(pa.RecordBatch.from_arrays([*batch.columns, place], schema=merged))
    stats = slice_file.close()
    assert stats is not None
    assert stats.logical_hash == logical_hash_parquet(tmp_path / "slice")
    written = pq.read_table(tmp_path / "slice")
    assert stats.logical_hash != logical_hash(written)  # the in-memory hash guesses zeros


def test_row_groups_written_in_the_background_hash_as_the_file_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hashing and encoding run in lanes beside the caller: the stats still describe the
    file exactly, whatever the row groups and batches."""
    monkeypatch.setattr(slice_file_module, "ROW_GROUP_ROWS", 700)
    slice_file = new_slice(tmp_path / "slice")
    for start in range(0, 5000, 450):
        slice_file.write(merged_batch(start, 450))
    stats = slice_file.close()
    assert stats is not None and stats.num_records == 5400
    assert pq.ParquetFile(tmp_path / "slice").metadata.num_row_groups == 6  # 900 rows each
    assert stats.physical_hash == physical_hash_file(tmp_path / "slice")
    assert stats.logical_hash == logical_hash_parquet(tmp_path / "slice")
    written = pq.read_table(tmp_path / "slice")
    assert written.column("offset").to_pylist() == list(range(10, 5410))


def test_a_discarded_slice_leaves_no_file_and_its_threads_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slice_file_module, "ROW_GROUP_ROWS", 100)
    slice_file = new_slice(tmp_path / "slice")
    slice_file.write(merged_batch(0, 250))  # two row groups given to the encoding lane
    before = {t.name for t in threading.enumerate()}
    assert any(name.startswith("slice-") for name in before)
    slice_file.discard()
    assert not (tmp_path / "slice").exists()
    assert not any(t.name.startswith("slice-") for t in threading.enumerate())
