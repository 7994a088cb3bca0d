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
(``structured_streaming/``). ``IntervalJoinRunner`` is the runner; its state is each side's
records within its bound (``retention.py``) and the join (``checkpoint.JoinSpec``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import structlog
from pyspark.sql import DataFrame
from pyspark.sql.types import TimestampType

from engine_spark import checkpoint as cp
from engine_spark.inputs import quote_identifier
from engine_spark.jvm_plan import analyzed, query_nodes, single_operator, view_name
from engine_spark.queries import run_steps
from engine_spark.spark_errors import query_errors
from engine_spark.stateful import retention
from engine_spark.stateful.plan import join_state_lags
from engine_spark.stateful.runner import StatefulQuery, StatefulRun, in_value_order, runner_mismatch
from engine_spark.stateful.stream_inputs import PhaseClock, StreamInput, spark_watermark

log = structlog.get_logger("engine_spark.stateful.interval_join")

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


def may_match(
    new_left: retention.EventTimeRange | None,
    kept_right: retention.EventTimeRange | None,
    left_lag: timedelta,
    right_lag: timedelta,
) -> bool:
    """Whether a new left record may match a kept right record: a pair matches only when
    the right record is at most ``left_lag`` after the left one and at most ``right_lag``
    before it (each side's bound: how long its records can still find a partner)."""
    if new_left is None or kept_right is None:
        return False
    return new_left[0] - kept_right[1] <= right_lag and kept_right[0] - new_left[1] <= left_lag


JoinSides = cp.JoinSpec | tuple[str, str]
"""The join found in the first transaction (from the state), or the inputs of its sides
(left, right) still to be checked against Spark's analysis of the bounds."""


class IntervalJoinRunner:
    """An inner interval join recomputed from each side's kept records: the query run twice
    as a batch query, no Structured Streaming. State: each side's records within its bound
    (``retention.retained_records``) and the join (``checkpoint.JoinSpec``)."""

    runner = cp.Runner.JOIN_RECOMPUTE

    def plan(self, query: StatefulQuery) -> JoinSides | None:
        inputs, carried = query.inputs, query.carried
        if query.temporal or len(inputs) != 2:
            return None
        if carried is not None and carried.runner != self.runner:
            return None
        if carried is not None and carried.join is not None:
            return carried.join
        if len({i.request.vocab.event_time_column for i in inputs}) != 1:
            return None
        for i in inputs:  # the bounds are read in microseconds of a timestamp, not in days
            schema = query.session.table(quote_identifier(i.request.query_alias)).schema
            if not isinstance(schema[i.request.vocab.event_time_column].dataType, TimestampType):
                return None
        aliases = frozenset(i.request.query_alias for i in inputs)
        with query_errors(None, in_step=False):
            sides = join_inputs(query.result, aliases)
        if sides is None and carried is not None:
            raise runner_mismatch("the records kept by an interval join")
        return sides

    def register(
        self, prepared: retention.PreparedViews, carried: cp.StreamState, event_time: str
    ) -> None:
        """The views of the first query: the left input's new and kept records, the right
        input's new ones. The bounds are in the state: no analysis of the plan, no watermark
        marks needed."""
        join, new = carried.join, prepared.new
        if join is None or {join.left, join.right} != set(new):
            raise runner_mismatch("the records kept by an interval join")
        left, right = join.left, join.right
        retention.register_union([new[left], prepared.kept[left]], left, event_time, marked=False)
        retention.register_union([new[right]], right, event_time, marked=False)

    def run(self, query: StatefulQuery, plan: JoinSides) -> StatefulRun | None:
        """The transaction's output and state; None when the join turns out not to be
        bounded on both sides (it then runs as Structured Streaming). With prepared views,
        the query's result is the first of the two queries."""
        clock = PhaseClock()
        session, request = query.session, query.request
        inputs, carried = query.inputs, query.carried
        columns, arrow_schema = query.columns, query.arrow_schema
        upto = spark_watermark(inputs)
        assert upto is not None, "a stateful query has streamed inputs"
        if isinstance(plan, cp.JoinSpec):
            left, right = plan.left, plan.right
        else:
            left, right = plan
        event_time = inputs[0].request.vocab.event_time_column
        # Spark's analysis of the bounds needs the event times marked; bounds from the state
        # do not.
        marked = not isinstance(plan, cp.JoinSpec)
        if query.prepared is not None:
            new, kept, first = query.prepared.new, query.prepared.kept, query.result
        else:
            prepared = retention.views(session, query.area, inputs, carried)
            new, kept = prepared.new, prepared.kept
            retention.register_union([new[left], kept[left]], left, event_time, marked=marked)
            retention.register_union([new[right]], right, event_time, marked=marked)
            first = run_steps(session, request.transform)
        spec = _spec(plan, first, inputs, left, right)
        if spec is None:
            return None
        left, right = spec.left, spec.right  # the first transaction may swap them (``_spec``)
        parts = [first]
        kept_right = kept[right]
        by_alias = {i.request.query_alias: i for i in inputs}
        if kept_right is not None and may_match(
            retention.new_range(by_alias[left]),
            retention.kept_range(carried, by_alias[right]),
            timedelta(microseconds=spec.left_lag_us),
            timedelta(microseconds=spec.right_lag_us),
        ):
            retention.register_union([new[left]], left, event_time, marked=marked)
            retention.register_union([kept_right], right, event_time, marked=marked)
            parts.append(run_steps(session, request.transform))
        clock.lap("plan")
        with query_errors(None, in_step=False):
            result = parts[0] if len(parts) == 1 else parts[0].unionAll(parts[1])
            table = result.toArrow().cast(arrow_schema)
        clock.lap("run")
        bounds = {
            left: timedelta(microseconds=spec.left_lag_us),
            right: timedelta(microseconds=spec.right_lag_us),
        }
        files = {
            f"{i.directory}.parquet": retention.retained_records(
                carried, i, upto, bounds[i.request.query_alias]
            )
            for i in inputs
        }
        clock.lap("retain")
        state = query.next_state(files, runner=self.runner, join=spec)
        log.info(
            "transform.join",
            bounds=[str(b) for b in bounds.values()],
            queries=len(parts),
            retained_bytes=state.files_size,
            **clock.laps,
        )
        return StatefulRun(in_value_order(table, columns), columns, state, max(bounds.values()))


def _spec(
    plan: JoinSides, first: DataFrame, inputs: Sequence[StreamInput], left: str, right: str
) -> cp.JoinSpec | None:
    """The join's bounds: from the state, or Spark's analysis of the first query."""
    if isinstance(plan, cp.JoinSpec):
        return plan
    aliases = frozenset(i.request.query_alias for i in inputs)
    with query_errors(None, in_step=False):
        bounds = join_bounds(first, aliases)
    if bounds is None:
        return None
    micros = timedelta(microseconds=1)
    if bounds[0] < bounds[1]:
        # The first query reads the left input's kept records, the second the right's:
        # with the narrower bound on the right, its kept records are fewer (often none,
        # and then there is no second query). Nothing is kept yet: either way round.
        left, right, bounds = right, left, (bounds[1], bounds[0])
    return cp.JoinSpec(
        left=left,
        right=right,
        left_lag_us=bounds[0] // micros,
        right_lag_us=bounds[1] // micros,
    )
