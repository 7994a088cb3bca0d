"""Whether an input's files hold just its offset interval, from their Parquet footers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from common.odf.fragments import OffsetInterval
from engine_spark.offset_bounds import holds_exactly


def _file(path: Path, offsets: list[int | None], **options: object) -> str:
    table = pa.table({"offset": pa.array(offsets, pa.int64()), "v": [1] * len(offsets)})
    pq.write_table(table, path, **options)
    return str(path)


def test_files_holding_exactly_the_interval_need_no_filter(tmp_path: Path) -> None:
    a = _file(tmp_path / "a", [10, 11, 12], row_group_size=2)
    b = _file(tmp_path / "b", [13, 14])
    assert holds_exactly([a, b], "offset", OffsetInterval(start=10, end=14))


def test_offsets_outside_the_interval_keep_the_filter(tmp_path: Path) -> None:
    path = _file(tmp_path / "a", [10, 11, 12])
    assert not holds_exactly([path], "offset", OffsetInterval(start=11, end=12))
    assert not holds_exactly([path], "offset", OffsetInterval(start=10, end=11))


def test_fewer_records_than_the_interval_keep_the_filter(tmp_path: Path) -> None:
    path = _file(tmp_path / "a", [10, 12])
    assert not holds_exactly([path], "offset", OffsetInterval(start=10, end=12))


def test_what_a_footer_cannot_show_keeps_the_filter(tmp_path: Path) -> None:
    interval = OffsetInterval(start=0, end=1)
    nulls = _file(tmp_path / "nulls", [0, None])
    no_stats = _file(tmp_path / "no-stats", [0, 1], write_statistics=False)
    other_column = _file(tmp_path / "other", [0, 1])
    arrow = tmp_path / "slice.arrow"
    with ipc.new_file(arrow, pa.schema([("offset", pa.int64())])) as writer:
        writer.write_table(pa.table({"offset": pa.array([0, 1], pa.int64())}))
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"PAR1 not really a parquet file")
    assert not holds_exactly([nulls], "offset", interval)
    assert not holds_exactly([no_stats], "offset", interval)
    assert not holds_exactly([other_column], "o", interval)
    assert not holds_exactly([str(arrow)], "offset", interval)
    assert not holds_exactly([str(garbage)], "offset", interval)
    assert not holds_exactly([str(tmp_path / "missing")], "offset", interval)


def test_an_offset_column_of_another_type_keeps_the_filter(tmp_path: Path) -> None:
    path = tmp_path / "int32"
    pq.write_table(pa.table({"offset": pa.array([0, 1], pa.int32())}), path)
    assert not holds_exactly([str(path)], "offset", OffsetInterval(start=0, end=1))
