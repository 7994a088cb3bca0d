"""``DaemonClient``: the workspace's use cases (``UseCases``), run by its daemon.

The CLI uses it when a daemon serves the workspace (``.odf/run/daemon.json``): each method
sends one call and turns the replies back into the values ``Application`` returns, so the
commands print the same output and exit with the same codes as in process. Errors come back
as ``DaemonCallError`` carrying the daemon's one-line message (what the in-process command
would print). A Ctrl-C cancels the call.

The client is all a command imports when a daemon serves it: gRPC and the messages, not
pyarrow nor the code of the use cases (a pull's events, a listing); what only some calls
need (Arrow for records, YAML for snapshots) loads in those calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from common.odf.errors import OdfError
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.app.use_cases import (
    IngestOptions,
    PullOptions,
    QueryOptions,
    TransformOptions,
    VerifyOptions,
)
from coordinator.daemon import records
from coordinator.daemon.errors import DaemonCallError, DaemonInvalidError, DaemonNotFoundError
from coordinator.daemon.grpc_generated import coordinator_pb2 as pb
from coordinator.daemon.grpc_generated import coordinator_pb2_grpc as pb_grpc
from coordinator.daemon.rundir import DaemonInfo
from coordinator.engine.errors import EngineUnavailableError

if TYPE_CHECKING:
    import pyarrow as pa

    from common.odf.block import MetadataBlock
    from common.odf.fragments import TransformSql
    from coordinator.app import (
        AddedDataset,
        DatasetSummary,
        IngestFile,
        PullEvent,
        SnapshotSource,
    )
    from coordinator.app.application import ResetDone
    from coordinator.evolution.query_change import QueryChange
    from coordinator.ingest.compaction import Compacted
    from coordinator.ingest.context import IngestResult
    from coordinator.ingest.progress import Progress, ProgressTask
    from coordinator.query import QueryResult
    from coordinator.verify.report import DatasetReport

CHUNK_BYTES = 1 << 20
T = TypeVar("T")


class DaemonClient:
    def __init__(self, info: DaemonInfo, token: str, *, tls: bool = False) -> None:
        """``tls``: over TLS even without ``info.tls_cert`` (trusting the system's roots)."""
        self.info = info
        if info.tls_cert is not None or tls:
            roots = Path(info.tls_cert).read_bytes() if info.tls_cert is not None else None
            credentials = grpc.ssl_channel_credentials(roots)
            self.channel = grpc.secure_channel(info.address, credentials)
        else:
            self.channel = grpc.insecure_channel(info.address)
        self.stub = pb_grpc.CoordinatorStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),)
        self.on_wait: Callable[[str], None] | None = None
        """Told when the daemon makes a call wait for another writer: one line."""
        self.wait_timeout: float | None = None
        """How long the daemon may make a pull or an ingest wait for other writers (default:
        the workspace's ``writers.waitTimeout``)."""

    def close(self) -> None:
        self.channel.close()

    def status(self) -> Any:
        """The daemon's ``StatusResponse`` (its queue, schedules, engines, running calls)."""
        return self._unary(self.stub.Status, pb.StatusRequest())

    # --- datasets --------------------------------------------------------------------------------

    def summary(self, name: str) -> DatasetSummary:
        from coordinator.daemon import convert

        reply = self._unary(self.stub.DescribeDataset, pb.DescribeDatasetRequest(name=name))
        return convert.from_summary(reply.summary)

    def list_datasets(self) -> list[DatasetSummary]:
        from coordinator.daemon import convert

        reply = self._unary(self.stub.ListDatasets, pb.ListDatasetsRequest())
        return [convert.from_summary(s) for s in reply.datasets]

    def add(self, sources: Sequence[SnapshotSource]) -> Iterator[AddedDataset]:
        from common.serde.yaml_codec import dump_snapshot
        from coordinator.app import AddedDataset

        request = pb.AddRequest(
            snapshots=[
                pb.Snapshot(origin=s.origin, yaml=dump_snapshot(s.snapshot)) for s in sources
            ]
        )
        for m in self._stream(self.stub.Add, request):
            yield AddedDataset(m.name, DatasetID.from_did(m.id))

    def delete(self, names: Sequence[str]) -> list[str]:
        reply = self._unary(self.stub.Delete, pb.DeleteRequest(names=list(names)))
        return list(reply.names)

    def log(self, name: str, limit: int | None = None) -> list[tuple[Multihash, MetadataBlock]]:
        from common.serde.flatbuffers_codec import decode_block

        request = pb.LogRequest(name=name, limit=limit)
        return [
            (Multihash.from_multibase(m.hash), decode_block(m.data))
            for m in self._stream(self.stub.Log, request)
        ]

    def tail(self, name: str, n: int, *, skip: int = 0) -> pa.Table:
        request = pb.TailRequest(name=name, num_records=n, skip=skip)
        return records.from_records_messages(self._stream(self.stub.Tail, request)).table

    def read(self, name: str, *, as_of: str | None = None) -> pa.RecordBatchReader:
        """The dataset's records through the daemon's engine (a query of all its columns)."""
        query = f"SELECT * FROM `{name}`"
        options = QueryOptions(as_of={name: as_of} if as_of else None)
        return self.query(query, options).table.to_reader()

    def schema(self, name: str) -> pa.Schema:
        reply = self._unary(self.stub.DescribeDataset, pb.DescribeDatasetRequest(name=name))
        schema = records.from_schema_bytes(reply.arrow_schema)
        if schema is None:
            from coordinator.app.application import no_schema_error

            raise no_schema_error(reply.summary.name)
        return schema

    def reset(self, name: str, block: str, *, force: bool = False) -> ResetDone:
        from coordinator.daemon import convert

        request = pb.ResetRequest(name=name, block=block, force=force)
        return convert.from_reset_done(self._unary(self.stub.Reset, request))

    def compact(self, name: str, *, max_records: int | None = None) -> Compacted:
        from coordinator.daemon import convert

        request = pb.CompactRequest(name=name, max_records=max_records)
        return convert.from_compacted(self._unary(self.stub.Compact, request))

    def rename(self, name: str, new_name: str) -> str:
        request = pb.RenameRequest(name=name, new_name=new_name)
        return str(self._unary(self.stub.Rename, request).name)

    # --- data ------------------------------------------------------------------------------------

    def set_watermark(self, name: str, watermark: datetime) -> Multihash:
        from coordinator.daemon import convert

        request = pb.SetWatermarkRequest(name=name, watermark=convert.timestamp(watermark))
        reply = self._unary(self.stub.SetWatermark, request)
        return Multihash.from_multibase(reply.head)

    def ingest(
        self, name: str, files: Sequence[IngestFile], options: IngestOptions = IngestOptions()
    ) -> Iterator[IngestResult]:
        from coordinator.daemon import convert

        for file in files:
            header = pb.IngestHeader(
                dataset=name,
                file_name=file.name,
                source_name=options.source_name,
                media_type=options.input_format,
                event_time=convert.timestamp(options.event_time),
                wait_timeout=self.wait_timeout,
            )
            upload = _upload(header, file.path)
            for event in self._progressing(self.stub.Ingest, upload, options.progress):
                yield convert.from_ingest_result(event.result)

    def pull(
        self, names: Sequence[str] = (), options: PullOptions = PullOptions()
    ) -> Iterator[PullEvent]:
        from coordinator.daemon import convert

        request = pb.PullRequest(
            names=list(names),
            all=options.all_datasets,
            recursive=options.recursive,
            system_time=convert.timestamp(options.system_time),
            fetch_uncacheable=options.fetch_uncacheable,
            fail_fast=options.fail_fast,
            wait_timeout=self.wait_timeout,
        )
        for event in self._progressing(self.stub.Pull, request, options.progress):
            yield convert.from_pull_event(event)

    def set_transform(
        self, name: str, query: str | TransformSql, options: TransformOptions = TransformOptions()
    ) -> QueryChange:
        from coordinator.daemon import convert

        request = pb.SetTransformRequest(
            name=name,
            engine=options.engine,
            version=options.version,
            inputs=list(options.inputs or ()),
        )
        from common.odf.fragments import TransformSql

        if isinstance(query, TransformSql):
            from common.serde.yaml_codec import dump_yaml, to_plain

            request.transform_yaml = dump_yaml(to_plain(query))
        else:
            request.sql = query
        return convert.from_query_change(self._unary(self.stub.SetTransform, request))

    def verify(
        self, names: Sequence[str], options: VerifyOptions = VerifyOptions()
    ) -> list[DatasetReport]:
        from coordinator.daemon import convert

        request = pb.VerifyRequest(
            names=list(names), recursive=options.recursive, integrity_only=options.integrity_only
        )
        reports = []
        for event in self._stream(self.stub.Verify, request):
            if event.HasField("replayed"):
                if options.on_replay is not None:
                    options.on_replay(*convert.from_replayed(event.replayed))
            elif event.HasField("bytes_checked"):
                if options.on_bytes is not None:
                    options.on_bytes(event.bytes_checked)
            else:
                reports.append(convert.from_report(event.report))
        return reports

    def query(self, query: str, options: QueryOptions = QueryOptions()) -> QueryResult:
        request = pb.QueryRequest(
            sql=query,
            aliases=dict(options.aliases or {}),
            limit=options.limit,
            as_of=dict(options.as_of or {}),
        )
        # Sent now: the daemon runs the query while the result's reader loads pyarrow (a thin
        # client's largest import, ~0.15-0.3 s) rather than after it.
        return records.from_records_messages(self._stream(self.stub.Query, request))

    # --- plumbing --------------------------------------------------------------------------------

    def _tell(self, line: str) -> None:
        if self.on_wait is not None:
            self.on_wait(line)

    def _unary(self, method: Callable[..., T], request: Any) -> T:
        try:
            return method(request, metadata=self.metadata)
        except grpc.RpcError as e:
            raise self._error(e) from None

    def _stream(self, method: Callable[..., Any], request: Any) -> Iterator[Any]:
        """The responses of a server-streaming call, started at once (not on the first read)."""
        return self._responses(method(request, metadata=self.metadata))

    def _responses(self, call: Any) -> Iterator[Any]:
        try:
            yield from call
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()  # a no-op once complete; stops the daemon's work on Ctrl-C

    def _progressing(
        self, method: Callable[..., Any], request: Any, progress: Progress | None
    ) -> Iterator[Any]:
        """A streamed call's result messages; its progress messages are replayed on
        ``progress`` and its waiting ones told to ``on_wait`` on the way."""
        tasks = _LocalTasks(progress)
        for event in self._stream(method, request):
            if event.HasField("progress"):
                tasks.apply(event.progress)
            elif event.HasField("waiting"):
                self._tell(event.waiting)
            else:
                yield event
        tasks.close()

    def _error(self, e: grpc.RpcError) -> OdfError:
        call: Any = e
        code, details = call.code(), call.details() or ""
        if code is grpc.StatusCode.UNAVAILABLE and not details.startswith(("embedded", "engine")):
            pid = f" (pid {self.info.pid})" if self.info.pid else ""
            return EngineUnavailableError(
                f"the daemon at {self.info.address}{pid} does not answer:"
                f" {details}; run the command with --no-daemon, or restart the daemon"
            )
        if code is grpc.StatusCode.NOT_FOUND:
            return DaemonNotFoundError(details)
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            return DaemonInvalidError(details)
        return DaemonCallError(details or code.name)


def _upload(header: pb.IngestHeader, path: Path) -> Iterator[pb.IngestRequest]:
    yield pb.IngestRequest(header=header)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            yield pb.IngestRequest(chunk=chunk)


class _LocalTasks:
    """The daemon's progress messages replayed on the local progress display (none: dropped)."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.tasks: dict[int, ProgressTask] = {}

    def apply(self, m: pb.Progress) -> None:
        if self.progress is None:
            return
        task = self.tasks.get(m.task)
        if task is None:
            total = m.total if m.HasField("total") else None
            self.tasks[m.task] = self.progress.task(m.description, total=total, unit=m.unit or "B")
            return
        if m.advance:
            task.advance(m.advance)
        if m.closed:
            task.close()
            del self.tasks[m.task]

    def close(self) -> None:
        for task in self.tasks.values():
            task.close()
        self.tasks.clear()
