"""ExecuteRawQuery: ingest preprocessing over the ``input`` view, as kamu calls it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.odf import engine_protocol as ep
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from engine_spark.phases import recording
from tests.integration.engine import client
from tests.integration.engine.datasets import sql

pytestmark = [pytest.mark.spark, pytest.mark.grpc]


@pytest.fixture
def raw_input(workdir: Path) -> str:
    (workdir / "in").mkdir()
    path = str(workdir / "in" / "input")  # kamu's path: no extension
    pq.write_table(pa.table({"city": ["a", "b", "c"], "population": [5, 500, 5000]}), path)
    return path


@pytest.mark.parametrize("output_name", ["output", "output.arrow"])
def test_raw_query_writes_the_result(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path, raw_input: str, output_name: str
) -> None:
    output = str(workdir / "out" / output_name)
    request = ep.RawQueryRequest(
        input_data_paths=(raw_input,),
        transform=sql(
            "select upper(city) as city, population * 2 as p2 from input where population > 10"
        ),
        output_data_path=output,
    )
    assert client.raw_query(engine_stub, request) == ep.RawQueryResponseSuccess(num_records=2)
    if output_name.endswith(".arrow"):
        with pa.memory_map(output) as source:
            table = ipc.open_file(source).read_all()
    else:
        table = pq.read_table(output)
    assert table.to_pydict() == {"city": ["B", "C"], "p2": [1000, 10000]}


def test_raw_query_invalid(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path, raw_input: str
) -> None:
    request = ep.RawQueryRequest(
        input_data_paths=(raw_input,),
        transform=sql("select nope from input"),
        output_data_path=str(workdir / "out" / "output"),
    )
    response = client.raw_query(engine_stub, request)
    assert isinstance(response, ep.RawQueryResponseInvalidQuery)
    assert "nope" in response.message


def test_a_raw_query_of_constants_needs_no_input(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    output = str(workdir / "out" / "output")
    request = ep.RawQueryRequest(
        input_data_paths=(), transform=sql("select 1 as x"), output_data_path=output
    )
    assert client.raw_query(engine_stub, request) == ep.RawQueryResponseSuccess(num_records=1)
    assert pq.read_table(output).to_pydict() == {"x": [1]}
    request = dataclasses.replace(request, transform=sql("select * from input"))
    response = client.raw_query(engine_stub, request)
    assert isinstance(response, ep.RawQueryResponseInvalidQuery)  # no input: no input view
    assert "input" in response.message


def test_another_engines_sql_is_refused(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path, raw_input: str
) -> None:
    request = ep.RawQueryRequest(
        input_data_paths=(raw_input,),
        transform=dataclasses.replace(sql("select * from input"), engine="datafusion"),
        output_data_path=str(workdir / "out" / "output"),
    )
    response = client.raw_query(engine_stub, request)
    assert isinstance(response, ep.RawQueryResponseInvalidQuery)
    assert response.message.startswith(
        "the transform is written for engine 'datafusion'; this engine runs 'spark' SQL only"
    )


def test_a_query_seen_before_is_parsed_and_vetted_once(
    spark_engine: SparkEngine, workdir: Path, raw_input: str
) -> None:
    """The second run of a query over the same input views analyzes its vetted parsed plan
    again and walks neither plan, with the same result; over other views the analyzed plan
    is vetted again; a refused query is refused every time."""
    query = "select city, count(*) as n, sum(population) as p from input group by city"
    runs = []
    for i in range(2):
        output = str(workdir / f"out-{i}")
        request = ep.RawQueryRequest(
            input_data_paths=(raw_input,), transform=sql(query), output_data_path=output
        )
        with recording() as rec:
            spark_engine.execute_raw_query(request)
        runs.append((set(rec.phases), pq.read_table(output)))
    (first, table), (second, again) = runs
    assert {"parse", "sandbox: parsed plan", "analysis", "sandbox: analyzed plan"} <= first
    assert "analysis" in second
    assert not second & {"parse", "sandbox: parsed plan", "sandbox: analyzed plan"}
    assert again.equals(table)
    assert table.to_pydict() == {"city": ["a", "b", "c"], "n": [1, 1, 1], "p": [5, 500, 5000]}
    other = str(workdir / "in" / "doubles")
    pq.write_table(pa.table({"city": ["a"], "population": [1.5]}), other)
    request = ep.RawQueryRequest(
        input_data_paths=(other,), transform=sql(query), output_data_path=str(workdir / "o")
    )
    with recording() as rec:
        spark_engine.execute_raw_query(request)
    assert "sandbox: analyzed plan" in rec.phases and "parse" not in rec.phases
    assert pq.read_table(workdir / "o").to_pydict() == {"city": ["a"], "n": [1], "p": [1.5]}
    refused = ep.RawQueryRequest(
        input_data_paths=(raw_input,),
        transform=sql("select * from input, other.secrets"),
        output_data_path=str(workdir / "refused"),
    )
    for _ in range(2):
        with pytest.raises(InvalidQueryError, match=r"other\.secrets is not allowed"):
            spark_engine.execute_raw_query(refused)
