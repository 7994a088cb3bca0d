"""DatasetState: everything needed to prepare a dataset's next transaction (RFC-014).

The state is a left fold of the metadata chain (``advance``) whose data-related part comes
only from the last data block (``AddData`` / ``ExecuteTransform``): since every data event
carries ``prevOffset``, ``prevCheckpoint`` and the watermark, the next transaction never needs
to scan older blocks. The fold is pure; ``coordinator.dataset.state_cache`` persists it so that
opening a dataset reads a handful of blocks, not the whole chain.

Each event-valued field remembers the hash of the block it came from (``origins``): replaying
just those blocks, oldest first, rebuilds the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from common.odf.block import MetadataBlock
from common.odf.events import (
    AddData,
    AddPushSource,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    Seed,
    SetAttachments,
    SetDataSchema,
    SetInfo,
    SetLicense,
    SetPollingSource,
    SetTransform,
    SetVocab,
)
from common.odf.fragments import (
    DatasetKind,
    DatasetVocabulary,
    ExecuteTransformInput,
    SourceState,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash

if TYPE_CHECKING:
    import pyarrow as pa

DataEvent = AddData | ExecuteTransform
"""The events that carry the data stream: offsets, checkpoints, watermarks."""

# Keys of ``DatasetState.origins``.
SEED = "seed"
VOCAB = "vocab"
SCHEMA = "schema"
POLLING_SOURCE = "polling_source"
TRANSFORM = "transform"
INFO = "info"
LICENSE = "license"
ATTACHMENTS = "attachments"
LAST_DATA = "last_data"
LAST_EXECUTE_TRANSFORM = "last_execute_transform"
PUSH_SOURCE = "push_source/"
SOURCE_STATE = "source_state/"


def resolve_vocab(event: SetVocab | None) -> DatasetVocabulary:
    """The effective column names: the event's, with the spec's defaults for missing ones."""
    default = DatasetVocabulary()
    if event is None:
        return default
    return DatasetVocabulary(
        offset_column=event.offset_column or default.offset_column,
        operation_type_column=event.operation_type_column or default.operation_type_column,
        system_time_column=event.system_time_column or default.system_time_column,
        event_time_column=event.event_time_column or default.event_time_column,
    )


def last_offset_of(event: DataEvent) -> int | None:
    """The last offset written as of this event: its slice's end, else the carried one."""
    return event.new_data.offset_interval.end if event.new_data else event.prev_offset


def last_input_block(entry: ExecuteTransformInput) -> Multihash | None:
    """The last input block included so far (RFC-014): ``newBlockHash ?? prevBlockHash``."""
    return entry.new_block_hash if entry.new_block_hash is not None else entry.prev_block_hash


def last_input_offset(entry: ExecuteTransformInput) -> int | None:
    """The last input offset included so far (RFC-014): ``newOffset ?? prevOffset``."""
    return entry.new_offset if entry.new_offset is not None else entry.prev_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetState:
    """A summary of a dataset as of its head block.

    Data-stream fields (``last_offset``, ``last_checkpoint``, ``last_watermark``) are those
    of the last ``AddData``/``ExecuteTransform``; everything else is the latest event of its
    kind. ``push_sources`` and ``source_states`` are ordered by when they were last set.
    """

    head: Multihash | None = None
    sequence_number: int = -1
    """Of the head block; -1 for an empty chain."""
    system_time: datetime | None = None
    """Of the head block."""
    id: DatasetID | None = None
    kind: DatasetKind | None = None
    set_vocab: SetVocab | None = None
    schema: SetDataSchema | None = None
    polling_source: SetPollingSource | None = None
    push_sources: tuple[AddPushSource, ...] = ()
    transform: SetTransform | None = None
    info: SetInfo | None = None
    license: SetLicense | None = None
    attachments: SetAttachments | None = None
    last_data_block: Multihash | None = None
    last_data_event: DataEvent | None = None
    last_execute_transform: ExecuteTransform | None = None
    source_states: tuple[SourceState, ...] = ()
    data_size: int = 0
    """Total bytes of all data slices."""
    origins: tuple[tuple[str, Multihash], ...] = field(default=(), repr=False)
    """``(field key, block hash)`` for every event-valued field, for ``state_cache``."""

    # --- derived views ----------------------------------------------------------------------

    @property
    def vocab(self) -> DatasetVocabulary:
        return resolve_vocab(self.set_vocab)

    @property
    def last_offset(self) -> int | None:
        """The offset of the last record written (``prevOffset`` of the next data event)."""
        return last_offset_of(self.last_data_event) if self.last_data_event else None

    @property
    def next_offset(self) -> int:
        """The offset the next record gets: records are numbered 0, 1, ... without gaps."""
        last = self.last_offset
        return 0 if last is None else last + 1

    @property
    def num_records(self) -> int:
        return self.next_offset

    @property
    def last_checkpoint(self) -> Multihash | None:
        """``prevCheckpoint`` of the next data event: the last data event's new checkpoint."""
        event = self.last_data_event
        return event.new_checkpoint.physical_hash if event and event.new_checkpoint else None

    @property
    def last_watermark(self) -> datetime | None:
        return self.last_data_event.new_watermark if self.last_data_event else None

    @property
    def schema_bytes(self) -> bytes | None:
        """The Arrow IPC ``Schema`` flatbuffer of the current ``SetDataSchema``."""
        return self.schema.schema if self.schema else None

    def arrow_schema(self) -> pa.Schema | None:
        """The current data schema as a pyarrow schema (decoded on each call)."""
        if self.schema is None:
            return None
        from common.serde.arrow_schema import decode_arrow_schema

        return decode_arrow_schema(self.schema.schema)

    def push_source(self, name: str | None = None) -> AddPushSource | None:
        """The active push source ``name``; with no name, the only one (if exactly one)."""
        if name is None:
            return self.push_sources[0] if len(self.push_sources) == 1 else None
        return next((s for s in self.push_sources if s.source_name == name), None)

    def source_state(self, source_name: str) -> SourceState | None:
        """The latest ``newSourceState`` recorded for ``source_name``."""
        return next((s for s in self.source_states if s.source_name == source_name), None)

    def input_progress(self, dataset_id: DatasetID) -> ExecuteTransformInput | None:
        """The last ``ExecuteTransform`` entry of an input (see ``last_input_block/offset``)."""
        if self.last_execute_transform is None:
            return None
        return next(
            (i for i in self.last_execute_transform.query_inputs if i.dataset_id == dataset_id),
            None,
        )

    def origin(self, key: str) -> Multihash | None:
        return next((h for k, h in self.origins if k == key), None)


def next_system_time(state: DatasetState, now: datetime | None = None) -> datetime:
    """The system time of the next block: ``now`` (default: the clock), but never before the
    head's, so a clock that stepped back cannot break the chain (time never goes back)."""
    now = now or datetime.now(UTC)
    return max(now, state.system_time) if state.system_time else now


def _with_origin(
    origins: tuple[tuple[str, Multihash], ...], key: str, block_hash: Multihash | None
) -> tuple[tuple[str, Multihash], ...]:
    kept = tuple((k, h) for k, h in origins if k != key)
    return (*kept, (key, block_hash)) if block_hash is not None else kept


def advance(state: DatasetState, block_hash: Multihash, block: MetadataBlock) -> DatasetState:
    """The state after appending ``block`` (assumed valid, see ``rules.validate_append``)."""
    changes, touched = _event_changes(state, block.event)
    origins = state.origins
    for key in touched.removed:
        origins = _with_origin(origins, key, None)
    for key in touched.set:
        origins = _with_origin(origins, key, block_hash)
    if isinstance(block.event, AddData | ExecuteTransform):
        changes["last_data_block"] = block_hash
    return with_head(state, block_hash, block, origins=origins, **changes)


def with_head(
    state: DatasetState, block_hash: Multihash, block: MetadataBlock, **changes: Any
) -> DatasetState:
    """``state`` with ``block`` (named ``block_hash``) as its head, and ``changes``."""
    return replace(
        state,
        head=block_hash,
        sequence_number=block.sequence_number,
        system_time=block.system_time,
        **changes,
    )


@dataclass
class _Touched:
    set: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def _event_changes(state: DatasetState, event: Any) -> tuple[dict[str, Any], _Touched]:
    touched = _Touched()
    simple = _SIMPLE_FIELDS.get(type(event))
    if simple is not None:
        touched.set.append(simple)
        return {simple: event}, touched
    match event:
        case Seed():
            touched.set.append(SEED)
            return {"id": event.dataset_id, "kind": event.dataset_kind}, touched
        case SetVocab():
            touched.set.append(VOCAB)
            return {"set_vocab": event}, touched
        case AddData():
            return _add_data_changes(state, event, touched), touched
        case ExecuteTransform():
            touched.set += [LAST_DATA, LAST_EXECUTE_TRANSFORM]
            size = event.new_data.size if event.new_data else 0
            return {
                "last_data_event": event,
                "last_execute_transform": event,
                "data_size": state.data_size + size,
            }, touched
        case AddPushSource():
            kept = tuple(s for s in state.push_sources if s.source_name != event.source_name)
            touched.set.append(PUSH_SOURCE + event.source_name)
            return {"push_sources": (*kept, event)}, touched
        case DisablePushSource():
            kept = tuple(s for s in state.push_sources if s.source_name != event.source_name)
            touched.removed.append(PUSH_SOURCE + event.source_name)
            return {"push_sources": kept}, touched
        case DisablePollingSource():
            touched.removed.append(POLLING_SOURCE)
            return {"polling_source": None}, touched
    raise TypeError(f"not a metadata event: {event!r}")


_SIMPLE_FIELDS: dict[type, str] = {
    SetDataSchema: SCHEMA,
    SetPollingSource: POLLING_SOURCE,
    SetTransform: TRANSFORM,
    SetInfo: INFO,
    SetLicense: LICENSE,
    SetAttachments: ATTACHMENTS,
}
"""Events that simply replace one field, named like their origin key."""


def _add_data_changes(state: DatasetState, event: AddData, touched: _Touched) -> dict[str, Any]:
    touched.set.append(LAST_DATA)
    changes: dict[str, Any] = {
        "last_data_event": event,
        "data_size": state.data_size + (event.new_data.size if event.new_data else 0),
    }
    new_state = event.new_source_state
    if new_state is not None:
        kept = tuple(s for s in state.source_states if s.source_name != new_state.source_name)
        changes["source_states"] = (*kept, new_state)
        touched.set.append(SOURCE_STATE + new_state.source_name)
    return changes


def fold(blocks: list[tuple[Multihash, MetadataBlock]]) -> DatasetState:
    """The state of a chain given oldest block first (no validation)."""
    state = DatasetState()
    for block_hash, block in blocks:
        state = advance(state, block_hash, block)
    return state
