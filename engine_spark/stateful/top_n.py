"""Top-N per key recomputed from the rows currently in the top N, emitted as a changelog.

The query shape, over one input::

    SELECT ..., rn FROM (
        SELECT ..., row_number() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM input
    ) WHERE rn <= N

For append-only inputs the top N of all records so far is the top N of (the previous top N
plus the new records), so the state is the rows that entered the window function and are in
the top N now (at most N per key). Each transaction puts those rows back under the window
function, next to the new records (a union put into Spark's analyzed plan), runs the query
as a batch query, and emits the difference to what it emitted before as a changelog keyed by
the partition keys and the row number (``changelog.py``): ``+I`` for a rank newly filled,
``-U``/``+U`` for a rank now held by another row. A rank once filled stays filled, so no row
is ever retracted without a replacement. Anything else with ``OVER`` is refused.
``TopNRunner`` is the runner; its state is the rows in the top N and the last emitted rows.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame

from engine_spark import checkpoint as cp
from engine_spark.changelog import changelog
from engine_spark.errors import InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import quote_identifier, register_view
from engine_spark.jvm_plan import (
    analyzed,
    expr_id,
    frame,
    query_nodes,
    replace_on_path,
    scala_seq,
    seq,
    view_name,
)
from engine_spark.ordering import sort_by_values
from engine_spark.queries import run_steps
from engine_spark.retractions import check_no_retractions
from engine_spark.spark_errors import query_errors
from engine_spark.stateful.retention import new_view, no_rows
from engine_spark.stateful.runner import StatefulQuery, StatefulRun, runner_mismatch
from engine_spark.stateful.shapes.operator import operator_path, recognised_path, rows_entering
from engine_spark.stateful.shapes.ranked_rows import ABOVE_WINDOW as _ABOVE
from engine_spark.stateful.shapes.ranked_rows import WINDOW_PLAN as _ALLOWED
from engine_spark.stateful.shapes.ranked_rows import output_name, rank_limit
from engine_spark.stateful.stream_inputs import PhaseClock

log = structlog.get_logger("engine_spark.stateful.top_n")


@dataclass(frozen=True, slots=True)
class TopN:
    limit: int
    input: str
    """The input view the window function reads."""
    keys: tuple[str, ...]
    """The output columns of the changelog key: the partition keys, then the row number."""
    kept_columns: tuple[str, ...]
    """The columns of the rows that enter the window function (what the state keeps)."""


def top_n(result: DataFrame, inputs: frozenset[str]) -> TopN | None:
    """The query's top-N when it has the shape above (``inputs``: the streamed inputs)."""
    path = recognised_path(result, inputs, _ALLOWED, "Window", _ABOVE)
    if path is None:
        return None
    window = path[-1]
    rank = _row_number(window)
    if rank is None:
        return None
    limits = [rank_limit(n.condition(), rank) for n in path[:-1] if str(n.nodeName()) == "Filter"]
    if len(limits) != 1:
        return None
    limit = limits[0]
    if limit is None or limit < 1:
        return None
    views = [
        view_name(n)
        for n in query_nodes(window, inputs)
        if str(n.nodeName()) == "View" and view_name(n) in inputs
    ]
    kept_columns = tuple(str(a.name()) for a in seq(window.child().output()))
    if len(views) != 1 or len(set(kept_columns)) != len(kept_columns):
        return None
    if str(_named(window, rank).name()) in kept_columns:
        return None
    partition = list(seq(window.partitionSpec()))
    if not partition or not all(str(p.nodeName()) == "AttributeReference" for p in partition):
        return None
    keys = _output_names(path, [*(expr_id(p) for p in partition), rank])
    if keys is None:
        return None
    return TopN(limit, views[0], keys, kept_columns)


def with_kept(result: DataFrame, kept: str | None) -> tuple[DataFrame, DataFrame]:
    """``result`` with the rows of the Parquet file ``kept`` (columns ``TopN.kept_columns``)
    entering the window function too, and the rows entering it that make the top N (the next
    state)."""
    session = result.sparkSession
    path = operator_path(result, "Window")
    window = path[-1]
    if kept is not None:
        below = rows_entering(result, window, kept)
        window = window.withNewChildren(scala_seq(session, [analyzed(below)]))
    new_root = replace_on_path(session, path, window)
    limit_at = max(i for i, n in enumerate(path) if str(n.nodeName()) == "Filter")
    limited = replace_on_path(session, path[limit_at:], window)
    columns = [quote_identifier(str(a.name())) for a in seq(window.child().output())]
    return frame(session, new_root), frame(session, limited).select(*columns)


def _row_number(window: Any) -> Any:
    """The exprId of the window's single ``row_number()`` column, or None."""
    expressions = list(seq(window.windowExpressions()))
    if len(expressions) != 1 or str(expressions[0].nodeName()) != "Alias":
        return None
    function = expressions[0].child()
    if str(function.nodeName()) != "WindowExpression":
        return None
    if str(function.windowFunction().nodeName()) != "RowNumber":
        return None
    if window.orderSpec().size() == 0:
        return None
    return expr_id(expressions[0])


def _named(window: Any, rank: Any) -> Any:
    return next(e for e in seq(window.windowExpressions()) if expr_id(e) == rank)


def _output_names(path: list[Any], ids: list[Any]) -> tuple[str, ...] | None:
    """The root's output names for the attributes ``ids`` of the window's output, followed
    up through the projections (renamed or not); None when one is not selected."""
    names = [output_name(path, i) for i in ids]
    return None if None in names else tuple(n for n in names if n is not None)


class TopNRunner:
    """A top-N per key recomputed from the rows in the top N: one batch query, emitted as a
    changelog. State: the rows in the top N (one Parquet file) and the last emitted rows."""

    runner = cp.Runner.TOPN_RECOMPUTE

    def plan(self, query: StatefulQuery) -> TopN | None:
        carried = query.carried
        if query.temporal or (carried is not None and carried.runner != self.runner):
            return None
        with query_errors(None, in_step=False):
            plan = top_n(query.result, frozenset(i.request.query_alias for i in query.inputs))
        if plan is None and carried is not None:
            raise runner_mismatch("the rows of a top N")
        return plan

    def run(self, query: StatefulQuery, plan: TopN) -> StatefulRun:
        inputs, carried = query.inputs, query.carried
        session, request = query.session, query.request
        columns, arrow_schema = query.columns, query.arrow_schema
        op = request.vocab.operation_type_column
        if columns.op is not None:
            raise InvalidQueryError(
                f"a top-N query emits its own changelog in {columns.op!r}: do not select an "
                f"{columns.op!r} column"
            )
        clock = PhaseClock()
        check_no_retractions([i.request for i in inputs], stateful=True)
        for inp in inputs:
            register_view(new_view(session, inp), inp.request.query_alias)
        result = run_steps(session, request.transform)
        source = next(i for i in inputs if i.request.query_alias == plan.input)
        name = f"{source.directory}.parquet"
        kept: str | None = None
        files = carried.files if carried is not None else {}
        if name in files and not no_rows(files[name]):
            path = query.area.inputs / name
            path.write_bytes(files[name])
            kept = str(path)
        clock.lap("plan")
        with query_errors(None, in_step=False):
            output, top = with_kept(result, kept)
            table = output.toArrow().cast(arrow_schema)
            top_rows = sort_by_values(top.toArrow(), [], [])
        clock.lap("run")
        before = carried.emitted if carried is not None else None
        changes = changelog(
            [table],
            pq.read_table(io.BytesIO(before)) if before is not None else None,
            plan.keys,
            op,
        )
        state = query.next_state(
            {name: parquet_bytes(top_rows)},
            runner=self.runner,
            keys=plan.keys,
            emitted=parquet_bytes(changes.emitted),
        )
        log.info("transform.top_n", limit=plan.limit, kept=top_rows.num_rows, **clock.laps)
        return StatefulRun(changes.rows, dataclasses.replace(columns, op=op), state, timedelta(0))
