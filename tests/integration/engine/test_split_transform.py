"""ExecuteSplitTransform (split transactions) through a real gRPC client, server and SparkSession:
the slices, concatenated, are ExecuteTransform's output; their hashes are the files'; they are
written and hashed by the executors in one Spark job, byte for byte what ExecuteTransform of
each slice writes."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.hashing.data_file import digest_data_file
from common.odf import engine_protocol as ep
from engine_spark.engine import SparkEngine
from engine_spark.split import execute_split, plan_slices
from tests.integration.engine import client
from tests.integration.engine.datasets import (
    CITIES,
    T0,
    InputDataset,
    OutputDataset,
    at,
    sql,
    validate_request,
)

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

ROW_LOCAL = sql(
    "select event_time, city, population * 10 as population_x10 from cities "
    "where population % 3 <> 0"
)
COLUMNS = ("offset", "op", "system_time", "event_time", "city", "population_x10")


def _cities(workdir: Path, blocks: int, per_block: int) -> InputDataset:
    src = InputDataset(workdir / "in", "cities", CITIES)
    for b in range(blocks):
        rows = [
            {"event_time": at(b + i / per_block), "city": f"c{b}-{i}", "population": b * 100 + i}
            for i in range(per_block)
        ]
        # each block its own system time, as in a chain (a slice's watermarks are those of
        # blocks not after its last file's system time)
        src.append(rows, watermark=at(b), system_time=T0 + timedelta(minutes=b))
    return src


def _records(*paths: str) -> list[tuple[object, ...]]:
    table = pa.concat_tables([pq.read_table(p) for p in paths])
    return [tuple(r[c] for c in COLUMNS) for r in table.to_pylist()]


def test_slices_concatenated_are_the_unsplit_output(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src = _cities(workdir, blocks=6, per_block=50)
    taken = src.take()
    unsplit = OutputDataset(workdir / "unsplit", "out", ROW_LOCAL)
    request = unsplit.request([taken])
    whole = client.transform(engine_stub, request)
    assert isinstance(whole, ep.TransformResponseSuccess), whole

    slices_dir = workdir / "slices"
    slices_dir.mkdir()
    answer = client.split_transform(
        engine_stub,
        ep.SplitTransformRequest(
            request=dataclasses.replace(request, new_checkpoint_path=str(workdir / "unused")),
            slices=3,
            min_records_per_slice=10,
            slices_dir=str(slices_dir),
        ),
    )
    assert isinstance(answer, ep.SplitTransformResponseSuccess), answer
    slices = answer.slices
    assert len(slices) == 3
    # each slice reads two whole blocks of the input; offsets contiguous across slices
    assert [s.inputs[0].offset_interval for s in slices] == [
        ep.OffsetInterval(start=0, end=99),
        ep.OffsetInterval(start=100, end=199),
        ep.OffsetInterval(start=200, end=299),
    ]
    assert slices[0].offset_interval is not None and slices[0].offset_interval.start == 0
    for before, after in itertools.pairwise(slices):
        assert before.offset_interval is not None and after.offset_interval is not None
        assert after.offset_interval.start == before.offset_interval.end + 1
    last = slices[-1].offset_interval
    assert whole.new_offset_interval is not None and last is not None
    assert last.end == whole.new_offset_interval.end
    paths = [s.data_path for s in slices if s.data_path is not None]
    assert _records(*paths) == _records(request.new_data_path)
    for s in slices:
        assert s.data_path is not None and Path(s.data_path).parent == slices_dir
        digest = digest_data_file(s.data_path)
        assert s.physical_hash == digest.physical_hash.to_multibase()
        assert s.logical_hash == digest.logical_hash.to_multibase()
        assert (s.size, s.num_records) == (digest.size, digest.records)
        times = pq.read_table(s.data_path, columns=["event_time"]).column(0).to_pylist()
        assert (s.min_event_time, s.max_event_time) == (min(times), max(times))
    # each slice claims its own blocks' watermark; the last one the transaction's
    assert [s.new_watermark for s in slices] == [at(1), at(3), whole.new_watermark]
    assert whole.new_watermark == at(5)


def test_a_query_that_combines_rows_is_not_split(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    for query, local in (
        (ROW_LOCAL, True),
        (sql("select distinct event_time, city from cities"), False),
        (
            sql(
                "select a.event_time, a.city from cities a join cities b on a.city = b.city"
                " and a.event_time between b.event_time - interval 1 hour and b.event_time"
            ),
            False,
        ),
    ):
        answer = client.validate(engine_stub, validate_request(query))
        assert isinstance(answer, ep.ValidateQueryResponseSuccess), (query, answer)
        assert answer.row_local is local, query

    src = _cities(workdir, blocks=2, per_block=5)
    out = OutputDataset(workdir / "d", "d", sql("select distinct event_time, city from cities"))
    (workdir / "s").mkdir()
    refused = client.split_transform(
        engine_stub,
        ep.SplitTransformRequest(
            request=out.request([src.take()]),
            slices=2,
            min_records_per_slice=1,
            slices_dir=str(workdir / "s"),
        ),
    )
    assert isinstance(refused, ep.SplitTransformResponseInvalidQuery), refused
    assert "not row-local" in refused.message
    assert not any((workdir / "s").iterdir())


def test_a_union_slice_reads_its_own_run_of_each_input(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    a = InputDataset(workdir / "a", "a", CITIES)
    b = InputDataset(workdir / "b", "b", CITIES)
    for n in range(4):
        for src in (a, b):
            src.append(
                [
                    {"event_time": at(n), "city": f"{src.name}{n}-{i}", "population": i}
                    for i in range(5)
                ],
                system_time=T0 + timedelta(minutes=n),
            )
    query = "select event_time, city from a union all select event_time, city from b"
    out = OutputDataset(workdir / "u", "u", sql(query))
    request = out.request([a.take(), b.take()])
    whole = client.transform(engine_stub, request)
    assert isinstance(whole, ep.TransformResponseSuccess), whole
    (workdir / "s").mkdir()
    answer = client.split_transform(
        engine_stub,
        ep.SplitTransformRequest(
            request=request, slices=2, min_records_per_slice=1, slices_dir=str(workdir / "s")
        ),
    )
    assert isinstance(answer, ep.SplitTransformResponseSuccess), answer
    assert [[i.offset_interval for i in s.inputs] for s in answer.slices] == [
        [ep.OffsetInterval(start=0, end=9)] * 2,
        [ep.OffsetInterval(start=10, end=19)] * 2,
    ]
    paths = [s.data_path for s in answer.slices if s.data_path is not None]
    split_rows = pa.concat_tables([pq.read_table(p) for p in paths])
    unsplit = pq.read_table(request.new_data_path)
    assert split_rows.column("offset").to_pylist() == list(range(40))
    assert sorted(split_rows.column("city").to_pylist()) == sorted(
        unsplit.column("city").to_pylist()
    )
    # the first slice: a's first two blocks, then b's
    first = pq.read_table(paths[0]).column("city").to_pylist()
    assert first[:10] == [f"a{n}-{i}" for n in range(2) for i in range(5)]


PROJECTION = sql(
    "select event_time, city, cast(population as decimal(12, 2)) as amount,"
    " to_date(event_time) as day, array(city, upper(city)) as names,"
    " named_struct('n', population, 'at', event_time + interval 1 minute) as detail from cities"
)
EXPLODE = sql(
    "select event_time, city, explode(array(population, population * 2)) as population from cities"
)


def _jobs(engine: SparkEngine) -> set[int]:
    return set(engine.session.sparkContext.statusTracker().getJobIdsForGroup())


def _tasks(engine: SparkEngine, job: int) -> list[int]:
    tracker = engine.session.sparkContext.statusTracker()
    info = tracker.getJobInfo(job)
    assert info is not None
    stages = [tracker.getStageInfo(s) for s in info.stageIds]
    return [s.numTasks for s in stages if s is not None]


def _in_three(request: ep.TransformRequest, slices_dir: Path) -> ep.SplitTransformRequest:
    slices_dir.mkdir()
    return ep.SplitTransformRequest(
        request=request, slices=3, min_records_per_slice=10, slices_dir=str(slices_dir)
    )


def test_the_executors_write_every_slice_in_one_job_as_execute_transform_would(
    engine_stub: engine_pb2_grpc.EngineStub, spark_engine: SparkEngine, workdir: Path
) -> None:
    src = _cities(workdir, blocks=6, per_block=40)
    taken = src.take()
    # (query, counted first: unless rows map one to one, the slices' records are counted by
    # a job before the write job)
    for n, (query, counted) in enumerate(((PROJECTION, False), (EXPLODE, True))):
        out = OutputDataset(workdir / f"out{n}", "out", query)
        split = _in_three(out.request([taken]), workdir / f"parallel{n}")
        before = _jobs(spark_engine)
        answer = client.split_transform(engine_stub, split)
        assert isinstance(answer, ep.SplitTransformResponseSuccess), answer
        new = sorted(_jobs(spark_engine) - before)
        assert len(new) > 1 if counted else len(new) == 1, (query, new)
        # the last job wrote and hashed the three slices: one stage, one task per slice
        assert _tasks(spark_engine, new[-1]) == [3], query

        sequential = dataclasses.replace(split, slices_dir=str(workdir / f"sequential{n}"))
        one_by_one = execute_split(
            sequential, plan_slices(sequential, 2), spark_engine.execute_transform
        )
        assert len(answer.slices) == len(one_by_one.slices) == 3
        for ours, theirs in zip(answer.slices, one_by_one.slices, strict=True):
            assert ours.data_path is not None and theirs.data_path is not None
            assert Path(ours.data_path).read_bytes() == Path(theirs.data_path).read_bytes()
            assert dataclasses.replace(ours, data_path=None) == dataclasses.replace(
                theirs, data_path=None
            )  # event-time bounds included: the executors compute them as the driver does
            assert ours.min_event_time is not None and ours.max_event_time is not None
        assert not [p.name for p in (workdir / f"parallel{n}").iterdir() if p.name[0] == "."]

    # a slice that fails on the executors (division by zero in slice 1 only) fails the call,
    # and no slice's file is left behind
    failing = OutputDataset(
        workdir / "failing",
        "out",
        sql("select event_time, city, 10 div (population - 205) as x from cities"),
    )
    refused = client.split_transform(
        engine_stub, _in_three(failing.request([taken]), workdir / "failed")
    )
    assert isinstance(refused, ep.SplitTransformResponseInvalidQuery), refused
    assert "DIVIDE_BY_ZERO" in refused.message
    assert not list((workdir / "failed").iterdir())
