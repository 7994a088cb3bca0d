"""Each error class ends the stream with one InvalidQuery or InternalError naming the problem."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from common.engine_rpc import engine_pb2, engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.serde import flatbuffers_codec as codec
from tests.integration.engine import client
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql, validate_request

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

CITIES = pa.schema([("city", pa.string()), ("population", pa.int64())])


@pytest.fixture
def cities(workdir: Path) -> ep.TransformRequestInput:
    src = InputDataset(workdir / "in", "cities", CITIES)
    src.append([{"event_time": at(0), "city": "A", "population": 10}], watermark=at(0))
    return src.take()


STREAM_QUERY_FAULTS = [
    pytest.param(
        "SELECT DISTINCT a.event_time, a.city, b.event_time AS seen FROM cities a "
        "LEFT JOIN cities b ON a.city = b.city "
        "AND b.event_time BETWEEN a.event_time AND a.event_time + INTERVAL 1 HOUR",
        ["MULTIPLE_EVENT_TIME_COLUMNS", "more than one event-time column", "'seen'"],
        id="self-join-two-event-times",
    ),
    pytest.param(
        "SELECT a.event_time, a.city FROM cities a JOIN "
        "(SELECT city, event_time + INTERVAL 0 SECONDS AS t FROM cities) b "
        "ON a.city = b.city AND b.t BETWEEN a.event_time AND a.event_time + INTERVAL 1 HOUR",
        ["a join of two streams needs an event-time bound"],
        id="join-input-without-event-time",
    ),
]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        *STREAM_QUERY_FAULTS,
        pytest.param(  # raised in a micro-batch: Spark wraps it in STREAM_FAILED
            "SELECT max(event_time) AS event_time, city, sum(population) div 0 AS x "
            "FROM cities GROUP BY city",
            ["DIVIDE_BY_ZERO"],
            id="streaming-divide-by-zero",
        ),
        pytest.param("selec event_time from cities", ["PARSE_SYNTAX_ERROR", "selec"], id="syntax"),
        pytest.param(
            "select event_time from nowhere",
            ["TABLE_OR_VIEW_NOT_FOUND", "nowhere"],
            id="unknown-table",
        ),
        pytest.param(
            "select event_time, nope from cities",
            ["UNRESOLVED_COLUMN", "nope"],
            id="unknown-column",
        ),
        pytest.param(
            "select event_time, population + array(1) as x from cities",
            ["DATATYPE_MISMATCH"],
            id="type-error",
        ),
        pytest.param(
            "select event_time, population div 0 as x from cities",
            ["DIVIDE_BY_ZERO"],
            id="ansi-divide-by-zero",
        ),
        pytest.param(
            "select event_time, cast(city as int) as x from cities",
            ["CAST_INVALID_INPUT", "'A'"],
            id="ansi-cast",
        ),
        pytest.param("select city from cities", ["no 'event_time' column"], id="no-event-time"),
        pytest.param(
            "select cast(event_time as string) as event_time, city from cities",
            ["'event_time' must be TIMESTAMP or DATE", "STRING"],
            id="event-time-type",
        ),
        pytest.param(
            "select * from cities",
            ["'offset'", "collides with the system column"],
            id="system-column",
        ),
        pytest.param(
            "select event_time, city as SYSTEM_TIME from cities",
            ["'SYSTEM_TIME'", "collides with the system column 'system_time'"],
            id="system-column-case",
        ),
        pytest.param("select event_time, 7 as op from cities", ["operation type 7"], id="bad-op"),
        pytest.param("drop view cities", ["only queries"], id="not-a-query"),
        pytest.param(
            "select event_time, rand() as r from cities",
            ["function rand() is not allowed", "random"],
            id="nondeterministic",
        ),
        pytest.param(
            "select event_time, reflect('java.lang.System', 'getenv', 'HOME') as h from cities",
            ["function reflect() is not allowed"],
            id="java-call",
        ),
        pytest.param(
            "select event_time, value as city from text.`/etc/hostname`",
            ["table text.`/etc/hostname` is not allowed"],
            id="sql-on-files",
        ),
    ],
)
def test_invalid_query(
    engine_stub: engine_pb2_grpc.EngineStub,
    workdir: Path,
    cities: ep.TransformRequestInput,
    query: str,
    words: list[str],
) -> None:
    out = OutputDataset(workdir / "out", "bad", sql(query))
    req = out.request([cities])
    response = client.transform(engine_stub, req)
    assert isinstance(response, ep.TransformResponseInvalidQuery), response
    for word in words:
        assert word in response.message
    assert "\n+- " not in response.message, "no logical plan dump in the message"
    assert not Path(req.new_data_path).exists()


def test_invalid_step_is_named(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path, cities: ep.TransformRequestInput
) -> None:
    out = OutputDataset(
        workdir / "out",
        "bad",
        sql(
            ("first", "select event_time from cities"),
            ("second", "select event_time, missing_col from first"),
            "select * from second",
        ),
    )
    response = client.transform(engine_stub, out.request([cities]))
    assert isinstance(response, ep.TransformResponseInvalidQuery)
    assert response.message.startswith("query step 'second': ")
    assert "missing_col" in response.message


def test_internal_error_has_a_backtrace_and_the_server_keeps_serving(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path, cities: ep.TransformRequestInput
) -> None:
    out = OutputDataset(workdir / "out", "ok", sql("select event_time, city from cities"))
    missing = dataclasses.replace(cities, data_paths=(str(workdir / "gone"),))
    response = client.transform(engine_stub, out.request([missing]))
    assert isinstance(response, ep.TransformResponseInternalError), response
    assert "gone" in response.message
    assert response.backtrace and "Traceback" in response.backtrace

    garbage = engine_pb2.TransformRequest(flatbuffer=b"\x00not a flatbuffer")
    (message,) = list(engine_stub.ExecuteTransform(garbage, timeout=60))
    decoded = codec.TRANSFORM_RESPONSE.decode(message.flatbuffer)
    assert isinstance(decoded, ep.TransformResponseInternalError)
    assert "cannot decode the TransformRequest" in decoded.message

    response = client.transform(engine_stub, out.request([cities]))
    assert isinstance(response, ep.TransformResponseSuccess)


@pytest.mark.parametrize(("query", "words"), STREAM_QUERY_FAULTS)
def test_a_stateful_query_fault_is_refused_at_validation(
    engine_stub: engine_pb2_grpc.EngineStub, query: str, words: list[str]
) -> None:
    """Issue 28's examples: the plan shows the fault, so ValidateQuery refuses the query (and
    ExecuteTransform does, ``test_invalid_query``, where Spark used to fail the stream and
    the failure came back as an InternalError)."""
    validated = client.validate(engine_stub, validate_request(sql(query)))
    assert isinstance(validated, ep.ValidateQueryResponseInvalidQuery), validated
    for word in words:
        assert word in validated.message
    assert "\n+- " not in validated.message and "JVM" not in validated.message
