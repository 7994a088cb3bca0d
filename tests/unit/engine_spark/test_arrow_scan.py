"""Arrow IPC inputs read in place: how rows are split between tasks, the schema, which files
the executors map, and files the driver refuses before any job runs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from pyspark.sql.types import (
    ArrayType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from engine_spark.arrow_scan import Piece, nullable, open_batches, pieces, split_rows
from engine_spark.errors import InputDataError
from engine_spark.inputs import check_column_types
from engine_spark.staging import ArrowInputs, Staging, staging_area


def test_rows_are_split_into_balanced_consecutive_ranges_one_per_core() -> None:
    assert split_rows(1_000_000, 2, 128 * 1024) == [range(500_000), range(500_000, 1_000_000)]
    assert split_rows(10, 3, 3) == [range(3), range(3, 6), range(6, 10)]
    # Small inputs are not split; an empty one is still one (empty) task.
    assert split_rows(100_000, 8, 128 * 1024) == [range(100_000)]
    assert split_rows(0, 2, 128 * 1024) == [range(0)]


def test_pieces_cover_a_row_range_across_batches_in_order() -> None:
    batches = [5, 0, 7, 3]
    assert pieces(batches, range(3, 13), max_rows=4) == [
        Piece(0, 3, 2),
        Piece(2, 0, 4),
        Piece(2, 4, 3),
        Piece(3, 0, 1),
    ]
    everything = [pieces(batches, r, max_rows=4) for r in split_rows(15, 2, 1)]
    rows = [(p.batch, p.offset + i) for share in everything for p in share for i in range(p.length)]
    assert rows == [(b, i) for b, n in enumerate(batches) for i in range(n)]
    assert pieces(batches, range(0)) == []


def test_the_schema_is_nullable_all_the_way_down_like_a_parquet_scan() -> None:
    inner = StructType([StructField("at", TimestampType(), False)])
    schema = StructType(
        [
            StructField("offset", LongType(), False),
            StructField("tags", MapType(StringType(), ArrayType(inner, False), False), False),
        ]
    )
    assert nullable(schema) == StructType(
        [
            StructField("offset", LongType(), True),
            StructField(
                "tags",
                MapType(
                    StringType(),
                    ArrayType(StructType([StructField("at", TimestampType(), True)]), True),
                    True,
                ),
                True,
            ),
        ]
    )


def test_executors_map_any_file_with_a_local_master_and_only_shared_ones_on_a_cluster(
    tmp_path: Path,
) -> None:
    in_place = ArrowInputs.IN_PLACE
    with staging_area(True, arrow_inputs=in_place) as local:
        assert local.maps(str(tmp_path / "input.arrow"))
    shared = tmp_path / "shared"
    shared.mkdir()
    with staging_area(True, shared, arrow_inputs=in_place) as cluster:
        assert cluster.maps(str(shared / "tx" / "input.arrow"))
        assert not cluster.maps(str(tmp_path / "input.arrow"))
        assert not cluster.maps(str(shared / ".." / "input.arrow"))
    assert not Staging.OFF.maps(str(tmp_path / "input.arrow"))


def test_arrow_inputs_are_staged_unless_read_in_place_is_chosen(tmp_path: Path) -> None:
    with staging_area(True) as staged, staging_area(True, tmp_path) as staged_shared:
        assert not staged.maps(str(tmp_path / "input.arrow"))
        assert not staged_shared.maps(str(tmp_path / "tx" / "input.arrow"))


def _write(path: Path, table: pa.Table, *, stream: bool = False) -> Path:
    new = ipc.new_stream if stream else ipc.new_file
    with pa.OSFile(str(path), "wb") as sink, new(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=1000):
            writer.write_batch(batch)
    return path


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_batches_are_mapped_and_a_truncated_file_is_refused_in_one_line(
    tmp_path: Path, stream: bool
) -> None:
    table = pa.table({"offset": pa.array(range(5000), pa.int64()), "s": ["x" * 20] * 5000})
    path = _write(tmp_path / "in.arrow", table, stream=stream)
    assert [b.num_rows for b in open_batches(str(path))] == [1000] * 5
    assert pa.Table.from_batches(open_batches(str(path))).equals(table)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputDataError, match="cannot read Arrow IPC data") as info:
        open_batches(str(path))
    assert str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def test_a_file_whose_column_types_disagree_with_the_schema_is_refused() -> None:
    wanted = StructType([StructField("offset", LongType()), StructField("n", LongType())])
    older = StructType([StructField("offset", LongType(), False)])  # fewer columns: fine
    check_column_types("/in/a", older, wanted)
    extra = StructType([*wanted.fields, StructField("gone", StringType())])  # not read: fine
    check_column_types("/in/a", extra, wanted)
    other = StructType([StructField("offset", LongType()), StructField("n", StringType())])
    with pytest.raises(InputDataError, match=r"^/in/a: column 'n' is string, but the input's"):
        check_column_types("/in/a", other, wanted)
