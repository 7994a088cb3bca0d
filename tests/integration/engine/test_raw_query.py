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
