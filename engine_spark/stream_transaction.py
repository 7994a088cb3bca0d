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
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from engine_spark import checkpoint as cp
from engine_spark import stream_state, streaming, window_recompute
from engine_spark.asof_join import as_of_join
from engine_spark.changelog import changelog
from engine_spark.errors import InputDataError, InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import quote_identifier, register_view, stable_literal
from engine_spark.join_recompute import EventTimeRange, join_bounds, join_inputs, may_match
from engine_spark.ordering import is_row_wise, sort_by_values
from engine_spark.outputs import OutputColumns, plan_output_columns
from engine_spark.queries import run_steps
from engine_spark.retractions import check_no_retractions, in_interval, read_columns
from engine_spark.schema_mapping import result_arrow_schema
from engine_spark.spark_errors import query_errors
from engine_spark.stateful import WATERMARK_METADATA_KEY, Mode, stateful_plan
from engine_spark.topn_recompute import TopN, top_n, with_kept
from engine_spark.watermark import input_watermark, is_late, spark_output_margin
from engine_spark.window_recompute import (
    WindowAggregate,
    closing_windows,
    retained,
    window_aggregate,
)

log = structlog.get_logger("engine_spark.stream_transaction")


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


def carried_stream(
    request: ep.TransformRequest, previous: cp.EngineCheckpoint
) -> cp.StreamState | None:
    """The previous streaming state, if it belongs to this query."""
    fingerprint = streaming.query_fingerprint(request.transform)
    return previous.stream if previous.stream and previous.stream.query == fingerprint else None


@dataclass(frozen=True, slots=True)
class PreparedViews:
    """The inputs' views registered for a recomputation before the query ran
    (``prepare_views``): each streamed input's new records (not late) and kept records."""

    new: dict[str, DataFrame]
    kept: dict[str, DataFrame | None]


def prepare_views(
    session: SparkSession,
    area: streaming.WorkArea,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    temporal: set[str],
) -> PreparedViews | None:
    """Before the query runs: when the previous state is a recomputation's kept records,
    register the inputs' views as the recomputation's (first) query reads them, so the query
    the engine runs is that query. A window aggregation reads new and kept records of every
    input; an interval join reads the left input's new and kept records and the right input's
    new ones. None when there is no such state."""
    carried = carried_stream(request, previous)
    if temporal or carried is None:
        return None
    if carried.runner not in (cp.WINDOW_RECOMPUTE, cp.JOIN_RECOMPUTE):
        return None
    inputs = _stream_inputs(request, previous, temporal)
    new, kept = _views(session, area, inputs, carried)
    event_time = inputs[0].request.vocab.event_time_column
    prepared = PreparedViews(new, kept)
    if carried.runner == cp.WINDOW_RECOMPUTE:
        for alias in new:
            _register([new[alias], kept[alias]], alias, event_time, marked=False)
    elif carried.join is not None and {carried.join.left, carried.join.right} == set(new):
        # The bounds are in the state: no analysis of the plan, no watermark marks needed.
        left, right = carried.join.left, carried.join.right
        _register([new[left], kept[left]], left, event_time, marked=False)
        _register([new[right]], right, event_time, marked=False)
    else:
        raise runner_mismatch("the records kept by an interval join")
    return prepared


def _views(
    session: SparkSession,
    area: streaming.WorkArea,
    inputs: Sequence[streaming.StreamInput],
    carried: cp.StreamState | None,
) -> tuple[dict[str, DataFrame], dict[str, DataFrame | None]]:
    """Each input's new records and kept records, by query alias."""
    new: dict[str, DataFrame] = {}
    kept: dict[str, DataFrame | None] = {}
    for inp in inputs:
        alias = inp.request.query_alias
        new[alias] = _new_view(session, inp)
        kept[alias] = _kept_view(session, area, inp, carried, new[alias])
    return new, kept


def _new_view(session: SparkSession, inp: streaming.StreamInput) -> DataFrame:
    """The input's new records as the batch query read them (``engine.py``), late ones
    dropped."""
    view = session.table(quote_identifier(inp.request.query_alias))
    if inp.previous_watermark is not None:
        column = F.col(quote_identifier(inp.request.vocab.event_time_column))
        view = view.where(~is_late(column, stable_literal(inp.previous_watermark, column)))
    return view


def _kept_view(
    session: SparkSession,
    area: streaming.WorkArea,
    inp: streaming.StreamInput,
    carried: cp.StreamState | None,
    new: DataFrame,
) -> DataFrame | None:
    """The input's kept records (a file of the state) with the schema of ``new``; None when
    there are none."""
    name = f"{inp.directory}.parquet"
    if carried is None or name not in carried.files or _no_rows(carried.files[name]):
        return None
    path = area.inputs / name
    path.write_bytes(carried.files[name])
    return session.read.schema(new.schema).parquet(str(path))


def _no_rows(parquet: bytes) -> bool:
    try:
        rows: int = pq.ParquetFile(io.BytesIO(parquet)).metadata.num_rows
        return rows == 0
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"the checkpoint's kept records are unreadable: {e}") from e


def _register(parts: list[DataFrame | None], alias: str, event_time: str, *, marked: bool) -> None:
    """Register the union of ``parts`` as ``alias``; ``marked``: its event time marked as
    bounded by a watermark (so Spark's analysis of join bounds sees it)."""
    frames = [p for p in parts if p is not None]
    df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    register_view(_with_watermark_metadata(df, event_time) if marked else df, alias)


def run_stream_transaction(
    session: SparkSession,
    area: streaming.WorkArea,
    request: ep.TransformRequest,
    previous: cp.EngineCheckpoint,
    temporal: set[str],
    batch_result: DataFrame,
    *,
    prepared: PreparedViews | None = None,
) -> StreamRun:
    """Run a stateful query over the slices: a window aggregation, an inner interval join or
    a top-N recomputed from the records it keeps (``window_recompute.py``,
    ``join_recompute.py``, ``topn_recompute.py``), anything else as a streaming query
    (``streaming.py``).

    ``temporal``: the aliases of temporal tables (already registered as static views);
    ``prepared``: ``prepare_views`` registered the inputs, so ``batch_result`` is the
    recomputation's (first) query."""
    inputs = _stream_inputs(request, previous, temporal)
    fingerprint = streaming.query_fingerprint(request.transform)
    carried = carried_stream(request, previous)
    columns = plan_output_columns(
        [(f.name, f.dataType.simpleString()) for f in batch_result.schema.fields], request.vocab
    )
    arrow_schema = result_arrow_schema(batch_result)
    windows = _window_plan(inputs, carried, temporal, batch_result, request.vocab.event_time_column)
    if windows is not None:
        result = batch_result if prepared is not None else None
        run = _WindowRun(session, area, request, inputs, carried, windows)
        return run.run(result, arrow_schema, columns)
    join = _join_plan(session, inputs, carried, temporal, batch_result)
    if join is not None:
        joined = _JoinRun(session, area, request, inputs, carried, join).run(
            prepared, batch_result, arrow_schema, columns
        )
        if joined is not None:
            return joined
    top = _topn_plan(inputs, carried, temporal, batch_result)
    if top is not None:
        return _TopNRun(session, area, request, inputs, carried, top).run(arrow_schema, columns)
    if carried is not None and carried.runner != cp.SPARK_STREAMING:
        raise runner_mismatch(f"streaming state of the {carried.runner!r} runner")
    clock = streaming.PhaseClock()
    transaction = streaming.restore(area, carried, session)
    clock.lap("restore")
    staged = []
    for inp in inputs:
        rows, schema = streaming.new_records(inp.request)
        staged.append((inp, rows))
        (area.inputs / inp.directory).mkdir(exist_ok=True)  # its files once planned
        view = streaming.stream_view(
            session,
            area,
            inp.directory,
            schema,
            event_time=inp.request.vocab.event_time_column,
            previous_watermark=inp.previous_watermark,
        )
        register_view(view, inp.request.query_alias)
    streaming.configure(session)
    result = run_steps(session, request.transform)
    plan = stateful_plan(result)
    clock.lap("plan")
    streaming.preset_watermarks(area, inputs, points=plan.points)
    for inp, rows in staged:
        streaming.stage_input(area, inp, rows, transaction, points=plan.points)
    clock.lap("stage")
    batches = [t.cast(arrow_schema) for t in streaming.run_query(result, area, plan.mode)]
    clock.lap("run")
    files = stream_state.pack(area.checkpoint, area.inputs)
    clock.lap("pack")
    emitted: bytes | None = None
    if plan.mode is Mode.APPEND:
        table = pa.concat_tables(batches) if batches else arrow_schema.empty_table()
        table = in_value_order(table, columns)
    else:
        if columns.op is not None:
            raise InvalidQueryError(
                f"an aggregation not grouped by event time emits its own changelog in "
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
    known = [i.watermark for i in inputs if i.watermark is not None]
    margin = spark_output_margin(min(known), points=plan.points) if known else timedelta(0)
    lag = max(plan.lag, _window_lag(result, inputs, request.vocab.event_time_column)) + margin
    if known and not window_recompute.labelled_by_window_end(
        result, request.vocab.event_time_column
    ):
        # a session labelled by its start: no later output before the oldest open session
        with query_errors(None, in_step=False):
            oldest = streaming.oldest_open_session(session, area)
        if oldest is not None:
            lag = max(lag, min(known) - oldest)
    return StreamRun(table, columns, state, lag)


def _window_lag(
    result: DataFrame, inputs: Sequence[streaming.StreamInput], output_event_time: str
) -> timedelta:
    """A window aggregation's lag under Structured Streaming, as ``window_recompute`` reads it
    (0 labelled by its end, its width by its start); 0 when it reads none."""
    names = {i.request.vocab.event_time_column for i in inputs}
    if len(names) != 1:
        return timedelta(0)
    aliases = frozenset(i.request.query_alias for i in inputs)
    with query_errors(None, in_step=False):
        found = window_recompute.window_aggregate(result, names.pop(), aliases, output_event_time)
    return found.lag if found is not None else timedelta(0)


def in_value_order(table: pa.Table, columns: OutputColumns) -> pa.Table:
    trailing = [columns.op] if columns.op else []
    return sort_by_values(table, [columns.event_time], trailing)


def _window_plan(
    inputs: Sequence[streaming.StreamInput],
    carried: cp.StreamState | None,
    temporal: set[str],
    batch_result: DataFrame,
    output_event_time: str,
) -> WindowAggregate | None:
    """The query's window aggregation when it runs as ``window_recompute`` (no temporal
    tables, one event-time column name, and no state of another runner to carry on)."""
    if temporal or (carried is not None and carried.runner != cp.WINDOW_RECOMPUTE):
        return None
    if carried is not None and carried.window is not None:  # found in the first transaction
        micros = timedelta(microseconds=1)
        window = carried.window
        return WindowAggregate(window.width_us * micros, window.column, window.lag_us * micros)
    names = {i.request.vocab.event_time_column for i in inputs}
    if len(names) != 1:
        return None
    aliases = frozenset(i.request.query_alias for i in inputs)
    with query_errors(None, in_step=False):
        plan = window_aggregate(batch_result, names.pop(), aliases, output_event_time)
    if plan is None and carried is not None:
        raise runner_mismatch("the records of a window aggregation's open windows")
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
            new, kept = _views(self.session, self.area, self.inputs, self.carried)
            event_time = self.inputs[0].request.vocab.event_time_column
            for alias in new:
                _register([new[alias], kept[alias]], alias, event_time, marked=False)
            result = run_steps(self.session, self.request.transform)
        clock.lap("plan")
        with query_errors(None, in_step=False):
            closing = closing_windows(result, self.plan, after, upto)
            table = closing.toArrow().cast(arrow_schema)
        clock.lap("run")
        files = {
            # in a window still open: less than a width behind the watermark
            f"{i.directory}.parquet": _retained_records(
                self.carried, i, upto, self.plan.width - timedelta(microseconds=1)
            )
            for i in self.inputs
        }
        clock.lap("retain")
        state = recomputed_state(
            self.session,
            self.request,
            self.carried,
            files,
            runner=cp.WINDOW_RECOMPUTE,
            window=cp.WindowSpec(
                column=self.plan.window_column,
                width_us=self.plan.width // timedelta(microseconds=1),
                lag_us=self.plan.lag // timedelta(microseconds=1),
            ),
        )
        log.info(
            "transform.windows",
            width=str(self.plan.width),
            retained_bytes=stream_state.total_size(files),
            **clock.laps,
        )
        return StreamRun(in_value_order(table, columns), columns, state, self.plan.lag)


def _join_plan(
    session: SparkSession,
    inputs: Sequence[streaming.StreamInput],
    carried: cp.StreamState | None,
    temporal: set[str],
    batch_result: DataFrame,
) -> cp.JoinSpec | tuple[str, str] | None:
    """When the query may run as ``join_recompute``: the join found in the first transaction
    (from the state), or the inputs of its sides (left, right) to be checked further."""
    if temporal or len(inputs) != 2:
        return None
    if carried is not None and carried.runner != cp.JOIN_RECOMPUTE:
        return None
    if carried is not None and carried.join is not None:
        return carried.join
    if len({i.request.vocab.event_time_column for i in inputs}) != 1:
        return None
    for i in inputs:  # the bounds are read in microseconds of a timestamp, not in days
        schema = session.table(quote_identifier(i.request.query_alias)).schema
        if not isinstance(schema[i.request.vocab.event_time_column].dataType, TimestampType):
            return None
    aliases = frozenset(i.request.query_alias for i in inputs)
    with query_errors(None, in_step=False):
        sides = join_inputs(batch_result, aliases)
    if sides is None and carried is not None:
        raise runner_mismatch("the records kept by an interval join")
    return sides


def _topn_plan(
    inputs: Sequence[streaming.StreamInput],
    carried: cp.StreamState | None,
    temporal: set[str],
    batch_result: DataFrame,
) -> TopN | None:
    """The query's top-N per key when it runs as ``topn_recompute``."""
    if temporal or (carried is not None and carried.runner != cp.TOPN_RECOMPUTE):
        return None
    with query_errors(None, in_step=False):
        plan = top_n(batch_result, frozenset(i.request.query_alias for i in inputs))
    if plan is None and carried is not None:
        raise runner_mismatch("the rows of a top N")
    return plan


@dataclass(frozen=True, slots=True)
class _TopNRun:
    """A top-N per key recomputed from the rows in the top N (``topn_recompute.py``): one
    batch query, emitted as a changelog."""

    session: SparkSession
    area: streaming.WorkArea
    request: ep.TransformRequest
    inputs: Sequence[streaming.StreamInput]
    carried: cp.StreamState | None
    plan: TopN

    def run(self, arrow_schema: pa.Schema, columns: OutputColumns) -> StreamRun:
        op = self.request.vocab.operation_type_column
        if columns.op is not None:
            raise InvalidQueryError(
                f"a top-N query emits its own changelog in {columns.op!r}: do not select an "
                f"{columns.op!r} column"
            )
        clock = streaming.PhaseClock()
        check_no_retractions([i.request for i in self.inputs], stateful=True)
        for inp in self.inputs:
            register_view(_new_view(self.session, inp), inp.request.query_alias)
        result = run_steps(self.session, self.request.transform)
        source = next(i for i in self.inputs if i.request.query_alias == self.plan.input)
        name = f"{source.directory}.parquet"
        kept: str | None = None
        files = self.carried.files if self.carried is not None else {}
        if name in files and not _no_rows(files[name]):
            path = self.area.inputs / name
            path.write_bytes(files[name])
            kept = str(path)
        clock.lap("plan")
        with query_errors(None, in_step=False):
            output, top = with_kept(result, kept)
            table = output.toArrow().cast(arrow_schema)
            top_rows = sort_by_values(top.toArrow(), [], [])
        clock.lap("run")
        before = self.carried.emitted if self.carried is not None else None
        changes = changelog(
            [table],
            pq.read_table(io.BytesIO(before)) if before is not None else None,
            self.plan.keys,
            op,
        )
        state = recomputed_state(
            self.session,
            self.request,
            self.carried,
            {name: parquet_bytes(top_rows)},
            runner=cp.TOPN_RECOMPUTE,
            keys=self.plan.keys,
            emitted=parquet_bytes(changes.emitted),
        )
        log.info("transform.top_n", limit=self.plan.limit, kept=top_rows.num_rows, **clock.laps)
        return StreamRun(changes.rows, dataclasses.replace(columns, op=op), state, timedelta(0))


def recomputed_state(
    session: SparkSession,
    request: ep.TransformRequest,
    carried: cp.StreamState | None,
    files: dict[str, bytes],
    *,
    runner: str,
    window: cp.WindowSpec | None = None,
    join: cp.JoinSpec | None = None,
    keys: tuple[str, ...] = (),
    emitted: bytes | None = None,
) -> cp.StreamState:
    """The state a recomputation hands to the next transaction: ``files`` are the records it
    keeps; a changelog (``keys``, ``emitted``) for a top-N, append mode otherwise."""
    return cp.StreamState(
        query=streaming.query_fingerprint(request.transform),
        spark_version=streaming.spark_version(session),
        mode=(Mode.CHANGELOG if keys else Mode.APPEND).value,
        transactions=(carried.transactions if carried is not None else 0) + 1,
        files=files,
        keys=keys,
        emitted=emitted,
        runner=runner,
        window=window,
        join=join,
    )


def runner_mismatch(what: str) -> InputDataError:
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
    join: cp.JoinSpec | tuple[str, str]

    def run(
        self,
        prepared: PreparedViews | None,
        batch_result: DataFrame,
        arrow_schema: pa.Schema,
        columns: OutputColumns,
    ) -> StreamRun | None:
        """The transaction's output and state; None when the join turns out not to be
        bounded on both sides (it then runs as Structured Streaming). With ``prepared``
        views, ``batch_result`` is the first of the two queries."""
        clock = streaming.PhaseClock()
        upto = streaming.spark_watermark(self.inputs)
        assert upto is not None, "a stateful query has streamed inputs"
        if isinstance(self.join, cp.JoinSpec):
            left, right = self.join.left, self.join.right
        else:
            left, right = self.join
        event_time = self.inputs[0].request.vocab.event_time_column
        # Spark's analysis of the bounds needs the event times marked; bounds from the state
        # do not.
        marked = not isinstance(self.join, cp.JoinSpec)
        if prepared is not None:
            new, kept, first = prepared.new, prepared.kept, batch_result
        else:
            new, kept = _views(self.session, self.area, self.inputs, self.carried)
            _register([new[left], kept[left]], left, event_time, marked=marked)
            _register([new[right]], right, event_time, marked=marked)
            first = run_steps(self.session, self.request.transform)
        spec = self._spec(first, left, right)
        if spec is None:
            return None
        left, right = spec.left, spec.right  # the first transaction may swap them (``_spec``)
        parts = [first]
        kept_right = kept[right]
        by_alias = {i.request.query_alias: i for i in self.inputs}
        if kept_right is not None and may_match(
            _new_range(by_alias[left]),
            _kept_range(self.carried, by_alias[right]),
            timedelta(microseconds=spec.left_lag_us),
            timedelta(microseconds=spec.right_lag_us),
        ):
            _register([new[left]], left, event_time, marked=marked)
            _register([kept_right], right, event_time, marked=marked)
            parts.append(run_steps(self.session, self.request.transform))
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
            f"{i.directory}.parquet": _retained_records(
                self.carried, i, upto, bounds[i.request.query_alias]
            )
            for i in self.inputs
        }
        clock.lap("retain")
        state = recomputed_state(
            self.session, self.request, self.carried, files, runner=cp.JOIN_RECOMPUTE, join=spec
        )
        log.info(
            "transform.join",
            bounds=[str(b) for b in bounds.values()],
            queries=len(parts),
            retained_bytes=stream_state.total_size(files),
            **clock.laps,
        )
        return StreamRun(in_value_order(table, columns), columns, state, max(bounds.values()))

    def _spec(self, first: DataFrame, left: str, right: str) -> cp.JoinSpec | None:
        """The join's bounds: from the state, or Spark's analysis of the first query."""
        if isinstance(self.join, cp.JoinSpec):
            return self.join
        aliases = frozenset(i.request.query_alias for i in self.inputs)
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


def _new_range(inp: streaming.StreamInput) -> EventTimeRange | None:
    """The oldest and newest event time of the input's new records that are not late, read
    from the input files' ``offset`` and ``event_time`` columns (no Spark job)."""
    request = inp.request
    offset, event_time = request.vocab.offset_column, request.vocab.event_time_column
    if request.offset_interval is None:
        return None
    times = []
    for path in request.data_paths:
        table = read_columns(path, [offset, event_time])
        if table is None:  # not readable so: assume the records may match
            return _ALL_TIME
        table = table.filter(in_interval(table.column(offset), request.offset_interval))
        if inp.previous_watermark is not None:
            table = table.filter(streaming.on_time(table, event_time, inp.previous_watermark))
        times.append(table.column(event_time))
    return _range(times)


def _kept_range(
    carried: cp.StreamState | None, inp: streaming.StreamInput
) -> EventTimeRange | None:
    """The oldest and newest event time of the input's kept records."""
    name = f"{inp.directory}.parquet"
    if carried is None or name not in carried.files:
        return None
    column = inp.request.vocab.event_time_column
    try:
        kept = pq.read_table(io.BytesIO(carried.files[name]), columns=[column])
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"the checkpoint's kept records are unreadable: {e}") from e
    return _range([kept.column(column)])


_ALL_TIME = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))


def _range(parts: Sequence[pa.ChunkedArray]) -> EventTimeRange | None:
    chunks = [c.cast(_MICROS, safe=False) for part in parts for c in part.chunks]
    if not chunks:
        return None
    bounds = pc.min_max(pa.chunked_array(chunks, _MICROS))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return None if low is None or high is None else (low, high)


_MICROS = pa.timestamp("us", tz="UTC")


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
    here, with the retraction check) that are not late, whose event time is not before
    ``upto`` minus ``bound``."""
    horizon = upto - bound
    if inp.previous_watermark is not None:
        horizon = max(horizon, inp.previous_watermark)
    rows, _ = streaming.new_records(inp.request, since=horizon)
    kept = kept_records(carried, f"{inp.directory}.parquet", rows.schema)
    records = pa.concat_tables([kept, rows])
    event_time = inp.request.vocab.event_time_column
    return parquet_bytes(retained(records, event_time, upto, bound))


def kept_records(carried: cp.StreamState | None, name: str, schema: pa.Schema) -> pa.Table:
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
    session: SparkSession,
    schemas: dict[str, pa.Schema],
    transform: TransformSql,
    vocab: DatasetVocabulary,
    event_times: dict[str, str],
) -> None:
    """InvalidQuery unless the query can run incrementally: row-wise, or a streaming query
    that ``stateful_plan`` and Spark's own checks for streaming queries accept (the query is
    started over inputs with no files: it runs no batch). ``event_times``: each input's
    event-time column (from its own vocabulary), by alias."""
    result = run_steps(session, transform)
    temporal = {t.name for t in transform.temporal_tables or ()}
    streamed = frozenset(schemas) - temporal
    if temporal:
        tables = {t.name: t for t in transform.temporal_tables or ()}
        with query_errors(None, in_step=False):
            if as_of_join(result, streamed, tables, vocab) is not None:
                return
    if is_row_wise_query(result):
        return
    if not temporal:
        with query_errors(None, in_step=False):
            if top_n(result, streamed) is not None:
                return
    with streaming.work_area() as area:
        stream_state.fresh(area.checkpoint)
        for i, (alias, schema) in enumerate(schemas.items()):
            if alias in temporal:
                continue
            name = f"input-{i}"
            spark_schema = streaming.empty_input(area, name, schema)
            view = streaming.stream_view(
                session,
                area,
                name,
                spark_schema,
                event_time=event_times[alias],
                previous_watermark=None,
            )
            register_view(view, alias)
        streaming.configure(session)
        result = run_steps(session, transform)
        streaming.run_query(result, area, stateful_plan(result).mode)
