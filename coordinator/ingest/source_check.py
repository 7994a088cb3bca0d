"""What ``odf add`` can check of a root dataset's sources before any data arrives.

A source's read step declares the columns its data will have when it gives a DDL ``schema``
(every reader then yields exactly those columns, named as the DDL names them). From that
alone, and the dataset's vocabulary, these are known at ``odf add``, and refused there with
the field's path rather than at the first ingest:

- each DDL entry parses and names supported types (``read.schema[1]: unsupported type STRNG``),
  and a Csv step's options are ones the reader supports (``read.escape``, ``read.encoding``...);
- the schema brings no system column (offset, operation type, system time);
- the event-time column, when the schema has it, is a DATE or TIMESTAMP; when the dataset's
  ``SetVocab`` names an event-time column explicitly, the schema has it (without ``SetVocab``
  a missing ``event_time`` is filled from the source's event time, as the spec says);
- the merge strategy's ``primaryKey`` and ``compareColumns`` are columns of the data.

A source with a ``preprocess`` query is checked only for its DDL: the query decides the
columns. A source without a schema (inferred columns) is not checked further.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from common.odf.errors import ValidationError
from common.odf.events import AddPushSource, MetadataEvent, SetPollingSource, SetVocab
from common.odf.fragments import DatasetVocabulary, MergeStrategySnapshot, ReadStepCsv
from coordinator.dataset.state import resolve_vocab
from coordinator.ingest.ddl import parse_ddl_schema, parse_read_schema
from coordinator.ingest.readers.temporal import is_temporal

Source = AddPushSource | SetPollingSource


def check_sources(events: Sequence[MetadataEvent]) -> None:
    """Check every source of a new dataset's ``events``; errors name ``metadata[i]...``."""
    set_vocab = next((e for e in reversed(events) if isinstance(e, SetVocab)), None)
    vocab = resolve_vocab(set_vocab)
    explicit = set_vocab is not None and set_vocab.event_time_column is not None
    for i, event in enumerate(events):
        if isinstance(event, AddPushSource | SetPollingSource):
            try:
                check_source(event, vocab, event_time_declared=explicit)
            except ValidationError as e:
                raise e.at(f"metadata[{i}]") from None


def check_source(source: Source, vocab: DatasetVocabulary, *, event_time_declared: bool) -> None:
    """Check one source (see the module doc); errors name ``read.schema[j]``, ``merge...``."""
    if isinstance(source.read, ReadStepCsv):
        from coordinator.ingest.readers.csv import check_csv_options

        check_csv_options(source.read)
    columns = getattr(source.read, "schema", None)
    if columns is None:
        return
    schema = _read_schema(columns)
    if source.preprocess is not None:
        return
    system = (vocab.offset_column, vocab.operation_type_column, vocab.system_time_column)
    for column in system:
        if column in schema.names:
            raise ValidationError(
                f"column {column!r} is a system column: the ingest writes it", path="read.schema"
            )
    event_time = vocab.event_time_column
    if event_time in schema.names:
        dtype = schema.field(event_time).type
        if not is_temporal(dtype):
            raise ValidationError(
                f"the event-time column {event_time!r} must be a DATE or TIMESTAMP, got {dtype}",
                path="read.schema",
            )
    elif event_time_declared:
        raise ValidationError(
            f"the event-time column {event_time!r} (SetVocab.eventTimeColumn) is not in the"
            f" schema (columns: {', '.join(schema.names)})",
            path="read.schema",
        )
    known = [*schema.names, event_time] if event_time not in schema.names else schema.names
    merge = source.merge
    keys = getattr(merge, "primary_key", None) or ()
    _check_columns(keys, known, "merge.primaryKey")
    if isinstance(merge, MergeStrategySnapshot) and merge.compare_columns:
        _check_columns(merge.compare_columns, known, "merge.compareColumns")


def _read_schema(columns: Sequence[str]) -> pa.Schema:
    """The DDL schema; an entry that does not parse is named by its index."""
    try:
        return parse_read_schema(columns)
    except ValidationError as whole:
        for j, entry in enumerate(columns):
            try:
                parse_ddl_schema([entry], path=f"read.schema[{j}]")
            except ValidationError as e:
                raise ValidationError(e.reason.replace(f" in {entry!r}", ""), path=e.path) from None
        raise whole from None  # only the entries together are wrong (e.g. a duplicate)


def _check_columns(names: Sequence[str], known: Sequence[str], path: str) -> None:
    for k, name in enumerate(names):
        if name not in known:
            raise ValidationError(
                f"column {name!r} is not in the schema (columns: {', '.join(known)})",
                path=f"{path}[{k}]",
            )
