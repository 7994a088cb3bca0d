"""Inner interval joins of two inputs recomputed from the records still within the bound.

A query whose only stateful operator is one inner join of two different inputs, bounded in
event time on both sides (``b.event_time BETWEEN a.event_time AND a.event_time + INTERVAL
1 HOUR``), needs as state only the records of each side that a later record of the other
side may still match. Each transaction is the same query run twice, as batch queries:

    output = query(left: kept + new, right: new) + query(left: new, right: kept)

that is every pair with at least one new record (pairs of two kept records were emitted by
earlier transactions), and then each side keeps its records whose event time is after the
watermark minus that side's bound (Spark's own analysis of the join condition, the one its
streaming join evicts state by). New records at or before their input's watermark are late
and dropped. Outer joins, self-joins and anything else run as Structured Streaming
(``streaming.py``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame

from engine_spark.jvm_plan import analyzed, query_nodes, single_operator, view_name
from engine_spark.stateful.plan import join_state_lags

_ALLOWED = frozenset({"Project", "Filter", "SubqueryAlias", "View", "Join", "ResolvedHint"})


def join_inputs(result: DataFrame, inputs: frozenset[str]) -> tuple[str, str] | None:
    """The inputs read by the left and the right side of the query's join, when the query
    has the shape a recomputed join needs (one inner join of two different inputs, with only
    projections and filters around it); ``inputs``: the streamed inputs' views."""
    join = _the_join(result, inputs)
    if join is None or str(join.joinType().sql()) != "INNER":
        return None
    if not bool(join.condition().isDefined()):
        return None
    sides = [_input_views(join.children().apply(i), inputs) for i in (0, 1)]
    if any(len(views) != 1 for views in sides) or sides[0] == sides[1]:
        return None
    return sides[0][0], sides[1][0]


def join_bounds(result: DataFrame, inputs: frozenset[str]) -> tuple[timedelta, timedelta] | None:
    """Each side's bound (left, right), when both are bounded. The inputs' event-time columns
    must carry the watermark metadata (``stateful.WATERMARK_METADATA_KEY``)."""
    join = _the_join(result, inputs)
    if join is None:
        return None
    left, right = join_state_lags(result.sparkSession.sparkContext._jvm, join)
    if left is None or right is None:
        return None
    return left, right


def _the_join(result: DataFrame, inputs: frozenset[str]) -> Any:
    return single_operator(analyzed(result), inputs, _ALLOWED, "Join")


def _input_views(node: Any, inputs: frozenset[str]) -> list[str]:
    return [
        view_name(n)
        for n in query_nodes(node, inputs)
        if str(n.nodeName()) == "View" and view_name(n) in inputs
    ]


EventTimeRange = tuple[datetime, datetime]
"""The oldest and the newest event time of some records."""


def may_match(
    new_left: EventTimeRange | None,
    kept_right: EventTimeRange | None,
    left_lag: timedelta,
    right_lag: timedelta,
) -> bool:
    """Whether a new left record may match a kept right record: a pair matches only when
    the right record is at most ``left_lag`` after the left one and at most ``right_lag``
    before it (each side's bound: how long its records can still find a partner)."""
    if new_left is None or kept_right is None:
        return False
    return new_left[0] - kept_right[1] <= right_lag and kept_right[0] - new_left[1] <= left_lag
