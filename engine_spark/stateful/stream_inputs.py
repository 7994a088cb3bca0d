"""The streamed inputs of a stateful transaction, shared by every runner.

Each input that is not a temporal table is a ``StreamInput``: its request, its watermark
before the transaction (records with an event time less than it are late, ``on_time``) and
after. ``new_records`` reads its records in the offset interval (refusing retractions and
corrections), ``spark_watermark`` is the global watermark (the minimum over inputs), and
``query_fingerprint`` names the query a carried state belongs to. ``WorkArea`` holds the
request's temporary files (Spark's checkpoint, one directory per input).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from common.odf.engine_protocol import TransformRequestInput
from common.odf.fragments import TransformSql
from engine_spark.exchange import read_schema, read_table
from engine_spark.retractions import check_slice, in_interval
from engine_spark.schema_mapping import spark_input_schema, spark_input_table
from engine_spark.staging import spark_values
from engine_spark.watermark import is_late

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class PhaseClock:
    """Seconds spent in each phase of a stateful transaction (for the logs)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.laps[phase] = round(now - self._last, 3)
        self._last = now


@dataclass(frozen=True, slots=True)
class StreamInput:
    """One streamed input of the transaction."""

    request: TransformRequestInput
    previous_watermark: datetime | None
    """The input's watermark before this transaction: records before it are late."""
    watermark: datetime | None
    """The input's watermark after this transaction."""

    @property
    def directory(self) -> str:
        return str(self.request.dataset_id.to_multibase())


def query_fingerprint(transform: TransformSql) -> str:
    """Identifies the query a streaming state belongs to (steps and temporal tables)."""
    doc = {
        "steps": [[s.alias, s.query] for s in transform.steps()],
        "temporal": [[t.name, list(t.primary_key)] for t in transform.temporal_tables or ()],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def spark_version(session: SparkSession) -> str:
    return ".".join(session.version.split(".")[:2])


@dataclass(slots=True)
class WorkArea:
    """The request's directories: Spark's checkpoint and one directory per streamed input."""

    root: Path

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def inputs(self) -> Path:
        return self.root / "in"


@contextmanager
def work_area() -> Iterator[WorkArea]:
    root = Path(tempfile.mkdtemp(prefix="odf-engine-stream-"))
    try:
        area = WorkArea(root)
        area.inputs.mkdir()
        yield area
    finally:
        shutil.rmtree(root, ignore_errors=True)


def spark_watermark(inputs: Sequence[StreamInput]) -> datetime | None:
    """Spark's global watermark once every input's marker is read: the minimum over inputs,
    an input without a watermark counting as the epoch."""
    return min((i.watermark or EPOCH for i in inputs), default=None)


def previous_spark_watermark(inputs: Sequence[StreamInput]) -> datetime | None:
    """The global watermark before this transaction (the same minimum)."""
    return min((i.previous_watermark or EPOCH for i in inputs), default=None)


def spark_schema(schema: pa.Schema) -> StructType:
    return from_arrow_schema(schema, prefer_timestamp_ntz=False)


def new_records(
    inp: TransformRequestInput, *, since: datetime | None = None
) -> tuple[pa.Table, StructType]:
    """The input's records in its offset interval, as Spark values, in offset order, and their
    Spark schema; InvalidQuery when they hold a retraction or correction
    (``retractions.py``). ``since``: only the records not late by it (``on_time``)."""
    schema = spark_input_schema(read_schema(inp.schema_file))
    spark = spark_schema(schema)
    rows = _records_in_interval(inp, schema)
    check_slice(inp, rows, stateful=True)
    if since is not None:
        rows = rows.filter(on_time(rows, inp.vocab.event_time_column, since))
    offset = inp.vocab.offset_column
    return spark_values(rows.sort_by([(offset, "ascending")]), spark), spark


def on_time(rows: pa.Table, column: str, watermark: datetime) -> pc.Expression:
    """A filter of ``rows``: event time ``column`` not late by ``watermark``
    (``watermark.is_late``; a filter drops a null event time)."""
    value = pa.scalar(watermark, rows.schema.field(column).type)
    return ~is_late(pc.field(column), value)


def _records_in_interval(inp: TransformRequestInput, schema: pa.Schema) -> pa.Table:
    """The records in the input's offset interval, in ``schema``, in no particular order."""
    if inp.offset_interval is None or not inp.data_paths:
        return schema.empty_table()
    parts = []
    offset = inp.vocab.offset_column
    for path in inp.data_paths:
        table = spark_input_table(read_table(path))
        table = table.filter(in_interval(table.column(offset), inp.offset_interval))
        columns = [
            table.column(f.name).cast(f.type)
            if f.name in table.column_names
            else pa.nulls(table.num_rows, f.type)
            for f in schema
        ]
        parts.append(pa.Table.from_arrays(columns, schema=schema))
    return pa.concat_tables(parts)
