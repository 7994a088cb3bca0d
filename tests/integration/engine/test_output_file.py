"""Row-wise outputs written by Spark's own writer give the same file contents as the collect path.

Every request runs twice on the same SparkSession: on an engine where Spark writes the output
(whatever its size) and on one that collects the result and writes it with pyarrow. The two files
must have the same schema (nullability included), the same records in the same order and
the same logical hash; which writer wrote a file shows in its Parquet footer.
"""

from __future__ import annotations

import dataclasses
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from common.hashing import logical_hash, logical_hash_parquet
from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, OffsetInterval
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from engine_spark.output_file import write_output
from engine_spark.output_stream import stream_output
from engine_spark.outputs import OutputColumns, OutputWriter
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql

pytestmark = [pytest.mark.spark]

FLAT = pa.schema(
    [
        ("flag", pa.bool_()),
        ("tiny", pa.int8()),
        ("small", pa.int16()),
        ("count", pa.int32()),
        ("big", pa.int64()),
        ("ratio", pa.float32()),
        ("value", pa.float64()),
        ("price", pa.decimal128(10, 2)),
        ("wide", pa.decimal128(30, 5)),
        ("name", pa.string()),
        ("blob", pa.binary()),
        ("day", pa.date32()),
        ("seen", pa.timestamp("ms", tz="UTC")),
    ]
)

COLUMNS = ", ".join(["event_time", *FLAT.names])


def flat_row(i: int) -> dict[str, object]:
    return {
        "event_time": at(i),
        "flag": i % 2 == 0,
        "tiny": i % 100 - 50,
        "small": i * 7,
        "count": None if i % 5 == 0 else i,
        "big": i * 1_000_003,
        "ratio": i / 3,
        "value": float("nan") if i == 4 else i * 1.5,
        "price": Decimal(i) / 4,
        "wide": Decimal(i) * Decimal("12345678901234567.12345"),
        "name": None if i % 7 == 0 else f"name-{i} ✓",
        "blob": bytes([i % 256, 0, 255]),
        "day": date(2024, 1, 1 + i % 28),
        "seen": at(i / 7),
    }


@pytest.fixture(scope="module")
def writing_engine(spark_engine: SparkEngine) -> SparkEngine:
    """The shared session; Spark's own writer writes every row-wise output it can."""
    return SparkEngine(spark_engine.session, output_writer=OutputWriter.SPARK)


@pytest.fixture(scope="module")
def collecting_engine(spark_engine: SparkEngine) -> SparkEngine:
    """The same session, with the collect path for every output."""
    return SparkEngine(spark_engine.session, output_writer=OutputWriter.COLLECT)


def both(
    spark_engine: SparkEngine, collecting: SparkEngine, request: ep.TransformRequest
) -> tuple[ep.TransformResponseSuccess, Path, Path]:
    """Run ``request`` on both engines; returns the response and the two data files."""
    spark_path = Path(request.new_data_path)
    collected_path = spark_path.with_name(f"collected-{spark_path.name}")
    spark = spark_engine.execute_transform(request)
    collected = collecting.execute_transform(
        dataclasses.replace(request, new_data_path=str(collected_path))
    )
    assert spark == collected
    return spark, spark_path, collected_path


def test_streamed_outputs_match_the_collect_path(
    spark_engine: SparkEngine, collecting_engine: SparkEngine, workdir: Path
) -> None:
    """The default writer: the result's batches streamed partition by partition (a union of
    two inputs: two partitions), offsets continuing across them, into Parquet and Arrow IPC,
    nested columns included."""
    first, second = (InputDataset(workdir / "in", n, FLAT) for n in ("one", "two"))
    first.append([flat_row(i) for i in range(70)])
    second.append([flat_row(i) for i in range(100, 163)])
    out = OutputDataset(
        workdir / "out",
        "union",
        sql(
            f"select {COLUMNS}, named_struct('n', name, 'at', seen) as s from one"
            f" union all select {COLUMNS}, named_struct('n', name, 'at', seen) as s from two"
        ),
    )
    out.next_offset = 10
    taken = [first.take(), second.take()]
    for suffix in ("", ".arrow"):
        request = out.request(taken, data_suffix=suffix)
        response, streamed, collected = both(spark_engine, collecting_engine, request)
        assert response.new_offset_interval == OffsetInterval(start=10, end=142)
        a, b = read_table(streamed), read_table(collected)
        assert a.schema == b.schema
        assert logical_hash(a) == logical_hash(b)  # equals() would fail on the NaN
        assert a.column("offset").to_pylist() == list(range(10, 143))
        assert a.column("big").to_pylist()[69:71] == [69 * 1_000_003, 100 * 1_000_003]
        assert leftovers(streamed.parent) == []
        if not suffix:  # both partitions in one row group, as the collect path writes them
            assert pq.read_metadata(streamed).num_row_groups == 1


def test_streamed_outputs_are_cut_into_row_groups_across_batches_and_partitions(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """Spark's batches (two partitions, two batches each) are re-cut into row groups of the
    given size, the last one fewer, with offsets and values in order; the engine's requests
    use row groups as large as ``pq.write_table``'s (the collect path's, above)."""
    session = spark_engine.session.newSession()
    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "30")
    result = session.sql(
        "select timestamp_millis(id * 1000) as event_time, id * 3 as v from range(0, 133, 1, 2)"
    )
    assert result.rdd.getNumPartitions() == 2
    path = workdir / "out" / "data"
    columns = OutputColumns(event_time="event_time", op=None, data=("v",))
    rows = stream_output(
        result,
        columns,
        DatasetVocabulary(),
        system_time=at(0),
        next_offset=7,
        path=str(path),
        row_group_rows=50,
    )
    assert rows == 133
    meta = pq.read_metadata(path)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [50, 50, 33]
    table = pq.read_table(path)
    assert table.column("offset").to_pylist() == list(range(7, 140))
    assert table.column("v").to_pylist() == [i * 3 for i in range(133)]
    assert leftovers(path.parent) == []


def read_table(path: Path) -> pa.Table:
    if path.name.endswith(".arrow"):
        with pa.memory_map(str(path)) as source:
            return pa.ipc.open_file(source).read_all()
    return pq.read_table(path)


def writer(path: Path) -> str:
    return str(pq.read_metadata(path).created_by)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_flat_types_over_several_files_match_the_collect_path(
    writing_engine: SparkEngine, collecting_engine: SparkEngine, workdir: Path
) -> None:
    src = InputDataset(workdir / "in", "flat", FLAT)
    for start in (0, 40, 90):  # three files (133 rows, one has tiny = 3): one sorted partition
        src.append([flat_row(i) for i in range(start, start + 40 + start // 10)])
    out = OutputDataset(
        workdir / "out",
        "flat.out",
        sql(f"select {COLUMNS}, big * 2 as big2, upper(name) as shout from flat where tiny <> 3"),
    )
    out.next_offset = 1000
    request = out.request([src.take()], system_time=at(100))
    response, spark_path, collected_path = both(writing_engine, collecting_engine, request)

    assert "parquet-mr" in writer(spark_path)
    assert "parquet-cpp" in writer(collected_path)
    spark_table, collected_table = pq.read_table(spark_path), pq.read_table(collected_path)
    assert spark_table.schema.remove_metadata() == collected_table.schema.remove_metadata()
    assert [f.nullable for f in spark_table.schema] == [f.nullable for f in collected_table.schema]
    assert spark_table.to_pylist()[:3] == collected_table.to_pylist()[:3]
    assert spark_table.column("offset").to_pylist() == list(range(1000, 1000 + 132))
    assert response.new_offset_interval == OffsetInterval(start=1000, end=1131)
    assert logical_hash_parquet(spark_path) == logical_hash_parquet(collected_path)
    assert leftovers(spark_path.parent) == []


def test_empty_result_writes_no_file(
    writing_engine: SparkEngine, collecting_engine: SparkEngine, workdir: Path
) -> None:
    src = InputDataset(workdir / "in", "flat", FLAT)
    src.append([flat_row(i) for i in range(10)], watermark=at(9))
    out = OutputDataset(workdir / "out", "none", sql(f"select {COLUMNS} from flat where big < 0"))
    request = out.request([src.take()])
    response, spark_path, collected_path = both(writing_engine, collecting_engine, request)

    assert response.new_offset_interval is None
    assert response.new_watermark == at(9)
    assert not spark_path.exists() and not collected_path.exists()
    assert leftovers(spark_path.parent) == []


def test_a_failing_query_leaves_no_file(writing_engine: SparkEngine, workdir: Path) -> None:
    src = InputDataset(workdir / "in", "flat", FLAT)
    src.append([flat_row(i) for i in range(10)])
    out = OutputDataset(
        workdir / "out", "bad", sql(f"select {COLUMNS}, big div (tiny + 50) as q from flat")
    )
    request = out.request([src.take()])

    with pytest.raises(InvalidQueryError, match=r"DIVIDE_BY_ZERO|by zero"):
        writing_engine.execute_transform(request)
    assert not Path(request.new_data_path).exists()
    assert leftovers(Path(request.new_data_path).parent) == []


def test_nested_and_op_results_are_collected(
    writing_engine: SparkEngine, collecting_engine: SparkEngine, workdir: Path
) -> None:
    src = InputDataset(workdir / "in", "flat", FLAT)
    src.append([flat_row(i) for i in range(10)])
    nested = OutputDataset(
        workdir / "out",
        "nested",
        sql("select event_time, named_struct('n', name, 'at', seen) as s from flat"),
    )
    with_op = OutputDataset(workdir / "out", "op", sql("select op, event_time, name from flat"))
    taken = src.take()
    for out in (nested, with_op):
        _, spark_path, collected_path = both(
            writing_engine, collecting_engine, out.request([taken])
        )
        assert "parquet-cpp" in writer(spark_path)
        assert logical_hash_parquet(spark_path) == logical_hash_parquet(collected_path)


def test_the_cluster_writer_keeps_partition_order_in_one_file(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    """``parallel``: the query runs in its own partitions (8 here, as on a cluster's
    executors), its rows are brought into one partition in partition and row order, and one
    file gets them with offsets in that order: the records the sequential writer gives."""
    session = spark_engine.session
    result = (
        session.range(0, 40_000, numPartitions=8)
        .where(F.col("id") % 3 != 0)
        .select(F.timestamp_seconds("id").alias("event_time"), (F.col("id") * 2).alias("v"))
    )
    assert result.rdd.getNumPartitions() == 8
    columns = OutputColumns(event_time="event_time", op=None, data=("v",))
    paths = {parallel: workdir / f"out-{parallel}.parquet" for parallel in (True, False)}
    for parallel, path in paths.items():
        rows = write_output(
            result,
            columns,
            DatasetVocabulary(),
            system_time=at(5),
            next_offset=7,
            path=str(path),
            parallel=parallel,
        )
        assert rows == 26_666
    table = pq.read_table(paths[True])
    assert table.column("offset").to_pylist() == list(range(7, 7 + 26_666))
    assert table.column("v").to_pylist() == [i * 2 for i in range(40_000) if i % 3 != 0]
    assert table.column_names == ["offset", "op", "system_time", "event_time", "v"]
    assert logical_hash_parquet(paths[True]) == logical_hash_parquet(paths[False])
    assert leftovers(workdir) == []
