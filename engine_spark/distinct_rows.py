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
from datetime import datetime
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
    single_operator,
    unalias,
    view_name,
)
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


def distinct_rows(result: DataFrame, event_times: Mapping[str, str]) -> DistinctRows | None:
    """The query's DISTINCT when it has the shape above (``event_times``: each streamed
    input's event-time column, by alias); None otherwise."""
    root = analyzed(result)
    distinct = single_operator(root, frozenset(event_times), _ALLOWED, "Distinct")
    if distinct is None:
        return None
    path = path_to(root, distinct)
    assert path is not None
    if any(str(n.nodeName()) not in _ABOVE for n in path[:-1]):
        return None
    traced = traced_event_time(distinct, event_times)
    if traced is None:
        return None
    alias, ids = traced
    kept_columns = tuple(str(a.name()) for a in seq(distinct.output()))
    gates = [str(a.name()) for a in seq(distinct.output()) if expr_id(a) in ids]
    if not gates or len(set(kept_columns)) != len(kept_columns):
        return None
    return DistinctRows(alias, gates[0], kept_columns)


def traced_event_time(node: Any, event_times: Mapping[str, str]) -> tuple[str, set[Any]] | None:
    """The one input ``node`` reads (its alias) and the exprIds under which ``node``'s output
    carries that input's event-time column (selected or renamed through projections); None
    when ``node`` reads several inputs or none."""
    views = [
        n
        for n in query_nodes(node, frozenset(event_times))
        if str(n.nodeName()) == "View" and view_name(n) in event_times
    ]
    if len(views) != 1:
        return None
    alias = view_name(views[0])
    ids = {expr_id(a) for a in seq(views[0].output()) if str(a.name()) == event_times[alias]}
    path = path_to(node, views[0])
    if path is None:
        return None
    for step in reversed(path[:-1]):
        if str(step.nodeName()) == "Project":
            ids = {
                expr_id(e)
                for e in seq(step.projectList())
                if expr_id(e) in ids or (is_attribute(unalias(e)) and expr_id(unalias(e)) in ids)
            }
    return (alias, ids) if ids else None


def passed(event_time: Column, watermark: datetime | None) -> Column:
    """Whether the watermark has passed a row's ``event_time`` (a TIMESTAMP or a DATE): the
    row is final, any row like it still to come would be late (``is_late``). None: no
    watermark yet, nothing is final."""
    if watermark is None:
        return F.lit(False)
    return is_late(event_time, stable_literal(watermark, event_time))


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
    root = analyzed(result)
    distinct = next(n for n in query_nodes(root, frozenset()) if str(n.nodeName()) == "Distinct")
    path = path_to(root, distinct)
    assert path is not None
    below = frame(session, distinct.child())
    if kept is not None:
        below = below.unionByName(session.read.schema(below.schema).parquet(kept))
    rows = frame(session, distinct.withNewChildren(scala_seq(session, [analyzed(below)])))
    column = F.col(quote_identifier(plan.event_time))
    final = (
        is_late(column, stable_literal(watermark, column))
        if watermark is not None
        else F.lit(False)
    )
    output = frame(session, replace_on_path(session, path, analyzed(rows.where(final))))
    return DistinctSplit(output, rows.where(~final))
