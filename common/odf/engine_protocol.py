"""Messages of the ODF engine protocol (transform and raw query), plus our own extensions.

The spec's messages are TransformRequest/TransformResponse and RawQueryRequest/
RawQueryResponse. ValidateQuery, MigrateQuery and ExecuteQuery are extensions of this project;
their FlatBuffers tables live in ``fbs/engine_ext.fbs``.
"""

from __future__ import annotations

from datetime import datetime

from common.odf.fragments import DatasetVocabulary, OffsetInterval, Transform, Watermark
from common.odf.identity import DatasetID
from common.odf.record import record

# --- Transform ---------------------------------------------------------------------------------


@record
class TransformRequestInput:
    dataset_id: DatasetID
    dataset_alias: str
    query_alias: str
    vocab: DatasetVocabulary
    offset_interval: OffsetInterval | None = None
    """New records of this input for this transaction; ``None`` when there are none."""
    data_paths: tuple[str, ...]
    schema_file: str
    explicit_watermarks: tuple[Watermark, ...]


@record
class TransformRequest:
    dataset_id: DatasetID
    dataset_alias: str
    system_time: datetime
    vocab: DatasetVocabulary
    transform: Transform
    query_inputs: tuple[TransformRequestInput, ...]
    next_offset: int
    prev_checkpoint_path: str | None = None
    new_checkpoint_path: str
    new_data_path: str


@record
class TransformResponseProgress:
    pass


@record
class TransformResponseSuccess:
    new_offset_interval: OffsetInterval | None = None
    new_watermark: datetime | None = None


@record
class TransformResponseInvalidQuery:
    message: str


@record
class TransformResponseInternalError:
    message: str
    backtrace: str | None = None


TransformResponse = (
    TransformResponseProgress
    | TransformResponseSuccess
    | TransformResponseInvalidQuery
    | TransformResponseInternalError
)

# --- Raw query ---------------------------------------------------------------------------------


@record
class RawQueryRequest:
    input_data_paths: tuple[str, ...]
    transform: Transform
    output_data_path: str


@record
class RawQueryResponseProgress:
    pass


@record
class RawQueryResponseSuccess:
    num_records: int


@record
class RawQueryResponseInvalidQuery:
    message: str


@record
class RawQueryResponseInternalError:
    message: str
    backtrace: str | None = None


RawQueryResponse = (
    RawQueryResponseProgress
    | RawQueryResponseSuccess
    | RawQueryResponseInvalidQuery
    | RawQueryResponseInternalError
)

# --- Extensions: validate and migrate (fbs/engine_ext.fbs) ---------------------------------------


@record
class ValidateQueryInput:
    query_alias: str
    schema: bytes
    """The input's Arrow schema as the bytes of an Arrow IPC Schema flatbuffer."""
    vocab: DatasetVocabulary | None = None
    """The input's own vocabulary (its event-time column); the default one when absent."""


@record
class ValidateQueryRequest:
    dataset_alias: str
    vocab: DatasetVocabulary
    transform: Transform
    query_inputs: tuple[ValidateQueryInput, ...]
    prev_transform: Transform | None = None


@record
class ValidateQueryResponseSuccess:
    output_schema: bytes
    """The output's Arrow schema (system columns first) as Arrow IPC Schema flatbuffer bytes."""
    row_local: bool = False
    """The query maps each input record to output records on its own (no aggregation, join,
    window, ordering or state): a transaction of it may be split (ExecuteSplitTransform)."""


@record
class ValidateQueryResponseInvalidQuery:
    message: str


@record
class ValidateQueryResponseInternalError:
    message: str
    backtrace: str | None = None


ValidateQueryResponse = (
    ValidateQueryResponseSuccess
    | ValidateQueryResponseInvalidQuery
    | ValidateQueryResponseInternalError
)


@record
class MigrateQueryRequest:
    """Switch a dataset from ``prev_transform`` to ``new_transform`` at a transaction boundary."""

    dataset_id: DatasetID
    dataset_alias: str
    system_time: datetime
    vocab: DatasetVocabulary
    prev_transform: Transform
    new_transform: Transform
    query_inputs: tuple[TransformRequestInput, ...]
    next_offset: int
    prev_checkpoint_path: str | None = None
    new_checkpoint_path: str
    new_data_path: str


@record
class MigrateQueryResponseSuccess:
    new_offset_interval: OffsetInterval | None = None
    """Output the old query still owed (flushed state), if any, written to new_data_path."""
    new_watermark: datetime | None = None


@record
class MigrateQueryResponseInvalidQuery:
    message: str


@record
class MigrateQueryResponseInternalError:
    message: str
    backtrace: str | None = None


MigrateQueryResponse = (
    MigrateQueryResponseSuccess
    | MigrateQueryResponseInvalidQuery
    | MigrateQueryResponseInternalError
)


# --- Extension: ad-hoc queries over datasets (fbs/engine_ext.fbs) -------------------------------


@record
class QueryInput:
    """One dataset of an ad-hoc query: a view named ``alias`` over all its data files."""

    alias: str
    data_paths: tuple[str, ...]
    """Every data file of the dataset, oldest first (the newest file's schema is the view's)."""
    schema: bytes | None = None
    """The view's Arrow schema (Arrow IPC Schema flatbuffer bytes) when there are no files."""


@record
class QueryRequest:
    """Run ``transform`` over views of whole datasets; write its result to one file."""

    inputs: tuple[QueryInput, ...]
    transform: Transform
    output_data_path: str


@record
class QueryResponseSuccess:
    num_records: int


@record
class QueryResponseInvalidQuery:
    message: str


@record
class QueryResponseInternalError:
    message: str
    backtrace: str | None = None


QueryResponse = QueryResponseSuccess | QueryResponseInvalidQuery | QueryResponseInternalError


# --- Extension: split transactions (fbs/engine_ext.fbs) ------------------------------------------


@record
class SplitTransformRequest:
    request: TransformRequest
    """Exactly what ExecuteTransform would get (its ``new_data_path`` is unused)."""
    slices: int
    """Slices wanted; 0: the engine picks (its parallelism)."""
    min_records_per_slice: int
    slices_dir: str
    """Where the executors write the slices' files, readable by the coordinator."""


@record
class SplitSliceInput:
    query_alias: str
    offset_interval: OffsetInterval | None = None
    """The input records that produced this slice (``None``: none)."""


@record
class SplitSlice:
    data_path: str | None = None
    """``None`` when the slice has no records."""
    offset_interval: OffsetInterval | None = None
    inputs: tuple[SplitSliceInput, ...]
    new_watermark: datetime | None = None
    physical_hash: str | None = None
    """As ``DataSlice.physicalHash`` (multibase multihash)."""
    logical_hash: str | None = None
    size: int = 0
    num_records: int = 0
    min_event_time: datetime | None = None
    """The least event time of its records, computed where the file was written (``None``:
    no records, or an engine that does not say)."""
    max_event_time: datetime | None = None


@record
class SplitTransformResponseSuccess:
    slices: tuple[SplitSlice, ...]


@record
class SplitTransformResponseProgress:
    pass


@record
class SplitTransformResponseInvalidQuery:
    message: str


@record
class SplitTransformResponseInternalError:
    message: str
    backtrace: str | None = None


SplitTransformResponse = (
    SplitTransformResponseProgress
    | SplitTransformResponseSuccess
    | SplitTransformResponseInvalidQuery
    | SplitTransformResponseInternalError
)


# --- Extension: data files hashed in the engine's tasks (fbs/engine_ext.fbs) ---------------------


@record
class HashDataFilesRequest:
    data_paths: tuple[str, ...]
    """Absolute paths the engine's executors read (at most ``MAX_HASHED_FILES``)."""


MAX_HASHED_FILES = 4096
"""Files per HashDataFiles call: the engine refuses more (a call is one Spark job, its answer
about 300 bytes per file)."""


@record
class DataFileColumn:
    name: str
    arrow_type: str
    """The Arrow type as pyarrow prints it."""


@record
class DataFileHashes:
    data_path: str
    error: str | None = None
    """Why the file could not be read at all (the other fields are then unset)."""
    size: int = 0
    physical_hash: str | None = None
    """As ``DataSlice.physicalHash`` (multibase multihash)."""
    logical_hash: str | None = None
    """``None`` when the records cannot be read."""
    num_records: int = 0
    columns: tuple[DataFileColumn, ...] | None = None
    unreadable: str | None = None
    """Why the bytes do not read as Parquet."""
    invalid_utf8: str | None = None
    exposed_slots: int = 0
    hashed_by: str | None = None
    """Where: ``executor <id>`` or ``driver``, and the host."""


@record
class HashDataFilesResponseSuccess:
    files: tuple[DataFileHashes, ...]
    """One per requested path, in request order."""
    tasks: int = 0


@record
class HashDataFilesResponseInvalidQuery:
    message: str


@record
class HashDataFilesResponseInternalError:
    message: str
    backtrace: str | None = None


HashDataFilesResponse = (
    HashDataFilesResponseSuccess
    | HashDataFilesResponseInvalidQuery
    | HashDataFilesResponseInternalError
)
