"""The stateful shapes users write, each run as a batch query over the rows it keeps.

* ranked rows (``ranked_rows.py``): the latest row per key, a global top N, a top N by
  ``rank()``/``dense_rank()`` or without the rank selected; a changelog with retractions;
* running aggregates per key ordered by event time (``running_aggregate.py``): each row once,
  when the watermark has passed it;
* SELECT DISTINCT (``distinct_rows.py``): each distinct row once, when the watermark has
  passed it, over a TIMESTAMP or a DATE event time.

``run_shape`` runs a stateful query of one of them (a state of their runner goes on with
it; a state of another runner, or a query of none of these shapes, is left to
``stream_transaction.run_stream_transaction``), and ``shaped`` tells ValidateQuery that the
query runs. Retractions in the inputs are refused (append-only inputs).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame, SparkSession

from common.odf import engine_protocol as ep
from common.odf.fragments import TransformSql
from engine_spark import checkpoint as cp
from engine_spark import distinct_rows, running_aggregate, streaming
from engine_spark.changelog import changelog
from engine_spark.errors import InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import register_view
from engine_spark.ordering import sort_by_values
from engine_spark.outputs import OutputColumns, plan_output_columns
from engine_spark.queries import run_steps
from engine_spark.ranked_rows import RankedRows, group_changes, ranked_rows
from engine_spark.retractions import check_no_retractions
from engine_spark.schema_mapping import result_arrow_schema
from engine_spark.spark_errors import query_errors
from engine_spark.stateful import Mode
from engine_spark.stream_transaction import (
    StreamRun,
    _new_view,
    _no_rows,
    _stream_inputs,
    carried_stream,
    in_value_order,
    recomputed_state,
    runner_mismatch,
)
from engine_spark.topn_recompute import top_n, with_kept

log = structlog.get_logger("engine_spark.query_shapes")

Shape = RankedRows | running_aggregate.RunningAggregate | distinct_rows.DistinctRows
_RUNNERS: dict[type, str] = {
    RankedRows: cp.RANKED_ROWS,
    running_aggregate.RunningAggregate: cp.RUNNING_AGGREGATE,
    distinct_rows.DistinctRows: cp.DISTINCT_ROWS,
}
_WAITING, _CARRIED = "waiting.parquet", "carried.parquet"


def shaped(
    result: DataFrame, event_times: Mapping[str, str], *, only: str | None = None
) -> Shape | None:
    """The query's shape, if it is one of the three (``event_times``: each streamed input's
    event-time column, by alias); ``only``: that runner's shape alone."""
    aliases = frozenset(event_times)
    finders: list[tuple[str, Callable[[], Shape | None]]] = [
        (cp.RANKED_ROWS, lambda: ranked_rows(result, aliases)),
        (cp.RUNNING_AGGREGATE, lambda: running_aggregate.running_aggregate(result, event_times)),
        (cp.DISTINCT_ROWS, lambda: distinct_rows.distinct_rows(result, event_times)),
    ]
    with query_errors(None, in_step=False):
        for runner, find in finders:
            if only not in (None, runner):
                continue
            shape = find()
            if shape is not None:
                return shape
    return None


def is_shaped(
    session: SparkSession, transform: TransformSql, event_times: Mapping[str, str]
) -> bool:
    """Whether the query (over the registered views) has one of the shapes above, so it
    runs incrementally (ValidateQuery, MigrateQuery; ``event_times``: each input's
    event-time column, by alias)."""
    if transform.temporal_tables:
        return False
    return shaped(run_steps(session, transform), event_times) is not None


def run_shape(
    session: SparkSession,
    area: streaming.WorkArea,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    temporal: set[str],
    batch_result: DataFrame,
) -> StreamRun | None:
    """The transaction of a stateful query of one of the shapes above; None for another
    query, or a state of another runner (``stream_transaction.run_stream_transaction``
    runs it). ``batch_result``: the query over the batch views of the new records."""
    carried = carried_stream(request, previous)
    mine = carried is not None and carried.runner in _RUNNERS.values()
    if temporal or (carried is not None and not mine):
        return None
    inputs = _stream_inputs(request, previous, temporal)
    event_times = {i.request.query_alias: i.request.vocab.event_time_column for i in inputs}
    if carried is None:
        with query_errors(None, in_step=False):
            if top_n(batch_result, frozenset(event_times)) is not None:
                return None  # the top-N runner's shape (datasets replay as they were written)
    shape = shaped(batch_result, event_times, only=carried.runner if carried else None)
    if shape is None and carried is not None:
        raise runner_mismatch(f"the state of the {carried.runner!r} runner")
    if shape is None:
        return None
    return _ShapeRun(session, area, request, inputs, carried, shape).run(batch_result)


@dataclass(frozen=True, slots=True)
class _ShapeRun:
    session: SparkSession
    area: streaming.WorkArea
    request: ep.TransformRequest
    inputs: Sequence[streaming.StreamInput]
    carried: cp.StreamState | None
    shape: Shape

    def run(self, batch_result: DataFrame) -> StreamRun:
        columns = plan_output_columns(
            [(f.name, f.dataType.simpleString()) for f in batch_result.schema.fields],
            self.request.vocab,
        )
        if columns.op is not None:
            raise InvalidQueryError(
                f"this query emits its own changelog or appends in {columns.op!r}: do not "
                f"select an {columns.op!r} column"
            )
        arrow_schema = result_arrow_schema(batch_result)
        clock = streaming.PhaseClock()
        check_no_retractions([i.request for i in self.inputs], stateful=True)
        for inp in self.inputs:
            register_view(_new_view(self.session, inp), inp.request.query_alias)
        result = run_steps(self.session, self.request.transform)
        source = next(i for i in self.inputs if i.request.query_alias == self.shape.input)
        clock.lap("plan")
        runner = _RUNNERS[type(self.shape)]
        with query_errors(None, in_step=False):
            if isinstance(self.shape, RankedRows):
                table, files, keys, emitted = self._ranked(result, source, arrow_schema)
            else:
                table, files = self._gated(result, source, arrow_schema, columns)
                keys, emitted = (), None
        clock.lap("run")
        state = recomputed_state(
            self.session,
            self.request,
            self.carried,
            files,
            runner=runner,
            keys=keys,
            emitted=emitted,
        )
        if isinstance(self.shape, RankedRows):
            state = dataclasses.replace(state, mode=Mode.CHANGELOG.value)
            columns = dataclasses.replace(columns, op=self.request.vocab.operation_type_column)
        log.info(
            "transform.shape",
            runner=runner,
            rows=table.num_rows,
            state_bytes=sum(len(v) for v in files.values()),
            **clock.laps,
        )
        lag = timedelta(0)
        if isinstance(self.shape, distinct_rows.DistinctRows) and self.shape.by_day:
            lag = distinct_rows.day_lag(source.watermark)
        return StreamRun(table, columns, state, lag)

    def _kept(self, name: str) -> str | None:
        """The state's file ``name`` written to the work area; None when it has no rows."""
        files = self.carried.files if self.carried is not None else {}
        if name not in files or _no_rows(files[name]):
            return None
        path = self.area.inputs / name
        path.write_bytes(files[name])
        return str(path)

    def _ranked(
        self, result: DataFrame, source: streaming.StreamInput, arrow_schema: pa.Schema
    ) -> tuple[pa.Table, dict[str, bytes], tuple[str, ...], bytes]:
        assert isinstance(self.shape, RankedRows)
        name = f"{source.directory}.parquet"
        output, top = with_kept(result, self._kept(name))
        table = output.toArrow().cast(arrow_schema)
        top_rows = sort_by_values(top.toArrow(), [], [])
        before = self.carried.emitted if self.carried is not None else None
        op = self.request.vocab.operation_type_column
        previous = pq.read_table(io.BytesIO(before)) if before is not None else None
        if self.shape.unique:
            changes = changelog([table], previous, self.shape.groups, op)  # one row per group
        else:
            changes = group_changes(table, previous, self.shape.groups, op)
        files = {name: parquet_bytes(top_rows)}
        return changes.rows, files, self.shape.groups, parquet_bytes(changes.emitted)

    def _gated(
        self,
        result: DataFrame,
        source: streaming.StreamInput,
        arrow_schema: pa.Schema,
        columns: OutputColumns,
    ) -> tuple[pa.Table, dict[str, bytes]]:
        """A running aggregate or a DISTINCT: the rows the new watermark has passed."""
        files: dict[str, bytes] = {}
        waiting = self._kept(_WAITING)
        if isinstance(self.shape, running_aggregate.RunningAggregate):
            running = running_aggregate.split_at_watermark(
                result, waiting, self._kept(_CARRIED), source.watermark
            )
            final, rest = running.final, running.waiting
            files[_CARRIED] = parquet_bytes(sort_by_values(running.carried.toArrow(), [], []))
        else:
            assert isinstance(self.shape, distinct_rows.DistinctRows)
            distinct = distinct_rows.split_at_watermark(
                result, self.shape, waiting, source.watermark
            )
            final, rest = distinct.final, distinct.waiting
        table = in_value_order(final.toArrow().cast(arrow_schema), columns)
        files[_WAITING] = parquet_bytes(sort_by_values(rest.toArrow(), [], []))
        return table, files
