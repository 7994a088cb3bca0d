"""The retraction check reads the input's ``offset``/``op`` a row group at a time (pyarrow)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf.engine_protocol import TransformRequestInput
from common.odf.fragments import DatasetVocabulary, OffsetInterval
from common.odf.identity import DatasetID
from engine_spark.errors import InputDataError
from engine_spark.retractions import first_change, op_batches


def write(path: Path, ops: list[int | None], *, statistics: bool = True) -> str:
    table = pa.table(
        {
            "offset": pa.array(range(len(ops)), pa.int64()),
            "op": pa.array(ops, pa.int32()),
            "v": pa.array(range(len(ops)), pa.int64()),
        }
    )
    pq.write_table(table, path, row_group_size=100, write_statistics=statistics)
    return str(path)


def request_input(paths: list[str], start: int, end: int) -> TransformRequestInput:
    return TransformRequestInput(
        dataset_id=DatasetID.new_seeded(b"in"),
        dataset_alias="in",
        query_alias="in",
        vocab=DatasetVocabulary(),
        offset_interval=OffsetInterval(start=start, end=end),
        data_paths=tuple(paths),
        schema_file=paths[0],
        explicit_watermarks=(),
    )


def test_row_groups_of_appends_are_skipped_by_their_statistics(tmp_path: Path) -> None:
    ops: list[int | None] = [0] * 300
    ops[150], ops[160], ops[250] = 1, None, 2
    path = write(tmp_path / "a.parquet", ops)
    read = list(op_batches(path, "offset", "op"))
    assert [t.column("offset")[0].as_py() for t in read] == [100, 200]  # group 0 skipped
    assert all(t.column_names == ["offset", "op"] and t.num_rows == 100 for t in read)
    assert first_change(request_input([path], 0, 299)) == (1, 150)
    assert first_change(request_input([path], 151, 299)) == (2, 250)
    assert first_change(request_input([path], 0, 149)) is None
    no_stats = write(tmp_path / "b.parquet", [0] * 300, statistics=False)
    assert len(list(op_batches(no_stats, "offset", "op"))) == 3  # no statistics: read
    assert first_change(request_input([no_stats, path], 0, 299)) == (1, 150)


def test_files_without_op_and_broken_files(tmp_path: Path) -> None:
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"offset": [0, 1]}), plain)
    assert list(op_batches(str(plain), "offset", "op")) == []
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(InputDataError, match="cannot read Parquet data"):
        list(op_batches(str(broken), "offset", "op"))
