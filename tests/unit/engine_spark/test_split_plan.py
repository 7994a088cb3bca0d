"""Split transactions, the engine's plan: runs of whole input files by record count, the
watermarks each slice may claim (pure: Parquet footers and files, no Spark)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval, TransformSql, Watermark
from engine_spark.split import SplitRefusal, plan_slices, slice_request
from engine_spark.warm_up import one_input_request

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TS = pa.timestamp("ms", tz="UTC")


def _files(tmp_path: Path, sizes: list[int]) -> list[str]:
    paths, offset = [], 0
    tmp_path.mkdir(parents=True, exist_ok=True)
    for n, size in enumerate(sizes):
        path = tmp_path / f"block-{n}"
        table = pa.table(
            {
                "offset": pa.array(range(offset, offset + size), pa.int64()),
                "system_time": pa.array([T0 + timedelta(minutes=n)] * size, TS),
            }
        )
        pq.write_table(table, path)
        paths.append(str(path))
        offset += size
    return paths


def _split(
    tmp_path: Path, sizes: list[int], slices: int, min_records: int
) -> ep.SplitTransformRequest:
    paths = _files(tmp_path, sizes)
    request = one_input_request(
        TransformSql(engine="spark", query="select * from i"),
        "i",
        paths,
        tmp_path / "out",
        system_time=T0,
        offsets=OffsetInterval(start=0, end=sum(sizes) - 1),
    )
    marks = tuple(
        Watermark(
            system_time=T0 + timedelta(minutes=n, seconds=1), event_time=T0 + timedelta(hours=n)
        )
        for n in range(len(sizes))
    )
    inp = dataclasses.replace(request.query_inputs[0], explicit_watermarks=marks)
    request = dataclasses.replace(request, query_inputs=(inp,))
    return ep.SplitTransformRequest(
        request=request, slices=slices, min_records_per_slice=min_records, slices_dir=str(tmp_path)
    )


def test_runs_of_whole_files_balanced_by_records(tmp_path: Path) -> None:
    plan = plan_slices(_split(tmp_path, [10, 10, 30, 10, 10, 10], 3, 1), parallelism=8)
    assert [[len(run.paths) for run in s] for s in plan] == [[2], [1], [3]]
    assert [s[0].interval for s in plan] == [
        OffsetInterval(start=0, end=19),
        OffsetInterval(start=20, end=49),
        OffsetInterval(start=50, end=79),
    ]


def test_fewer_slices_rather_than_small_ones_and_parallelism_when_unset(tmp_path: Path) -> None:
    assert len(plan_slices(_split(tmp_path / "a", [10] * 6, 6, 25), parallelism=8)) == 2
    assert len(plan_slices(_split(tmp_path / "b", [10] * 6, 0, 1), parallelism=3)) == 3
    assert len(plan_slices(_split(tmp_path / "c", [10] * 6, 4, 100), parallelism=3)) == 1


def test_a_slice_claims_the_watermarks_recorded_before_the_next_slices_first_file(
    tmp_path: Path,
) -> None:
    split = _split(tmp_path, [10] * 4, 2, 1)
    plan = plan_slices(split, parallelism=2)
    first = slice_request(
        split.request, plan[0], last=False, next_offset=0, data_path="/d", checkpoint_path="/c"
    )
    assert [w.event_time for w in first.query_inputs[0].explicit_watermarks] == [
        T0,
        T0 + timedelta(hours=1),
    ]
    assert first.query_inputs[0].data_paths == split.request.query_inputs[0].data_paths[:2]
    last = slice_request(
        split.request, plan[1], last=True, next_offset=20, data_path="/d", checkpoint_path="/c"
    )
    assert (
        last.query_inputs[0].explicit_watermarks
        == split.request.query_inputs[0].explicit_watermarks
    )
    assert last.next_offset == 20


def test_files_that_do_not_hold_the_interval_are_refused(tmp_path: Path) -> None:
    split = _split(tmp_path, [10, 10], 2, 1)
    inp = dataclasses.replace(
        split.request.query_inputs[0], offset_interval=OffsetInterval(start=0, end=24)
    )
    bad = dataclasses.replace(
        split, request=dataclasses.replace(split.request, query_inputs=(inp,))
    )
    with pytest.raises(SplitRefusal, match="files hold 20 records, its offset interval 25"):
        plan_slices(bad, parallelism=2)
