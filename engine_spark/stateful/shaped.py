"""The stateful shapes users write, each run as a batch query over the rows it keeps.

* ranked rows (``shapes/ranked_rows.py``): the latest row per key, a global top N, a top N by
  ``rank()``/``dense_rank()`` or without the rank selected; a changelog with retractions;
* running aggregates per key ordered by event time (``shapes/running_aggregate.py``): each row once,
  when the watermark has passed it;
* SELECT DISTINCT (``shapes/distinct_rows.py``): each distinct row once, when the watermark has
  passed it, over a TIMESTAMP or a DATE event time.

``ShapedRunner`` is their runner in the registry (after the top-N runner, whose queries a
dataset replays as they were written; before Structured Streaming): a state of its own goes
on with it, a state of another runner or a query of none of these shapes is left to the next
runner; ``shaped`` tells ValidateQuery that the query runs. Retractions in the inputs are
refused (append-only inputs).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame

from engine_spark import checkpoint as cp
from engine_spark.changelog import changelog
from engine_spark.errors import InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import register_view
from engine_spark.ordering import sort_by_values
from engine_spark.outputs import OutputColumns
from engine_spark.queries import run_steps
from engine_spark.retractions import check_no_retractions
from engine_spark.spark_errors import query_errors
from engine_spark.stateful.retention import new_view, no_rows
from engine_spark.stateful.runner import (
    StatefulQuery,
    StatefulRun,
    in_value_order,
    runner_mismatch,
)
from engine_spark.stateful.shapes import distinct_rows, running_aggregate
from engine_spark.stateful.shapes.ranked_rows import RankedRows, group_changes, ranked_rows
from engine_spark.stateful.stream_inputs import PhaseClock, StreamInput
from engine_spark.stateful.top_n import with_kept

log = structlog.get_logger("engine_spark.stateful.shaped")

Shape = RankedRows | running_aggregate.RunningAggregate | distinct_rows.DistinctRows
_RUNNERS: dict[type, cp.Runner] = {
    RankedRows: cp.Runner.RANKED_ROWS,
    running_aggregate.RunningAggregate: cp.Runner.RUNNING_AGGREGATE,
    distinct_rows.DistinctRows: cp.Runner.DISTINCT_ROWS,
}
_WAITING, _CARRIED = "waiting.parquet", "carried.parquet"


def shaped(
    result: DataFrame, event_times: Mapping[str, str], *, only: cp.Runner | None = None
) -> Shape | None:
    """The query's shape, if it is one of the three (``event_times``: each streamed input's
    event-time column, by alias); ``only``: that runner's shape alone."""
    aliases = frozenset(event_times)
    finders: list[tuple[cp.Runner, Callable[[], Shape | None]]] = [
        (cp.Runner.RANKED_ROWS, lambda: ranked_rows(result, aliases)),
        (
            cp.Runner.RUNNING_AGGREGATE,
            lambda: running_aggregate.running_aggregate(result, event_times),
        ),
        (cp.Runner.DISTINCT_ROWS, lambda: distinct_rows.distinct_rows(result, event_times)),
    ]
    with query_errors(None, in_step=False):
        for runner, find in finders:
            if only not in (None, runner):
                continue
            shape = find()
            if shape is not None:
                return shape
    return None


class ShapedRunner:
    """The shapes above, each recomputed from the rows it keeps (see the module doc)."""

    runner = cp.Runner.RANKED_ROWS
    """The checkpoint's name of its first shape; each shape's state names its own
    (``_RUNNERS``)."""

    def plan(self, query: StatefulQuery) -> Shape | None:
        carried = query.carried
        mine = carried is not None and carried.runner in _RUNNERS.values()
        if query.temporal or query.prepared is not None or (carried is not None and not mine):
            return None
        event_times = {
            i.request.query_alias: i.request.vocab.event_time_column for i in query.inputs
        }
        shape = shaped(query.result, event_times, only=carried.runner if carried else None)
        if shape is None and carried is not None:
            raise runner_mismatch(f"the state of the {carried.runner.value!r} runner")
        return shape

    def run(self, query: StatefulQuery, plan: Shape) -> StatefulRun:
        return _ShapeRun(query, plan).run()


class _ShapeRun:
    def __init__(self, query: StatefulQuery, shape: Shape) -> None:
        self.query, self.shape = query, shape
        self.session, self.area, self.request = query.session, query.area, query.request
        self.inputs: Sequence[StreamInput] = query.inputs
        self.carried = query.carried

    def run(self) -> StatefulRun:
        columns = self.query.columns
        if columns.op is not None:
            raise InvalidQueryError(
                f"this query emits its own changelog or appends in {columns.op!r}: do not "
                f"select an {columns.op!r} column"
            )
        arrow_schema = self.query.arrow_schema
        clock = PhaseClock()
        check_no_retractions([i.request for i in self.inputs], stateful=True)
        for inp in self.inputs:
            register_view(new_view(self.session, inp), inp.request.query_alias)
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
        state = self.query.next_state(files, runner=runner, keys=keys, emitted=emitted)
        if isinstance(self.shape, RankedRows):
            state = dataclasses.replace(state, mode=cp.Mode.CHANGELOG)
            columns = dataclasses.replace(columns, op=self.request.vocab.operation_type_column)
        log.info(
            "transform.shape",
            runner=runner.value,
            rows=table.num_rows,
            state_bytes=sum(len(v) for v in files.values()),
            **clock.laps,
        )
        lag = timedelta(0)
        if isinstance(self.shape, distinct_rows.DistinctRows) and self.shape.by_day:
            lag = distinct_rows.day_lag(source.watermark)
        return StatefulRun(table, columns, state, lag)

    def _kept(self, name: str) -> str | None:
        """The state's file ``name`` written to the work area; None when it has no rows."""
        files = self.carried.files if self.carried is not None else {}
        if name not in files or no_rows(files[name]):
            return None
        path = self.area.inputs / name
        path.write_bytes(files[name])
        return str(path)

    def _ranked(
        self, result: DataFrame, source: StreamInput, arrow_schema: pa.Schema
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
        source: StreamInput,
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
