"""Execution on a Spark Connect server (``--master sc://HOST:PORT``), vetted locally.

The engine keeps a small local JVM session (``local[1]``, no data) in which every query is
parsed, vetted by the SQL sandbox and analyzed over empty views with the inputs' schemas,
exactly as in local mode, so the same queries are refused before anything reaches the
server. Only then is the very same SQL text sent to the server, over views of the inputs'
Parquet files that the server reads itself (same machine or shared storage: the paths of
the request must be valid on the server). The result comes back as Arrow and is written by
the engine like a collected local result.

What runs over Connect: stateless (row-wise) transforms and raw queries of any shape. What
needs the JVM on the executing side is refused with ``not supported over Spark Connect:``
(``refuse``): temporal tables and as-of joins, stateful (streaming, recomputed) queries,
Arrow IPC inputs (the server reads Parquet only) and ad-hoc queries.

The server must run the same Spark version (checked at start) and, like any Connect
server, has no authentication of its own: loopback or an authenticating proxy only. The
sandbox's SQL settings (``SANDBOX_SQL_CONF``) are set on every Connect session too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyspark
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from common.odf.engine_protocol import TransformRequestInput
from common.odf.fragments import TransformSql
from engine_spark.errors import InvalidQueryError
from engine_spark.exchange import DataFormat, detect_format, read_schema
from engine_spark.inputs import nanosecond_columns, quote_identifier, union_in_order
from engine_spark.queries import output_step
from engine_spark.schema_mapping import spark_input_schema
from engine_spark.session import SANDBOX_SQL_CONF, quiet_pandas_warning

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

UNSUPPORTED = "not supported over Spark Connect"


CONNECT_SQL_CONF: dict[str, str] = {
    **SANDBOX_SQL_CONF,
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
}
"""Settings of every Connect session: the sandbox's, and those that decide query results."""


def refuse(reason: str) -> InvalidQueryError:
    """The error for what the engine does not run over Connect, saying why."""
    return InvalidQueryError(f"{UNSUPPORTED}: {reason}")


class ConnectServer:
    """A Spark Connect server the engine executes on: one client session per request."""

    def __init__(self, url: str) -> None:
        """Opens a first session (``masters.check_reachable`` ran at start-up)."""
        self._url = url
        with self.session() as session:
            version = session.version
        if version != pyspark.__version__:
            raise ValueError(
                f"{url}: the Spark Connect server runs Spark {version}, the engine"
                f" {pyspark.__version__}: queries are vetted locally, so both must be the same"
            )

    @property
    def url(self) -> str:
        return self._url

    @contextmanager
    def session(self) -> Iterator[ConnectSession]:
        """A fresh Connect session (its own temp views and conf), released at the end."""
        quiet_pandas_warning()
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        builder: Any = ConnectSession.builder.remote(self._url)
        session: ConnectSession = builder.config(map=CONNECT_SQL_CONF).create()
        try:
            yield session
        finally:
            session.stop()


def check_parquet(paths: Sequence[str]) -> None:
    """Refuse inputs the server cannot read: it scans Parquet files only."""
    for path in paths:
        if detect_format(path) is not DataFormat.PARQUET:
            raise refuse(f"input file {path} is not Parquet (the server reads Parquet only)")


def load_remote_input(session: ConnectSession, inp: TransformRequestInput) -> DataFrame:
    """The new records of one input, read by the server, in offset order (as ``load_input``)."""
    schema = file_schema(inp.schema_file)
    if inp.offset_interval is None or not inp.data_paths:
        return session.createDataFrame([], schema)
    check_parquet(inp.data_paths)
    offset = quote_identifier(inp.vocab.offset_column)
    interval = inp.offset_interval
    df = _scan(session, inp.data_paths, schema).where(
        f"{offset} BETWEEN {int(interval.start)} AND {int(interval.end)}"
    )
    if len(inp.data_paths) > 1:
        df = df.coalesce(1).sortWithinPartitions(offset)
    return df


def load_remote_files(session: ConnectSession, paths: Sequence[str]) -> DataFrame:
    """Several files as one DataFrame in file order (as ``load_files``)."""
    check_parquet(paths)
    schema = file_schema(paths[-1])
    return union_in_order([_scan(session, [path], schema) for path in paths])


def run_remote_steps(session: ConnectSession, transform: TransformSql) -> DataFrame:
    """The transform's steps on the server: the texts the local sandbox already vetted."""
    output = output_step(transform)
    for step in transform.steps():
        if step.alias is not None:
            session.sql(step.query).createOrReplaceTempView(quote_identifier(step.alias))
    return session.sql(output.query)


def _scan(session: ConnectSession, paths: Sequence[str], schema: StructType) -> DataFrame:
    """Parquet files with ``schema``; nanosecond timestamps (raw INT64) truncated to
    microseconds as ``inputs.read_parquet`` does, one scan per set of such columns."""
    groups: dict[frozenset[str], list[str]] = {}
    for path in paths:
        groups.setdefault(nanosecond_columns(read_schema(path), schema), []).append(path)
    frames: list[DataFrame] = []
    for nanos, group in groups.items():
        if not nanos:
            frames.append(session.read.schema(schema).parquet(*group))
            continue
        raw = StructType(
            [StructField(f.name, LongType(), f.nullable) if f.name in nanos else f for f in schema]
        )
        frames.append(
            session.read.schema(raw)
            .parquet(*group)
            .selectExpr(*[_column_expr(f.name, f.dataType.simpleString(), nanos) for f in schema])
        )
    return union_in_order(frames)


def file_schema(path: str) -> StructType:
    """The Spark schema of a Parquet file (as ``inputs.file_schema``)."""
    return from_arrow_schema(spark_input_schema(read_schema(path)))


def _column_expr(name: str, spark_type: str, nanos: frozenset[str]) -> str:
    quoted = quote_identifier(name)
    if name not in nanos:
        return quoted
    return f"CAST(timestamp_micros({quoted} div 1000) AS {spark_type}) AS {quoted}"
