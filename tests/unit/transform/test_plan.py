"""The batch step: how far each input advances in the next transaction (RFC-014)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from common.odf.events import ExecuteTransform, SetTransform
from common.odf.fragments import (
    DatasetKind,
    DatasetVocabulary,
    ExecuteTransformInput,
    OffsetInterval,
    SqlQueryStep,
    TransformInput,
    TransformSql,
    Watermark,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde.arrow_schema import encode_arrow_schema
from coordinator.dataset.state import DatasetState
from coordinator.transform.errors import InputDivergedError
from coordinator.transform.plan import (
    InputBlock,
    InputWindow,
    TransformPlan,
    UpToDate,
    plan_next,
)
from tests.unit.coordinator.events import SCHEMA, T0, at

SCHEMA_BYTES = encode_arrow_schema(SCHEMA)
WIDER = encode_arrow_schema(SCHEMA.append(pa.field("area", pa.float64())))
A = DatasetID.new_seeded(b"input-a")
B = DatasetID.new_seeded(b"input-b")
HEAD = Multihash.sha3_256(b"derivative head")


def h(name: str) -> Multihash:
    return Multihash.sha3_256(name.encode())


def data_block(name: str, start: int, count: int, watermark_hours: float) -> InputBlock:
    return InputBlock(
        hash=h(name),
        system_time=at(watermark_hours),
        data=OffsetInterval(start=start, end=start + count - 1),
        data_file=h("file-" + name),
        watermark=at(watermark_hours),
        is_data_event=True,
    )


def schema_block(name: str, schema: bytes = SCHEMA_BYTES) -> InputBlock:
    return InputBlock(hash=h(name), system_time=T0, schema=schema)


def window(
    dataset_id: DatasetID,
    blocks: list[InputBlock],
    *,
    start: Multihash | None = None,
    start_schema: bytes | None = None,
) -> InputWindow:
    return InputWindow(
        dataset_id=dataset_id,
        dataset_alias=f"in-{dataset_id.to_multibase()[-4:]}",
        query_alias="in",
        vocab=DatasetVocabulary(),
        start_block=start,
        start_schema=start_schema,
        blocks=tuple(blocks),
    )


def derivative(*progress: ExecuteTransformInput, prev_offset: int | None = None) -> DatasetState:
    inputs = tuple(TransformInput(dataset_ref=i.to_did(), alias="in") for i in (A, B))
    last = ExecuteTransform(query_inputs=progress, prev_offset=prev_offset) if progress else None
    return DatasetState(
        head=HEAD,
        sequence_number=5,
        system_time=at(1),
        id=DatasetID.new_seeded(b"derivative"),
        kind=DatasetKind.DERIVATIVE,
        transform=SetTransform(
            inputs=inputs,
            transform=TransformSql(engine="spark", queries=(SqlQueryStep(query="select 1"),)),
        ),
        last_data_event=last,
        last_execute_transform=last,
    )


def plan(state: DatasetState, *windows: InputWindow, max_records: int = 100) -> TransformPlan:
    result = plan_next(state, windows, max_records=max_records, now=at(2))
    assert isinstance(result, TransformPlan), result
    return result


def test_first_transaction_takes_every_block_of_each_input() -> None:
    blocks = [schema_block("s"), data_block("d1", 0, 10, 1), data_block("d2", 10, 5, 2)]
    p = plan(derivative(), window(A, blocks))
    (a,) = p.inputs
    assert (a.prev_block_hash, a.new_block_hash) == (None, h("d2"))
    assert (a.prev_offset, a.new_offset) == (None, 14)
    assert a.offset_interval == OffsetInterval(start=0, end=14)
    assert [f.physical_hash for f in a.files] == [h("file-d1"), h("file-d2")]
    assert a.explicit_watermarks == (
        Watermark(system_time=at(1), event_time=at(1)),
        Watermark(system_time=at(2), event_time=at(2)),
    )
    assert a.schema == SCHEMA_BYTES
    assert (p.expected_head, p.prev_offset, p.next_offset) == (HEAD, None, 0)
    assert p.system_time == at(2)


def test_system_time_never_goes_before_the_head() -> None:
    state = replace(derivative(), system_time=at(5))
    p = plan(state, window(A, [schema_block("s"), data_block("d1", 0, 1, 1)]))
    assert p.system_time == at(5)


def test_backlog_is_split_into_bounded_transactions_at_block_boundaries() -> None:
    blocks = [schema_block("s")] + [data_block(f"d{i}", 10 * i, 10, i) for i in range(5)]
    w = window(A, blocks)
    first = plan(derivative(), w, max_records=15)
    assert (first.inputs[0].new_block_hash, first.inputs[0].new_offset) == (h("d1"), 19)
    # The next transaction continues exactly where the committed one stopped.
    state = derivative(first.inputs[0].execute_transform_input(), prev_offset=7)
    second = plan(state, w, max_records=15)
    a = second.inputs[0]
    assert (a.prev_block_hash, a.new_block_hash) == (h("d1"), h("d3"))
    assert (a.prev_offset, a.new_offset) == (19, 39)
    assert a.offset_interval == OffsetInterval(start=20, end=39)
    assert second.prev_offset == 7 and second.next_offset == 8


def test_one_data_block_larger_than_the_limit_still_fits() -> None:
    p = plan(
        derivative(), window(A, [schema_block("s"), data_block("big", 0, 1000, 1)]), max_records=10
    )
    assert p.inputs[0].num_records == 1000


def test_input_schema_change_ends_the_transaction_before_it() -> None:
    blocks = [
        schema_block("s1"),
        data_block("d1", 0, 3, 1),
        schema_block("s2", WIDER),
        data_block("d2", 3, 3, 2),
    ]
    w = window(A, blocks)
    first = plan(derivative(), w)
    assert first.inputs[0].new_block_hash == h("d1")
    assert first.inputs[0].schema == SCHEMA_BYTES
    second = plan(derivative(first.inputs[0].execute_transform_input()), w)
    a = second.inputs[0]
    assert (a.prev_block_hash, a.new_block_hash, a.new_offset) == (h("d1"), h("d2"), 5)
    assert a.schema == WIDER


def test_watermark_only_block_makes_a_transaction_without_records() -> None:
    progress = ExecuteTransformInput(dataset_id=A, new_block_hash=h("d1"), new_offset=9)
    wm = InputBlock(hash=h("wm"), system_time=at(3), watermark=at(3), is_data_event=True)
    w = window(A, [wm], start=h("d1"), start_schema=SCHEMA_BYTES)
    a = plan(derivative(progress, prev_offset=4), w).inputs[0]
    assert (a.prev_block_hash, a.new_block_hash) == (h("d1"), h("wm"))
    assert (a.prev_offset, a.new_offset, a.offset_interval) == (9, None, None)
    assert a.explicit_watermarks == (Watermark(system_time=at(3), event_time=at(3)),)
    assert a.files == ()


def test_blocks_without_data_or_watermark_are_not_a_reason_to_run() -> None:
    progress = ExecuteTransformInput(dataset_id=A, new_block_hash=h("d1"), new_offset=9)
    info = InputBlock(hash=h("info"), system_time=at(3))
    w = window(A, [info], start=h("d1"), start_schema=SCHEMA_BYTES)
    assert plan_next(derivative(progress), (w,), max_records=10, now=at(4)) == UpToDate(
        "up to date"
    )


def test_nothing_new_is_up_to_date() -> None:
    progress = ExecuteTransformInput(dataset_id=A, new_block_hash=h("d1"), new_offset=9)
    w = window(A, [], start=h("d1"), start_schema=SCHEMA_BYTES)
    assert isinstance(plan_next(derivative(progress), (w,), max_records=10, now=at(4)), UpToDate)


def test_input_without_schema_makes_the_dataset_wait() -> None:
    ready = window(A, [schema_block("s"), data_block("d1", 0, 1, 1)])
    empty = window(B, [InputBlock(hash=h("source"), system_time=T0)])
    result = plan_next(derivative(), (ready, empty), max_records=10, now=at(2))
    assert isinstance(result, UpToDate)
    assert "waiting for input" in result.reason and empty.dataset_alias in result.reason


def test_second_input_without_news_is_empty_with_its_schema() -> None:
    progress_b = ExecuteTransformInput(dataset_id=B, new_block_hash=h("b1"), new_offset=2)
    a_window = window(A, [schema_block("s"), data_block("a1", 0, 4, 1)])
    b_window = window(B, [], start=h("b1"), start_schema=WIDER)
    p = plan(derivative(progress_b), a_window, b_window)
    a, b = p.inputs
    assert a.new_offset == 3
    assert (b.prev_block_hash, b.new_block_hash, b.prev_offset, b.new_offset) == (
        h("b1"),
        None,
        2,
        None,
    )
    assert b.offset_interval is None and b.explicit_watermarks == () and b.schema == WIDER
    assert [i.dataset_id for i in p.query_inputs()] == [A, B]


def test_progress_outside_the_input_chain_is_a_diverged_input() -> None:
    progress = ExecuteTransformInput(dataset_id=A, new_block_hash=h("gone"), new_offset=9)
    w = window(A, [data_block("d2", 10, 1, 1)], start=h("d1"), start_schema=SCHEMA_BYTES)
    with pytest.raises(InputDivergedError, match="not in its chain"):
        plan_next(derivative(progress), (w,), max_records=10, now=at(2))


def test_event_time_watermarks_keep_block_order() -> None:
    blocks = [schema_block("s")] + [data_block(f"d{i}", i, 1, i) for i in range(3)]
    marks = plan(derivative(), window(A, blocks)).inputs[0].explicit_watermarks
    times: list[datetime] = [m.event_time for m in marks]
    assert times == sorted(times) and times[-1] - times[0] == timedelta(hours=2)
