"""Stateful queries across transactions: windows, interval joins, changelogs (issue: stateful
streaming). Every expected output is written by hand from the semantics in
``engine_spark/README.md``: a window is emitted once, when the input watermark passes its end;
records at or before the input watermark when they arrive are dropped; an aggregation without
a window is a changelog (+I, then -U/+U when a key's row changes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from engine_spark.checkpoint import read_checkpoint
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql

pytestmark = [pytest.mark.spark]

READINGS = pa.schema([("sensor", pa.string()), ("value", pa.int64())])


def reading(hours: float, sensor: str, value: int, op: int = 0) -> dict[str, Any]:
    return {"event_time": at(hours), "sensor": sensor, "value": value, "op": op}


class Pipeline:
    """One output dataset fed by input datasets, transaction by transaction, in process."""

    def __init__(self, engine: SparkEngine, out: OutputDataset) -> None:
        self.engine = engine
        self.out = out
        self.watermarks: list[Any] = []

    def run(self, *inputs: ep.TransformRequestInput) -> list[dict[str, Any]]:
        request = self.out.request(inputs)
        response = self.engine.execute_transform(request)
        self.out.commit(request, response)
        self.watermarks.append(response.new_watermark)
        if response.new_offset_interval is None:
            return []
        rows = pq.read_table(request.new_data_path).to_pylist()
        for row in rows:
            row.pop("system_time")
        return rows


def window_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["op"], r["event_time"], r["sensor"], r["total"], r["n"]) for r in rows]


TUMBLING = sql(
    "SELECT window.end AS event_time, sensor, sum(value) AS total, count(*) AS n "
    "FROM readings GROUP BY window(event_time, '1 hour'), sensor"
)


def test_tumbling_window_emits_each_window_once_when_the_watermark_passes_it(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    readings = InputDataset(workdir / "in", "readings", READINGS)
    pipe = Pipeline(spark_engine, OutputDataset(workdir / "out", "hourly", TUMBLING))

    # tx1: records of hours 0 and 1, watermark inside hour 0: nothing closes.
    readings.append(
        [reading(0.1, "a", 1), reading(1.2, "a", 2), reading(0.5, "b", 3)], watermark=at(0.5)
    )
    assert pipe.run(readings.take()) == []
    # tx2: one late record (at the watermark 0.5: dropped), one in the open hour 0.
    readings.append([reading(0.5, "a", 100), reading(0.7, "a", 10)], watermark=at(0.9))
    assert pipe.run(readings.take()) == []
    # tx3: a watermark alone closes hour 0.
    readings.append([], watermark=at(1.0))
    assert window_rows(pipe.run(readings.take())) == [
        (0, at(1), "a", 11, 2),
        (0, at(1), "b", 3, 1),
    ]
    # tx4: out of order inside hour 1, then the watermark passes hour 1 only.
    readings.append([reading(2.5, "a", 7), reading(1.9, "a", 5)], watermark=at(2.2))
    assert window_rows(pipe.run(readings.take())) == [(0, at(2), "a", 7, 2)]
    assert pipe.watermarks == [at(0.5), at(0.9), at(1.0), at(2.2)]
    # Replay of tx4 from tx3's checkpoint gives the same bytes.
    state = read_checkpoint(pipe.out.prev_checkpoint)
    assert state.stream is not None and state.stream.mode == "append"
