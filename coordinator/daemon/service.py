"""The ``odf.coordinator.v1.Coordinator`` service: each call is one use case of the application.

Nothing here decides anything about datasets: a handler reads its request, calls the
``Application`` method of the same name and sends back what it returns (``convert``). Calls
that change datasets hold those datasets' locks (``DatasetLocks``); after a commit the
daemon's ``on_commit`` is told which dataset moved, so the scheduler can update its dependents.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc

from common.logs import get_logger
from common.odf.errors import ValidationError
from common.odf.fragments import TransformSql
from common.serde.yaml_codec import load_object, load_snapshot
from coordinator.app import (
    Application,
    IngestFile,
    RootPulled,
    SnapshotSource,
    TransactionCommitted,
)
from coordinator.app.use_cases import (
    IngestOptions,
    PullOptions,
    QueryOptions,
    TransformOptions,
    VerifyOptions,
)
from coordinator.daemon import convert
from coordinator.daemon.calls import (
    DatasetLocks,
    Emit,
    StreamedProgress,
    Waits,
    stream_call,
    unary,
)
from coordinator.daemon.grpc_generated import coordinator_pb2 as pb
from coordinator.daemon.grpc_generated import coordinator_pb2_grpc as pb_grpc
from coordinator.daemon.metrics import Metrics
from coordinator.daemon.query_warm_up import RecentQueries
from coordinator.daemon.records import records_messages, schema_bytes
from coordinator.ingest.readers import FORMATS, MEDIA_TYPES
from coordinator.query import QueryResult
from coordinator.tempdirs import owned_temp_dir

log = get_logger(__name__)

OnCommit = Callable[[str], None]
"""Told the name of a dataset whose head has moved."""

_UPLOAD_PREFIX = ".upload-"


@dataclass(eq=False)
class CoordinatorService(pb_grpc.CoordinatorServicer):
    app: Application
    locks: DatasetLocks
    metrics: Metrics
    on_commit: OnCommit
    status: Callable[[], Any] | None = None
    recent: RecentQueries | None = None
    """Where a query that succeeded is remembered, for the next start's warm-up."""

    def Status(self, request: Any, context: grpc.ServicerContext) -> Any:
        status = self.status
        if status is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no status in this server")
        return unary(context, status)

    # --- datasets --------------------------------------------------------------------------------

    def ListDatasets(self, request: Any, context: grpc.ServicerContext) -> Any:
        summaries = unary(context, self.app.list_datasets)
        return pb.ListDatasetsResponse(datasets=[convert.summary(s) for s in summaries])

    def DescribeDataset(self, request: Any, context: grpc.ServicerContext) -> Any:
        def describe() -> Any:
            ds = self.app.dataset(request.name)
            return pb.DescribeDatasetResponse(
                summary=convert.summary(self.app.summary(request.name)),
                id=ds.id.to_did(),
                arrow_schema=schema_bytes(ds.state().arrow_schema()),
            )

        return unary(context, describe)

    def Log(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        limit = request.limit if request.HasField("limit") else None

        def work(emit: Emit) -> None:
            ds = self.app.dataset(request.name)
            for h, _ in self.app.log(request.name, limit):
                emit(pb.Block(hash=h.to_multibase(), data=ds.get_block_bytes(h)))

        return stream_call(context, work, name="Log")

    def Tail(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        def work(emit: Emit) -> None:
            table = self.app.tail(request.name, request.num_records, skip=request.skip)
            for message in records_messages(table, table.num_rows):
                emit(message)

        return stream_call(context, work, name="Tail")

    def Query(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        options = QueryOptions(
            aliases=dict(request.aliases),
            limit=request.limit if request.HasField("limit") else None,
            as_of=dict(request.as_of),
        )

        def work(emit: Emit) -> None:
            result = self.query(request.sql, options)
            for message in records_messages(result.table, result.num_records):
                emit(message)

        return stream_call(context, work, name="Query")

    def query(self, sql: str, options: QueryOptions) -> QueryResult:
        """An ad-hoc query of a client (gRPC ``Query``, the HTTP query endpoint): in a slot of
        the daemon's parallel work, timed; remembered for the next start's warm-up when it
        reads the datasets as they are."""
        started, engine_starts = time.monotonic(), self._engine_starts()
        with self.locks.slots, self.metrics.timed("query"):
            result = self.app.query(sql, options)
        if self.recent is not None and not options.aliases and not options.as_of:
            seconds = time.monotonic() - started
            unknown = self._engine_starts() != engine_starts  # an engine start's time
            self.recent.record(sql, options.limit, None if unknown else seconds)
        return result

    def _engine_starts(self) -> int:
        pool = self.app.pool
        return 0 if pool is None else pool.stats.starts + pool.stats.restarts

    # --- ingest and pull -------------------------------------------------------------------------

    def Ingest(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Any:
        requests = iter(request_iterator)
        first = next(requests, None)
        if first is None or not first.HasField("header"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a header")
        header = first.header
        options = IngestOptions(
            input_format=unary(context, lambda: _input_format(header)),
            event_time=convert.from_timestamp(header, "event_time"),
            source_name=header.source_name if header.HasField("source_name") else None,
        )
        self.app.ws.scratch_dir.mkdir(exist_ok=True)
        with owned_temp_dir(_UPLOAD_PREFIX, self.app.ws.scratch_dir) as tmp:
            upload = tmp / "upload"
            size = unary(context, lambda: _receive(requests, upload))
            log.info("daemon.upload", dataset=header.dataset, file=header.file_name, bytes=size)
            self.metrics.bytes_in.inc(size)

            def work(emit: Emit) -> None:
                progress = StreamedProgress(emit, lambda p: pb.IngestEvent(progress=p), pb.Progress)
                waits = Waits.of(context, emit, pb.IngestEvent, header)
                with (
                    waits.hold(self.locks, [header.dataset], "ingest"),
                    self.metrics.timed("ingest"),
                ):
                    for result in self.app.ingest(
                        header.dataset,
                        [IngestFile(upload, header.file_name or "<upload>")],
                        replace(options, progress=progress),
                    ):
                        self._committed_ingest(
                            result.dataset, result.num_records, result.up_to_date
                        )
                        emit(pb.IngestEvent(result=convert.ingest_result(result)))

            yield from stream_call(context, work, name="Ingest")

    def Pull(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        options = PullOptions(
            all_datasets=request.all,
            recursive=request.recursive,
            system_time=convert.from_timestamp(request, "system_time"),
            fetch_uncacheable=request.fetch_uncacheable,
            fail_fast=request.fail_fast,
        )

        def work(emit: Emit) -> None:
            progress = StreamedProgress(emit, lambda p: pb.PullEvent(progress=p), pb.Progress)
            order = self.app.pull_order(list(request.names), options)
            waits = Waits.of(context, emit, pb.PullEvent, request)
            with (
                waits.hold(self.locks, [d.alias for d in order], "pull"),
                self.metrics.timed("pull"),
            ):
                pulling = replace(options, progress=progress)
                for event in self.app.pull(list(request.names), pulling):
                    emit(self.pull_message(event))

        return stream_call(context, work, name="Pull")

    def pull_message(self, event: Any) -> Any:
        """The message of a pull event; commits are counted and announced."""
        block = b""
        if isinstance(event, RootPulled):
            r = event.result
            self._committed_ingest(r.dataset, r.num_records, r.up_to_date)
        elif isinstance(event, TransactionCommitted):
            self.metrics.transactions.inc()
            self.metrics.records.labels("transform").inc(event.output_records)
            block = self.app.dataset(event.dataset).get_block_bytes(event.head)
            self.on_commit(event.dataset)
        return convert.pull_event(event, block)

    def _committed_ingest(self, dataset: str, records: int, up_to_date: bool) -> None:
        if not up_to_date:
            self.metrics.records.labels("ingest").inc(records)
            self.on_commit(dataset)

    # --- transforms ------------------------------------------------------------------------------

    def SetTransform(self, request: Any, context: grpc.ServicerContext) -> Any:
        def change() -> Any:
            query: str | TransformSql
            if request.WhichOneof("query") == "transform_yaml":
                query = load_object(TransformSql, request.transform_yaml, source="transform_yaml")
            else:
                query = request.sql
            with (
                self.locks.hold([request.name], "transform change"),
                self.metrics.timed("set_transform"),
            ):
                options = TransformOptions(
                    engine=request.engine if request.HasField("engine") else None,
                    version=request.version if request.HasField("version") else None,
                    inputs=list(request.inputs) or None,
                )
                c = self.app.set_transform(request.name, query, options)
            self.on_commit(c.dataset)
            ds = self.app.dataset(c.dataset)
            migration = ds.get_block_bytes(c.head) if c.migration is not None else b""
            return convert.query_change(c, ds.get_block_bytes(c.set_transform), migration)

        return unary(context, change)

    # --- chain edits -----------------------------------------------------------------------------

    def SetWatermark(self, request: Any, context: grpc.ServicerContext) -> Any:
        def move() -> Any:
            watermark = convert.from_timestamp(request, "watermark")
            if watermark is None:
                raise ValidationError("a watermark is required", path="watermark")
            alias = self.app.dataset(request.name).alias
            with self.locks.hold([alias], "watermark change"), self.metrics.timed("set_watermark"):
                head = self.app.set_watermark(alias, watermark)
            self.on_commit(alias)
            return pb.SetWatermarkResponse(head=convert.hash_text(head))

        return unary(context, move)

    def Reset(self, request: Any, context: grpc.ServicerContext) -> Any:
        def reset() -> Any:
            with self.locks.hold([request.name], "reset"), self.metrics.timed("reset"):
                done = self.app.reset(request.name, request.block, force=request.force)
            self.on_commit(done.dataset)
            return convert.reset_done(done)

        return unary(context, reset)

    def Compact(self, request: Any, context: grpc.ServicerContext) -> Any:
        max_records = request.max_records if request.HasField("max_records") else None

        def compact() -> Any:
            with self.locks.hold([request.name], "compaction"), self.metrics.timed("compact"):
                done = self.app.compact(request.name, max_records=max_records)
            self.on_commit(done.dataset)
            return convert.compacted(done)

        return unary(context, compact)

    def Rename(self, request: Any, context: grpc.ServicerContext) -> Any:
        def rename() -> Any:
            with (
                self.locks.hold([request.name, request.new_name], "rename"),
                self.metrics.timed("rename"),
            ):
                return pb.RenameResponse(name=self.app.rename(request.name, request.new_name))

        return unary(context, rename)

    # --- verification ----------------------------------------------------------------------------

    def Verify(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        def work(emit: Emit) -> None:
            with self.locks.slots, self.metrics.timed("verify"):
                options = VerifyOptions(
                    recursive=request.recursive,
                    integrity_only=request.integrity_only,
                    on_replay=lambda name, result: emit(convert.replayed(name, result)),
                    on_bytes=lambda n: emit(pb.VerifyEvent(bytes_checked=n)),
                )
                reports = self.app.verify(list(request.names), options)
            for r in reports:
                emit(convert.report(r))

        return stream_call(context, work, name="Verify")

    # --- workspace -------------------------------------------------------------------------------

    def Add(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        def work(emit: Emit) -> None:
            sources = [
                SnapshotSource(s.origin, load_snapshot(s.yaml, source=s.origin))
                for s in request.snapshots
            ]
            with self.locks.hold([s.snapshot.name for s in sources], "add"):
                for added in self.app.add(sources):
                    emit(pb.AddedDataset(name=added.alias, id=added.id.to_did()))

        return stream_call(context, work, name="Add")

    def Delete(self, request: Any, context: grpc.ServicerContext) -> Any:
        def delete() -> Any:
            with self.locks.hold(list(request.names), "delete"):
                return pb.DeleteResponse(names=self.app.delete(list(request.names)))

        return unary(context, delete)


def _input_format(header: Any) -> str | None:
    """The reader of an upload: a format name (``csv``) or a media type (``text/csv``)."""
    if not header.HasField("media_type"):
        return None
    value = str(header.media_type).strip().lower()
    if value in FORMATS:
        return value
    by_media_type = {MEDIA_TYPES[step]: name for name, step in FORMATS.items()}
    if value in by_media_type:
        return by_media_type[value]
    known = ", ".join([*FORMATS, *by_media_type])
    raise ValidationError(f"unknown format {value!r} (expected one of {known})", path="media_type")


def _receive(requests: Iterator[Any], path: Path) -> int:
    """Write the uploaded chunks to ``path``; the number of bytes."""
    size = 0
    with open(path, "wb") as out:
        for message in requests:
            if not message.HasField("chunk"):
                raise ValidationError("only chunks may follow the header", path="IngestRequest")
            out.write(message.chunk)
            size += len(message.chunk)
    return size
