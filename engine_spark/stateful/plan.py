"""Which queries need state across transactions, and whether they can run incrementally.

A query made only of row-wise operators (projection, filter, union, explode) gives the same
result on each transaction's new records as on all records at once: it runs as a batch query
over the slices (``engine.py``). Any other query (aggregation, join of two inputs, window,
distinct, sort, limit) depends on earlier records and runs with its state carried in the
checkpoint (``stateful/registry.py`` picks the runner), in one of two modes:

* ``append``: every stateful operator is bounded by event time (GROUP BY ``window(...)`` or
  ``session_window(...)``, joins of two inputs with an event-time condition). A result is
  emitted once, when the watermark closes it, and never revised.
* ``changelog``: an aggregation with no event-time window (GROUP BY key). Each transaction
  emits ``+I`` for a new key and a ``-U``/``+U`` pair when a key's row changed (RFC-015),
  against the last emitted row per key kept in the checkpoint. The query must select every
  grouping key.

Refused, with InvalidQuery, at ValidateQuery as well as at ExecuteTransform: ``LIMIT`` and
``ORDER BY`` over a stream, analytic window functions (``OVER``) other than a top-N per key
(``stateful/top_n.py``), joins of two inputs without an event-time bound, and whatever
Spark's own checks for streaming queries refuse (several aggregations in a changelog, ...).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from py4j.java_gateway import get_field  # type: ignore[import-untyped]
from pyspark.sql import DataFrame

from engine_spark.checkpoint import Mode
from engine_spark.errors import InvalidQueryError
from engine_spark.jvm_plan import (
    analyzed,
    child,
    expr_id,
    is_attribute,
    same_node,
    seq,
    unalias,
    walk,
)
from engine_spark.spark_errors import QUERY_CONDITIONS

WATERMARK_METADATA_KEY = "spark.watermarkDelayMs"
"""Spark's (internal) column metadata marking an event-time column bounded by a watermark
(``EventTimeWatermark.delayKey``); pinned by the tests of ``stateful/structured_streaming/``."""


WINDOW_FUNCTIONS = (
    "window functions (OVER ...) over a stream are supported in these shapes, over one input: "
    "the latest row or top N per key or overall, SELECT <columns> FROM (SELECT ..., "
    "row_number() | rank() | dense_rank() OVER ([PARTITION BY k] ORDER BY v) AS rn FROM t) "
    "WHERE rn <= N (or rn = 1), with only projections above; a running aggregate or number, "
    "SUM | COUNT | MIN | MAX | AVG(x) OVER ([PARTITION BY k] ORDER BY event_time [, ...] "
    "ROWS UNBOUNDED PRECEDING) or row_number() | rank() | dense_rank() OVER ([PARTITION BY "
    "k] ORDER BY event_time [, ...]), with projections and filters above; otherwise write an "
    "aggregation (GROUP BY key with max_by/min_by, or GROUP BY window(...))"
)


@dataclass(frozen=True, slots=True)
class StatefulPlan:
    mode: Mode
    keys: tuple[str, ...] = ()
    """The output columns that identify a changelog row (its grouping keys)."""
    lag: timedelta = timedelta(0)
    """How far behind the input watermark a row may still be emitted: an interval join
    matches (or, outer, gives up on) a row up to its bound after the row's event time, so the
    output watermark is held back by the join's widest bound."""
    points: bool = False
    """An operator keeps state per event time itself, not per time window of it (GROUP BY
    event_time, DISTINCT over it), or per session window (which still merges a record at
    its end): it closes a key only once the watermark is past it
    (``watermark.spark_eviction_watermark``)."""
    spark_lag: timedelta = timedelta(0)
    """How far below its watermark Spark's own join state watermark is (``lag`` with Spark's
    margins, its widest over the joins' sides): Spark evicts a join's rows at or below it,
    emits an outer join's unmatched rows then, and hands it to the operators above as their
    watermark."""
    outer: bool = False
    """An outer join of two streams: it emits a row Spark evicts unmatched."""
    reach: timedelta | None = timedelta(0)
    """How far after a record's event time a key it makes may lie (points): zero for an
    event time itself, the widest gap of session windows whose gaps are constants of whole
    milliseconds; None when not known (a gap computed per row, or not a whole millisecond):
    a key may then fall off a whole millisecond whatever the event times."""


def stateful_plan(df: DataFrame) -> StatefulPlan:
    """How a streaming query ``df`` runs; InvalidQuery when it cannot run incrementally."""
    root = analyzed(df)
    jvm = df.sparkSession.sparkContext._jvm
    aggregates = []
    lag = spark_lag = timedelta(0)
    outer, whole_ms = False, True
    for node in walk(root):
        name = str(node.nodeName())
        if name in ("GlobalLimit", "LocalLimit", "Tail", "Offset"):
            raise InvalidQueryError(
                "LIMIT/OFFSET over a stream is not supported: the first rows of an endless "
                "stream depend on how it is split into transactions; filter or aggregate instead"
            )
        if name == "Sort" and bool(getattr(node, "global")()):
            raise InvalidQueryError(
                "ORDER BY over a stream is not supported: the output is ordered by offset; "
                "use ORDER BY only inside an aggregation's result or drop it"
            )
        if name == "Window":
            raise InvalidQueryError(WINDOW_FUNCTIONS)
        if name == "Join" and bool(node.isStreaming()) and _check_bounded_join(node):
            exact = _join_lag(jvm, node)
            lag = max(lag, exact)
            spark_lag = max(spark_lag, _join_lag(jvm, node, spark=True))
            outer = outer or str(node.joinType().sql()) != "INNER"
            whole_ms = whole_ms and not exact % timedelta(milliseconds=1)
        if name in ("Aggregate", "Distinct") and bool(node.isStreaming()):
            _check_one_event_time(node)
            aggregates.append(node)
    unbounded = [a for a in aggregates if not _has_event_time_key(a)]
    if not unbounded:
        points = any(_has_event_time_point_key(a) for a in aggregates)
        reach = _session_reach(root) if whole_ms else None
        return StatefulPlan(
            Mode.APPEND, lag=lag, points=points, spark_lag=spark_lag, outer=outer, reach=reach
        )
    return StatefulPlan(Mode.CHANGELOG, _changelog_keys(root, unbounded[0]), lag=lag)


def _distinct_keys(root: Any, distinct: Any) -> tuple[str, ...]:
    """SELECT DISTINCT: every output column is the key, so its changelog only inserts."""
    node = root
    while not same_node(node, distinct):
        if str(node.nodeName()) not in ("SubqueryAlias", "View"):
            raise InvalidQueryError(
                "SELECT DISTINCT over a stream must be the query's last operator (its rows are "
                "emitted once each, as inserts); move projections and filters inside it"
            )
        node = child(node, 0)
    return tuple(str(a.name()) for a in seq(root.output()))


_REFERENCE_MS = 10**15
"""A watermark far from the epoch, to read a join's bounds as differences from it."""


def _join_lag(jvm: Any, join: Any, *, spark: bool = False) -> timedelta:
    """The widest bound of an interval join: how long after a row's event time the other
    side's watermark must move before the row can no longer match (``spark``: as Spark
    evicts it, with its margins)."""
    lags = join_state_lags(jvm, join, spark=spark)
    return max((lag for lag in lags if lag is not None), default=timedelta(0))


def join_state_lags(
    jvm: Any, join: Any, *, spark: bool = False
) -> tuple[timedelta | None, timedelta | None]:
    """For each side of a join (left, right): how far behind the watermark a row of that side
    may still match a later row of the other side (None: no bound), exactly: a later row is
    not late (``watermark.is_late``), so a row at the watermark less an inclusive bound may
    still match, and a row at it less a strict bound may not. Spark's own analysis of each
    conjunct of the condition, as it uses it to evict join state, less the millisecond of
    margin Spark adds to an inclusive bound (it evicts at or before its state watermark);
    the event-time columns are those carrying the watermark metadata. ``spark``: Spark's own
    lags, its margins kept (whole milliseconds: Spark's state watermark is the watermark
    less them)."""
    helper = jvm.org.apache.spark.sql.catalyst.analysis.StreamingJoinHelper
    left, right = child(join, 0), child(join, 1)
    condition = join.condition()
    conjuncts = _conjuncts(jvm, condition.get()) if bool(condition.isDefined()) else []
    lags: list[timedelta | None] = []
    for side, other in ((left, right), (right, left)):
        watermarked = other.outputSet()
        for attribute in seq(other.output()):
            if not _has_watermark(attribute):
                watermarked = getattr(watermarked, "$minus")(attribute)
        side_lags = []
        for conjunct in conjuncts:
            state = helper.getStateValueWatermark(
                side.outputSet(),
                watermarked,
                jvm.scala.Some(conjunct),
                jvm.scala.Some(jvm.java.lang.Long(_REFERENCE_MS)),
            )
            if bool(state.isDefined()):
                spark_lag = timedelta(milliseconds=_REFERENCE_MS - int(state.get()))
                margin = timedelta(0) if spark else _SPARK_MARGIN[str(conjunct.nodeName())]
                side_lags.append(spark_lag - margin)
        # every conjunct must hold (Spark evicts by the one that holds longest)
        lags.append((max if spark else min)(side_lags, default=None))
    return lags[0], lags[1]


_SPARK_MARGIN = defaultdict(
    timedelta,
    {
        "LessThanOrEqual": timedelta(milliseconds=1),
        "GreaterThanOrEqual": timedelta(milliseconds=1),
        "LessThan": timedelta(microseconds=1),
        "GreaterThan": timedelta(microseconds=1),
    },
)
"""What to take off Spark's lag for a bound, by comparison: Spark adds a millisecond to an
inclusive one; a strict one reaches one microsecond (a timestamp's unit) less far."""


def _conjuncts(jvm: Any, condition: Any) -> list[Any]:
    """The conjuncts of ``condition``, ``x BETWEEN a AND b`` (replaced only by the
    optimizer) read as ``x >= a`` and ``x <= b``."""
    name = str(condition.nodeName())
    if name == "And":
        return _conjuncts(jvm, condition.left()) + _conjuncts(jvm, condition.right())
    if name == "Between":
        expressions = jvm.org.apache.spark.sql.catalyst.expressions
        value = condition.input()
        return [
            expressions.GreaterThanOrEqual(value, condition.lower()),
            expressions.LessThanOrEqual(value, condition.upper()),
        ]
    return [condition]


def _check_bounded_join(join: Any) -> bool:
    """InvalidQuery for a join of two streams with no event-time bound; whether the join
    keeps state (both sides are streams)."""
    left, right = child(join, 0), child(join, 1)
    if not (bool(left.isStreaming()) and bool(right.isStreaming())):
        return False  # a stream joined with a static relation (a temporal table) keeps no state
    condition = join.condition()
    bounded = False
    if bool(condition.isDefined()):
        refs = [a for a in seq(condition.get().references().toSeq()) if _has_watermark(a)]
        left_ids = {expr_id(a) for a in seq(left.output())}
        right_ids = {expr_id(a) for a in seq(right.output())}
        ids = {expr_id(a) for a in refs}
        bounded = bool(ids & left_ids) and bool(ids & right_ids)
    if not bounded:
        raise InvalidQueryError(
            "a join of two streams needs an event-time bound, or its state grows forever: "
            "add a condition on both sides' event_time, e.g. "
            "a.event_time BETWEEN b.event_time - INTERVAL 1 HOUR AND b.event_time, "
            "or declare the slowly changing side as a temporal table"
        )
    return True


def _has_event_time_key(aggregate: Any) -> bool:
    if str(aggregate.nodeName()) == "Distinct":
        return any(_has_watermark(a) for a in seq(aggregate.output()))
    return any(
        _has_watermark(e) for e in seq(aggregate.groupingExpressions()) if is_attribute(e)
    ) or any(
        _has_watermark(a)
        for e in seq(aggregate.groupingExpressions())
        for a in seq(e.references().toSeq())
    )


def _check_one_event_time(aggregate: Any) -> None:
    """InvalidQuery when the aggregation is keyed by more than one watermarked event time
    (Spark fails the stream with MULTIPLE_EVENT_TIME_COLUMNS; said here, from the plan)."""
    marked = [str(a.name()) for a in _key_columns(aggregate) if _has_watermark(a)]
    if len(marked) > 1:
        raise InvalidQueryError(
            f"{QUERY_CONDITIONS['MULTIPLE_EVENT_TIME_COLUMNS']}: it is keyed by the event-time "
            f"columns {', '.join(repr(m) for m in marked)} [MULTIPLE_EVENT_TIME_COLUMNS]"
        )


def _has_event_time_point_key(aggregate: Any) -> bool:
    """Whether the aggregate is keyed by a watermarked event time itself (a timestamp) or by
    a session window, not by a time window of it."""
    return any(
        _has_watermark(a) and (str(a.dataType().typeName()) == "timestamp" or _is_session_window(a))
        for a in _key_columns(aggregate)
    )


SESSION_WINDOW_METADATA_KEY = "spark.sessionWindow"
"""Spark's (internal) column metadata marking a session window (``SessionWindow.marker``)."""


def _is_session_window(attribute: Any) -> bool:
    """A session window key: a session ``[start, end)`` still merges a record at its end (Spark
    merges sessions that touch), so, like an event time, it closes once the watermark is
    past its end, not at it."""
    try:
        return bool(attribute.metadata().contains(SESSION_WINDOW_METADATA_KEY))
    except Exception:  # not a named expression
        return False


def _session_reach(root: Any) -> timedelta | None:
    """The widest gap of the query's session windows (zero without any): each session
    window's struct as the analyzer writes it, ``end`` its event time plus the gap; None
    unless every interval in it is a constant of whole milliseconds."""
    reach = timedelta(0)
    for node in walk(root):
        if str(node.nodeName()) != "Project":
            continue
        for window in seq(node.projectList()):
            if not _is_session_window(window):
                continue
            stack = [window]
            while stack:
                e = stack.pop()
                if not str(e.dataType().simpleString()).startswith("interval"):
                    stack.extend(seq(e.children()))
                    continue
                gap = _constant_interval(e)
                if gap is None or gap % timedelta(milliseconds=1):
                    return None
                reach = max(reach, gap)
    return reach


_CALENDAR_FIELDS = ("months", "days", "microseconds")
"""The fields of Spark's ``CalendarInterval``."""


def _constant_interval(expression: Any) -> timedelta | None:
    """A constant interval's length (a day-time interval, or a calendar interval without
    months); None for anything else."""
    if not bool(expression.foldable()):
        return None
    value = expression.eval(None)
    if isinstance(value, int):  # a day-time interval: microseconds
        return timedelta(microseconds=value)
    try:
        months, days, micros = (int(get_field(value, f)) for f in _CALENDAR_FIELDS)
    except Exception:  # not a calendar interval
        return None
    return timedelta(days=days, microseconds=micros) if months == 0 else None


def _key_columns(aggregate: Any) -> list[Any]:
    """The columns an aggregation keeps state by: a DISTINCT's every output column, else its
    grouping expressions that are columns."""
    if str(aggregate.nodeName()) == "Distinct":
        return list(seq(aggregate.output()))
    return [e for e in seq(aggregate.groupingExpressions()) if is_attribute(e)]


def _changelog_keys(root: Any, aggregate: Any) -> tuple[str, ...]:
    """The output columns holding the aggregate's grouping keys; InvalidQuery when one is
    not selected (a changed row could not be told from a new one)."""
    if str(aggregate.nodeName()) == "Distinct":
        return _distinct_keys(root, aggregate)
    grouping = list(seq(aggregate.groupingExpressions()))
    key_ids: set[Any] = set()
    for expression in seq(aggregate.aggregateExpressions()):
        inner = expression.child() if str(expression.nodeName()) == "Alias" else expression
        if any(bool(inner.semanticEquals(g)) for g in grouping):
            key_ids.add(expr_id(expression))
    if len(key_ids) < len(grouping):
        raise _missing_keys()
    node, path = root, []
    while not same_node(node, aggregate):
        path.append(node)
        children = list(seq(node.children()))
        if len(children) != 1 or str(node.nodeName()) not in _KEY_PRESERVING:
            raise InvalidQueryError(
                f"{_UNBOUNDED} must be the query's last "
                "operator (with projections and HAVING above it) so its changes can be "
                "emitted as a changelog"
            )
        node = children[0]
    for above in reversed(path):
        if str(above.nodeName()) == "Project":
            key_ids = {
                expr_id(e) for e in seq(above.projectList()) if expr_id(unalias(e)) in key_ids
            }
    names = tuple(str(a.name()) for a in seq(root.output()) if expr_id(a) in key_ids)
    if len(names) < len(grouping):
        raise _missing_keys()
    return names


_UNBOUNDED = (
    "an aggregation grouped neither by a window of an input's event-time column (the one "
    "its vocabulary names) nor by that column"
)

_KEY_PRESERVING = frozenset({"Project", "Filter", "SubqueryAlias", "View"})


def _missing_keys() -> InvalidQueryError:
    return InvalidQueryError(
        f"{_UNBOUNDED} is emitted as a changelog (+I, -U/+U "
        "per key): select every GROUP BY key, under any alias, so a change can be retracted"
    )


def _has_watermark(expression: Any) -> bool:
    try:
        return bool(expression.metadata().contains(WATERMARK_METADATA_KEY))
    except Exception:  # not a named expression
        return False
