"""The data writer: new records to a staged Parquet slice plus the events that commit it.

Steps, in the reference's order: validate the input columns, normalise timestamps, add a
NULL event-time column if the data has none, merge with history, fill NULL event times with
the fallback, sort stably by the strategy's keys, number the offsets, put the system columns
first, write Parquet. Then decide what to commit (see ``_decide``):

- ``SetDataSchema`` before the first data, and again when new columns appear (the storage
  rules allow adding columns; any other change is an error, as in the reference);
- ``AddData`` with the slice (logical and physical hash, offsets, size), ``prevOffset``,
  ``prevCheckpoint``, the new watermark (never lower than the previous one) and source state;
- nothing when there are no new records and neither watermark nor source state changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from common.odf.events import AddData, SetDataSchema
from common.odf.fragments import (
    DatasetVocabulary,
    DataSlice,
    MergeStrategy,
    OffsetInterval,
    SourceState,
)
from common.odf.multihash import Multihash
from common.serde.arrow_schema import encode_arrow_schema
from coordinator.dataset.rules import schema_change_problem
from coordinator.ingest.errors import BadInputSchemaError
from coordinator.ingest.history import History
from coordinator.ingest.merge import Merge, merge_for
from coordinator.ingest.ordering import write_sorted
from coordinator.ingest.readers.stream import DataStream
from coordinator.ingest.readers.temporal import check_time_range
from coordinator.ingest.readers.utf8 import check_utf8_batch
from coordinator.ingest.slice_file import SliceFile, SliceStats
from coordinator.ingest.system_columns import (
    event_time_field,
    fill_event_time,
    normalize_batch,
    normalized_schema,
    output_schema,
    same_schema,
    validate_input,
)

SLICE_FILE_NAME = "slice.parquet"


class IncompatibleSchemaError(BadInputSchemaError):
    """The new records do not fit the dataset's schema (other than by added columns)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainContext:
    """What the writer needs to know about the dataset, as of the head it was read at."""

    vocab: DatasetVocabulary
    schema: pa.Schema | None
    """The current ``SetDataSchema``, decoded."""
    prev_offset: int | None
    prev_watermark: datetime | None
    prev_checkpoint: Multihash | None
    prev_source_state: SourceState | None
    """``newSourceState`` of the last ``AddData`` (an ``AddData`` without one erases it)."""
    history: History

    def add_data(
        self,
        new_data: DataSlice | None,
        new_watermark: datetime | None,
        new_source_state: SourceState | None,
    ) -> AddData:
        """The ``AddData`` that follows this head; it has no ``newCheckpoint`` (the default):
        the ingest of a root dataset writes none."""
        return AddData(
            prev_checkpoint=self.prev_checkpoint,
            prev_offset=self.prev_offset,
            new_data=new_data,
            new_watermark=new_watermark,
            new_source_state=new_source_state,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    system_time: datetime
    """The ``system_time`` column and the blocks' time."""
    fallback_event_time: datetime
    """Event time of records that have none."""
    new_source_state: SourceState | None = None
    source: str = "input"
    """How errors name the input."""
    declared_schema: bool = False
    """The source declares its read schema: an input with no records still establishes the
    dataset's schema (a ``SetDataSchema`` alone), since its types are known, not guessed."""


@dataclass(frozen=True, slots=True)
class StagedWrite:
    """Events to commit, in order, and the staged slice file the ``AddData`` refers to."""

    set_data_schema: SetDataSchema | None
    add_data: AddData | None
    """``None``: only the schema is new (records-less input of a declared schema)."""
    data_file: Path | None
    num_records: int


def stage_write(
    context: ChainContext,
    strategy: MergeStrategy,
    data: DataStream | None,
    options: WriteOptions,
    staging_dir: Path,
) -> StagedWrite | None:
    """Write ``data`` (None: the source had no data file at all) as a slice in
    ``staging_dir``; None when there is nothing to commit."""
    if data is None:
        return _decide(context, options, None, None, None)
    vocab = context.vocab
    validate_input(data.schema, vocab, source=options.source)
    merge = merge_for(strategy, vocab)
    merged = merge.merge(_prepared(data, context, options), context.history)
    out_schema = output_schema(merged.schema, vocab, merged.schema.field(vocab.event_time_column))
    schema_event = schema_event_for(context.schema, out_schema, source=options.source)
    slice_file = SliceFile(
        staging_dir / SLICE_FILE_NAME,
        merged=merged.schema,
        output=out_schema,
        vocab=vocab,
        start_offset=0 if context.prev_offset is None else context.prev_offset + 1,
        system_time=options.system_time,
    )
    filled = _filled(merged, vocab.event_time_column, options.fallback_event_time)
    try:
        _write_in_order(merge, filled, slice_file, staging_dir)
        stats = slice_file.close()
    except BaseException:
        slice_file.discard()
        raise
    return _decide(context, options, stats, staging_dir / SLICE_FILE_NAME, schema_event)


def _prepared(data: DataStream, context: ChainContext, options: WriteOptions) -> DataStream:
    """Timestamps normalised and an event-time column present (NULL when synthesised)."""
    column = context.vocab.event_time_column
    source = options.source
    schema = normalized_schema(data.schema)
    prev_type = (
        context.schema.field(column).type
        if context.schema is not None and column in context.schema.names
        else None
    )
    field = event_time_field(schema, column, prev_type)
    synthesise = column not in schema.names
    if synthesise:
        schema = schema.append(field)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in data:
            check_utf8_batch(batch, name=source)
            check_time_range(batch, name=source)
            if synthesise:
                batch = batch.append_column(field, pa.nulls(batch.num_rows, field.type))
            yield normalize_batch(batch, schema)

    return DataStream(schema, batches())


def _filled(merged: DataStream, column: str, fallback: datetime) -> Iterator[pa.RecordBatch]:
    index = merged.schema.get_field_index(column)
    for batch in merged:
        filled = fill_event_time(batch.column(index), fallback)
        yield batch.set_column(index, merged.schema.field(index), filled)


def _write_in_order(
    merge: Merge, batches: Iterator[pa.RecordBatch], slice_file: SliceFile, spill_dir: Path
) -> None:
    keys = merge.sort_keys
    if merge.streaming and len(keys) == 1:
        write_sorted(batches, keys[0], slice_file, spill_dir)
        return
    table = pa.Table.from_batches(list(batches), schema=slice_file.merged)
    order = pc.sort_indices(table, sort_keys=[(k, "ascending", "at_start") for k in keys])
    for batch in table.take(order).to_batches(max_chunksize=65536):
        slice_file.write(batch)


def schema_event_for(
    current: pa.Schema | None, new: pa.Schema, *, source: str
) -> SetDataSchema | None:
    """The ``SetDataSchema`` to commit before data of schema ``new``, if one is needed."""
    if current is None:
        return SetDataSchema(schema=encode_arrow_schema(new))
    if same_schema(current, new):
        return None
    old_nullable = {f.name: f.nullable for f in current}
    relaxed = pa.schema(
        [f.with_nullable(f.nullable or old_nullable.get(f.name, True)) for f in new]
    )
    problem = schema_change_problem(current, relaxed)
    if problem:
        raise IncompatibleSchemaError(
            f"the data does not fit the dataset's schema: {problem}", path=source
        )
    return SetDataSchema(schema=encode_arrow_schema(relaxed))


def _decide(
    context: ChainContext,
    options: WriteOptions,
    stats: SliceStats | None,
    data_file: Path | None,
    schema_event: SetDataSchema | None,
) -> StagedWrite | None:
    """The commit rule: something must change (data, watermark or source state), or a
    declared schema is recorded for the first time."""
    watermark = context.prev_watermark
    if stats is not None and stats.max_event_time is not None:
        watermark = max(watermark, stats.max_event_time) if watermark else stats.max_event_time
    if (
        stats is None
        and watermark == context.prev_watermark
        and options.new_source_state == context.prev_source_state
    ):
        if schema_event is not None and options.declared_schema and context.schema is None:
            return StagedWrite(
                set_data_schema=schema_event, add_data=None, data_file=None, num_records=0
            )
        return None
    new_data = None
    if stats is not None:
        new_data = DataSlice(
            logical_hash=stats.logical_hash,
            physical_hash=stats.physical_hash,
            offset_interval=OffsetInterval(start=stats.offset_start, end=stats.offset_end),
            size=stats.size,
        )
    add_data = context.add_data(new_data, watermark, options.new_source_state)
    return StagedWrite(
        set_data_schema=schema_event,
        add_data=add_data,
        data_file=data_file if stats is not None else None,
        num_records=stats.num_records if stats is not None else 0,
    )
