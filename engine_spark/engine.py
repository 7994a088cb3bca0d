"""The Spark engine's operations, each a short list of named steps.

``SparkEngine`` wraps one long-lived SparkSession. Every request runs in its own fresh session
(``newSession``: shared SparkContext, its own temp views, functions and SQL conf), and
requests are serialized by a lock, so one request never sees another's views and
memory use stays bounded. Methods return the protocol's Success messages and raise
``InvalidQueryError`` for the query's faults; anything else is an internal error.
"""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import structlog
from pyspark.sql import DataFrame, SparkSession

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, OffsetInterval, TemporalTable, TransformSql
from common.serde.arrow_schema import decode_arrow_schema, encode_arrow_schema
from engine_spark import calls, jvm_plan
from engine_spark import checkpoint as cp
from engine_spark.connect import (
    ConnectServer,
    load_remote_files,
    load_remote_input,
    refuse,
    run_remote_steps,
)
from engine_spark.errors import InvalidQueryError
from engine_spark.exchange import read_schema, write_table
from engine_spark.file_hashes import hash_files
from engine_spark.inputs import (
    empty_input,
    load_dataset,
    load_files,
    load_input,
    quote_identifier,
    register_view,
)
from engine_spark.ordering import RowOrder, analyzed_order, result_order, sort_by_values
from engine_spark.output_file import spark_writable, write_output
from engine_spark.output_stream import stream_output
from engine_spark.outputs import OutputColumns, OutputWriter, build_output, plan_output_columns
from engine_spark.phases import phase
from engine_spark.planned_queries import PlannedQueries, PlannedQuery, plan_key
from engine_spark.queries import run_steps
from engine_spark.retractions import check_no_retractions
from engine_spark.row_local import not_row_local
from engine_spark.sandbox import Policy
from engine_spark.schema_evolution import check_schema_evolution
from engine_spark.schema_mapping import output_column
from engine_spark.session import request_session, small_input_settings
from engine_spark.spark_errors import query_errors
from engine_spark.split import (
    InputRun,
    SplitRefusal,
    execute_split,
    plan_slices,
    run_records,
    slice_path,
    slice_request,
    split_slice,
)
from engine_spark.split_job import (
    SliceJob,
    keeps_row_count,
    slice_records,
    slice_schemas,
    write_slices,
)
from engine_spark.staging import ArrowInputs, Staging, stages_locally, staging_area, under
from engine_spark.stateful.registry import (
    check_incremental,
    is_row_wise_query,
    prepare_views,
    reads_latest_state,
    run_stateful,
)
from engine_spark.stateful.runner import StatefulQuery
from engine_spark.stateful.stream_inputs import work_area
from engine_spark.temporal import (
    carried_state,
    check_primary_key,
    latest_state,
    state_view,
    temporal_tables,
)
from engine_spark.warm_up import warm_up_request
from engine_spark.watermark import input_watermark, output_watermark

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

log = structlog.get_logger("engine_spark.engine")

_CANCEL_REPEAT_S = 0.2
"""How often a cancelled call cancels its tag again, until the call ends."""

RAW_QUERY_INPUT_VIEW = "input"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SparkEngine:
    """ExecuteTransform, ExecuteRawQuery, ValidateQuery, MigrateQuery, ExecuteQuery."""

    def __init__(
        self,
        session: SparkSession,
        *,
        stage_arrow: bool | None = None,
        arrow_inputs: ArrowInputs = ArrowInputs.STAGED,
        output_writer: OutputWriter = OutputWriter.STREAM,
        shared_staging: Path | None = None,
        connect: ConnectServer | None = None,
    ) -> None:
        """``stage_arrow``: hand Arrow IPC inputs to Spark as Parquet files (default: when
        the master is local or there is a shared staging directory, see ``staging.py``), else
        through ``createDataFrame``; ``arrow_inputs``: staged, or read where they lie
        (``staging.ArrowInputs``). ``output_writer``: how row-wise outputs are written
        (``OutputWriter``; Spark's own writer only with a local master, or for outputs under
        the shared staging directory). ``shared_staging``: a directory every node of the
        cluster reaches at this path (ignored with a local master). ``connect``: execute on
        that Spark Connect server, ``session`` (local) only vetting and analyzing the queries
        (``connect.py``)."""
        self._session = session
        self._connect = connect
        self._lock = threading.Lock()
        local = stages_locally(session.sparkContext.master or "")
        self._shared = None if local else shared_staging
        self._stage_arrow = (
            (local or self._shared is not None) if stage_arrow is None else stage_arrow
        )
        self._arrow_inputs = arrow_inputs
        if output_writer is OutputWriter.SPARK and not local:
            output_writer = OutputWriter.STREAM
        self._output_writer = output_writer
        self._planned = PlannedQueries()
        """Ad-hoc queries' plans, for the same query over the same files again."""

    @property
    def session(self) -> SparkSession:
        return self._session

    def warm_up(self) -> None:
        """Run one small transaction end to end, so the first real request finds the JVM's
        classes loaded and Spark's code generation cache populated."""
        with tempfile.TemporaryDirectory(prefix="odf-engine-warm-up-") as tmp:
            execute = self.execute_transform(warm_up_request(Path(tmp)))
            log.info("engine.warmed_up", records=execute.new_offset_interval)

    def close(self) -> None:
        """Stop the SparkSession (after the server stopped taking requests)."""
        with self._lock:
            self._session.stop()

    # --- ExecuteTransform -----------------------------------------------------------------

    def execute_transform(self, request: ep.TransformRequest) -> ep.TransformResponseSuccess:
        if self._connect is not None:
            return self._connect_transform(self._connect, request)
        with (
            self._isolated("transform", request.dataset_alias) as session,
            staging_area(
                self._stage_arrow, self._shared, arrow_inputs=self._arrow_inputs
            ) as staging,
            work_area() as area,
        ):
            with phase("inputs"):
                previous = cp.read_checkpoint(request.prev_checkpoint_path)
                tables = temporal_tables(request.transform, _aliases(request.query_inputs))
                latest = reads_latest_state(request, previous)
                states = _register_inputs(
                    session, staging, request.query_inputs, tables, previous, latest=latest
                )
            prepared = prepare_views(session, area, request, previous, set(tables))
            result = run_steps(session, request.transform)
            stream: cp.StreamState | None = None
            lag = timedelta(0)
            output: _Output | None = None
            interval: OffsetInterval | None = None
            written_by = OutputWriter.COLLECT.value
            run = run_stateful(
                StatefulQuery(session, area, request, previous, tables, result, prepared)
            )
            if run is not None:
                output, order = _Output(run.table, run.columns, RowOrder.VALUES), RowOrder.VALUES
                stream, lag = run.state, run.lag
                for name in run.absorbed:  # its versions are in the stream state
                    states.pop(name, None)
            else:
                columns = _output_columns(result, request.vocab)
                if columns.op is None:
                    check_no_retractions(request.query_inputs, stateful=False)
                with query_errors(None, in_step=False), phase("optimisation"):
                    order = result_order(result)
                writer = self._output_writer if order is RowOrder.INPUT else OutputWriter.COLLECT
                cluster_write = self._writes_on_cluster(writer, request.new_data_path)
                if cluster_write:
                    writer = OutputWriter.SPARK
                if writer is OutputWriter.SPARK and not spark_writable(
                    result.schema, columns, request.new_data_path
                ):
                    writer = OutputWriter.STREAM
                if writer is OutputWriter.STREAM and columns.op is not None:
                    writer = OutputWriter.COLLECT
                cluster_write = cluster_write and writer is OutputWriter.SPARK
                written_by = writer.value + (" (cluster)" if cluster_write else "")
                if writer is OutputWriter.COLLECT:
                    output = _collect_output(result, columns, order)
                else:
                    write = (
                        partial(write_output, parallel=cluster_write)
                        if writer is OutputWriter.SPARK
                        else stream_output
                    )
                    with query_errors(None, in_step=False):
                        rows = write(
                            result,
                            columns,
                            request.vocab,
                            system_time=request.system_time,
                            next_offset=request.next_offset,
                            path=request.new_data_path,
                        )
                    interval = _interval(rows, request.next_offset)
            if output is not None:
                interval = _write_slice(
                    build_output(
                        output.table,
                        output.columns,
                        request.vocab,
                        system_time=request.system_time,
                        next_offset=request.next_offset,
                    ),
                    request.new_data_path,
                    request.next_offset,
                )
            with phase("checkpoint"):
                state = _next_checkpoint(previous, request.query_inputs, states, stream, lag)
                _write_state(state, request.new_checkpoint_path)
            log.info(
                "transform.done",
                records=_records(interval),
                order=order.value,
                writer=written_by,
            )
            return ep.TransformResponseSuccess(
                new_offset_interval=interval, new_watermark=state.output_watermark
            )

    def _writes_on_cluster(self, writer: OutputWriter, path: str) -> bool:
        """Whether a row-wise output goes to ``path`` through Spark's writer on the cluster's
        executors: with a shared staging directory that holds ``path`` (the coordinator puts
        the output there), unless the whole result is to be collected anyway."""
        return (
            self._shared is not None
            and writer is not OutputWriter.COLLECT
            and under(self._shared, path)
        )

    # --- ExecuteRawQuery ------------------------------------------------------------------

    def execute_raw_query(self, request: ep.RawQueryRequest) -> ep.RawQueryResponseSuccess:
        if self._connect is not None:
            return self._connect_raw_query(self._connect, request)
        with (
            self._isolated("raw_query", request.output_data_path) as session,
            staging_area(
                self._stage_arrow, self._shared, arrow_inputs=self._arrow_inputs
            ) as staging,
        ):
            small_input_settings(session, request.input_data_paths)
            if request.input_data_paths:  # none: a query of constants, with no input view
                with phase("inputs"):
                    inputs = load_files(session, request.input_data_paths, staging)
                    register_view(inputs, RAW_QUERY_INPUT_VIEW)
            table = _query_result(run_steps(session, request.transform))
            with phase("output write"):
                write_table(table, request.output_data_path)
            return ep.RawQueryResponseSuccess(num_records=table.num_rows)

    # --- Over Spark Connect (connect.py) -------------------------------------------------

    def _connect_transform(
        self, server: ConnectServer, request: ep.TransformRequest
    ) -> ep.TransformResponseSuccess:
        """A stateless transform: vetted and analyzed here over empty inputs, run there."""
        with self._isolated("transform", request.dataset_alias) as session:
            previous = cp.read_checkpoint(request.prev_checkpoint_path)
            if temporal_tables(request.transform, _aliases(request.query_inputs)):
                raise refuse("temporal tables (as-of joins) need the engine's plan rewrites")
            for inp in request.query_inputs:
                register_view(empty_input(session, read_schema(inp.schema_file)), inp.query_alias)
            result = run_steps(session, request.transform)
            if previous.stream is not None or not is_row_wise_query(result):
                raise refuse(
                    "a stateful query (aggregation, join, window, ORDER BY, ...) needs the"
                    " engine's streaming state on a classic driver; only row-wise queries run"
                )
            columns = _output_columns(result, request.vocab)
            if columns.op is None:
                check_no_retractions(request.query_inputs, stateful=False)
            with query_errors(None, in_step=False):
                order = analyzed_order(result)
            with self._remote_session(server) as remote:
                for inp in request.query_inputs:
                    load_remote_input(remote, inp).createOrReplaceTempView(
                        quote_identifier(inp.query_alias)
                    )
                table = run_remote_steps(remote, request.transform).toArrow()
            if order is RowOrder.VALUES:
                table = sort_by_values(
                    table, [columns.event_time], [columns.op] if columns.op else []
                )
            interval = _write_slice(
                build_output(
                    table,
                    columns,
                    request.vocab,
                    system_time=request.system_time,
                    next_offset=request.next_offset,
                ),
                request.new_data_path,
                request.next_offset,
            )
            state = _next_checkpoint(previous, request.query_inputs, {})
            _write_state(state, request.new_checkpoint_path)
            log.info(
                "transform.done", records=_records(interval), order=order.value, writer="connect"
            )
            return ep.TransformResponseSuccess(
                new_offset_interval=interval, new_watermark=state.output_watermark
            )

    def _connect_raw_query(
        self, server: ConnectServer, request: ep.RawQueryRequest
    ) -> ep.RawQueryResponseSuccess:
        """A raw query of any shape: vetted here over an empty ``input``, run there, its rows
        ordered as in local mode (``_query_result``)."""
        with self._isolated("raw_query", request.output_data_path) as session:
            paths = request.input_data_paths
            if paths:
                empty = empty_input(session, read_schema(paths[-1]))
                register_view(empty, RAW_QUERY_INPUT_VIEW)
            result = run_steps(session, request.transform)
            with query_errors(None, in_step=False):
                order = analyzed_order(result)
            with self._remote_session(server) as remote:
                if paths:
                    load_remote_files(remote, paths).createOrReplaceTempView(RAW_QUERY_INPUT_VIEW)
                table = run_remote_steps(remote, request.transform).toArrow()
            table = _ordered_query_result(table, order)
            write_table(table, request.output_data_path)
            return ep.RawQueryResponseSuccess(num_records=table.num_rows)

    @contextmanager
    def _remote_session(self, server: ConnectServer) -> Iterator[ConnectSession]:
        """A fresh session on the Connect server for one call: interrupted when the call is
        cancelled, its errors reported as query errors."""
        with (
            server.session() as remote,
            self._remote_cancel(remote),
            query_errors(None, in_step=False),
        ):
            yield remote

    @contextmanager
    def _remote_cancel(self, remote: ConnectSession) -> Iterator[None]:
        """A cancelled call interrupts what its Connect session runs on the server."""
        control = calls.current()
        if control is None:
            yield
            return

        def interrupt() -> None:
            remote.interruptAll()

        remove = control.on_cancel(interrupt)
        try:
            yield
            control.raise_if_cancelled()
        finally:
            remove()

    # --- ExecuteQuery (extension) ---------------------------------------------------------

    def execute_query(self, request: ep.QueryRequest) -> ep.QueryResponseSuccess:
        """An ad-hoc query over whole datasets, each a view under its alias (``odf sql``).

        Spark reads lazily: registering a view reads footers only, and the query scans just
        the datasets (and columns) it uses.
        """
        if self._connect is not None:
            raise refuse("ad-hoc queries (odf sql): run them on a local or cluster engine")
        with (
            self._isolated("query", request.output_data_path) as session,
            staging_area(
                self._stage_arrow, self._shared, arrow_inputs=self._arrow_inputs
            ) as staging,
        ):
            key = plan_key(request)
            planned = self._planned.get(key) if key is not None else None
            if planned is None:
                small_input_settings(session, (p for i in request.inputs for p in i.data_paths))
                with phase("inputs"):
                    for inp in request.inputs:
                        schema = None if inp.schema is None else decode_arrow_schema(inp.schema)
                        frame = load_dataset(session, inp.data_paths, schema, staging)
                        register_view(frame, inp.alias)
                planned = _planned(run_steps(session, request.transform, Policy.INTERACTIVE))
            try:
                table = _collected(planned)
            except BaseException:
                if key is not None:
                    self._planned.drop(key)
                raise
            if key is not None:
                self._planned.keep(key, planned)
            with phase("output write"):
                write_table(table, request.output_data_path)
            return ep.QueryResponseSuccess(num_records=table.num_rows)

    # --- ValidateQuery --------------------------------------------------------------------

    def validate_query(self, request: ep.ValidateQueryRequest) -> ep.ValidateQueryResponseSuccess:
        with self._isolated("validate", request.dataset_alias) as session:
            schemas = {i.query_alias: decode_arrow_schema(i.schema) for i in request.query_inputs}
            for name, table in temporal_tables(request.transform, list(schemas)).items():
                check_primary_key(table, schemas[name].names)
            new_schema = _output_schema(session, schemas, request.transform, request.vocab)
            event_times = {
                i.query_alias: (i.vocab or DatasetVocabulary()).event_time_column
                for i in request.query_inputs
            }
            check_incremental(session, schemas, request.transform, request.vocab, event_times)
            local = _row_local_reason(session, schemas, request.transform) is None
            old_schema = _previous_schema(session, schemas, request.prev_transform, request.vocab)
            if old_schema is not None:
                check_schema_evolution(old_schema, new_schema)
            return ep.ValidateQueryResponseSuccess(
                output_schema=encode_arrow_schema(new_schema), row_local=local
            )

    # --- ExecuteSplitTransform (extension) ------------------------------------------------

    def execute_split_transform(
        self, request: ep.SplitTransformRequest
    ) -> ep.SplitTransformResponseSuccess:
        inner = request.request
        with self._isolated("validate", inner.dataset_alias) as session:
            schemas = {i.query_alias: read_schema(i.schema_file) for i in inner.query_inputs}
            reason = _row_local_reason(session, schemas, inner.transform)
            if reason is None and inner.prev_checkpoint_path is not None:
                reason = "a previous checkpoint (stateful)"
            parallelism = session.sparkContext.defaultParallelism
        if reason is not None:
            raise InvalidQueryError(f"{inner.dataset_alias}: not row-local, cannot split: {reason}")
        try:
            plan = plan_slices(request, parallelism)
        except SplitRefusal as e:
            raise InvalidQueryError(f"{inner.dataset_alias}: {e}") from None
        if self._splits_on_executors(request.slices_dir):
            answer = self._split_on_executors(request, plan)
            if answer is not None:
                return answer
        return execute_split(request, plan, self.execute_transform)

    def _splits_on_executors(self, slices_dir: str) -> bool:
        """Whether the executors can write the slices as ExecuteTransform's stream writer
        would (``split_job.py``): not over Spark Connect, not with another output writer, and
        at a path they reach (a local master, or the cluster's shared staging directory)."""
        if self._connect is not None or self._output_writer is not OutputWriter.STREAM:
            return False
        local = stages_locally(self._session.sparkContext.master or "")
        return local or (self._shared is not None and under(self._shared, slices_dir))

    def _split_on_executors(
        self, request: ep.SplitTransformRequest, plan: Sequence[Sequence[InputRun]]
    ) -> ep.SplitTransformResponseSuccess | None:
        """Every slice written and hashed by the executors in one job (``split_job.py``);
        ``None`` when ExecuteTransform would not stream the slices' outputs (an ``op``
        column, rows sorted by value): the slices then go one by one through it."""
        inner = request.request
        requests = [
            slice_request(
                inner,
                runs,
                last=j == len(plan) - 1,
                next_offset=inner.next_offset,
                data_path=str(slice_path(request, j)),
                checkpoint_path="",
            )
            for j, runs in enumerate(plan)
        ]
        with (
            self._isolated("split", inner.dataset_alias) as session,
            staging_area(
                self._stage_arrow, self._shared, arrow_inputs=self._arrow_inputs
            ) as staging,
        ):
            results = []
            for r in requests:
                with phase("inputs"):
                    _register_inputs(session, staging, r.query_inputs, {}, cp.EMPTY_CHECKPOINT)
                results.append(run_steps(session, inner.transform))
            columns = _output_columns(results[0], inner.vocab)
            with query_errors(None, in_step=False), phase("optimisation"):
                streamed = columns.op is None and all(
                    _output_columns(r, inner.vocab) == columns and result_order(r) is RowOrder.INPUT
                    for r in results
                )
            if not streamed:
                log.info("split.sequential", subject=inner.dataset_alias)
                return None
            check_no_retractions(inner.query_inputs, stateful=False)
            with query_errors(None, in_step=False):
                counts = (
                    [run_records(runs) for runs in plan]
                    if all(keeps_row_count(r) for r in results)
                    else slice_records(results)
                )
                offsets = list(itertools.accumulate(counts[:-1], initial=inner.next_offset))
                facts = write_slices(
                    results,
                    SliceJob(
                        paths=tuple(r.new_data_path for r in requests),
                        schemas=slice_schemas(results),
                        next_offsets=tuple(offsets),
                        columns=columns,
                        vocab=inner.vocab,
                        system_time=inner.system_time,
                    ),
                )
            wrong = [
                j for j, (f, n) in enumerate(zip(facts, counts, strict=True)) if f.num_records != n
            ]
            if wrong:
                for r in requests:
                    Path(r.new_data_path).unlink(missing_ok=True)
                raise RuntimeError(
                    f"split slices {wrong}: wrote {[facts[j].num_records for j in wrong]} records,"
                    f" counted {[counts[j] for j in wrong]}"
                )
            answers = tuple(
                split_slice(
                    request,
                    runs,
                    path=slice_path(request, j),
                    next_offset=offset,
                    facts=f,
                    watermark=_next_checkpoint(
                        cp.EMPTY_CHECKPOINT, r.query_inputs, {}
                    ).output_watermark,
                )
                for j, (runs, r, offset, f) in enumerate(
                    zip(plan, requests, offsets, facts, strict=True)
                )
            )
            log.info("split.done", slices=len(answers), records=sum(counts), writer="executors")
            return ep.SplitTransformResponseSuccess(slices=answers)

    # --- HashDataFiles (extension) ------------------------------------------------------

    def hash_data_files(self, request: ep.HashDataFilesRequest) -> ep.HashDataFilesResponseSuccess:
        """Each file's hashes computed in the application's tasks (``file_hashes.py``)."""
        n = len(request.data_paths)
        if n > ep.MAX_HASHED_FILES:
            raise InvalidQueryError(
                f"HashDataFiles: {n} files in one call, at most {ep.MAX_HASHED_FILES}"
            )
        with self._isolated("hash_files", f"{n} data files") as session:
            files, tasks = hash_files(session, request.data_paths)
        log.info(
            "hash_files.done",
            files=n,
            tasks=tasks,
            where=sorted({f.hashed_by for f in files if f.hashed_by}),
        )
        return ep.HashDataFilesResponseSuccess(files=tuple(files), tasks=tasks)

    # --- MigrateQuery ---------------------------------------------------------------------

    def migrate_query(self, request: ep.MigrateQueryRequest) -> ep.MigrateQueryResponseSuccess:
        """Switch to ``new_transform``: carry watermarks, drop what the new query cannot use.

        The engine buffers no input between transactions, so the old query owes no output:
        the response never has a data slice. The new query is checked against the inputs'
        schemas first (InvalidQuery if it cannot run); watermarks of inputs the new query
        still reads are carried, with this request's explicit watermarks applied.
        """
        with self._isolated("migrate", request.dataset_alias) as session:
            previous = cp.read_checkpoint(request.prev_checkpoint_path)
            tables = temporal_tables(request.new_transform, _aliases(request.query_inputs))
            empty = [
                dataclasses.replace(i, offset_interval=None, data_paths=())
                for i in request.query_inputs
            ]
            states = _register_inputs(session, Staging.OFF, empty, tables, previous)
            result = run_steps(session, request.new_transform)
            _collect_output(result, _output_columns(result, request.vocab))
            if not is_row_wise_query(result):
                schemas = {
                    i.query_alias: read_schema(i.schema_file)
                    for i in request.query_inputs
                    if i.query_alias not in tables
                }
                event_times = {
                    i.query_alias: i.vocab.event_time_column for i in request.query_inputs
                }
                check_incremental(
                    session, schemas, request.new_transform, request.vocab, event_times
                )
            state = _next_checkpoint(previous, request.query_inputs, states)
            _write_state(state, request.new_checkpoint_path)
            return ep.MigrateQueryResponseSuccess(
                new_offset_interval=None, new_watermark=state.output_watermark
            )

    # --- Plumbing -------------------------------------------------------------------------

    @contextmanager
    def _isolated(self, operation: str, subject: str) -> Iterator[SparkSession]:
        """The engine's turn for one request: its own session, its Spark jobs tagged so that
        cancelling the call (``calls.current()``) cancels them."""
        control = calls.current()
        if control is None:
            self._lock.acquire()
        else:
            control.acquire(self._lock)
        try:
            started = time.monotonic()
            log.info(f"{operation}.start", subject=subject)
            with phase("session"):
                session = request_session(self._session)
            try:
                with self._jobs_tagged(control):
                    yield session
            finally:
                log.info(
                    f"{operation}.end",
                    subject=subject,
                    seconds=round(time.monotonic() - started, 3),
                )
        finally:
            self._lock.release()

    @contextmanager
    def _jobs_tagged(self, control: calls.CallControl | None) -> Iterator[None]:
        """Tag this thread's Spark jobs; a cancelled call cancels (interrupts) them, also the
        jobs it starts after the cancellation (a call cancelled while Spark still analyzes or
        compiles its query has no job yet): until the call ends, its tag is cancelled again
        every ``_CANCEL_REPEAT_S``."""
        if control is None:
            yield
            return
        context = self._session.sparkContext
        tag = f"odf-call-{uuid.uuid4().hex}"
        context.addJobTag(tag)
        context.setInterruptOnCancel(True)
        ended = threading.Event()

        def cancel_until_ended() -> None:
            while not ended.is_set():
                context.cancelJobsWithTag(tag)
                ended.wait(_CANCEL_REPEAT_S)

        remove = control.on_cancel(
            lambda: threading.Thread(
                target=cancel_until_ended, name="odf-cancel", daemon=True
            ).start()
        )
        try:
            yield
            control.raise_if_cancelled()
        finally:
            ended.set()
            remove()
            context.removeJobTag(tag)

    def alive(self) -> bool:
        """Whether the JVM behind the session still runs (its process, when this process
        launched it)."""
        process = getattr(self._session.sparkContext._gateway, "proc", None)
        return process is None or process.poll() is None


@dataclasses.dataclass(frozen=True, slots=True)
class _Output:
    """A collected query result in its final row order, plus where its system columns are."""

    table: pa.Table
    columns: OutputColumns
    order: RowOrder


def _aliases(inputs: Sequence[ep.TransformRequestInput]) -> list[str]:
    return [i.query_alias for i in inputs]


def _register_inputs(
    session: SparkSession,
    staging: Staging,
    inputs: Sequence[ep.TransformRequestInput],
    tables: dict[str, TemporalTable],
    previous: cp.EngineCheckpoint,
    *,
    latest: bool = True,
) -> dict[str, cp.TemporalState]:
    """Register every input's view: its new slice, or a temporal table's latest state
    (``latest``; else its new slice too).

    Returns the temporal tables' new states (for the next checkpoint).
    """
    states: dict[str, cp.TemporalState] = {}
    for inp in inputs:
        df = load_input(session, inp, staging)
        table = tables.get(inp.query_alias)
        if table is not None and latest:
            carried = carried_state(previous.temporal_tables, table)
            with query_errors(None, in_step=False):
                states[table.name] = latest_state(session, df, carried, table, inp.vocab)
            df = state_view(session, states[table.name])
        register_view(df, inp.query_alias)
    return states


def _output_columns(result: DataFrame, vocab: DatasetVocabulary) -> OutputColumns:
    return plan_output_columns(
        [(f.name, f.dataType.simpleString()) for f in result.schema.fields], vocab
    )


def _collect_output(
    result: DataFrame, columns: OutputColumns, order: RowOrder | None = None
) -> _Output:
    with query_errors(None, in_step=False):
        if order is None:
            with phase("optimisation"):
                order = result_order(result)
        with phase("job, tasks and collect"):
            table = result.toArrow()
    if order is RowOrder.VALUES:
        trailing = [columns.op] if columns.op else []
        table = sort_by_values(table, [columns.event_time], trailing)
    return _Output(table, columns, order)


def _query_result(result: DataFrame) -> pa.Table:
    """A raw or ad-hoc query's result in its final row order, zoned timestamps as written.

    Column names may repeat (``SELECT a.id, b.id``): they are set aside while sorting.
    """
    return _collected(_planned(result))


def _planned(result: DataFrame) -> PlannedQuery:
    """``result`` planned: its row order known and its executed plan made."""
    with query_errors(None, in_step=False):
        with phase("optimisation"):
            order = result_order(result)
        with phase("physical planning"):
            result._jdf.queryExecution().executedPlan()
    return PlannedQuery(result, order)


def _collected(planned: PlannedQuery) -> pa.Table:
    """The rows of a planned query, in its final order."""
    with query_errors(None, in_step=False), phase("job, tasks and collect"):
        table = planned.frame.toArrow()
    return _ordered_query_result(table, planned.order)


def _ordered_query_result(table: pa.Table, order: RowOrder) -> pa.Table:
    names = table.column_names
    if order is RowOrder.VALUES:
        positional = table.rename_columns([f"c{i}" for i in range(len(names))])
        table = sort_by_values(positional, [], [])
    return pa.Table.from_arrays([output_column(c) for c in table.columns], names=names)


def _row_local_reason(
    session: SparkSession, schemas: dict[str, pa.Schema], transform: TransformSql
) -> str | None:
    """Why ``transform`` over inputs of ``schemas`` is not row-local (``None``: it is)."""
    if temporal_tables(transform, list(schemas)):
        return "temporal tables"
    for alias, schema in schemas.items():
        register_view(empty_input(session, schema), alias)
    return not_row_local(jvm_plan.analyzed(run_steps(session, transform)))


def _output_schema(
    session: SparkSession,
    schemas: dict[str, pa.Schema],
    transform: TransformSql,
    vocab: DatasetVocabulary,
) -> pa.Schema:
    for alias, schema in schemas.items():
        register_view(empty_input(session, schema), alias)
    result = run_steps(session, transform)
    output = _collect_output(result, _output_columns(result, vocab))
    return build_output(
        output.table, output.columns, vocab, system_time=_EPOCH, next_offset=0
    ).schema


def _previous_schema(
    session: SparkSession,
    schemas: dict[str, pa.Schema],
    transform: TransformSql | None,
    vocab: DatasetVocabulary,
) -> pa.Schema | None:
    """The output schema of the query being replaced; ``None`` when there is none, or when it
    cannot run on these inputs (it produced nothing here to evolve from: a broken query can
    always be replaced, and the coordinator checks the dataset's recorded schema itself)."""
    if transform is None:
        return None
    try:
        return _output_schema(session, schemas, transform, vocab)
    except InvalidQueryError as e:
        log.info("validate.previous_query_invalid", reason=str(e))
        return None


def _write_slice(table: pa.Table, path: str, next_offset: int) -> OffsetInterval | None:
    """Write the output slice; an empty result writes no file and has no interval."""
    if table.num_rows:
        write_table(table, path)
    return _interval(table.num_rows, next_offset)


def _interval(records: int, next_offset: int) -> OffsetInterval | None:
    return OffsetInterval(start=next_offset, end=next_offset + records - 1) if records else None


def _records(interval: OffsetInterval | None) -> int:
    return 0 if interval is None else interval.end - interval.start + 1


def _next_checkpoint(
    previous: cp.EngineCheckpoint,
    inputs: tuple[ep.TransformRequestInput, ...],
    temporal: dict[str, cp.TemporalState],
    stream: cp.StreamState | None = None,
    lag: timedelta = timedelta(0),
) -> cp.EngineCheckpoint:
    """The state after this transaction. With streaming state, every streamed input must
    have a watermark before the output has one (such an input holds Spark's windows back),
    and the output watermark lags the inputs' by what the query may still emit (``lag``)."""
    watermarks = {
        i.dataset_id: input_watermark(
            i.explicit_watermarks, previous.input_watermarks.get(i.dataset_id)
        )
        for i in inputs
    }
    known = {k: v for k, v in watermarks.items() if v is not None}
    held_back = stream is not None and any(
        watermarks[i.dataset_id] is None for i in inputs if i.query_alias not in temporal
    )
    return cp.EngineCheckpoint(
        input_watermarks=known,
        output_watermark=(
            previous.output_watermark
            if held_back
            else output_watermark(watermarks.values(), previous.output_watermark, lag)
        ),
        temporal_tables=temporal,
        stream=stream,
    )


def _write_state(state: cp.EngineCheckpoint, path: str) -> None:
    """A checkpoint file whenever there is state to carry to the next transaction."""
    if not state.is_empty():
        cp.write_checkpoint(state, path)
