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
(``streaming.py``).

The restriction is put into the analyzed plan: a filter on the window column right below the
aggregation, so every window that is computed is complete and is emitted exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

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
from engine_spark.streaming import on_time

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


def labelled_by_window_end(result: DataFrame, output_event_time: str) -> bool:
    """Whether every aggregation grouped by a window (time or session window) labels the
    output's event time by the window's end (``window.end``, passed up unchanged)."""
    root = analyzed(result)
    for node in walk(root):
        if str(node.nodeName()) != "Aggregate":
            continue
        windows = [
            e
            for e in seq(node.groupingExpressions())
            if str(e.nodeName()) == "AttributeReference" and _is_window_type(e.dataType())
        ]
        if not all(_labelled_by_end(root, node, w, output_event_time) for w in windows):
            return False
    return True


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


def retained(records: pa.Table, event_time: str, watermark: datetime, reach: timedelta) -> pa.Table:
    """The records that may still be needed after ``watermark``: those at most ``reach``
    behind it. A later record is not late (at or after ``watermark``), so a join's bound
    is its reach; a window of width w holds records less than w behind the end of a window
    still open (which is after ``watermark``): its reach is w less a microsecond."""
    return records.filter(on_time(records, event_time, watermark - reach))


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
