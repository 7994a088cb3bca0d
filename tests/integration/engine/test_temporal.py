"""Temporal tables: an input read as its latest state per key, carried in the checkpoint."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TemporalTable
from tests.integration.engine import client
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

RATES = pa.schema([("currency", pa.string()), ("rate", pa.float64())])
TICKS = pa.schema([("currency", pa.string()), ("amount", pa.int64())])
QUERY = (
    "select t.event_time, t.currency, t.amount * r.rate as usd "
    "from ticks t left join rates r on t.currency = r.currency"
)


def rate(hours: float, currency: str, value: float, op: int = 0) -> dict[str, object]:
    return {"event_time": at(hours), "currency": currency, "rate": value, "op": op}


def tick(hours: float, currency: str, amount: int) -> dict[str, object]:
    return {"event_time": at(hours), "currency": currency, "amount": amount}


def run(stub: engine_pb2_grpc.EngineStub, out: OutputDataset, req: ep.TransformRequest) -> list:
    response = client.transform(stub, req)
    assert isinstance(response, ep.TransformResponseSuccess), response
    out.commit(req, response)
    table = pq.read_table(req.new_data_path)
    return [(r["currency"], r["usd"]) for r in table.to_pylist()]


def test_lookup_join_against_the_latest_state_across_transactions(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    rates = InputDataset(workdir / "rates", "rates", RATES)
    ticks = InputDataset(workdir / "ticks", "ticks", TICKS)
    transform = dataclasses.replace(
        sql(QUERY), temporal_tables=(TemporalTable(name="rates", primary_key=("currency",)),)
    )
    out = OutputDataset(workdir / "out", "usd", transform)

    rates.append([rate(0, "EUR", 1.1), rate(0, "GBP", 1.3)])
    ticks.append([tick(1, "EUR", 10), tick(1, "GBP", 100)])
    assert run(engine_stub, out, out.request([rates.take(), ticks.take()])) == [
        ("EUR", 11.0),
        ("GBP", 130.0),
    ]

    # EUR corrected, GBP retracted, CHF added; GBP's old rate lives only in the checkpoint.
    rates.append(
        [
            rate(2, "EUR", 1.1, op=2),
            rate(2, "EUR", 1.2, op=3),
            rate(2, "GBP", 1.3, op=1),
            rate(2, "CHF", 2.0),
        ]
    )
    ticks.append([tick(3, "EUR", 10), tick(3, "GBP", 100), tick(3, "CHF", 1)])
    second = out.request([rates.take(), ticks.take()])
    checkpoint_before = out.prev_checkpoint
    assert run(engine_stub, out, second) == [("CHF", 2.0), ("EUR", 12.0), ("GBP", None)]

    # Nothing new in rates: the state comes from the checkpoint alone.
    ticks.append([tick(4, "CHF", 3)])
    assert run(engine_stub, out, out.request([rates.take(), ticks.take()])) == [("CHF", 6.0)]

    # Replaying the second transaction from its checkpoint reproduces output and state.
    replay = dataclasses.replace(
        second,
        prev_checkpoint_path=checkpoint_before,
        new_data_path=str(workdir / "replay" / "data"),
        new_checkpoint_path=str(workdir / "replay" / "checkpoint"),
    )
    assert isinstance(client.transform(engine_stub, replay), ep.TransformResponseSuccess)
    assert pq.read_table(replay.new_data_path).equals(pq.read_table(second.new_data_path))
    assert (
        Path(replay.new_checkpoint_path).read_bytes()
        == Path(second.new_checkpoint_path).read_bytes()
    )


def test_temporal_table_must_name_an_input_and_its_key_columns(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    ticks = InputDataset(workdir / "ticks", "ticks", TICKS)
    ticks.append([tick(0, "EUR", 1)])
    entry = ticks.take()
    for table, words in [
        (TemporalTable(name="rates", primary_key=("currency",)), "not one of the inputs"),
        (TemporalTable(name="ticks", primary_key=("iso",)), "primary key column 'iso'"),
    ]:
        transform = dataclasses.replace(
            sql("select event_time, currency from ticks"), temporal_tables=(table,)
        )
        out = OutputDataset(workdir / "out", "bad", transform)
        response = client.transform(engine_stub, out.request([entry]))
        assert isinstance(response, ep.TransformResponseInvalidQuery), response
        assert words in response.message


def test_migrate_keeps_the_state_of_a_temporal_table_the_new_query_declares(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    rates = InputDataset(workdir / "rates", "rates", RATES)
    ticks = InputDataset(workdir / "ticks", "ticks", TICKS)
    keyed = (TemporalTable(name="rates", primary_key=("currency",)),)
    out = OutputDataset(
        workdir / "out", "usd", dataclasses.replace(sql(QUERY), temporal_tables=keyed)
    )
    rates.append([rate(0, "EUR", 1.5)])
    ticks.append([tick(1, "EUR", 2)])
    run(engine_stub, out, out.request([rates.take(), ticks.take()]))

    doubled = dataclasses.replace(
        sql(QUERY.replace("* r.rate", "* r.rate * 2")), temporal_tables=keyed
    )
    migrate_dir = workdir / "migrate"
    response = client.migrate(
        engine_stub,
        ep.MigrateQueryRequest(
            dataset_id=out.id,
            dataset_alias=out.name,
            system_time=at(5),
            vocab=DatasetVocabulary(),
            prev_transform=out.transform,
            new_transform=doubled,
            query_inputs=(rates.take(), ticks.take()),
            next_offset=out.next_offset,
            prev_checkpoint_path=out.prev_checkpoint,
            new_checkpoint_path=str(migrate_dir / "checkpoint"),
            new_data_path=str(migrate_dir / "data"),
        ),
    )
    assert isinstance(response, ep.MigrateQueryResponseSuccess), response
    out.transform, out.prev_checkpoint = doubled, str(migrate_dir / "checkpoint")
    ticks.append([tick(6, "EUR", 10)])
    assert run(engine_stub, out, out.request([rates.take(), ticks.take()])) == [("EUR", 30.0)]
