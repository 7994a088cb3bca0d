"""Event-time as-of joins of a stream against a versioned input across transactions
(``engine_spark/asof_join.py``). Expected rows are written by hand from the semantics: each
tick gets the version of its symbol with the newest event time at or before its own, from
any transaction; a tick is emitted once the versioned input's watermark reaches it; records
at or before their input's watermark when they arrive are dropped."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TemporalTable, TransformSql
from engine_spark.checkpoint import Runner, read_checkpoint
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from tests.integration.engine import datasets
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql
from tests.integration.engine.test_stateful import Pipeline

pytestmark = [pytest.mark.spark]

PRICES = pa.schema([("symbol", pa.string()), ("price", pa.float64())])
TICKS = pa.schema([("symbol", pa.string()), ("qty", pa.int64())])


def as_of(
    join: str = "JOIN",
    *,
    where: str = "",
    order: str = "p.event_time DESC, p.offset DESC",
    time: str = "p.event_time <= t.event_time",
    output_time: str = "t.event_time",
    key: tuple[str, ...] = ("symbol",),
    limit: int = 1,
    columns: str = "p.*",
) -> TransformSql:
    on = " ON true" if join.startswith("LEFT") else ""
    query = (
        f"SELECT {output_time}, t.symbol, t.qty, v.price FROM ticks AS t "
        f"{join} LATERAL (SELECT {columns} FROM prices AS p WHERE p.symbol = t.symbol "
        f"AND {time}{where} ORDER BY {order} LIMIT {limit}) AS v{on}"
    )
    tables = (TemporalTable(name="prices", primary_key=key),)
    return dataclasses.replace(sql(query), temporal_tables=tables)


def price(hours: float, symbol: str, value: float, op: int = 0) -> dict[str, Any]:
    return {"event_time": at(hours), "symbol": symbol, "price": value, "op": op}


def tick(hours: float, symbol: str, qty: int) -> dict[str, Any]:
    return {"event_time": at(hours), "symbol": symbol, "qty": qty}


def rows(out: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["symbol"], r["qty"], r["price"]) for r in out]


def pipeline(engine: SparkEngine, workdir: Path, name: str, transform: TransformSql) -> Any:
    prices = InputDataset(workdir / f"{name}-prices", "prices", PRICES)
    ticks = InputDataset(workdir / f"{name}-ticks", "ticks", TICKS)
    return prices, ticks, Pipeline(engine, OutputDataset(workdir / name, name, transform))


def test_as_of_join_uses_versions_of_every_earlier_transaction(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    prices, ticks, pipe = pipeline(spark_engine, workdir, "asof", as_of())
    # 1: A@1.5 finds A@0; B@0.5 has no version yet (inner join: dropped); A@3 waits for the
    # prices' watermark (2).
    prices.append([price(0, "A", 10), price(1, "B", 20)], watermark=at(2))
    ticks.append([tick(1.5, "A", 1), tick(0.5, "B", 2), tick(3, "A", 3)], watermark=at(1))
    assert rows(pipe.run(prices.take(), ticks.take())) == [("A", 1, 10.0)]
    waiting = read_checkpoint(pipe.out.prev_checkpoint)
    assert waiting.stream is not None and waiting.stream.runner == Runner.ASOF_JOIN
    assert pipe.watermarks[-1] == at(1)

    # 2: versions out of order (2.5 before 2.2), a late one (B@1.5 <= 2: dropped, else B@5
    # below would find it); the waiting A@3 and the new A@3.5 find A@2.5; B@5 waits.
    prices.append([price(2.5, "A", 11), price(2.2, "A", 12), price(1.5, "B", 99)], watermark=at(4))
    ticks.append([tick(3.5, "A", 4), tick(5, "B", 5)], watermark=at(3))
    second = pipe.out.request([prices.take(), ticks.take()])
    checkpoint_before = pipe.out.prev_checkpoint
    response = spark_engine.execute_transform(second)
    pipe.out.commit(second, response)
    assert rows(pq.read_table(second.new_data_path).to_pylist()) == [
        ("A", 3, 11.0),
        ("A", 4, 11.0),
    ]

    # 3: only watermarks: B@5 is released and finds B@1 of the first transaction.
    prices.append([], watermark=at(6))
    ticks.append([], watermark=at(4))
    assert rows(pipe.run(prices.take(), ticks.take())) == [("B", 5, 20.0)]
    assert pipe.watermarks[-1] == at(4)

    # 4: a late tick (A@2 <= 4) is dropped; A@6.2 still finds A@2.5 (kept, the newest at
    # or before the horizon), A@7 the new A@6.5.
    prices.append([price(6.5, "A", 13)], watermark=at(8))
    ticks.append([tick(2, "A", 6), tick(6.2, "A", 7), tick(7, "A", 8)], watermark=at(5))
    assert rows(pipe.run(prices.take(), ticks.take())) == [("A", 7, 11.0), ("A", 8, 13.0)]

    # Replaying the second transaction from its checkpoint writes the same bytes.
    replay = dataclasses.replace(
        second,
        prev_checkpoint_path=checkpoint_before,
        new_data_path=f"{second.new_data_path}-replay",
        new_checkpoint_path=f"{second.new_checkpoint_path}-replay",
    )
    spark_engine.execute_transform(replay)
    assert Path(replay.new_data_path).read_bytes() == Path(second.new_data_path).read_bytes()
    assert (
        Path(replay.new_checkpoint_path).read_bytes()
        == Path(second.new_checkpoint_path).read_bytes()
    )


def test_n_transactions_give_what_one_transaction_gives(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    versions = [
        price(h / 4 + 0.05, s, h * 1.0) for h in range(40) for s in ("A", "B", "C") if h % 3
    ]
    ticks_ = [tick(h / 4 + 0.1, s, h) for h in range(40) for s in ("A", "B", "D")]
    transform = as_of("LEFT JOIN")

    prices, ticks, pipe = pipeline(spark_engine, workdir, "many", transform)
    many: list[tuple[Any, ...]] = []
    for part in range(4):  # every record in order of event time: none is late
        lo, hi = part * 2.5, (part + 1) * 2.5
        prices.append([v for v in versions if at(lo) <= v["event_time"] < at(hi)], watermark=at(hi))
        ticks.append([t for t in ticks_ if at(lo) <= t["event_time"] < at(hi)], watermark=at(hi))
        many += rows(pipe.run(prices.take(), ticks.take()))

    prices, ticks, pipe = pipeline(spark_engine, workdir, "one", transform)
    prices.append(versions, watermark=at(10))
    ticks.append(ticks_, watermark=at(10))
    one = rows(pipe.run(prices.take(), ticks.take()))
    assert sorted(many, key=str) == sorted(one, key=str)
    assert len(one) == len(ticks_)
    assert ("D", 0, None) in one  # a left join keeps a tick without any version


def test_state_stays_bounded_by_keys_and_the_watermark_gap(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    prices, ticks, pipe = pipeline(spark_engine, workdir, "bounded", as_of())
    kept: list[int] = []
    for n in range(12):
        prices.append(
            [price(n + i / 10, s, n + i / 10) for i in range(10) for s in "ABCDE"],
            watermark=at(n + 1),
        )
        ticks.append([tick(n + 0.55, s, n) for s in "ABCDE"], watermark=at(n + 0.5))
        assert rows(pipe.run(prices.take(), ticks.take())) == [(s, n, n + 0.5) for s in "ABCDE"]
        state = read_checkpoint(pipe.out.prev_checkpoint).stream
        assert state is not None
        kept.append(sum(pq.read_table(io.BytesIO(b)).num_rows for b in state.files.values()))
    # Per key the newest version at or before the horizon (0.5 into the hour) and the
    # versions after it: 5 x (1 + 4), whatever the number of transactions.
    assert kept == [25] * 12


def test_retractions_in_the_versioned_input_are_refused(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    prices, ticks, pipe = pipeline(spark_engine, workdir, "retract", as_of())
    prices.append([price(0, "A", 10)], watermark=at(1))
    ticks.append([tick(0.5, "A", 1)], watermark=at(1))
    assert rows(pipe.run(prices.take(), ticks.take())) == [("A", 1, 10.0)]
    before = pipe.out.prev_checkpoint
    prices.append([price(0, "A", 10, op=1)], watermark=at(2))
    with pytest.raises(InvalidQueryError, match=r"'prices' has a retraction .* at offset 1"):
        pipe.run(prices.take(), ticks.take())
    assert pipe.out.prev_checkpoint == before


def validate(transform: TransformSql) -> ep.ValidateQueryRequest:
    return datasets.validate_request(transform, inputs={"ticks": TICKS, "prices": PRICES})


def test_the_as_of_form_validates(spark_engine: SparkEngine) -> None:
    spark_engine.validate_query(validate(as_of()))
    spark_engine.validate_query(validate(as_of("LEFT JOIN")))


@pytest.mark.parametrize(
    ("transform", "reason"),
    [
        (as_of(order="p.event_time DESC"), "ORDER BY p.event_time DESC, p.offset DESC"),
        (as_of(where=" AND p.price > 0"), "only equalities on the primary key ['symbol']"),
        (as_of(key=("symbol", "price")), "one equality per primary key column ['symbol', 'price']"),
        (as_of(time="p.event_time < t.event_time"), "(found (p.event_time < outer(t.event_time)))"),
        (
            as_of(output_time="t.event_time - INTERVAL 1 DAY AS event_time"),
            "the stream's event_time as the output's event_time",
        ),
        (as_of(limit=2), "LIMIT 1"),
        (as_of(columns="price"), "the ORDER BY columns among the subquery's columns"),
    ],
)
def test_look_alikes_of_the_as_of_form_are_refused(
    spark_engine: SparkEngine, transform: TransformSql, reason: str
) -> None:
    with pytest.raises(InvalidQueryError, match=re.escape(reason)):
        spark_engine.validate_query(validate(transform))


def test_migrate_query_drops_the_waiting_rows_and_versions_and_keeps_watermarks(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    prices, ticks, pipe = pipeline(spark_engine, workdir, "migrate", as_of())
    prices.append([price(0, "A", 10)], watermark=at(1))
    ticks.append([tick(0.5, "A", 1), tick(2, "A", 2)], watermark=at(1))
    assert rows(pipe.run(prices.take(), ticks.take())) == [("A", 1, 10.0)]

    left = as_of("LEFT JOIN")
    migrate = ep.MigrateQueryRequest(
        dataset_id=pipe.out.id,
        dataset_alias=pipe.out.name,
        prev_transform=pipe.out.transform,
        new_transform=left,
        vocab=DatasetVocabulary(),
        query_inputs=(prices.take(), ticks.take()),
        prev_checkpoint_path=pipe.out.prev_checkpoint,
        new_checkpoint_path=str(workdir / "migrated"),
        new_data_path=str(workdir / "migrated-data"),
        system_time=at(2),
        next_offset=pipe.out.next_offset,
    )
    assert spark_engine.migrate_query(migrate).new_offset_interval is None
    migrated = read_checkpoint(str(workdir / "migrated"))
    assert migrated.stream is None
    assert sorted(migrated.input_watermarks.values()) == [at(1), at(1)]

    # The tick waiting at the change (A@2) is not emitted; A@0 is forgotten, so a new tick
    # of A finds no version (the left join keeps it with null).
    pipe.out.prev_checkpoint, pipe.out.transform = str(workdir / "migrated"), left
    prices.append([], watermark=at(5))
    ticks.append([tick(3, "A", 3)], watermark=at(3))
    assert rows(pipe.run(prices.take(), ticks.take())) == [("A", 3, None)]
