"""The metadata chain rules: may ``block`` be appended to a chain whose state is ``state``?

Pure functions over ``DatasetState`` and the new block; nothing here touches the disk, so
the same rules serve the commit path and a full verification that replays a chain from its
Seed. They follow the spec and the reference coordinator's append validators:

- the chain starts with exactly one ``Seed`` and its links are unbroken: ``prevBlockHash`` is
  the head, sequence numbers go up by one, system time never goes back;
- data events (``AddData`` for root datasets, ``ExecuteTransform`` for derivative ones) carry
  ``prevOffset`` equal to the last offset written and ``prevCheckpoint`` equal to the last
  checkpoint; new offsets start right after it; the watermark never goes back or disappears;
  data needs a ``SetDataSchema`` first; an event that changes nothing is refused;
- ``SetDataSchema`` may only add columns to the current schema;
- sources and transforms are consistent with the dataset kind and with each other.

Every error is an ``AppendValidationError`` whose path names the event field at fault.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.odf import events
from common.odf.block import MetadataBlock
from common.odf.fragments import DatasetKind, ExecuteTransformInput, TransformSql
from common.odf.identity import DID_ODF_PREFIX, DatasetID
from coordinator.dataset.errors import AppendValidationError
from coordinator.dataset.state import (
    DataEvent,
    DatasetState,
    last_input_block,
    last_input_offset,
)

if TYPE_CHECKING:
    import pyarrow as pa


def _fail(event: object, field: str | None, message: str) -> AppendValidationError:
    name = type(event).__name__
    return AppendValidationError(message, path=f"{name}.{field}" if field else name)


def validate_append(state: DatasetState, block: MetadataBlock) -> None:
    """Raise ``AppendValidationError`` unless ``block`` may follow the chain's head."""
    _validate_links(state, block)
    event = block.event
    match event:
        case events.AddData() | events.ExecuteTransform():
            _validate_data_event(state, event)
        case events.SetDataSchema():
            _validate_schema_change(state, event)
        case events.SetPollingSource():
            _validate_polling_source(state, event)
        case events.AddPushSource():
            _validate_push_source(state, event)
        case events.DisablePushSource():
            if state.push_source(event.source_name) is None:
                raise _fail(event, "sourceName", f"no active push source {event.source_name!r}")
        case events.DisablePollingSource():
            if state.polling_source is None:
                raise _fail(event, None, "the dataset has no active polling source")
        case events.SetTransform():
            _validate_set_transform(state, event)
        case _:
            pass


def _validate_links(state: DatasetState, block: MetadataBlock) -> None:
    event = block.event
    if isinstance(event, events.Seed):
        if state.head is not None or block.prev_block_hash is not None:
            raise _fail(event, None, "Seed must be the first block of a chain and appear once")
    elif state.head is None:
        raise _fail(event, None, "the first block of a chain must be a Seed")
    if block.prev_block_hash != state.head:
        raise AppendValidationError(
            f"is {block.prev_block_hash or '(none)'}, the head is {state.head or '(none)'}",
            path="MetadataBlock.prevBlockHash",
        )
    if block.sequence_number != state.sequence_number + 1:
        raise AppendValidationError(
            f"is {block.sequence_number}, expected {state.sequence_number + 1}",
            path="MetadataBlock.sequenceNumber",
        )
    if state.system_time is not None and block.system_time < state.system_time:
        raise AppendValidationError(
            f"{block.system_time.isoformat()} is before the head's {state.system_time.isoformat()}",
            path="MetadataBlock.systemTime",
        )


# --- data events -------------------------------------------------------------------------------


def _validate_data_event(state: DatasetState, event: DataEvent) -> None:
    expected_kind = (
        DatasetKind.ROOT if isinstance(event, events.AddData) else DatasetKind.DERIVATIVE
    )
    if state.kind is not expected_kind:
        raise _fail(event, None, f"only {expected_kind.value} datasets can have this event")
    _validate_offsets(state, event)
    if event.new_data is not None and state.schema is None:
        raise _fail(event, "newData", "SetDataSchema event must be present before adding data")
    if event.prev_checkpoint != state.last_checkpoint:
        raise _fail(
            event,
            "prevCheckpoint",
            f"is {event.prev_checkpoint or '(none)'}, the last checkpoint is"
            f" {state.last_checkpoint or '(none)'}",
        )
    _validate_watermark(state, event)
    if isinstance(event, events.ExecuteTransform):
        _validate_query_inputs(state, event)
    if not _advances_something(state, event):
        raise _fail(
            event,
            None,
            "event neither has data nor advances the checkpoint, watermark or source state",
        )


def _validate_offsets(state: DatasetState, event: DataEvent) -> None:
    if event.prev_offset != state.last_offset:
        raise _fail(
            event,
            "prevOffset",
            f"is {_opt(event.prev_offset)}, the last offset written is {_opt(state.last_offset)}",
        )
    if event.new_data is None:
        return
    interval = event.new_data.offset_interval
    expected_start = 0 if event.prev_offset is None else event.prev_offset + 1
    if interval.start != expected_start:
        raise _fail(
            event,
            "newData.offsetInterval.start",
            f"is {interval.start}, offsets must continue at {expected_start}",
        )
    if interval.end < interval.start:
        raise _fail(
            event,
            "newData.offsetInterval",
            f"end {interval.end} is before start {interval.start}",
        )


def _validate_watermark(state: DatasetState, event: DataEvent) -> None:
    last = state.last_watermark
    if last is None:
        return
    new = event.new_watermark
    if new is None:
        raise _fail(event, "newWatermark", f"is missing, the last watermark is {last.isoformat()}")
    if new < last:
        raise _fail(
            event,
            "newWatermark",
            f"{new.isoformat()} goes back from the last watermark {last.isoformat()}",
        )


def _advances_something(state: DatasetState, event: DataEvent) -> bool:
    if event.new_data is not None:
        return True
    new_checkpoint = event.new_checkpoint.physical_hash if event.new_checkpoint else None
    if new_checkpoint != event.prev_checkpoint or event.new_watermark != state.last_watermark:
        return True
    if isinstance(event, events.AddData):
        previous = state.last_data_event
        prev_source_state = (
            previous.new_source_state if isinstance(previous, events.AddData) else None
        )
        return event.new_source_state != prev_source_state
    # RFC-014: a transaction that consumed input blocks records that progress, even when the
    # engine produced no records and no new watermark (e.g. every input row was filtered out).
    return any(i.new_block_hash is not None for i in event.query_inputs)


def _validate_query_inputs(state: DatasetState, event: events.ExecuteTransform) -> None:
    if state.transform is None:
        raise _fail(event, None, "ExecuteTransform must be preceded by a SetTransform event")
    declared = [_input_id(i.dataset_ref) for i in state.transform.inputs]
    actual = [i.dataset_id for i in event.query_inputs]
    if actual != declared:
        raise _fail(
            event,
            "queryInputs",
            "inputs must be listed in the same order as declared in SetTransform",
        )
    for index, entry in enumerate(event.query_inputs):
        _validate_query_input(state, event, index, entry)


def _validate_query_input(
    state: DatasetState, event: events.ExecuteTransform, index: int, entry: ExecuteTransformInput
) -> None:
    where = f"queryInputs[{index}]"
    if entry.new_block_hash is not None and entry.new_block_hash == entry.prev_block_hash:
        raise _fail(event, f"{where}.newBlockHash", "equals prevBlockHash: empty block interval")
    if entry.new_offset is not None and entry.new_offset == entry.prev_offset:
        raise _fail(event, f"{where}.newOffset", "equals prevOffset: empty offset interval")
    if entry.new_offset is not None and entry.new_block_hash is None:
        raise _fail(event, f"{where}.newOffset", "is set but the block interval is empty")
    previous = state.input_progress(entry.dataset_id)
    expected_block = last_input_block(previous) if previous else None
    expected_offset = last_input_offset(previous) if previous else None
    if entry.prev_block_hash != expected_block:
        raise _fail(
            event,
            f"{where}.prevBlockHash",
            f"is {entry.prev_block_hash or '(none)'}, the last input block processed is"
            f" {expected_block or '(none)'}",
        )
    if entry.prev_offset != expected_offset:
        raise _fail(
            event,
            f"{where}.prevOffset",
            f"is {_opt(entry.prev_offset)}, the last input offset processed is"
            f" {_opt(expected_offset)}",
        )


# --- schema ------------------------------------------------------------------------------------


def _validate_schema_change(state: DatasetState, event: events.SetDataSchema) -> None:
    from common.serde.arrow_schema import decode_arrow_schema

    new = decode_arrow_schema(event.schema)
    if state.schema is None:
        return
    old = decode_arrow_schema(state.schema.schema)
    problem = schema_change_problem(old, new)
    if problem:
        raise _fail(event, "schema", problem)


def schema_change_problem(old: pa.Schema, new: pa.Schema) -> str | None:
    """Why ``new`` is not ``old`` plus added columns, or ``None`` when it is.

    Existing columns keep their names, types and relative order; nullability may only be
    relaxed. New columns may appear anywhere.
    """
    positions = {f.name: i for i, f in enumerate(new)}
    last = -1
    for f in old:
        if f.name not in positions:
            return f"column {f.name!r} was removed or renamed; schemas may only add columns"
        g = new.field(positions[f.name])
        if not g.type.equals(f.type):
            return f"column {f.name!r} changed type from {f.type} to {g.type}"
        if f.nullable and not g.nullable:
            return f"column {f.name!r} became non-nullable"
        if positions[f.name] < last:
            return f"column {f.name!r} was moved; existing columns must keep their order"
        last = positions[f.name]
    return None


# --- sources and transforms --------------------------------------------------------------------


def _require_root(state: DatasetState, event: object) -> None:
    if state.kind is not DatasetKind.ROOT:
        raise _fail(event, None, "only Root datasets can have ingest sources")


def _validate_polling_source(state: DatasetState, event: events.SetPollingSource) -> None:
    _require_root(state, event)
    if state.push_sources:
        raise _fail(event, None, "cannot add a polling source while push sources are still active")
    if event.preprocess is not None:
        _validate_normalized(event, "preprocess", event.preprocess)


def _validate_push_source(state: DatasetState, event: events.AddPushSource) -> None:
    _require_root(state, event)
    if state.polling_source is not None:
        raise _fail(event, None, "cannot add a push source while a polling source is still active")
    if getattr(event.read, "schema", None) is None:
        raise _fail(event, "read.schema", "push sources must specify the read schema")
    if event.preprocess is not None:
        _validate_normalized(event, "preprocess", event.preprocess)


def _validate_set_transform(state: DatasetState, event: events.SetTransform) -> None:
    if state.kind is not DatasetKind.DERIVATIVE:
        raise _fail(event, None, "only Derivative datasets can have a transform")
    if not event.inputs:
        raise _fail(event, "inputs", "a transform must have at least one input")
    for i, entry in enumerate(event.inputs):
        if not entry.dataset_ref.startswith(DID_ODF_PREFIX):
            raise _fail(event, f"inputs[{i}].datasetRef", "must be resolved to a did:odf id")
        _input_id(entry.dataset_ref)
        if entry.alias is None:
            raise _fail(event, f"inputs[{i}].alias", "must be set")
    _validate_normalized(event, "transform", event.transform)


def _validate_normalized(event: object, where: str, transform: TransformSql) -> None:
    """Queries in the normalized form: ``queries`` only, the last one without an alias."""
    if transform.query is not None:
        raise _fail(event, f"{where}.query", "must be normalized into queries")
    if not transform.queries:
        raise _fail(event, f"{where}.queries", "a transform must have at least one query")
    if transform.queries[-1].alias is not None:
        raise _fail(event, f"{where}.queries", "the last query is the output: it has no alias")
    for i, q in enumerate(transform.queries[:-1]):
        if q.alias is None:
            raise _fail(event, f"{where}.queries[{i}].alias", "every query but the last needs one")


def _input_id(ref: str) -> DatasetID:
    try:
        return DatasetID.from_did(ref)
    except Exception:
        raise AppendValidationError(
            f"{ref!r} is not a did:odf id", path="SetTransform.inputs"
        ) from None


def _opt(value: int | None) -> str:
    return "(none)" if value is None else str(value)
