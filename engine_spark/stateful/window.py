"""Event-time window aggregations recomputed from the records of their open windows.

A query whose only stateful operator is one ``GROUP BY window(event_time, ...)`` (tumbling or
sliding) over an input's own ``event_time`` does not need Spark's streaming machinery to run
incrementally. The state it carries is the input records that belong to a window still open
(event time after the watermark minus the widest window), and each transaction is one batch
query:

    records = retained records + the transaction's new records that are not late
    output  = the query over ``records``, its aggregation restricted to the windows that
              close in this transaction: previous watermark < window end <= watermark
    retained = records whose event time is after watermark - widest window

This gives what Spark's streaming aggregation in append mode gives (a window is emitted once,
when the watermark reaches its end; records at or before their input's watermark are
dropped), at the cost of a batch query over a slice and the records of open windows: none of
Structured Streaming's fixed cost per run (state stores opened and committed, offset and
commit logs, query start). Any other stateful query runs as Structured Streaming
(``structured_streaming/``). ``WindowRunner`` is the runner; its state is the records of
open windows (``retention.py``) and the window (``checkpoint.WindowSpec``).

The restriction is put into the analyzed plan: a filter on the window column right below the
aggregation, so every window that is computed is complete and is emitted exactly once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import structlog
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine_spark import checkpoint as cp
from engine_spark.inputs import quote_identifier, stable_literal
from engine_spark.jvm_plan import (
    analyzed,
    frame,
    path_to,
    replace_on_path,
    scala_seq,
    walk,
)
from engine_spark.queries import run_steps
from engine_spark.spark_errors import query_errors
from engine_spark.stateful import retention
from engine_spark.stateful.runner import StatefulQuery, StatefulRun, in_value_order, runner_mismatch
from engine_spark.stateful.stream_inputs import (
    PhaseClock,
    previous_spark_watermark,
    spark_watermark,
)
from engine_spark.stateful.window_shape import WindowAggregate, window_aggregate

log = structlog.get_logger("engine_spark.stateful.window")


def closing_windows(
    result: DataFrame, plan: WindowAggregate, after: datetime | None, upto: datetime
) -> DataFrame:
    """``result`` computing only the windows whose end is in ``(after, upto]``."""
    session = result.sparkSession
    root = analyzed(result)
    aggregate = next(n for n in walk(root) if str(n.nodeName()) == "Aggregate")
    # (the first in the walk: an input's own view holds none)
    path = path_to(root, aggregate)
    assert path is not None, "the aggregation is not below the root"
    end = F.col(quote_identifier(plan.window_column)).getField("end")
    condition = end <= stable_literal(upto, end)
    if after is not None:
        condition = (end > stable_literal(after, end)) & condition
    below = frame(session, aggregate.child()).where(condition)
    restricted = aggregate.withNewChildren(scala_seq(session, [analyzed(below)]))
    return frame(session, replace_on_path(session, path, restricted))


class WindowRunner:
    """A window aggregation recomputed over the records of its open windows: one batch
    query, no Structured Streaming. State: the records of windows still open
    (``retention.retained_records``) and the window (``checkpoint.WindowSpec``)."""

    runner = cp.Runner.WINDOW_RECOMPUTE

    def plan(self, query: StatefulQuery) -> WindowAggregate | None:
        """The query's window aggregation (no temporal tables, one event-time column name,
        and no state of another runner to carry on)."""
        carried = query.carried
        if query.temporal or (carried is not None and carried.runner != self.runner):
            return None
        if carried is not None and carried.window is not None:  # found in the first transaction
            micros = timedelta(microseconds=1)
            window = carried.window
            return WindowAggregate(
                window.width_us * micros,
                window.column,
                window.lag_us * micros,
                None if window.slide_us is None else window.slide_us * micros,
                window.offset_us * micros,
            )
        inputs = query.inputs
        names = {i.request.vocab.event_time_column for i in inputs}
        if len(names) != 1:
            return None
        aliases = frozenset(i.request.query_alias for i in inputs)
        output_event_time = query.request.vocab.event_time_column
        with query_errors(None, in_step=False):
            plan = window_aggregate(query.result, names.pop(), aliases, output_event_time)
        if plan is None and carried is not None:
            raise runner_mismatch("the records of a window aggregation's open windows")
        return plan

    def register(
        self, prepared: retention.PreparedViews, _: cp.StreamState | None, event_time: str
    ) -> None:
        """Every input's view: its new records and its kept ones."""
        for alias, new in prepared.new.items():
            retention.register_union([new, prepared.kept[alias]], alias, event_time, marked=False)

    def run(self, query: StatefulQuery, plan: WindowAggregate) -> StatefulRun:
        clock = PhaseClock()
        session, inputs, carried = query.session, query.inputs, query.carried
        columns, arrow_schema = query.columns, query.arrow_schema
        upto = spark_watermark(inputs)
        assert upto is not None, "a stateful query has streamed inputs"
        after = previous_spark_watermark(inputs) if carried is not None else None
        # With prepared views the query already ran over the recomputation's views.
        result = query.result if query.prepared is not None else None
        if result is None:
            prepared = retention.views(session, query.area, inputs, carried)
            self.register(prepared, carried, inputs[0].request.vocab.event_time_column)
            result = run_steps(session, query.request.transform)
        clock.lap("plan")
        with query_errors(None, in_step=False):
            closing = closing_windows(result, plan, after, upto)
            table = closing.toArrow().cast(arrow_schema)
        clock.lap("run")
        files = {
            # in a window still open: less than a width behind the watermark
            f"{i.directory}.parquet": retention.retained_records(
                carried, i, upto, plan.width - timedelta(microseconds=1)
            )
            for i in inputs
        }
        clock.lap("retain")
        micros = timedelta(microseconds=1)
        state = query.next_state(
            files,
            runner=self.runner,
            window=cp.WindowSpec(
                column=plan.window_column,
                width_us=plan.width // micros,
                lag_us=plan.lag // micros,
                slide_us=None if plan.slide is None else plan.slide // micros,
                offset_us=plan.offset // micros,
            ),
        )
        log.info(
            "transform.windows",
            width=str(plan.width),
            retained_bytes=state.files_size,
            **clock.laps,
        )
        return StatefulRun(in_value_order(table, columns), columns, state, plan.lag_at(upto))
