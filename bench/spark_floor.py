"""Spark's floor: the same SQL over the same Parquet file by plain PySpark, no engine around it.

What any Spark-based engine pays at least for a transaction, measured in the benchmark's own
process with its own SparkSession: the engine's session configuration
(``engine_spark.session.session_conf``: same master, shuffle partitions, adaptive execution,
Arrow batch size, ANSI mode...), the input file read by ``spark.read.parquet``, the query run
by ``spark.sql``, and the result written as ONE Parquet file (what a data slice is) the two
plain ways there are, each timed: collected as Arrow (``toArrow``) and written by pyarrow, or
written by Spark's own writer from one partition (``coalesce(1)``) and the part file renamed.
The faster of the two is the floor. The same query as an aggregate with no output (``count``
and a ``sum``, collected) shows the cost of the scan and the query alone.

No system columns, no offsets, no hashes, no commit, no gRPC: only what Spark itself does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from bench.figures import Figure
from engine_spark.exchange import PARQUET_COMPRESSION
from engine_spark.session import SessionSettings, build_session

INPUT_VIEW = "raw"
"""The view the query reads (``bench_transform.QUERY``)."""

WAYS = ("toArrow + pyarrow", "coalesce(1) writer")
"""The plain ways to one Parquet file, in the order ``write_ways`` times them."""


def plain_session(master: str, driver_memory: str | None) -> SparkSession:
    """A SparkSession with the engine's own configuration, in this process."""
    return build_session(SessionSettings(master=master, driver_memory=driver_memory))


def _view(spark: SparkSession, data_file: Path) -> None:
    spark.read.parquet(str(data_file)).createOrReplaceTempView(INPUT_VIEW)


def to_arrow(spark: SparkSession, query: str, data_file: Path, out: Path) -> tuple[float, int]:
    """Read, query, collect as Arrow, write by pyarrow: seconds and records written."""
    started = time.perf_counter()
    _view(spark, data_file)
    table = spark.sql(query).toArrow()
    pq.write_table(table, out, compression=PARQUET_COMPRESSION)
    return time.perf_counter() - started, table.num_rows


def spark_writer(spark: SparkSession, query: str, data_file: Path, out: Path) -> tuple[float, int]:
    """Read, query, Spark's writer from one partition, the part file renamed to ``out``:
    seconds and records written (read from the footer, not timed)."""
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        started = time.perf_counter()
        _view(spark, data_file)
        written = work / "out"
        spark.sql(query).coalesce(1).write.option("compression", PARQUET_COMPRESSION).parquet(
            str(written)
        )
        (part,) = written.glob("part-*")
        os.replace(part, out)
        seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return seconds, pq.read_metadata(out).num_rows


def write_ways(
    spark: SparkSession, query: str, data_file: Path, out_dir: Path, tag: str
) -> list[tuple[float, int]]:
    """Each of ``WAYS`` once: (seconds, records) in that order."""
    return [
        to_arrow(spark, query, data_file, out_dir / f"plain-arrow-{tag}.parquet"),
        spark_writer(spark, query, data_file, out_dir / f"plain-writer-{tag}.parquet"),
    ]


def aggregate_only(spark: SparkSession, query: str, data_file: Path) -> tuple[float, int]:
    """The query's rows counted and summed, nothing written: seconds and the count."""
    started = time.perf_counter()
    _view(spark, data_file)
    (row,) = spark.sql(f"SELECT count(*) AS n, sum(hash(*)) AS h FROM ({query})").collect()
    return time.perf_counter() - started, int(row["n"])


def figures(rows: int, median: dict[str, float], target: float, *, counted: bool) -> list[Figure]:
    """A size's figures from the medians (``ours``, ``engine``: our engine call alone,
    ``datafusion``, each of ``WAYS``, ``aggregate``): the target row, ours vs DataFusion
    (infinite when the record counts differ, ``counted`` false), then the floor's rows, which
    have no target."""
    floor = min(median[way] for way in WAYS)
    differ = "" if counted else " (RECORD COUNTS DIFFER)"
    df = median["datafusion"]
    return [
        Figure(
            f"whole transaction vs DataFusion, {rows:,} records{differ}",
            median["ours"] if counted else float("inf"),
            "s",
            df,
            target,
        ),
        Figure(f"plain Spark vs DataFusion, {rows:,} records", floor, "s", df),
        Figure(f"ours vs plain Spark, {rows:,} records", median["ours"], "s", floor),
        Figure(f"our engine call vs plain Spark, {rows:,} records", median["engine"], "s", floor),
        Figure(
            f"plain Spark, no output, vs DataFusion, {rows:,} records", median["aggregate"], "s", df
        ),
    ]
