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

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine_spark import checkpoint as cp
from engine_spark.inputs import quote_identifier, stable_literal
from engine_spark.jvm_plan import (
    analyzed,
    expr_id,
    frame,
    path_to,
    replace_on_path,
    scala_seq,
    seq,
    single_operator,
    view_name,
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

log = structlog.get_logger("engine_spark.stateful.window")

_ROW_WISE = frozenset(
    {
        "Project",
        "Filter",
        "SubqueryAlias",
        "View",
        "Generate",
        "LogicalRelation",
        "LocalRelation",
        "LogicalRDD",
        "MapInArrow",
        "Relation",
        "ResolvedHint",
        "Expand",
        "Aggregate",
    }
)
"""The plan nodes a recomputed window query may have (one Aggregate, Expand only as the
sliding window's expansion)."""


@dataclass(frozen=True, slots=True)
class WindowAggregate:
    """Where a window query's aggregation is, and how wide its windows are."""

    width: timedelta
    """The window duration: a record older than the watermark by more is in closed windows
    only."""
    window_column: str
    """The name of the window column below the aggregation."""
    lag: timedelta
    """How far the output watermark stays behind the input watermark: zero when the output's
    event time is the window's end (every window still to come ends after the watermark),
    the width otherwise (a window labelled by its start, or by anything inside it, may still
    be emitted with an event time up to a width behind)."""


def window_aggregate(
    result: DataFrame, event_time: str, inputs: frozenset[str], output_event_time: str
) -> WindowAggregate | None:
    """The query's window aggregation when it can be recomputed from retained records;
    ``inputs``: the views of the streamed inputs, by name; ``output_event_time``: the output's
    event-time column."""
    root = analyzed(result)
    aggregate = single_operator(root, inputs, _ROW_WISE, "Aggregate")
    if aggregate is None:
        return None
    windows = [
        e
        for e in seq(aggregate.groupingExpressions())
        if str(e.nodeName()) == "AttributeReference" and _is_window_type(e.dataType())
    ]
    if len(windows) != 1:
        return None
    width = _window_width(aggregate, windows[0], event_time, inputs)
    if width is None:
        return None
    names = [str(a.name()) for a in seq(aggregate.child().output())]
    window_column = str(windows[0].name())
    if names.count(window_column) != 1:
        return None
    by_end = _labelled_by_end(root, aggregate, windows[0], output_event_time)
    return WindowAggregate(width, window_column, timedelta(0) if by_end else width)


def _labelled_by_end(root: Any, aggregate: Any, window: Any, output_event_time: str) -> bool:
    """Whether the output's event time is ``window.end``, computed by the aggregation and
    passed up unchanged."""
    outputs = [a for a in seq(root.output()) if str(a.name()) == output_event_time]
    if len(outputs) != 1:
        return False
    target = expr_id(outputs[0])
    for e in seq(aggregate.aggregateExpressions()):
        if expr_id(e) != target or str(e.nodeName()) != "Alias":
            continue
        field = e.child()
        return (
            str(field.nodeName()) == "GetStructField"
            and int(field.ordinal()) == 1
            and str(field.child().nodeName()) == "AttributeReference"
            and expr_id(field.child()) == expr_id(window)
        )
    return False


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


def _is_window_type(data_type: Any) -> bool:
    return str(data_type.simpleString()) == "struct<start:timestamp,end:timestamp>"


def _window_width(
    aggregate: Any, window: Any, event_time: str, inputs: frozenset[str]
) -> timedelta | None:
    """The width of the time window ``window`` (an attribute the aggregation groups by), as
    Spark's analyzer writes it: ``named_struct(start, ..., end, start + <width>)`` in a
    Project (tumbling) or an Expand (sliding) below the aggregation, over an input column
    named ``event_time`` that no operator redefines; None for anything else (session
    windows, windows over a computed time)."""
    target = expr_id(window)
    for node in walk(aggregate.child()):
        name = str(node.nodeName())
        if name == "Project":
            for e in seq(node.projectList()):
                if expr_id(e) != target or str(e.nodeName()) != "Alias":
                    continue
                if str(e.child().nodeName()) == "AttributeReference":
                    target = expr_id(e.child())  # the window column renamed: follow it
                    break
                return _struct_width(e.child(), node, event_time, inputs)
        elif name == "Expand":
            output = [expr_id(a) for a in seq(node.output())]
            if target in output:
                position = output.index(target)
                widths = {
                    _struct_width(list(seq(p))[position], node, event_time, inputs)
                    for p in seq(node.projections())
                }
                return widths.pop() if len(widths) == 1 else None
    return None


def _struct_width(
    struct: Any, node: Any, event_time: str, inputs: frozenset[str]
) -> timedelta | None:
    """``named_struct(start, s, end, knownnullable(precisetimestampconversion(s' + W)))``:
    W microseconds, when the struct reads only the input column ``event_time``."""
    if str(struct.nodeName()) != "CreateNamedStruct":
        return None
    names = [str(n) for n in seq(struct.names())]
    if names != ["start", "end"]:
        return None
    end = struct.valExprs().apply(1)
    for expected in ("KnownNullable", "PreciseTimestampConversion"):
        if str(end.nodeName()) != expected:
            return None
        end = end.child()
    if str(end.nodeName()) != "Add" or str(end.right().nodeName()) != "Literal":
        return None
    references = list(seq(struct.references().toSeq()))
    if len(references) != 1 or str(references[0].name()) != event_time:
        return None
    if not all(
        str(e.child().nodeName()) == "AttributeReference"
        for e in _descendants(struct)
        if str(e.nodeName()) == "PreciseTimestampConversion"
        and str(e.fromType().simpleString()) == "timestamp"
    ):
        return None  # the windows are over a time computed from event_time
    if not _read_from_input(node, references[0], inputs):
        return None
    return timedelta(microseconds=int(end.right().value()))


def _descendants(expression: Any) -> Iterator[Any]:
    stack = [expression]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(seq(e.children()))


def _read_from_input(node: Any, attribute: Any, inputs: frozenset[str]) -> bool:
    """Whether ``attribute`` reaches ``node`` unchanged from one of the ``inputs`` views."""
    target = expr_id(attribute)
    for below in walk(node):
        name = str(below.nodeName())
        if (
            name == "View"
            and view_name(below) in inputs
            and any(expr_id(a) == target for a in seq(below.output()))
        ):
            return True
        if name == "Project":
            for e in seq(below.projectList()):
                if expr_id(e) == target and str(e.nodeName()) == "Alias":
                    return False
        elif name == "Generate" and any(expr_id(a) == target for a in seq(below.generatorOutput())):
            return False
    return False


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
            return WindowAggregate(window.width_us * micros, window.column, window.lag_us * micros)
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
        state = query.next_state(
            files,
            runner=self.runner,
            window=cp.WindowSpec(
                column=plan.window_column,
                width_us=plan.width // timedelta(microseconds=1),
                lag_us=plan.lag // timedelta(microseconds=1),
            ),
        )
        log.info(
            "transform.windows",
            width=str(plan.width),
            retained_bytes=state.files_size,
            **clock.laps,
        )
        return StatefulRun(in_value_order(table, columns), columns, state, plan.lag)
