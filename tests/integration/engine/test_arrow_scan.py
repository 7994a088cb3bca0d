"""Arrow IPC inputs read where they lie (``engine_spark/arrow_scan.py``).

The query must see exactly what ``createDataFrame`` (and the staged Parquet file before)
gave it, no file may be staged, the rows must stay in file order across tasks, and hostile
files are refused in one line before any job runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.odf import engine_protocol as ep
from engine_spark.arrow_scan import MIN_SPLIT_ROWS, arrow_input
from engine_spark.engine import SparkEngine
from engine_spark.staging import ArrowInputs, Staging, arrow_frame, staging_area
from tests.integration.engine import client
from tests.integration.engine.datasets import CITIES, InputDataset, OutputDataset, at, sql
from tests.integration.engine.test_arrow_staging import OLD, every_type
from tests.integration.engine.test_transform import run

pytestmark = pytest.mark.spark


def write_ipc(path: Path, table: pa.Table, batch_rows: int = 64 * 1024) -> str:
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    return str(path)


def test_inputs_read_in_place_equal_create_data_frame_for_every_type(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    session = spark_engine.session
    table = every_type()
    path = write_ipc(workdir / "every.arrow", table, batch_rows=2)  # rows across batches
    want = arrow_frame(session, table, Staging.OFF).toArrow()
    with staging_area(True, arrow_inputs=ArrowInputs.IN_PLACE) as staging:
        df = arrow_input(session, path, staging)
        assert "MapInArrow" in df._jdf.queryExecution().analyzed().toString()
        assert df.inputFiles() == []
        got = df.toArrow()
        assert staging.directory is not None and not any(staging.directory.iterdir())
    assert got.schema.equals(pa.schema([f.with_nullable(True) for f in want.schema]))
    # repr: NaN equals itself there (and values keep their exact Python types).
    assert repr(got.to_pylist()) == repr(want.to_pylist())
    assert got.column("ms")[0].as_py() == OLD


def test_a_large_input_is_read_by_several_tasks_in_file_order(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    n = 2 * MIN_SPLIT_ROWS + 7
    table = pa.table({"offset": pa.array(range(n), pa.int64()), "v": pa.array(range(n, 0, -1))})
    path = write_ipc(workdir / "big.arrow", table, batch_rows=50_000)
    with staging_area(True, arrow_inputs=ArrowInputs.IN_PLACE) as staging:
        df = arrow_input(spark_engine.session, path, staging)
        assert df.rdd.getNumPartitions() == 2
        assert df.toArrow().column("offset").to_pylist() == list(range(n))


def test_no_staging_file_is_written_for_an_arrow_input_read_in_place(
    spark_engine: SparkEngine,
    engine_stub: engine_pb2_grpc.EngineStub,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def staged(self: Staging, table: pa.Table) -> str:
        raise AssertionError("an Arrow IPC input was staged")

    monkeypatch.setattr(Staging, "write", staged)
    monkeypatch.setattr(spark_engine, "_arrow_inputs", ArrowInputs.IN_PLACE)
    src = InputDataset(workdir / "in", "cities", CITIES)
    out = OutputDataset(workdir / "out", "big", sql("select event_time, city from cities"))
    src.append(
        [{"event_time": at(i), "city": f"c{i}", "population": i} for i in range(3)], arrow=True
    )
    request = out.request([src.take()])
    run(engine_stub, out, request)
    assert out.next_offset == 3


def _truncated(path: str) -> None:
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) - 40])


def _population_as_text(path: str) -> None:
    table = ipc.open_file(pa.memory_map(path, "r")).read_all()
    table = table.set_column(
        table.schema.get_field_index("population"),
        "population",
        table.column("population").cast(pa.string()),
    )
    Path(path).unlink()
    write_ipc(Path(path), table)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_truncated, "cannot read"),
        (_population_as_text, "column 'population' is string, but the input's schema says bigint"),
    ],
    ids=["truncated", "schema-disagrees"],
)
@pytest.mark.parametrize("mode", list(ArrowInputs), ids=[m.value for m in ArrowInputs])
def test_hostile_arrow_inputs_are_refused_in_one_line(
    spark_engine: SparkEngine,
    engine_stub: engine_pb2_grpc.EngineStub,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    damage: Callable[[str], None],
    message: str,
    mode: ArrowInputs,
) -> None:
    monkeypatch.setattr(spark_engine, "_arrow_inputs", mode)
    src = InputDataset(workdir / "in", "cities", CITIES)
    out = OutputDataset(workdir / "out", "x", sql("select event_time, city from cities"))
    src.append([{"event_time": at(0), "city": "A", "population": 1}])  # the schema file
    good = src.take()
    bad = src.append([{"event_time": at(1), "city": "B", "population": 2}], arrow=True)
    assert bad is not None
    damage(bad)
    entry = src.take()
    request = out.request([dataclasses.replace(entry, schema_file=good.data_paths[0])])
    response = client.transform(engine_stub, request)
    assert isinstance(response, ep.TransformResponseInternalError), response
    line = response.message.strip()
    assert f"{bad}: {message}" in line, line
    assert "\n" not in line
    assert not Path(request.new_data_path).exists()
