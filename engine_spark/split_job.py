"""A split transaction's slices written and hashed by the executors, in one Spark job.

The slices' results (one DataFrame per slice, each over its own run of input files) become
one DataFrame of K partitions: each result is coalesced into one partition (without a
shuffle: its rows stay in the order ``output_stream.result_batches`` serves them, partition
after partition) and the K are concatenated in slice order (``UNION ALL``: partition ``j`` is
slice ``j``). Its ``mapInArrow`` task ``j`` writes slice ``j``'s file with the stream
writer's own code (``output_stream.write_batches``: same system columns, row groups and
Parquet settings, hence the same bytes as ExecuteTransform of that slice), then hashes it
(``common.hashing``: physical and logical hash, size, records) where it was written, and
answers one small row. The driver collects those K rows, nothing else.

Each slice's offsets start where the previous slice's end, so the K record counts are known
before the job: from the inputs' runs when the plan neither drops nor adds rows, else from a
first, cheaper pass in the JVM that counts each slice's rows without ordering them
(``slice_records``). A slice that wrote other than its count is an error (the later slices'
offsets would be wrong).

The workers run the engine's interpreter and import this package, ``pyarrow`` and
``common``; they write at the slices' paths: any path with a local master, on a cluster the
shared staging directory every node mounts.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from common.arrow_values import EPOCH
from common.logs import configure_logging
from common.odf.fragments import DatasetVocabulary
from engine_spark import jvm_plan
from engine_spark.inputs import union_in_order
from engine_spark.output_stream import OUTPUT_ROW_GROUP_ROWS, arrow_schema, write_batches
from engine_spark.outputs import OutputColumns
from engine_spark.phases import phase
from engine_spark.session import quiet_pandas_warning
from engine_spark.split import SliceFacts

_FACTS = (
    "slice int, records long, size long, physical_hash string, logical_hash string,"
    " min_event_us long, max_event_us long"
)
_FACTS_ARROW = pa.schema(
    [
        pa.field("slice", pa.int32()),
        pa.field("records", pa.int64()),
        pa.field("size", pa.int64()),
        pa.field("physical_hash", pa.string()),
        pa.field("logical_hash", pa.string()),
        pa.field("min_event_us", pa.int64()),
        pa.field("max_event_us", pa.int64()),
    ]
)
"""A task's answer; event times as microseconds since the epoch (a Spark timestamp would come
back to the driver in the session's time zone)."""
_MICROSECOND = timedelta(microseconds=1)
_UNION_OUTPUT_PARTITIONING = "spark.sql.unionOutputPartitioning"
_STOP_WAIT_S = 30.0
_WORKER_KILL_S = 2.5
"""Spark gives a killed task's Python worker 2 s to stop (``spark.python.task.killTimeout``)."""
_COUNT_PRESERVING = frozenset(
    {"Project", "Union", "SubqueryAlias", "View", "Sort", "Repartition", "ResolvedHint"}
)
_RELATIONS = frozenset({"LogicalRDD", "LocalRelation", "Relation", "LogicalRelation"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SliceJob:
    """What every task of the job needs (pickled into the tasks; small)."""

    paths: tuple[str, ...]
    schemas: tuple[pa.Schema, ...]
    """Each slice's result as ``toArrow`` reads it (nullability included)."""
    next_offsets: tuple[int, ...]
    columns: OutputColumns
    vocab: DatasetVocabulary
    system_time: datetime
    row_group_rows: int = OUTPUT_ROW_GROUP_ROWS


def keeps_row_count(result: DataFrame) -> bool:
    """Whether ``result``'s analysed plan gives exactly one row per input row (no filter,
    no generator), so a slice's records are its inputs' records."""
    for node in jvm_plan.walk(jvm_plan.analyzed(result)):
        name = str(node.nodeName())
        if name not in _COUNT_PRESERVING and name not in _RELATIONS:
            return False
    return True


def slice_records(results: Sequence[DataFrame]) -> list[int]:
    """Each slice's records, counted in the JVM: each result's rows tagged with its slice and
    counted by slice (an aggregation, so Spark drops the local sorts that put the inputs in
    offset order); no row leaves the JVM."""
    tagged = union_in_order([r.select(F.lit(j).alias("slice")) for j, r in enumerate(results)])
    with phase("count job"):
        rows = tagged.groupBy("slice").count().collect()
    counts = dict.fromkeys(range(len(results)), 0)
    counts.update((int(r["slice"]), int(r["count"])) for r in rows)
    return list(counts.values())


def write_slices(results: Sequence[DataFrame], job: SliceJob) -> list[SliceFacts]:
    """Write and hash every slice on the executors (module doc); a failed job leaves no slice
    file behind."""
    if not len(results) == len(job.paths) == len(job.schemas) == len(job.next_offsets):
        raise ValueError("a split job needs one path, schema and offset per slice")
    frame = _one_partition_each(results)
    context = frame.sparkSession.sparkContext
    tag = f"odf-split-{uuid.uuid4().hex}"
    context.addJobTag(tag)
    try:
        with phase("write and hash job"):
            rows = _map(frame, partial(_write_partition, job), _FACTS).collect()
        return [
            SliceFacts(
                num_records=int(r["records"]),
                size=int(r["size"]),
                physical_hash=r["physical_hash"],
                logical_hash=r["logical_hash"],
                min_event_time=_from_micros(r["min_event_us"]),
                max_event_time=_from_micros(r["max_event_us"]),
            )
            for r in _by_slice(rows, len(results))
        ]
    except BaseException:
        # The job's other tasks may still be writing: stop them, wait until none runs, then
        # remove what they wrote (finished slices and the temporary files of killed ones).
        context.cancelJobsWithTag(tag)
        _wait_for_tasks_to_stop(context)
        for path in map(Path, job.paths):
            path.unlink(missing_ok=True)
            for partial_file in path.parent.glob(f".{path.name}.*.tmp"):
                partial_file.unlink(missing_ok=True)
        raise
    finally:
        context.removeJobTag(tag)


def _wait_for_tasks_to_stop(context: Any) -> None:
    """Until no stage has a running task (at most ``_STOP_WAIT_S``; the engine runs one
    transaction at a time), plus the time Spark gives a killed task's Python worker."""
    tracker = context.statusTracker()
    deadline = time.monotonic() + _STOP_WAIT_S
    while time.monotonic() < deadline:
        stages = (tracker.getStageInfo(s) for s in tracker.getActiveStageIds())
        if not any(info is not None and info.numActiveTasks > 0 for info in stages):
            break
        time.sleep(0.1)
    time.sleep(_WORKER_KILL_S)


def slice_schemas(results: Sequence[DataFrame]) -> tuple[pa.Schema, ...]:
    return tuple(arrow_schema(r.schema) for r in results)


def _one_partition_each(results: Sequence[DataFrame]) -> DataFrame:
    """The results as the K partitions of one DataFrame, in order. Spark's union of
    single-partition children would otherwise be one partition holding them all (its
    ``unionOutputPartitioning``); a union inside a row-local query is unaffected (its children
    concatenate either way: none has a partitioning of several partitions). Each task checks
    that its partition is a slice, and the driver that every slice answered once."""
    results[0].sparkSession.conf.set(_UNION_OUTPUT_PARTITIONING, "false")
    return union_in_order([r.coalesce(1) for r in results])


def _map(frame: DataFrame, task: Any, schema: str) -> DataFrame:
    with warnings.catch_warnings():
        # mapInArrow checks the pandas version (the engine uses no pandas) and warns about it.
        quiet_pandas_warning()
        return frame.mapInArrow(task, schema)


def _by_slice(rows: Sequence[Any], k: int) -> list[Any]:
    """The tasks' rows in slice order; exactly one per slice."""
    found = sorted(rows, key=lambda r: int(r["slice"]))
    if [int(r["slice"]) for r in found] != list(range(k)):
        raise RuntimeError(f"the split job answered for slices {[r['slice'] for r in rows]}")
    return found


def _slice_index(k: int) -> int:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("a split task runs outside of a Spark task")
    j = context.partitionId()
    if not 0 <= j < k:
        raise RuntimeError(f"task of partition {j} in a split job of {k} slices")
    return j


def _write_partition(job: SliceJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In a worker: write this task's slice, hash it, answer its facts in one row."""
    configure_logging(0)  # the worker's own process: as quiet as the engine by default
    j = _slice_index(len(job.paths))
    schema = job.schemas[j]
    path = job.paths[j]
    records = write_batches(
        (_conform(b, schema) for b in batches),
        job.columns,
        job.vocab,
        system_time=job.system_time,
        next_offset=job.next_offsets[j],
        path=path,
        row_group_rows=job.row_group_rows,
    )
    facts = (
        SliceFacts.of_file(path, job.vocab.event_time_column)
        if records
        else SliceFacts(num_records=0)
    )
    yield pa.RecordBatch.from_pydict(
        {
            "slice": [j],
            "records": [facts.num_records],
            "size": [facts.size],
            "physical_hash": [facts.physical_hash],
            "logical_hash": [facts.logical_hash],
            "min_event_us": [_micros(facts.min_event_time)],
            "max_event_us": [_micros(facts.max_event_time)],
        },
        schema=_FACTS_ARROW,
    )


def _micros(value: datetime | None) -> int | None:
    return None if value is None else (value - EPOCH) // _MICROSECOND


def _from_micros(value: int | None) -> datetime | None:
    return None if value is None else EPOCH + value * _MICROSECOND


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the slice's own schema (field nullability, the UTC zone ``toArrow``
    labels timestamps with), as ``result_batches`` reads the same Arrow data."""
    if batch.schema == schema:
        return batch
    columns = [
        c if c.type == f.type else c.cast(f.type)
        for c, f in zip(batch.columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
