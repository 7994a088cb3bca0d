"""The daemon API's messages (``proto/coordinator.proto``) to and from the application's results.

Pure functions, both directions, so the thin-client CLI gets back exactly the values the
in-process application returns and renders them with the same code.

What only some messages need (the results of ingest, query changes and replays, which bring
the code of those use cases) is imported in the functions that build them. Records and
schemas (Arrow IPC) are ``records``: a thin client's query needs nothing of this module.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from google.protobuf.timestamp_pb2 import Timestamp

from common.odf.events import ExecuteTransform, SetTransform
from common.odf.fragments import OffsetInterval
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import decode_block
from coordinator.app import (
    DatasetSummary,
    DerivativeDone,
    PullEvent,
    PullFailed,
    PullStarted,
    RootPulled,
)
from coordinator.app import TransactionCommitted as Committed
from coordinator.daemon.grpc_generated import coordinator_pb2 as pb
from coordinator.daemon.records import from_schema_bytes, schema_bytes
from coordinator.verify.report import (
    AbsentInput,
    BlockRef,
    Check,
    DatasetReport,
    Outcome,
    Problem,
    TransactionResult,
)

if TYPE_CHECKING:
    from coordinator.app.application import ResetDone
    from coordinator.evolution.query_change import QueryChange
    from coordinator.ingest.compaction import Compacted
    from coordinator.ingest.context import IngestResult
    from coordinator.verify.replay import ReplayResult

# --- scalars -------------------------------------------------------------------------------------


def timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def from_timestamp(message: Any, field: str) -> datetime | None:
    if not message.HasField(field):
        return None
    ts: Timestamp = getattr(message, field)
    return ts.ToDatetime(tzinfo=UTC)


def hash_text(value: Multihash | None) -> str:
    return value.to_multibase() if value is not None else ""


def from_hash_text(text: str) -> Multihash | None:
    return Multihash.from_multibase(text) if text else None


def optional(message: Any, field: str) -> Any:
    return getattr(message, field) if message.HasField(field) else None


# --- datasets ------------------------------------------------------------------------------------


def summary(s: DatasetSummary) -> pb.DatasetSummary:
    return pb.DatasetSummary(
        name=s.name,
        kind=s.kind or "",
        head=hash_text(s.head),
        blocks=s.blocks,
        records=s.records,
        size=s.size,
        updated=timestamp(s.updated),
        watermark=timestamp(s.watermark),
        error=s.error or "",
    )


def from_summary(m: pb.DatasetSummary) -> DatasetSummary:
    return DatasetSummary(
        name=m.name,
        kind=m.kind or None,
        head=from_hash_text(m.head),
        blocks=optional(m, "blocks"),
        records=optional(m, "records"),
        size=optional(m, "size"),
        updated=from_timestamp(m, "updated"),
        watermark=from_timestamp(m, "watermark"),
        error=m.error or None,
    )


# --- ingest and pull -----------------------------------------------------------------------------


def ingest_result(r: IngestResult) -> pb.IngestResult:
    return pb.IngestResult(
        dataset=r.dataset,
        old_head=hash_text(r.old_head),
        new_head=hash_text(r.new_head),
        num_records=r.num_records,
        up_to_date=r.up_to_date,
        has_more=r.has_more,
        message=r.message or "",
    )


def from_ingest_result(m: pb.IngestResult) -> IngestResult:
    from coordinator.ingest.context import IngestResult

    return IngestResult(
        dataset=m.dataset,
        old_head=from_hash_text(m.old_head),
        new_head=from_hash_text(m.new_head),
        num_records=m.num_records,
        up_to_date=m.up_to_date,
        has_more=m.has_more,
        message=m.message or None,
    )


def pull_event(event: PullEvent, block: bytes = b"") -> pb.PullEvent:
    """``block``: the stored bytes of a committed transaction's block."""
    match event:
        case RootPulled(_, result):
            return pb.PullEvent(root_pulled=ingest_result(result))
        case Committed():
            return pb.PullEvent(
                transaction=pb.TransactionCommitted(
                    dataset=event.dataset,
                    head=hash_text(event.head),
                    block=block,
                    input_records=event.input_records,
                    output_records=event.output_records,
                )
            )
        case DerivativeDone(name, reason):
            return pb.PullEvent(done=pb.DerivativeDone(dataset=name, reason=reason))
        case PullFailed(name, error, skipped):
            return pb.PullEvent(failed=pb.PullFailed(dataset=name, error=error, skipped=skipped))
        case PullStarted(name):
            return pb.PullEvent(started=name)


def from_pull_event(m: pb.PullEvent) -> PullEvent:
    kind = m.WhichOneof("event")
    if kind == "root_pulled":
        result = from_ingest_result(m.root_pulled)
        return RootPulled(result.dataset, result)
    if kind == "transaction":
        t = m.transaction
        event = decode_block(t.block).event
        assert isinstance(event, ExecuteTransform), "a transaction commits an ExecuteTransform"
        head = Multihash.from_multibase(t.head)
        return Committed(t.dataset, head, event, t.input_records, t.output_records)
    if kind == "done":
        return DerivativeDone(m.done.dataset, m.done.reason)
    if kind == "started":
        return PullStarted(m.started)
    if kind == "failed":
        f = m.failed
        return PullFailed(f.dataset, f.error, optional(f, "skipped"))
    raise ValueError(f"unexpected pull event {kind!r}")


# --- transforms ----------------------------------------------------------------------------------


def query_change(c: QueryChange, set_transform_block: bytes, migration_block: bytes) -> Any:
    return pb.SetTransformResponse(
        dataset=c.dataset,
        set_transform=hash_text(c.set_transform),
        set_transform_block=set_transform_block,
        head=hash_text(c.head),
        output_schema=schema_bytes(c.output_schema),
        added_columns=list(c.added_columns),
        migrated=c.migrated,
        migration_block=migration_block,
    )


def from_query_change(m: pb.SetTransformResponse) -> QueryChange:
    from coordinator.evolution.query_change import QueryChange

    set_transform = decode_block(m.set_transform_block).event
    assert isinstance(set_transform, SetTransform)
    migration = decode_block(m.migration_block).event if m.migration_block else None
    assert migration is None or isinstance(migration, ExecuteTransform)
    schema = from_schema_bytes(m.output_schema)
    assert schema is not None, "a query change has an output schema"
    return QueryChange(
        dataset=m.dataset,
        set_transform=Multihash.from_multibase(m.set_transform),
        head=Multihash.from_multibase(m.head),
        transform=set_transform.transform,
        output_schema=schema,
        added_columns=tuple(m.added_columns),
        migration=migration,
        migrated=m.migrated,
    )


# --- chain edits ---------------------------------------------------------------------------------


def reset_done(r: ResetDone) -> pb.ResetResponse:
    return pb.ResetResponse(
        dataset=r.dataset, head=hash_text(r.head), removed=r.removed, invalidated=r.invalidated
    )


def from_reset_done(m: pb.ResetResponse) -> ResetDone:
    from coordinator.app.application import ResetDone

    head = Multihash.from_multibase(m.head)
    return ResetDone(m.dataset, head, m.removed, tuple(m.invalidated))


def compacted(c: Compacted) -> pb.CompactResponse:
    return pb.CompactResponse(
        dataset=c.dataset,
        head=hash_text(c.head),
        blocks_before=c.blocks_before,
        blocks_after=c.blocks_after,
        files_before=c.files_before,
        files_after=c.files_after,
    )


def from_compacted(m: pb.CompactResponse) -> Compacted:
    from coordinator.ingest.compaction import Compacted

    return Compacted(
        dataset=m.dataset,
        head=Multihash.from_multibase(m.head),
        blocks_before=m.blocks_before,
        blocks_after=m.blocks_after,
        files_before=m.files_before,
        files_after=m.files_after,
    )


# --- verification --------------------------------------------------------------------------------


def block_ref(b: BlockRef | None) -> pb.BlockRef | None:
    if b is None:
        return None
    return pb.BlockRef(hash=hash_text(b.hash), sequence_number=b.sequence_number)


def from_block_ref(m: Any, field: str) -> BlockRef | None:
    if not m.HasField(field):
        return None
    ref: pb.BlockRef = getattr(m, field)
    return BlockRef(Multihash.from_multibase(ref.hash), optional(ref, "sequence_number"))


def replayed(dataset: str, r: ReplayResult) -> pb.VerifyEvent:
    return pb.VerifyEvent(
        replayed=pb.Replayed(
            dataset=dataset,
            block=block_ref(r.block),
            kind=r.kind,
            differences=list(r.differences),
            error=r.error or "",
            seconds=r.seconds,
            engine=r.engine or "",
        )
    )


def from_replayed(m: pb.Replayed) -> tuple[str, ReplayResult]:
    from coordinator.verify.replay import ReplayResult

    block = from_block_ref(m, "block")
    assert block is not None
    result = ReplayResult(
        block=block,
        kind=m.kind,
        differences=tuple(m.differences),
        error=m.error or None,
        seconds=m.seconds,
        engine=m.engine or None,
    )
    return m.dataset, result


def report(r: DatasetReport) -> pb.VerifyEvent:
    index = {id(p): i for i, p in enumerate(r.problems)}
    return pb.VerifyEvent(
        report=pb.DatasetReport(
            dataset=r.dataset,
            kind=r.kind or "",
            head=hash_text(r.head),
            blocks=r.blocks,
            transactions=[
                pb.VerifiedTransaction(
                    block=block_ref(t.block),
                    event=t.event,
                    offset_start=t.offsets.start if t.offsets else None,
                    offset_end=t.offsets.end if t.offsets else None,
                    integrity=t.integrity.value,
                    replay=t.replay.value,
                    problems=[index[id(p)] for p in t.problems],
                    engine=t.engine or "",
                )
                for t in r.transactions
            ],
            problems=[
                pb.Problem(check=p.check.value, message=p.message, block=block_ref(p.block))
                for p in r.problems
            ],
            replayed=r.replayed,
            absent_inputs=[pb.AbsentInput(alias=a.alias, id=a.dataset_id) for a in r.absent_inputs],
        )
    )


def from_report(m: pb.DatasetReport) -> DatasetReport:
    problems = tuple(
        Problem(check=Check(p.check), message=p.message, block=from_block_ref(p, "block"))
        for p in m.problems
    )
    transactions = []
    for t in m.transactions:
        block = from_block_ref(t, "block")
        assert block is not None
        start, end = optional(t, "offset_start"), optional(t, "offset_end")
        transactions.append(
            TransactionResult(
                block=block,
                event=t.event,
                offsets=OffsetInterval(start=start, end=end) if start is not None else None,
                integrity=Outcome(t.integrity),
                replay=Outcome(t.replay),
                problems=tuple(problems[i] for i in t.problems),
                engine=t.engine or None,
            )
        )
    return DatasetReport(
        dataset=m.dataset,
        kind=m.kind or None,
        head=from_hash_text(m.head),
        blocks=m.blocks,
        transactions=tuple(transactions),
        problems=problems,
        replayed=m.replayed,
        absent_inputs=tuple(AbsentInput(a.alias, a.id) for a in m.absent_inputs),
    )
