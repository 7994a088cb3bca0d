"""A stateful transaction end to end: stream the inputs, run the query, build the output.

``engine.py`` sends every query that is not row-wise here (``is_row_wise_query``). The
inputs are staged and streamed (``streaming.py``), Spark's checkpoint is restored and packed
(``stream_state.py``), the plan decides append or changelog mode (``stateful.py``), and the
collected micro-batches become the output rows: sorted by value in append mode, a changelog
against the last emitted rows per key otherwise (``changelog.py``).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from engine_spark import checkpoint as cp
from engine_spark import stream_state, streaming
from engine_spark.changelog import changelog
from engine_spark.errors import InputDataError, InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import quote_identifier, register_view, stable_literal
from engine_spark.join_recompute import join_bounds, join_inputs
from engine_spark.ordering import is_row_wise, sort_by_values
from engine_spark.outputs import OutputColumns, plan_output_columns
from engine_spark.queries import run_steps
from engine_spark.schema_mapping import result_arrow_schema
from engine_spark.spark_errors import query_errors
from engine_spark.stateful import WATERMARK_METADATA_KEY, Mode, stateful_plan
from engine_spark.watermark import input_watermark
from engine_spark.window_recompute import (
    WindowAggregate,
    closing_windows,
    retained,
    window_aggregate,
)

log = structlog.get_logger("engine_spark.stream_transaction")

EVENT_TIME = DatasetVocabulary().event_time_column


@dataclass(frozen=True, slots=True)
class StreamRun:
    """A stateful transaction's output rows (final order), the state, the watermark lag."""

    table: pa.Table
    columns: OutputColumns
    state: cp.StreamState
    lag: timedelta


def is_row_wise_query(result: DataFrame) -> bool:
    """Whether the query gives the same answer slice by slice as over all records at once."""
    with query_errors(None, in_step=False):
        return is_row_wise(result)


def _stream_inputs(
    request: ep.TransformRequest, previous: cp.EngineCheckpoint, temporal: set[str]
) -> list[streaming.StreamInput]:
    return [
        streaming.StreamInput(
            i,
            previous_watermark=previous.input_watermarks.get(i.dataset_id),
            watermark=input_watermark(
                i.explicit_watermarks, previous.input_watermarks.get(i.dataset_id)
            ),
        )
        for i in request.query_inputs
        if i.query_alias not in temporal
    ]


def _carried(request: ep.TransformRequest, previous: cp.EngineCheckpoint) -> cp.StreamState | None:
    """The previous streaming state, if it belongs to this query."""
    fingerprint = streaming.query_fingerprint(request.transform)
    return previous.stream if previous.stream and previous.stream.query == fingerprint else None


def prepare_window_views(
    session: SparkSession,
    area: streaming.WorkArea,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    temporal: set[str],
) -> bool:
    """Before the query runs: when the previous state is a window aggregation's retained
    records, turn each streamed input's view (its new records, ``engine.py``) into the records
    the recomputation reads (``_register_window_view``); whether it did."""
    carried = _carried(request, previous)
    if temporal or carried is None or carried.runner != cp.WINDOW_RECOMPUTE:
        return False
    for inp in _stream_inputs(request, previous, temporal):
        _register_window_view(session, area, inp, carried)
    return True


def _register_window_view(
    session: SparkSession,
    area: streaming.WorkArea,
    inp: streaming.StreamInput,
    carried: cp.StreamState | None,
) -> None:
    """The input's view: its new records that are not late, then the retained ones."""
    alias = inp.request.query_alias
    view = session.table(quote_identifier(alias))
    if inp.previous_watermark is not None:
        event_time = F.col(quote_identifier(inp.request.vocab.event_time_column))
        view = view.where(event_time > stable_literal(inp.previous_watermark, event_time))
    name = f"{inp.directory}.parquet"
    if carried is not None and name in carried.files:
        path = area.inputs / name
        path.write_bytes(carried.files[name])
        kept = session.read.schema(view.schema).parquet(str(path))
        view = view.unionByName(kept)
    register_view(view, alias)


def run_stream_transaction(
    session: SparkSession,
    area: streaming.WorkArea,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    temporal: set[str],
    batch_result: DataFrame,
    *,
    window_views: bool = False,
) -> StreamRun:
    """Run a stateful query over the slices: a window aggregation recomputed from retained
    records (``window_recompute.py``), anything else as a streaming query (``streaming.py``).

    ``temporal``: the aliases of temporal tables (already registered as static views);
    ``window_views``: ``prepare_window_views`` registered the inputs, so ``batch_result`` is
    the recomputation's query."""
    inputs = _stream_inputs(request, previous, temporal)
    fingerprint = streaming.query_fingerprint(request.transform)
    carried = _carried(request, previous)
    columns = plan_output_columns(
        [(f.name, f.dataType.simpleString()) for f in batch_result.schema.fields], request.vocab
    )
    arrow_schema = result_arrow_schema(batch_result)
    windows = _window_plan(inputs, carried, temporal, batch_result)
    if windows is not None:
        result = batch_result if window_views else None
        run = _WindowRun(session, area, request, inputs, carried, windows)
        return run.run(result, arrow_schema, columns)
    sides = _join_plan(inputs, carried, temporal, batch_result)
    if sides is not None:
        joined = _JoinRun(session, area, request, inputs, carried, *sides).run(
            arrow_schema, columns
        )
        if joined is not None:
            return joined
    if carried is not None and carried.runner != cp.SPARK_STREAMING:
        raise InputDataError(
            f"the checkpoint's streaming state is for the {carried.runner!r} runner, which "
            "this query cannot use; replay the dataset with the engine that wrote it"
        )
    clock = streaming.PhaseClock()
    transaction = streaming.restore(area, carried, session, streaming.spark_watermark(inputs))
    clock.lap("restore")
    for inp in inputs:
        schema = streaming.stage_input(area, inp, transaction)
        view = streaming.stream_view(
            session,
            area,
            inp.directory,
            schema,
            event_time=inp.request.vocab.event_time_column,
            previous_watermark=inp.previous_watermark,
        )
        register_view(view, inp.request.query_alias)
    clock.lap("stage")
    streaming.configure(session)
    result = run_steps(session, request.transform)
    plan = stateful_plan(result)
    clock.lap("plan")
    batches = [t.cast(arrow_schema) for t in streaming.run_query(result, area, plan.mode)]
    clock.lap("run")
    files = stream_state.pack(area.checkpoint, area.inputs)
    clock.lap("pack")
    emitted: bytes | None = None
    if plan.mode is Mode.APPEND:
        table = pa.concat_tables(batches) if batches else arrow_schema.empty_table()
        table = _in_value_order(table, columns)
    else:
        if columns.op is not None:
            raise InvalidQueryError(
                f"an aggregation without an event-time window emits its own changelog in "
                f"{columns.op!r}: do not select an {columns.op!r} column"
            )
        op = request.vocab.operation_type_column
        before = carried.emitted if carried is not None else None
        changes = changelog(
            batches or [arrow_schema.empty_table()],
            pq.read_table(io.BytesIO(before)) if before is not None else None,
            plan.keys,
            op,
        )
        table = changes.rows
        columns = dataclasses.replace(columns, op=op)
        emitted = parquet_bytes(changes.emitted)
    state = cp.StreamState(
        query=fingerprint,
        spark_version=streaming.spark_version(session),
        mode=plan.mode.value,
        transactions=transaction + 1,
        files=files,
        keys=plan.keys,
        emitted=emitted,
    )
    log.info(
        "transform.stream",
        mode=plan.mode.value,
        batches=len(batches),
        state_bytes=stream_state.total_size(files),
        **clock.laps,
    )
    return StreamRun(table, columns, state, plan.lag)


def _in_value_order(table: pa.Table, columns: OutputColumns) -> pa.Table:
    trailing = [columns.op] if columns.op else []
    return sort_by_values(table, [columns.event_time], trailing)


def _window_plan(
    inputs: Sequence[streaming.StreamInput],
    carried: cp.StreamState | None,
    temporal: set[str],
    batch_result: DataFrame,
) -> WindowAggregate | None:
    """The query's window aggregation when it runs as ``window_recompute`` (no temporal
    tables, one event-time column name, and no state of another runner to carry on)."""
    if temporal or (carried is not None and carried.runner != cp.WINDOW_RECOMPUTE):
        return None
    if carried is not None and carried.window is not None:  # found in the first transaction
        width = timedelta(microseconds=carried.window.width_us)
        return WindowAggregate(width, carried.window.column)
    names = {i.request.vocab.event_time_column for i in inputs}
    if len(names) != 1:
        return None
    aliases = frozenset(i.request.query_alias for i in inputs)
    with query_errors(None, in_step=False):
        plan = window_aggregate(batch_result, names.pop(), aliases)
    if plan is None and carried is not None:
        raise InputDataError(
            "the checkpoint holds the retained records of a window aggregation, but this "
            "engine does not run the query as one; replay the dataset with the engine that "
            "wrote it"
        )
    return plan


@dataclass(frozen=True, slots=True)
class _WindowRun:
    """A window aggregation recomputed over the records of its open windows
    (``window_recompute.py``): one batch query, no Structured Streaming."""

    session: SparkSession
    area: streaming.WorkArea
    request: ep.TransformRequest
    inputs: Sequence[streaming.StreamInput]
    carried: cp.StreamState | None
    plan: WindowAggregate

    def run(
        self, result: DataFrame | None, arrow_schema: pa.Schema, columns: OutputColumns
    ) -> StreamRun:
        """``result``: the query over the recomputation's views, when already registered."""
        clock = streaming.PhaseClock()
        upto = streaming.spark_watermark(self.inputs)
        assert upto is not None, "a stateful query has streamed inputs"
        after = (
            streaming.previous_spark_watermark(self.inputs) if self.carried is not None else None
        )
        if result is None:
            for inp in self.inputs:
                _register_window_view(self.session, self.area, inp, self.carried)
            result = run_steps(self.session, self.request.transform)
        clock.lap("plan")
        with query_errors(None, in_step=False):
            closing = closing_windows(result, self.plan, after, upto)
            table = closing.toArrow().cast(arrow_schema)
        clock.lap("run")
        files = {
            f"{i.directory}.parquet": _retained_records(self.carried, i, upto, self.plan.width)
            for i in self.inputs
        }
        clock.lap("retain")
        state = cp.StreamState(
            query=streaming.query_fingerprint(self.request.transform),
            spark_version=streaming.spark_version(self.session),
            mode=Mode.APPEND.value,
            transactions=(self.carried.transactions if self.carried is not None else 0) + 1,
            files=files,
            runner=cp.WINDOW_RECOMPUTE,
            window=cp.WindowSpec(
                column=self.plan.window_column,
                width_us=self.plan.width // timedelta(microseconds=1),
            ),
        )
        log.info(
            "transform.windows",
            width=str(self.plan.width),
            retained_bytes=stream_state.total_size(files),
            **clock.laps,
        )
        return StreamRun(_in_value_order(table, columns), columns, state, timedelta(0))


def _join_plan(
    inputs: Sequence[streaming.StreamInput],
    carried: cp.StreamState | None,
    temporal: set[str],
    batch_result: DataFrame,
) -> tuple[str, str] | None:
    """The inputs of the query's join (left, right) when it may run as ``join_recompute``."""
    if temporal or len(inputs) != 2:
        return None
    if carried is not None and carried.runner != cp.JOIN_RECOMPUTE:
        return None
    if len({i.request.vocab.event_time_column for i in inputs}) != 1:
        return None
    aliases = frozenset(i.request.query_alias for i in inputs)
    with query_errors(None, in_step=False):
        sides = join_inputs(batch_result, aliases)
    if sides is None and carried is not None:
        raise _runner_mismatch("the records kept by an interval join")
    return sides


def _runner_mismatch(what: str) -> InputDataError:
    return InputDataError(
        f"the checkpoint holds {what}, but this engine does not run the query that way; "
        "replay the dataset with the engine that wrote it"
    )


@dataclass(frozen=True, slots=True)
class _JoinRun:
    """An inner interval join recomputed from each side's kept records
    (``join_recompute.py``): the query run twice as a batch query, no Structured Streaming."""

    session: SparkSession
    area: streaming.WorkArea
    request: ep.TransformRequest
    inputs: Sequence[streaming.StreamInput]
    carried: cp.StreamState | None
    left: str
    right: str

    def run(self, arrow_schema: pa.Schema, columns: OutputColumns) -> StreamRun | None:
        """The transaction's output and state; None when the join turns out not to be
        bounded on both sides (it then runs as Structured Streaming)."""
        clock = streaming.PhaseClock()
        upto = streaming.spark_watermark(self.inputs)
        assert upto is not None, "a stateful query has streamed inputs"
        by_alias = {i.request.query_alias: i for i in self.inputs}
        aliases = frozenset(by_alias)
        new = {a: self._new_records(i) for a, i in by_alias.items()}
        kept = {a: self._kept_records(i, new[a]) for a, i in by_alias.items()}
        kept_left = kept[self.left]
        register_view(
            new[self.left] if kept_left is None else new[self.left].unionByName(kept_left),
            self.left,
        )
        register_view(new[self.right], self.right)
        first = run_steps(self.session, self.request.transform)
        with query_errors(None, in_step=False):
            bounds = join_bounds(first, aliases)
        if bounds is None:
            if self.carried is not None:
                raise _runner_mismatch("the records kept by an interval join")
            return None
        parts = [first]
        kept_right = kept[self.right]
        if kept_right is not None:
            register_view(new[self.left], self.left)
            register_view(kept_right, self.right)
            parts.append(run_steps(self.session, self.request.transform))
        clock.lap("plan")
        with query_errors(None, in_step=False):
            result = parts[0] if len(parts) == 1 else parts[0].unionAll(parts[1])
            table = result.toArrow().cast(arrow_schema)
        clock.lap("run")
        lags = {self.left: bounds[0], self.right: bounds[1]}
        files = {
            f"{i.directory}.parquet": _retained_records(
                self.carried, i, upto, lags[i.request.query_alias]
            )
            for i in self.inputs
        }
        clock.lap("retain")
        state = cp.StreamState(
            query=streaming.query_fingerprint(self.request.transform),
            spark_version=streaming.spark_version(self.session),
            mode=Mode.APPEND.value,
            transactions=(self.carried.transactions if self.carried is not None else 0) + 1,
            files=files,
            runner=cp.JOIN_RECOMPUTE,
        )
        log.info(
            "transform.join",
            bounds=[str(b) for b in bounds],
            retained_bytes=stream_state.total_size(files),
            **clock.laps,
        )
        lag = max(bounds)
        return StreamRun(_in_value_order(table, columns), columns, state, lag)

    def _new_records(self, inp: streaming.StreamInput) -> DataFrame:
        """The input's new records as the batch query read them (``engine.py``), late ones
        dropped, its event time marked as bounded by a watermark."""
        event_time = inp.request.vocab.event_time_column
        view = self.session.table(quote_identifier(inp.request.query_alias))
        if inp.previous_watermark is not None:
            column = F.col(quote_identifier(event_time))
            view = view.where(column > stable_literal(inp.previous_watermark, column))
        return _with_watermark_metadata(view, event_time)

    def _kept_records(self, inp: streaming.StreamInput, new: DataFrame) -> DataFrame | None:
        name = f"{inp.directory}.parquet"
        if self.carried is None or name not in self.carried.files:
            return None
        path = self.area.inputs / name
        path.write_bytes(self.carried.files[name])
        event_time = inp.request.vocab.event_time_column
        plain = self.session.table(quote_identifier(inp.request.query_alias)).schema
        kept = self.session.read.schema(plain).parquet(str(path))
        return _with_watermark_metadata(kept, event_time).select(*new.columns)


def _with_watermark_metadata(df: DataFrame, event_time: str) -> DataFrame:
    return df.select(
        *[
            F.col(quote_identifier(c)).alias(c, metadata={WATERMARK_METADATA_KEY: 0})
            if c == event_time
            else F.col(quote_identifier(c))
            for c in df.columns
        ]
    )


def _retained_records(
    carried: cp.StreamState | None, inp: streaming.StreamInput, upto: datetime, bound: timedelta
) -> bytes:
    """The input's records a later transaction may still need: kept ones and new ones (read
    here, with the retraction check) that are not late, whose event time is after ``upto``
    minus ``bound``."""
    horizon = upto - bound
    if inp.previous_watermark is not None:
        horizon = max(horizon, inp.previous_watermark)
    rows, _ = streaming.new_records(inp.request, after=horizon)
    kept = _kept(carried, f"{inp.directory}.parquet", rows.schema)
    records = pa.concat_tables([kept, rows])
    event_time = inp.request.vocab.event_time_column
    return parquet_bytes(retained(records, event_time, upto, bound))


def _kept(carried: cp.StreamState | None, name: str, schema: pa.Schema) -> pa.Table:
    """The records retained for an input (file ``name`` of the state) in ``schema`` (columns
    the input gained since read as null)."""
    if carried is None or name not in carried.files:
        return schema.empty_table()
    try:
        kept = pq.read_table(io.BytesIO(carried.files[name]))
        columns = [
            kept.column(f.name).cast(f.type)
            if f.name in kept.column_names
            else pa.nulls(kept.num_rows, f.type)
            for f in schema
        ]
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(
            f"the checkpoint's retained records {name!r} are unreadable: {e}"
        ) from e
    return pa.Table.from_arrays(columns, schema=schema)


def check_incremental(
    session: SparkSession, schemas: dict[str, pa.Schema], transform: TransformSql
) -> None:
    """InvalidQuery unless the query can run incrementally: row-wise, or a streaming query
    that ``stateful_plan`` and Spark's own checks for streaming queries accept (the query is
    started over inputs with no files: it runs no batch)."""
    result = run_steps(session, transform)
    if is_row_wise_query(result):
        return
    temporal = {t.name for t in transform.temporal_tables or ()}
    with streaming.work_area() as area:
        stream_state.fresh(area.checkpoint)
        for i, (alias, schema) in enumerate(schemas.items()):
            if alias in temporal:
                continue
            name = f"input-{i}"
            spark_schema = streaming.empty_input(area, name, schema)
            view = streaming.stream_view(
                session, area, name, spark_schema, event_time=EVENT_TIME, previous_watermark=None
            )
            register_view(view, alias)
        streaming.configure(session)
        result = run_steps(session, transform)
        streaming.run_query(result, area, stateful_plan(result).mode)
