"""An ad-hoc query seen before over the same files runs on the plan the engine kept
(``engine_spark/planned_queries.py``): the same rows, without planning again; any change to a
file under it, or new files, plans afresh."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from engine_spark.engine import SparkEngine
from engine_spark.phases import recording
from tests.integration.engine.datasets import sql

pytestmark = pytest.mark.spark

GROUPED = "SELECT carrier, COUNT(*) AS n, SUM(delay) AS delay FROM f GROUP BY carrier"


@pytest.fixture
def engine(spark_engine: SparkEngine) -> SparkEngine:
    """An engine of its own (its own kept plans) over the shared session."""
    return SparkEngine(spark_engine.session)


def _write(path: Path, carriers: list[str], delays: list[int]) -> str:
    pq.write_table(pa.table({"carrier": carriers, "delay": delays}), path)
    return str(path)


def _run(
    engine: SparkEngine, workdir: Path, paths: list[str], query: str
) -> tuple[pa.Table, set[str]]:
    """The rows of ``query`` over a view ``f`` of ``paths``, and the phases it went through."""
    output = workdir / "out" / "result.arrow"
    output.parent.mkdir(exist_ok=True)
    request = ep.QueryRequest(
        inputs=(ep.QueryInput(alias="f", data_paths=tuple(paths)),),
        transform=sql(query),
        output_data_path=str(output),
    )
    with recording() as rec:
        response = engine.execute_query(request)
    with pa.memory_map(str(output)) as source:
        table = ipc.open_file(source).read_all()
    assert response.num_records == table.num_rows
    return table.sort_by("carrier"), set(rec.phases)


def test_the_same_query_over_the_same_files_runs_on_its_kept_plan(
    engine: SparkEngine, workdir: Path
) -> None:
    paths = [_write(workdir / "f-0", ["AA", "UA", "AA"], [5, 10, 20])]
    first, planned = _run(engine, workdir, paths, GROUPED)
    again, kept = _run(engine, workdir, paths, GROUPED)
    assert first == again
    assert first.to_pylist() == [
        {"carrier": "AA", "n": 2, "delay": 25},
        {"carrier": "UA", "n": 1, "delay": 10},
    ]
    assert {"inputs", "analysis", "physical planning"} <= planned
    assert not kept & {"inputs", "analysis", "optimisation", "physical planning"}, kept
    assert "job, tasks and collect" in kept
    # Another text is another plan.
    other, _ = _run(engine, workdir, paths, GROUPED + " HAVING COUNT(*) > 1")
    assert other.to_pylist() == [{"carrier": "AA", "n": 2, "delay": 25}]


def test_a_new_file_or_a_file_changed_in_place_plans_afresh(
    engine: SparkEngine, workdir: Path
) -> None:
    paths = [_write(workdir / "f-0", ["AA", "UA", "AA"], [5, 10, 20])]
    _run(engine, workdir, paths, GROUPED)
    # The dataset moves on: one more file, a new plan over both.
    paths.append(_write(workdir / "f-1", ["UA"], [1]))
    grown, phases = _run(engine, workdir, paths, GROUPED)
    assert "inputs" in phases
    assert grown.to_pylist() == [
        {"carrier": "AA", "n": 2, "delay": 25},
        {"carrier": "UA", "n": 2, "delay": 11},
    ]
    _run(engine, workdir, paths, GROUPED)  # kept now
    # A file rewritten under the same path (of the same size, and with its old modification
    # time put back: only its inode tells): the kept plan, and its shuffle, are not used.
    stat = os.stat(paths[1])
    replacement = workdir / "f-1.new"
    _write(replacement, ["AA"], [1])
    assert replacement.stat().st_size == stat.st_size
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, paths[1])
    changed, phases = _run(engine, workdir, paths, GROUPED)
    assert "inputs" in phases
    assert changed.to_pylist() == [
        {"carrier": "AA", "n": 3, "delay": 26},
        {"carrier": "UA", "n": 1, "delay": 10},
    ]


def test_queries_over_arrow_files_are_not_kept(engine: SparkEngine, workdir: Path) -> None:
    arrow = workdir / "f-0.arrow"
    table = pa.table({"carrier": ["AA"], "delay": [1]})
    with pa.OSFile(str(arrow), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    _run(engine, workdir, [str(arrow)], GROUPED)
    again, phases = _run(engine, workdir, [str(arrow)], GROUPED)
    assert "inputs" in phases
    assert again.to_pylist() == [{"carrier": "AA", "n": 1, "delay": 1}]
