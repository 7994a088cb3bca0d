"""The daemon API's messages carry the application's results without loss, both ways."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from common.odf.fragments import OffsetInterval
from common.odf.multihash import Multihash
from coordinator.app import DatasetSummary
from coordinator.daemon import convert, records
from coordinator.daemon.grpc_generated import coordinator_pb2 as pb
from coordinator.ingest.context import IngestResult
from coordinator.verify.replay import ReplayResult
from coordinator.verify.report import (
    BlockRef,
    Check,
    DatasetReport,
    Outcome,
    Problem,
    TransactionResult,
)

pytestmark = pytest.mark.unit

H1 = Multihash.sha3_256(b"one")
H2 = Multihash.sha3_256(b"two")
WHEN = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def wire(message: object) -> object:
    """Through bytes, as gRPC sends it."""
    return type(message).FromString(message.SerializeToString())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "summary",
    [
        DatasetSummary(
            name="a",
            kind="Root",
            head=H1,
            blocks=3,
            records=0,
            size=10,
            updated=WHEN,
            watermark=None,
        ),
        DatasetSummary(name="broken", error="refs/head: not a multihash"),
    ],
)
def test_summaries(summary: DatasetSummary) -> None:
    assert convert.from_summary(wire(convert.summary(summary))) == summary  # type: ignore[arg-type]


def test_ingest_results() -> None:
    for r in (
        IngestResult("a", H1, H2, 5, False),
        IngestResult("a", None, None, 0, True, has_more=True, message="no new files"),
    ):
        assert convert.from_ingest_result(wire(convert.ingest_result(r))) == r  # type: ignore[arg-type]


def test_a_report_keeps_which_problems_belong_to_which_transaction() -> None:
    shared = Problem(check=Check.DATA, message="size differs", block=BlockRef(H2, 4))
    head = Problem(check=Check.HEAD, message="missing")
    report = DatasetReport(
        dataset="b",
        kind="Derivative",
        head=H1,
        blocks=5,
        transactions=(
            TransactionResult(
                block=BlockRef(H2, 4),
                event="ExecuteTransform",
                offsets=OffsetInterval(start=0, end=9),
                integrity=Outcome.FAILED,
                replay=Outcome.SKIPPED,
                problems=(shared,),
            ),
            TransactionResult(
                block=BlockRef(H1, 5),
                event="ExecuteTransform",
                offsets=None,
                integrity=Outcome.OK,
                replay=Outcome.OK,
                engine="container localhost/odf-engine-spark@sha256:" + "ab" * 32,
            ),
        ),
        problems=(head, shared),
        replayed=False,
    )
    back = convert.from_report(wire(convert.report(report)).report)  # type: ignore[attr-defined]
    assert back == report
    assert back.transactions[0].problems[0] is back.problems[1]  # the same problem, once


def test_replays() -> None:
    r = ReplayResult(
        block=BlockRef(H1, 2),
        kind="migration",
        differences=("x",),
        seconds=1.5,
        engine="embedded odf-engine-spark/0.1.0+src.0123456789abcdef pyspark/4.3.0",
    )
    event = wire(convert.replayed("b", r))
    assert convert.from_replayed(event.replayed) == ("b", r)  # type: ignore[attr-defined]


def test_records_as_arrow_ipc_messages() -> None:
    table = pa.table({"id": pa.array(range(200_000), pa.int64()), "v": ["x"] * 200_000})
    messages = [wire(m) for m in records.records_messages(table, 250_000)]
    assert len(messages) > 2  # several batches, then the total
    result = records.from_records_messages(messages)  # type: ignore[arg-type]
    assert result.table.equals(table) and result.num_records == 250_000 and result.cut == 50_000
    empty = table.slice(0, 0)
    back = records.from_records_messages(records.records_messages(empty, 0))
    assert back.table.schema == table.schema and back.table.num_rows == 0


def test_timestamps_keep_microseconds() -> None:
    ts = convert.timestamp(WHEN)
    assert ts is not None
    assert convert.from_timestamp(pb.PullRequest(system_time=ts), "system_time") == WHEN
    assert convert.from_timestamp(pb.PullRequest(), "system_time") is None
