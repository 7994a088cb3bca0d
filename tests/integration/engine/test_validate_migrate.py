"""ValidateQuery (schema without data) and MigrateQuery (switching queries) over gRPC."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary
from common.serde.arrow_schema import decode_arrow_schema
from tests.integration.engine import client, datasets
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

QUERY = "select event_time, city, population * 10 as population_x10 from cities"


def test_validate_returns_the_schema_execute_writes(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    response = client.validate(engine_stub, datasets.validate_request(sql(QUERY)))
    assert isinstance(response, ep.ValidateQueryResponseSuccess), response
    schema = decode_arrow_schema(response.output_schema)

    src = InputDataset(workdir / "in", "cities", datasets.CITIES)
    out = OutputDataset(workdir / "out", "x10", sql(QUERY))
    src.append([{"event_time": at(0), "city": "A", "population": 1}])
    req = out.request([src.take()])
    assert isinstance(client.transform(engine_stub, req), ep.TransformResponseSuccess)
    assert schema == pq.read_table(req.new_data_path).schema
    assert schema.names == ["offset", "op", "system_time", "event_time", "city", "population_x10"]


def test_validate_reports_invalid_queries(engine_stub: engine_pb2_grpc.EngineStub) -> None:
    response = client.validate(
        engine_stub, datasets.validate_request(sql("select city from cities"))
    )
    assert isinstance(response, ep.ValidateQueryResponseInvalidQuery)
    assert "event_time" in response.message


def test_validate_checks_schema_evolution_against_the_previous_query(
    engine_stub: engine_pb2_grpc.EngineStub,
) -> None:
    narrower = sql("select event_time, city from cities")
    response = client.validate(engine_stub, datasets.validate_request(narrower, prev=sql(QUERY)))
    assert isinstance(response, ep.ValidateQueryResponseInvalidQuery)
    assert "drops column 'population_x10'" in response.message

    wider = sql(QUERY.replace(" from", ", population from"))
    response = client.validate(engine_stub, datasets.validate_request(wider, prev=sql(QUERY)))
    assert isinstance(response, ep.ValidateQueryResponseSuccess)


def test_a_previous_query_that_cannot_run_is_no_obstacle(
    engine_stub: engine_pb2_grpc.EngineStub,
) -> None:
    broken = sql("select city from cities")  # no event_time: it never produced anything
    response = client.validate(engine_stub, datasets.validate_request(sql(QUERY), prev=broken))
    assert isinstance(response, ep.ValidateQueryResponseSuccess), response


def test_migrate_carries_watermarks_of_inputs_the_new_query_reads(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    a = InputDataset(workdir / "a", "a", datasets.CITIES)
    b = InputDataset(workdir / "b", "b", datasets.CITIES)
    old = sql("select event_time, city from a union all select event_time, city from b")
    new = sql("select event_time, upper(city) as city from a")
    out = OutputDataset(workdir / "out", "m", old)
    a.append([{"event_time": at(0), "city": "x", "population": 1}], watermark=at(5))
    b.append([{"event_time": at(0), "city": "y", "population": 1}], watermark=at(3))
    req = out.request([a.take(), b.take()])
    out.commit(req, client.transform(engine_stub, req))

    migrate_dir = workdir / "migrate"
    request = ep.MigrateQueryRequest(
        dataset_id=out.id,
        dataset_alias=out.name,
        system_time=at(20),
        vocab=DatasetVocabulary(),
        prev_transform=old,
        new_transform=new,
        query_inputs=(a.take(),),
        next_offset=out.next_offset,
        prev_checkpoint_path=out.prev_checkpoint,
        new_checkpoint_path=str(migrate_dir / "checkpoint"),
        new_data_path=str(migrate_dir / "data"),
    )
    response = client.migrate(engine_stub, request)
    # Only a's watermark (5) holds the new query back; b's (3) is dropped with b.
    assert response == ep.MigrateQueryResponseSuccess(new_offset_interval=None, new_watermark=at(5))
    state = json.loads((migrate_dir / "checkpoint").read_text())
    assert [i["datasetId"] for i in state["inputs"]] == [a.id.to_did()]

    # The next transaction runs the new query from the migrated checkpoint.
    out.transform, out.prev_checkpoint = new, str(migrate_dir / "checkpoint")
    a.append([{"event_time": at(6), "city": "z", "population": 1}], watermark=at(7))
    req = out.request([a.take()])
    response = client.transform(engine_stub, req)
    assert isinstance(response, ep.TransformResponseSuccess)
    assert response.new_watermark == at(7)
    assert pq.read_table(req.new_data_path).column("city").to_pylist() == ["Z"]


def test_migrate_rejects_an_invalid_new_query(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    a = InputDataset(workdir / "a", "a", datasets.CITIES)
    a.append([{"event_time": at(0), "city": "x", "population": 1}])
    request = ep.MigrateQueryRequest(
        dataset_id=a.id,
        dataset_alias="m",
        system_time=at(1),
        vocab=DatasetVocabulary(),
        prev_transform=sql("select event_time, city from a"),
        new_transform=sql("select event_time, nope from a"),
        query_inputs=(a.take(),),
        next_offset=0,
        new_checkpoint_path=str(workdir / "m" / "checkpoint"),
        new_data_path=str(workdir / "m" / "data"),
    )
    response = client.migrate(engine_stub, request)
    assert isinstance(response, ep.MigrateQueryResponseInvalidQuery)
    assert "nope" in response.message
