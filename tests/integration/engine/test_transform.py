"""ExecuteTransform through a real gRPC client, server and SparkSession."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.hashing.logical import logical_hash
from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval, TransformSql
from engine_spark.checkpoint import read_checkpoint
from tests.integration.engine import client
from tests.integration.engine.datasets import TS, InputDataset, OutputDataset, at, sql

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

CITIES = pa.schema([("city", pa.string()), ("population", pa.int64())])

SYSTEM_SCHEMA = [
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("op", pa.int32()),
    pa.field("system_time", TS, nullable=False),
    pa.field("event_time", TS),
]


def city(hours: float, name: str, population: int, op: int = 0) -> dict[str, object]:
    return {"event_time": at(hours), "city": name, "population": population, "op": op}


def over_cities(
    workdir: Path, name: str, transform: TransformSql
) -> tuple[InputDataset, OutputDataset]:
    """The input ``cities`` and the output ``name`` of ``transform`` over it, in ``workdir``."""
    src = InputDataset(workdir / "in", "cities", CITIES)
    return src, OutputDataset(workdir / "out", name, transform)


def union_of_cities(
    workdir: Path, columns: str
) -> tuple[InputDataset, InputDataset, OutputDataset]:
    """The inputs ``a`` and ``b`` (both cities) and the output ``both``: their ``columns``,
    ``a``'s rows then ``b``'s (``union all``)."""
    a = InputDataset(workdir / "a", "a", CITIES)
    b = InputDataset(workdir / "b", "b", CITIES)
    query = f"select {columns} from a union all select {columns} from b"
    return a, b, OutputDataset(workdir / "out", "both", sql(query))


def run(
    stub: engine_pb2_grpc.EngineStub, out: OutputDataset, request: ep.TransformRequest
) -> ep.TransformResponseSuccess:
    response = client.transform(stub, request)
    assert isinstance(response, ep.TransformResponseSuccess), response
    out.commit(request, response)
    return response


def rows(path: str, *columns: str) -> list[tuple[object, ...]]:
    table = pq.read_table(path)
    return [tuple(r[c] for c in columns) for r in table.to_pylist()]


def test_map_filter_carries_offsets_and_watermarks_across_transactions(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src, out = over_cities(
        workdir,
        "big",
        sql(
            "select event_time, city, population * 10 as population_x10 from cities "
            "where population > 100"
        ),
    )

    # 1: one slice with a watermark.
    src.append([city(0, "A", 50), city(1, "B", 500), city(2, "C", 1000)], watermark=at(2))
    req = out.request([src.take()], system_time=at(10))
    assert run(engine_stub, out, req) == ep.TransformResponseSuccess(
        new_offset_interval=OffsetInterval(start=0, end=1), new_watermark=at(2)
    )
    table = pq.read_table(req.new_data_path)
    assert table.schema == pa.schema(
        [*SYSTEM_SCHEMA, pa.field("city", pa.string()), pa.field("population_x10", pa.int64())]
    )
    assert table.to_pylist() == [
        {
            "offset": 0,
            "op": 0,
            "system_time": at(10),
            "event_time": at(1),
            "city": "B",
            "population_x10": 5000,
        },
        {
            "offset": 1,
            "op": 0,
            "system_time": at(10),
            "event_time": at(2),
            "city": "C",
            "population_x10": 10000,
        },
    ]
    assert out.prev_checkpoint is not None

    # 2: a backlog of two slices, the watermark only on the second one.
    src.append([city(3, "D", 700), city(4, "E", 5)])
    src.append([city(5, "F", 300)], watermark=at(5))
    req = out.request([src.take()], system_time=at(11))
    assert run(engine_stub, out, req) == ep.TransformResponseSuccess(
        new_offset_interval=OffsetInterval(start=2, end=3), new_watermark=at(5)
    )
    assert rows(req.new_data_path, "offset", "city", "system_time") == [
        (2, "D", at(11)),
        (3, "F", at(11)),
    ]

    # 3: only the watermark advanced: no data file, the watermark still moves.
    src.append([], watermark=at(8))
    req = out.request([src.take()], system_time=at(12))
    assert run(engine_stub, out, req) == ep.TransformResponseSuccess(
        new_offset_interval=None, new_watermark=at(8)
    )

    # 4: data without an explicit watermark: the watermark comes from the checkpoint.
    src.append([city(9, "G", 900)])
    req = out.request([src.take()], system_time=at(13))
    assert run(engine_stub, out, req) == ep.TransformResponseSuccess(
        new_offset_interval=OffsetInterval(start=4, end=4), new_watermark=at(8)
    )


def test_replaying_a_transaction_gives_identical_output(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src, out = over_cities(
        workdir,
        "agg",
        sql(
            "select event_time, city, count(*) as n, sum(population) as total from cities "
            "group by event_time, city"
        ),
    )
    src.append([city(h % 3, "ABC"[h % 3], h) for h in range(30)], watermark=at(3))
    first = out.request([src.take()], system_time=at(10))
    response = run(engine_stub, out, first)
    replay = dataclasses.replace(
        first,
        new_data_path=str(workdir / "replay" / "data"),
        new_checkpoint_path=str(workdir / "replay" / "checkpoint"),
    )
    assert client.transform(engine_stub, replay) == response
    original, replayed = pq.read_table(first.new_data_path), pq.read_table(replay.new_data_path)
    assert replayed.equals(original)
    assert logical_hash(replayed) == logical_hash(original)
    # The checkpoint carries the same watermarks and Spark logs; the streaming state store's
    # files hold the same state under other names (RocksDB), so they are not compared.
    stored, again = (read_checkpoint(r.new_checkpoint_path) for r in (first, replay))
    assert stored.stream is not None and again.stream is not None
    assert (stored.input_watermarks, stored.output_watermark) == (
        again.input_watermarks,
        again.output_watermark,
    )
    assert {k: v for k, v in stored.stream.files.items() if not k.startswith("state/")} == {
        k: v for k, v in again.stream.files.items() if not k.startswith("state/")
    }
    # A shuffle has no input order: rows are sorted by event time, then the other columns.
    assert rows(first.new_data_path, "offset", "event_time", "city", "n", "total") == [
        (0, at(0), "A", 10, sum(range(0, 30, 3))),
        (1, at(1), "B", 10, sum(range(1, 30, 3))),
        (2, at(2), "C", 10, sum(range(2, 30, 3))),
    ]


def test_union_of_two_inputs_keeps_input_order_and_takes_the_minimum_watermark(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    a, b, out = union_of_cities(workdir, "event_time, city")
    a.append([city(2, "A2", 1), city(1, "A1", 1)], watermark=at(6))
    b.append([city(0, "B0", 1), city(3, "B3", 1)], watermark=at(4))
    req = out.request([a.take(), b.take()])
    response = run(engine_stub, out, req)
    assert response.new_watermark == at(4)
    assert rows(req.new_data_path, "offset", "city") == [(0, "A2"), (1, "A1"), (2, "B0"), (3, "B3")]


def test_an_input_with_no_new_data_is_empty_with_its_schema(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    a, b, out = union_of_cities(workdir, "event_time, city, population")
    a.append([city(0, "X", 1)], watermark=at(1))
    b.append([city(0, "X", 42)], watermark=at(1))
    run(engine_stub, out, out.request([a.take(), b.take()]))

    a.append([city(2, "X", 2)], watermark=at(3))
    second_b = b.take()  # b has nothing new: no interval, no files, only its schema file
    assert second_b.offset_interval is None and second_b.data_paths == ()
    req = out.request([a.take(), second_b])
    response = run(engine_stub, out, req)
    assert rows(req.new_data_path, "offset", "city", "population") == [(2, "X", 2)]
    assert response.new_watermark == at(1), "b's watermark, carried in the checkpoint"


def test_retractions_and_corrections_pass_through(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src, out = over_cities(
        workdir,
        "big",
        sql("select op, event_time, city, population from cities where population > 100"),
    )
    src.append(
        [
            city(0, "A", 500),
            city(0, "B", 200),
            city(0, "A", 500, op=2),  # correct A: 500 -> 600, both halves kept
            city(0, "A", 600, op=3),
            city(0, "B", 200, op=1),  # retract B
            city(0, "C", 50),  # filtered out
            city(0, "C", 50, op=2),  # correct C: 50 -> 150, only the +C half passes the filter
            city(0, "C", 150, op=3),
        ]
    )
    req = out.request([src.take()])
    run(engine_stub, out, req)
    assert rows(req.new_data_path, "offset", "op", "city", "population") == [
        (0, 0, "A", 500),
        (1, 0, "B", 200),
        (2, 2, "A", 500),
        (3, 3, "A", 600),
        (4, 1, "B", 200),
        (5, 0, "C", 150),  # a +C without its -C is an append downstream
    ]


def test_multi_step_query(engine_stub: engine_pb2_grpc.EngineStub, workdir: Path) -> None:
    src = InputDataset(workdir / "in", "org.example.cities", CITIES)
    out = OutputDataset(
        workdir / "out",
        "steps",
        sql(
            "select event_time, shout from loud where length(shout) > 1",  # output step first
            ("big", "select * from `org.example.cities` where population > 100"),
            ("loud", "select event_time, upper(city) as shout from big"),
        ),
    )
    src.append([city(0, "ab", 500), city(1, "c", 500), city(2, "de", 5)])
    req = out.request([src.take()])
    run(engine_stub, out, req)
    assert rows(req.new_data_path, "offset", "shout") == [(0, "AB")]


def test_empty_result_writes_no_file(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src, out = over_cities(
        workdir, "none", sql("select event_time, city from cities where population < 0")
    )
    src.append([city(0, "A", 1)], watermark=at(1))
    req = out.request([src.take()])
    assert run(engine_stub, out, req) == ep.TransformResponseSuccess(
        new_offset_interval=None, new_watermark=at(1)
    )
    assert not Path(req.new_data_path).exists()
    assert Path(req.new_checkpoint_path).exists()


def test_arrow_ipc_inputs_and_output(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src, out = over_cities(
        workdir, "dates", sql("select cast(event_time as date) as event_time, city from cities")
    )
    src.append([city(0, "A", 1)], arrow=True)
    src.append([city(30, "B", 2)])  # formats may differ between slices
    req = out.request([src.take()], data_suffix=".arrow")
    run(engine_stub, out, req)
    with pa.memory_map(req.new_data_path) as source:
        table = ipc.open_file(source).read_all()
    assert table.schema.field("event_time").type == pa.date32()
    assert table.column("city").to_pylist() == ["A", "B"]
    assert [d.isoformat() for d in table.column("event_time").to_pylist()] == [
        "2024-01-01",
        "2024-01-02",
    ]


def test_order_by_over_the_stream_is_refused(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src, out = over_cities(
        workdir,
        "sorted",
        sql("select event_time, city, population from cities order by population desc"),
    )
    src.append([city(0, "A", 5), city(1, "B", 50)])
    response = client.transform(engine_stub, out.request([src.take()]))
    assert isinstance(response, ep.TransformResponseInvalidQuery), response
    assert "ORDER BY over a stream is not supported" in response.message


def test_requests_are_isolated_and_may_arrive_concurrently(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src = InputDataset(workdir / "in", "cities", CITIES)
    src.append([city(0, "A", 5), city(1, "B", 50)])
    entry = src.take()
    defining = OutputDataset(
        workdir / "def",
        "def",
        sql(("secret", "select * from cities"), "select event_time, city from secret"),
    )
    run(engine_stub, defining, defining.request([entry]))
    peeking = OutputDataset(workdir / "peek", "peek", sql("select event_time, city from secret"))
    response = client.transform(engine_stub, peeking.request([entry]))
    assert isinstance(response, ep.TransformResponseInvalidQuery)
    assert "TABLE_OR_VIEW_NOT_FOUND" in response.message

    outputs = [
        OutputDataset(
            workdir / f"c{i}", f"c{i}", sql(f"select event_time, city, {i} as i from cities")
        )
        for i in range(3)
    ]
    requests = [o.request([entry]) for o in outputs]
    with ThreadPoolExecutor(3) as pool:
        responses = list(pool.map(lambda r: client.transform(engine_stub, r), requests))
    for i, (req, response) in enumerate(zip(requests, responses, strict=True)):
        assert isinstance(response, ep.TransformResponseSuccess)
        assert rows(req.new_data_path, "city", "i") == [("A", i), ("B", i)]


def test_an_input_column_added_later_reads_as_null_in_older_slices(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    src = InputDataset(workdir / "in", "cities", pa.schema([("city", pa.string())]))
    src.append([{"event_time": at(0), "city": "A"}])
    src.data_schema = CITIES  # the root dataset gained a column
    src.append([city(1, "B", 7)])
    out = OutputDataset(
        workdir / "out", "o", sql("select event_time, city, population from cities")
    )
    req = out.request([src.take()])
    run(engine_stub, out, req)
    assert rows(req.new_data_path, "offset", "city", "population") == [(0, "A", None), (1, "B", 7)]
