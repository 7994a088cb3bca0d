"""Running aggregates per key ordered by event time, each row emitted once the watermark has
passed its event time, computed from the rows still waiting and one carried row per key.

The shape, over one input::

    SELECT event_time, k, x,
           SUM(x) OVER (PARTITION BY k ORDER BY event_time ROWS UNBOUNDED PRECEDING) AS total
    FROM t

with ``SUM``, ``COUNT``, ``MIN``, ``MAX`` or ``AVG`` (several, one window specification),
framed ``ROWS`` or ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`` (the default frame
with an ORDER BY), or a running number, ``row_number()``, ``rank()`` or ``dense_rank()``;
ordered by the input's event-time column ascending (then anything), partitioned by columns
or not at all; projections and filters above it.

A row is final once the watermark has passed its event time (``watermark.is_late``: a record
before the watermark is late, so no row can come before it any more), and it is emitted then,
once, with its running values (``+I``, never revised). The rows at or after the watermark
wait: they are the state, as they enter the window function, with one row per key carrying
the aggregates of every row emitted so far (a sum, a count, a minimum, a maximum; a sum and a
count for an average; the rows emitted for a row number or a rank, the distinct orderings
emitted for a dense rank: rows at one event time are emitted together, so no ordering is
split between transactions). Emitted rows precede waiting ones in every partition's order (an
event time less than the watermark against one at or after it; rows at one event time are
emitted together), so a transaction computes the window over the rows it emits only, and
combines each running value with its key's carried aggregate: the window function is replaced
in Spark's analyzed plan by that computation with the same output attributes, so what the
query does above it runs unchanged. N transactions give what one gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import _parse_datatype_json_string

from engine_spark.jvm_plan import (
    analyzed,
    expr_id,
    frame,
    is_attribute,
    replace_on_path,
    scala_seq,
    seq,
)
from engine_spark.stateful.shapes.distinct_rows import passed, traced_event_time
from engine_spark.stateful.shapes.operator import operator_path, recognised_path, rows_entering
from engine_spark.stateful.shapes.ranked_rows import ABOVE_WINDOW, WINDOW_PLAN

FUNCTIONS = frozenset({"Sum", "Count", "Min", "Max", "Average"})
NUMBERS = frozenset({"RowNumber", "Rank", "DenseRank"})
"""Window functions numbering the rows in order: a running count of the rows (or of the
distinct orderings, ``DenseRank``) before each."""
_KEY, _VALUE, _RUNNING = "__odf_key_{}", "__odf_value_{}", "__odf_running_{}"
_CARRIED = "__odf_carried"


@dataclass(frozen=True, slots=True)
class RunningAggregate:
    input: str
    """The alias of the input whose rows the window numbers."""
    event_time: str
    """The column of the rows entering the window that holds the input's event time."""
    functions: tuple[str, ...]
    """Each window expression's function (``FUNCTIONS``, ``NUMBERS``), in order."""
    kept_columns: tuple[str, ...]
    """The columns of the rows entering the window function (what the state keeps)."""


def running_aggregate(result: DataFrame, event_times: Mapping[str, str]) -> RunningAggregate | None:
    """The query's running aggregate when it has the shape above (``event_times``: each
    streamed input's event-time column, by alias); None otherwise."""
    path = recognised_path(result, frozenset(event_times), WINDOW_PLAN, "Window", ABOVE_WINDOW)
    if path is None:
        return None
    window = path[-1]
    functions = [_running_function(e) for e in seq(window.windowExpressions())]
    traced = traced_event_time(window.child(), event_times)
    if traced is None or not functions or None in functions:
        return None
    alias, ids = traced.input, traced.ids
    order = list(seq(window.orderSpec()))
    first = order[0].child() if order else None
    if first is None or not is_attribute(first) or expr_id(first) not in ids:
        return None
    if str(order[0].direction().sql()) != "ASC":
        return None
    if not all(is_attribute(p) for p in seq(window.partitionSpec())):
        return None
    kept_columns = tuple(str(a.name()) for a in seq(window.child().output()))
    if len(set(kept_columns)) != len(kept_columns):
        return None
    return RunningAggregate(
        alias, str(first.name()), tuple(f for f in functions if f is not None), kept_columns
    )


def _running_function(expression: Any) -> str | None:
    """The aggregate function of a window expression framed from the partition's start to the
    current row (ROWS or RANGE), without DISTINCT or FILTER, or a numbering function
    (``NUMBERS``, whatever its frame); None for anything else."""
    if str(expression.nodeName()) != "Alias":
        return None
    window = expression.child()
    if str(window.nodeName()) != "WindowExpression":
        return None
    aggregate = window.windowFunction()
    if str(aggregate.nodeName()) in NUMBERS:
        return str(aggregate.nodeName())
    if str(aggregate.nodeName()) != "AggregateExpression":
        return None
    if bool(aggregate.isDistinct()) or bool(aggregate.filter().isDefined()):
        return None
    name = str(aggregate.aggregateFunction().nodeName())
    frame_spec = window.windowSpec().frameSpecification()
    if str(frame_spec.nodeName()) != "SpecifiedWindowFrame":
        return None
    bounds = (str(frame_spec.lower().nodeName()), str(frame_spec.upper().nodeName()))
    if bounds != ("UnboundedPreceding$", "CurrentRow$") and bounds != (
        "UnboundedPreceding",
        "CurrentRow",
    ):
        return None
    return name if name in FUNCTIONS else None


@dataclass(frozen=True, slots=True)
class RunningSplit:
    final: DataFrame
    """The query's result: the rows the watermark has passed, with their running values."""
    waiting: DataFrame
    """The rows still waiting (the next state), in ``kept_columns``."""
    carried: DataFrame
    """The aggregates of every row emitted, one row per key (the next state)."""


def split_at_watermark(
    result: DataFrame,
    kept: str | None,
    carry: str | None,
    watermark: datetime | None,
) -> RunningSplit:
    """``result`` over the rows entering its window function (the new ones and those of the
    Parquet file ``kept``) that the watermark has passed (None: none yet), combined with the
    aggregates per key of the rows emitted before (the Parquet file ``carry``)."""
    session = result.sparkSession
    jvm = session.sparkContext._jvm
    assert jvm is not None
    path = operator_path(result, "Window")
    window = path[-1]
    below = rows_entering(result, window, kept)
    column = _column(jvm, next(iter(seq(window.orderSpec()))).child())
    final = passed(column, watermark)
    emitted, waiting = below.where(final), below.where(~final)
    attributes = list(seq(window.child().output()))
    parts = [_Part(session, i, e) for i, e in enumerate(seq(window.windowExpressions()))]
    keys = [
        _column(jvm, p).alias(_KEY.format(j)) for j, p in enumerate(seq(window.partitionSpec()))
    ]
    running = emitted.select(
        *[_column(jvm, a) for a in attributes], *keys, *[c for p in parts for c in p.running()]
    )
    totals = emitted.groupBy(*keys).agg(*[c for p in parts for c in p.totals()])
    if carry is not None:
        before = session.read.parquet(carry)
        carried = before.select(*[F.col(n).alias(_CARRIED + n) for n in before.columns])
        condition = F.lit(True)
        for j in range(len(keys)):
            key = _KEY.format(j)
            condition = condition & running[key].eqNullSafe(carried[_CARRIED + key])
        running = running.join(carried, condition, "left")
        merged = totals.unionByName(before).groupBy(*[_KEY.format(j) for j in range(len(keys))])
        totals = merged.agg(*[c for p in parts for c in p.merged()]).select(
            *[F.col(f.name).cast(f.dataType) for f in totals.schema.fields]
        )
    combined = running.select(
        *[_column(jvm, a) for a in attributes],
        *[p.combined(carried=carry is not None).alias(_VALUE.format(p.index)) for p in parts],
    )
    plan = analyzed(combined)
    outputs = {str(a.name()): a for a in seq(plan.output())}
    values = [
        p.alias.withNewChildren(scala_seq(session, [outputs[_VALUE.format(p.index)]]))
        for p in parts
    ]
    project = jvm.org.apache.spark.sql.catalyst.plans.logical.Project(
        scala_seq(session, [*attributes, *values]), plan
    )
    return RunningSplit(frame(session, replace_on_path(session, path, project)), waiting, totals)


def _column(jvm: Any, expression: Any) -> Column:
    """A Column over a resolved Catalyst expression (its attributes by exprId)."""
    return Column(jvm.org.apache.spark.sql.classic.ExpressionUtils.column(expression))


class _Part:
    """One window expression: its running value over the emitted rows, its totals per key,
    and how a carried total and a running value combine."""

    def __init__(self, session: SparkSession, index: int, alias: Any) -> None:
        jvm = session.sparkContext._jvm
        assert jvm is not None
        self.index = index
        self.alias = alias
        self.window = alias.child()
        function = self.window.windowFunction()
        self.type = _parse_datatype_json_string(str(alias.dataType().json()))
        self._jvm = jvm
        self._session = session
        self._functions = []
        if str(function.nodeName()) in NUMBERS:
            self.function = str(function.nodeName())
            self.names = [f"{_RUNNING.format(index)}_0"]
            return
        self.function = str(function.aggregateFunction().nodeName())
        aggregates = jvm.org.apache.spark.sql.catalyst.expressions.aggregate
        if self.function == "Average":
            argument = function.aggregateFunction().child()
            parts = [aggregates.Sum(argument), aggregates.Count(scala_seq(session, [argument]))]
        else:
            parts = [function.aggregateFunction()]
        self._functions = [p.toAggregateExpression() for p in parts]
        self.names = [f"{_RUNNING.format(index)}_{k}" for k in range(len(parts))]

    def running(self) -> list[Column]:
        if self.function in NUMBERS:  # numbered over the emitted rows, then shifted
            return [_column(self._jvm, self.window).alias(self.names[0])]
        spec = self.window.windowSpec()
        return [
            _column(
                self._jvm, self.window.withNewChildren(scala_seq(self._session, [f, spec]))
            ).alias(n)
            for f, n in zip(self._functions, self.names, strict=True)
        ]

    def totals(self) -> list[Column]:
        if self.function == "DenseRank":  # the distinct orderings numbered
            order = [
                _column(self._jvm, o.child()) for o in seq(self.window.windowSpec().orderSpec())
            ]
            return [F.count_distinct(F.struct(*order)).alias(self.names[0])]
        if self.function in NUMBERS:  # the rows numbered
            return [F.count(F.lit(1)).alias(self.names[0])]
        return [
            _column(self._jvm, f).alias(n) for f, n in zip(self._functions, self.names, strict=True)
        ]

    def merged(self) -> list[Column]:
        """The totals of the carried rows and the increments, per key."""
        merge = {"Min": F.min, "Max": F.max}.get(self.function, F.sum)
        return [merge(F.col(n)).alias(n) for n in self.names]

    def combined(self, *, carried: bool) -> Column:
        running = [F.col(n) for n in self.names]
        before = [F.col(_CARRIED + n) for n in self.names]
        if not carried and self.function != "Average":
            value = running[0]
        elif not carried:
            value = F.when(running[1] > 0, running[0] / running[1])
        elif self.function == "Sum":
            value = F.coalesce(before[0] + running[0], before[0], running[0])
        elif self.function == "Count" or self.function in NUMBERS:
            value = F.coalesce(before[0], F.lit(0)) + running[0]
        elif self.function == "Min":
            value = F.least(before[0], running[0])
        elif self.function == "Max":
            value = F.greatest(before[0], running[0])
        else:
            total = F.coalesce(before[0], F.lit(0)) + F.coalesce(running[0], F.lit(0))
            count = F.coalesce(before[1], F.lit(0)) + running[1]
            value = F.when(count > 0, total / count)
        return value.cast(self.type)
