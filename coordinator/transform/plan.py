"""The batch step of a derivative transformation: how far the next transaction may go.

Pure: from the derivative dataset's state and a window of each input's chain, decide the next
transaction (``TransformPlan``) or that there is nothing to do (``UpToDate``). Following
RFC-014, the previous transaction's ``queryInputs`` say where each input was left
(``newBlockHash ?? prevBlockHash``, ``newOffset ?? prevOffset``); the next one takes the input
blocks after that, oldest first, and stops

- after the data block that brings the input to ``max_records`` new records (at least one
  data block always fits), so a long backlog becomes several bounded transactions;
- before a ``SetDataSchema`` that follows data already taken, so the data of one transaction
  has one schema per input (a schema change opens the next transaction).

Blocks without data or watermark (``SetInfo``, ...) ride along. A transaction runs when at
least one input brings new records or watermarks; inputs that never produced a schema make
the dataset wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from common.odf import engine_protocol as ep
from common.odf.fragments import (
    DatasetVocabulary,
    ExecuteTransformInput,
    OffsetInterval,
    TransformSql,
    Watermark,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.dataset.state import (
    DatasetState,
    last_input_block,
    last_input_offset,
    next_system_time,
)
from coordinator.transform.errors import InputDivergedError, TransformSetupError


@dataclass(frozen=True, slots=True, kw_only=True)
class InputBlock:
    """What planning needs of one block of an input's chain."""

    hash: Multihash
    system_time: datetime
    data: OffsetInterval | None = None
    """Offsets of the block's new data slice (AddData/ExecuteTransform ``newData``)."""
    data_file: Multihash | None = None
    """Physical hash of that slice's file."""
    watermark: datetime | None = None
    """``newWatermark`` of a data event (carried or advanced)."""
    is_data_event: bool = False
    schema: bytes | None = None
    """The Arrow schema of a ``SetDataSchema`` block."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InputWindow:
    """One input of the derivative dataset, and its blocks after a known starting point."""

    dataset_id: DatasetID
    dataset_alias: str
    query_alias: str
    vocab: DatasetVocabulary
    start_block: Multihash | None
    """The window starts after this block (``None``: at the Seed)."""
    start_schema: bytes | None
    """The input's schema as of ``start_block``."""
    blocks: tuple[InputBlock, ...]
    """``(start_block, head]``, oldest first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataFileRef:
    """A data slice of an input that a transaction reads (whole or in part)."""

    physical_hash: Multihash
    file_interval: OffsetInterval
    """All offsets in the file."""
    block: Multihash | None = None
    """The block that added the file (a split transaction names it when a slice ends in it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InputPlan:
    """What one input contributes to a transaction."""

    dataset_id: DatasetID
    dataset_alias: str
    query_alias: str
    vocab: DatasetVocabulary
    prev_block_hash: Multihash | None
    new_block_hash: Multihash | None
    prev_offset: int | None
    new_offset: int | None
    files: tuple[DataFileRef, ...]
    explicit_watermarks: tuple[Watermark, ...]
    schema: bytes
    """The input's Arrow schema for this transaction (of its data, or its latest)."""

    @property
    def offset_interval(self) -> OffsetInterval | None:
        """The new records: ``(prevOffset, newOffset]`` as a closed interval, if any."""
        if self.new_offset is None:
            return None
        start = 0 if self.prev_offset is None else self.prev_offset + 1
        return OffsetInterval(start=start, end=self.new_offset)

    @property
    def num_records(self) -> int:
        interval = self.offset_interval
        return 0 if interval is None else interval.end - interval.start + 1

    def execute_transform_input(self) -> ExecuteTransformInput:
        return ExecuteTransformInput(
            dataset_id=self.dataset_id,
            prev_block_hash=self.prev_block_hash,
            new_block_hash=self.new_block_hash,
            prev_offset=self.prev_offset,
            new_offset=self.new_offset,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformPlan:
    """One transaction of a derivative dataset, ready to be executed and committed."""

    expected_head: Multihash
    """The head the plan was made from: the commit's compare-and-swap."""
    system_time: datetime
    transform: TransformSql
    vocab: DatasetVocabulary
    prev_offset: int | None
    prev_checkpoint: Multihash | None
    prev_watermark: datetime | None
    output_schema: bytes | None
    """The dataset's current ``SetDataSchema`` schema (``None`` before its first data)."""
    inputs: tuple[InputPlan, ...]

    @classmethod
    def following(
        cls,
        state: DatasetState,
        *,
        transform: TransformSql,
        system_time: datetime,
        inputs: tuple[InputPlan, ...],
    ) -> TransformPlan:
        """The transaction that continues the dataset whose state is ``state``."""
        if state.head is None:
            raise TransformSetupError("the dataset has no blocks: it has no transform")
        return cls(
            expected_head=state.head,
            system_time=system_time,
            transform=transform,
            vocab=state.vocab,
            prev_offset=state.last_offset,
            prev_checkpoint=state.last_checkpoint,
            prev_watermark=state.last_watermark,
            output_schema=state.schema_bytes,
            inputs=inputs,
        )

    @property
    def next_offset(self) -> int:
        return 0 if self.prev_offset is None else self.prev_offset + 1

    @property
    def num_input_records(self) -> int:
        return sum(i.num_records for i in self.inputs)

    def query_inputs(self) -> tuple[ExecuteTransformInput, ...]:
        return tuple(i.execute_transform_input() for i in self.inputs)

    def validate_request(self, dataset_alias: str) -> ep.ValidateQueryRequest:
        """ValidateQuery of the plan's query over its inputs' schemas."""
        return ep.ValidateQueryRequest(
            dataset_alias=dataset_alias,
            vocab=self.vocab,
            transform=self.transform,
            query_inputs=tuple(
                ep.ValidateQueryInput(query_alias=i.query_alias, schema=i.schema, vocab=i.vocab)
                for i in self.inputs
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationPlan:
    """The switch of a dataset from ``prev_transform`` to the transform of ``transform_plan``
    (MigrateQuery).

    ``transform_plan`` is the same transaction seen as a transform of the new query (what its
    events record). Its inputs are at rest (no new blocks): the migration consumes no input
    data, it only hands the engine's state over to the new query.
    """

    prev_transform: TransformSql
    transform_plan: TransformPlan

    @property
    def inputs(self) -> tuple[InputPlan, ...]:
        return self.transform_plan.inputs


@dataclass(frozen=True, slots=True)
class UpToDate:
    """No transaction to run, and why."""

    reason: str


def plan_next(
    state: DatasetState,
    windows: tuple[InputWindow, ...],
    *,
    max_records: int,
    now: datetime,
) -> TransformPlan | UpToDate:
    """The next transaction of the derivative dataset whose state is ``state``."""
    if state.head is None or state.transform is None:
        raise TransformSetupError("the dataset has no SetTransform: it is not derivative")
    if max_records < 1:
        raise ValueError("max_records must be at least 1")
    waiting = [w.dataset_alias for w in windows if _schema_at(w, len(w.blocks)) is None]
    if waiting:
        return UpToDate(f"waiting for input {', '.join(waiting)} to have data")
    inputs = tuple(_plan_input(state, w, max_records) for w in windows)
    if not any(_brings_something(i) for i in inputs):
        return UpToDate("up to date")
    return TransformPlan.following(
        state,
        transform=state.transform.transform,
        system_time=next_system_time(state, now),
        inputs=inputs,
    )


def _brings_something(plan: InputPlan) -> bool:
    return plan.new_offset is not None or bool(plan.explicit_watermarks)


def _plan_input(state: DatasetState, window: InputWindow, max_records: int) -> InputPlan:
    progress = state.input_progress(window.dataset_id)
    prev_block = last_input_block(progress) if progress else None
    prev_offset = last_input_offset(progress) if progress else None
    first = _position_after(window, prev_block)
    taken = _take_blocks(window.blocks[first:], max_records)
    data_blocks = [b for b in taken if b.data is not None]
    watermarks = tuple(
        Watermark(system_time=b.system_time, event_time=b.watermark)
        for b in taken
        if b.is_data_event and b.watermark is not None
    )
    last = first + len(taken)
    schema = _schema_at(window, last)
    assert schema is not None  # plan_next waits for inputs without a schema
    new_offset = data_blocks[-1].data.end if data_blocks and data_blocks[-1].data else None
    return InputPlan(
        dataset_id=window.dataset_id,
        dataset_alias=window.dataset_alias,
        query_alias=window.query_alias,
        vocab=window.vocab,
        prev_block_hash=prev_block,
        new_block_hash=taken[-1].hash if taken else None,
        prev_offset=prev_offset,
        new_offset=new_offset,
        files=tuple(
            DataFileRef(physical_hash=b.data_file, file_interval=b.data, block=b.hash)
            for b in data_blocks
            if b.data_file is not None and b.data is not None
        ),
        explicit_watermarks=watermarks,
        schema=schema,
    )


def _position_after(window: InputWindow, block: Multihash | None) -> int:
    """Index in ``window.blocks`` of the first block after ``block``."""
    if block == window.start_block:
        return 0
    for i, b in enumerate(window.blocks):
        if b.hash == block:
            return i + 1
    raise InputDivergedError(
        f"input {window.dataset_alias!r}: block {block} that the last transaction processed"
        " is not in its chain (the input was reset or replaced)"
    )


def _take_blocks(blocks: tuple[InputBlock, ...], max_records: int) -> tuple[InputBlock, ...]:
    """The blocks of the next transaction: see the module docstring."""
    records = 0
    has_data = False
    end = 0
    for i, b in enumerate(blocks):
        if b.schema is not None and has_data:
            break
        end = i + 1
        if b.data is not None:
            has_data = True
            records += b.data.end - b.data.start + 1
            if records >= max_records:
                break
    return blocks[:end]


def _schema_at(window: InputWindow, position: int) -> bytes | None:
    """The input's schema after the first ``position`` blocks of the window."""
    for b in reversed(window.blocks[:position]):
        if b.schema is not None:
            return b.schema
    return window.start_schema
