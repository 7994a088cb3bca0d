"""SELECT DISTINCT over a stream, each distinct row emitted once, when the watermark has
passed its event time, recomputed from the distinct rows still waiting.

The shape, over one input, DISTINCT the query's last operator::

    SELECT DISTINCT event_time, k FROM t          -- event_time a TIMESTAMP or a DATE

A distinct row is final once the watermark has passed its event time (``watermark.is_late``:
a record with an event time less than the watermark is late, so no duplicate of the row can
come any more), and it is emitted then, once. A row whose event time is at or after the
watermark waits: the state is those rows, deduplicated, as they enter the DISTINCT. Each
transaction puts them back under the DISTINCT next to the new records that are not late (a
union put into Spark's analyzed plan), runs the query as a batch query and splits its rows at
the new watermark: before it, emitted (``+I``); the rest, kept. A duplicate of an emitted row
would be late, so the emitted rows need no state. The same for a TIMESTAMP and a DATE event
time, and the same whether the records arrive in one transaction or several.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from engine_spark.inputs import quote_identifier, stable_literal
from engine_spark.jvm_plan import (
    analyzed,
    expr_id,
    frame,
    is_attribute,
    path_to,
    query_nodes,
    replace_on_path,
    scala_seq,
    seq,
    unalias,
    view_name,
)
from engine_spark.stateful.shapes.operator import operator_path, recognised_path, rows_entering
from engine_spark.watermark import is_late

_ALLOWED = frozenset({"Project", "Filter", "SubqueryAlias", "View", "Distinct", "ResolvedHint"})
_ABOVE = frozenset({"SubqueryAlias", "View"})


@dataclass(frozen=True, slots=True)
class DistinctRows:
    input: str
    """The input view the query reads."""
    event_time: str
    """The column of the distinct rows holding the input's event time (what gates them)."""
    kept_columns: tuple[str, ...]
    """The columns of the distinct rows (what the state keeps)."""
    by_day: bool = False
    """``event_time`` is the date of the input's event time (a TIMESTAMP)."""


def distinct_rows(result: DataFrame, event_times: Mapping[str, str]) -> DistinctRows | None:
    """The query's DISTINCT when it has the shape above (``event_times``: each streamed
    input's event-time column, by alias); None otherwise."""
    path = recognised_path(result, frozenset(event_times), _ALLOWED, "Distinct", _ABOVE)
    if path is None:
        return None
    distinct = path[-1]
    traced = traced_event_time(distinct, event_times)
    if traced is None:
        return None
    kept_columns = tuple(str(a.name()) for a in seq(distinct.output()))
    if len(set(kept_columns)) != len(kept_columns):
        return None
    for ids, by_day in ((traced.ids, False), (traced.days, True)):
        gates = [str(a.name()) for a in seq(distinct.output()) if expr_id(a) in ids]
        if gates:
            return DistinctRows(traced.input, gates[0], kept_columns, by_day)
    return None


@dataclass(frozen=True, slots=True)
class TracedEventTime:
    input: str
    """The one input the node reads."""
    ids: set[Any]
    """The exprIds of the node's output that are the input's event-time column."""
    days: set[Any]
    """Those that are its date (``CAST(event_time AS DATE)``, ``to_date(event_time)``)."""


def traced_event_time(node: Any, event_times: Mapping[str, str]) -> TracedEventTime | None:
    """The one input ``node`` reads and the exprIds under which ``node``'s output carries
    that input's event-time column or its date (selected or renamed through projections);
    None when ``node`` reads several inputs or none, or drops the column."""
    views = [
        n
        for n in query_nodes(node, frozenset(event_times))
        if str(n.nodeName()) == "View" and view_name(n) in event_times
    ]
    if len(views) != 1:
        return None
    alias = view_name(views[0])
    ids = {expr_id(a) for a in seq(views[0].output()) if str(a.name()) == event_times[alias]}
    days: set[Any] = set()
    path = path_to(node, views[0])
    if path is None:
        return None
    for step in reversed(path[:-1]):
        if str(step.nodeName()) != "Project":
            continue
        before, before_days, ids, days = ids, days, set(), set()
        for e in seq(step.projectList()):
            inner = unalias(e)
            if expr_id(e) in before or (is_attribute(inner) and expr_id(inner) in before):
                ids.add(expr_id(e))
            elif (
                expr_id(e) in before_days
                or (is_attribute(inner) and expr_id(inner) in before_days)
                or _is_date_of(inner, before)
            ):
                days.add(expr_id(e))
    return TracedEventTime(alias, ids, days) if ids or days else None


def _is_date_of(expression: Any, ids: set[Any]) -> bool:
    """Whether ``expression`` is the date of a TIMESTAMP attribute in ``ids``."""
    kind = str(expression.nodeName())
    if kind not in ("Cast", "ParseToDate") or str(expression.dataType().typeName()) != "date":
        return False
    children = list(seq(expression.children()))
    if len(children) != 1:
        return False
    argument = children[0]
    return (
        is_attribute(argument)
        and expr_id(argument) in ids
        and str(argument.dataType().typeName()) == "timestamp"
    )


def passed(event_time: Column, watermark: datetime | None, *, by_day: bool = False) -> Column:
    """Whether the watermark has passed a row's ``event_time`` (a TIMESTAMP or a DATE): the
    row is final, any row like it still to come would be late (``is_late``). ``by_day``:
    ``event_time`` is the date of the input's event time, final once the watermark has
    passed the day's last instant. None: no watermark yet, nothing is final."""
    if watermark is None:
        return F.lit(False)
    if by_day:
        next_day = F.unix_micros(F.date_add(event_time, 1).cast("timestamp"))
        event_time = F.timestamp_micros(next_day - 1)
    return is_late(event_time, stable_literal(watermark, event_time))


def day_lag(watermark: datetime | None) -> timedelta:
    """How far behind ``watermark`` a distinct row by day may still be emitted: to the
    start of the watermark's day (a row dated that day is not final yet)."""
    if watermark is None:
        return timedelta(0)
    start = watermark.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return watermark - start


@dataclass(frozen=True, slots=True)
class DistinctSplit:
    final: DataFrame
    """The query's result: the distinct rows the watermark has passed."""
    waiting: DataFrame
    """The distinct rows still waiting (the next state), in ``kept_columns``."""


def split_at_watermark(
    result: DataFrame, plan: DistinctRows, kept: str | None, watermark: datetime | None
) -> DistinctSplit:
    """``result`` with the rows of the Parquet file ``kept`` entering the DISTINCT too, split
    at ``watermark`` (None: nothing is final yet)."""
    session = result.sparkSession
    path = operator_path(result, "Distinct")
    distinct = path[-1]
    below = rows_entering(result, distinct, kept)
    rows = frame(session, distinct.withNewChildren(scala_seq(session, [analyzed(below)])))
    column = F.col(quote_identifier(plan.event_time))
    final = passed(column, watermark, by_day=plan.by_day)
    output = frame(session, replace_on_path(session, path, analyzed(rows.where(final))))
    return DistinctSplit(output, rows.where(~final))
