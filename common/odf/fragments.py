"""ODF 0.35 fragments: the building blocks that metadata events are made of.

Field order follows the spec's JSON schemas (and ``fbs/odf.fbs``); serializers rely on it.
Unions are plain Python unions of their variant classes; ``common.odf.unions`` holds their
codes and tags.
"""

from __future__ import annotations

from dataclasses import field
from datetime import datetime
from enum import Enum

from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.odf.record import record

INT32 = {"fbs": "int32"}
"""Field metadata marking an ``int`` that is a FlatBuffers int32 rather than a uint64."""


class DatasetKind(Enum):
    ROOT = "Root"
    DERIVATIVE = "Derivative"


class SourceOrdering(Enum):
    BY_EVENT_TIME = "ByEventTime"
    BY_NAME = "ByName"


class CompressionFormat(Enum):
    GZIP = "Gzip"
    ZIP = "Zip"


class MqttQos(Enum):
    AT_MOST_ONCE = "AtMostOnce"
    AT_LEAST_ONCE = "AtLeastOnce"
    EXACTLY_ONCE = "ExactlyOnce"


# --- Data bookkeeping ------------------------------------------------------------------------


@record
class OffsetInterval:
    """A closed interval ``[start, end]`` of record offsets."""

    start: int
    end: int


@record
class DataSlice:
    logical_hash: Multihash
    physical_hash: Multihash
    offset_interval: OffsetInterval
    size: int


@record
class Checkpoint:
    physical_hash: Multihash
    size: int


@record
class SourceState:
    source_name: str
    kind: str
    value: str


@record
class Watermark:
    system_time: datetime
    event_time: datetime


@record
class DatasetVocabulary:
    offset_column: str = "offset"
    operation_type_column: str = "op"
    system_time_column: str = "system_time"
    event_time_column: str = "event_time"


@record
class ExecuteTransformInput:
    dataset_id: DatasetID
    prev_block_hash: Multihash | None = None
    new_block_hash: Multihash | None = None
    prev_offset: int | None = None
    new_offset: int | None = None


# --- Attachments -----------------------------------------------------------------------------


@record
class AttachmentEmbedded:
    path: str
    content: str


@record
class AttachmentsEmbedded:
    items: tuple[AttachmentEmbedded, ...]


Attachments = AttachmentsEmbedded


# --- Event time and caching --------------------------------------------------------------------


@record
class EventTimeSourceFromMetadata:
    pass


@record
class EventTimeSourceFromPath:
    pattern: str
    timestamp_format: str | None = None


@record
class EventTimeSourceFromSystemTime:
    pass


EventTimeSource = (
    EventTimeSourceFromMetadata | EventTimeSourceFromPath | EventTimeSourceFromSystemTime
)


@record
class SourceCachingForever:
    pass


SourceCaching = SourceCachingForever


# --- Fetch -------------------------------------------------------------------------------------


@record
class RequestHeader:
    name: str
    value: str


@record
class EnvVar:
    name: str
    value: str | None = None


@record
class MqttTopicSubscription:
    path: str
    qos: MqttQos | None = None


@record
class FetchStepUrl:
    url: str
    event_time: EventTimeSource | None = None
    cache: SourceCaching | None = None
    headers: tuple[RequestHeader, ...] | None = None


@record
class FetchStepFilesGlob:
    path: str
    event_time: EventTimeSource | None = None
    cache: SourceCaching | None = None
    order: SourceOrdering | None = None


@record
class FetchStepContainer:
    image: str
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None
    env: tuple[EnvVar, ...] | None = None


@record
class FetchStepMqtt:
    host: str
    port: int = field(metadata=INT32)
    username: str | None = None
    password: str | None = None
    topics: tuple[MqttTopicSubscription, ...]


FetchStep = FetchStepUrl | FetchStepFilesGlob | FetchStepContainer | FetchStepMqtt


# --- Prepare -----------------------------------------------------------------------------------


@record
class PrepStepDecompress:
    format: CompressionFormat
    sub_path: str | None = None


@record
class PrepStepPipe:
    command: tuple[str, ...]


PrepStep = PrepStepDecompress | PrepStepPipe


# --- Read --------------------------------------------------------------------------------------


@record
class ReadStepCsv:
    schema: tuple[str, ...] | None = None
    separator: str | None = None
    encoding: str | None = None
    quote: str | None = None
    escape: str | None = None
    header: bool | None = None
    infer_schema: bool | None = None
    null_value: str | None = None
    date_format: str | None = None
    timestamp_format: str | None = None


@record
class ReadStepGeoJson:
    schema: tuple[str, ...] | None = None


@record
class ReadStepEsriShapefile:
    schema: tuple[str, ...] | None = None
    sub_path: str | None = None


@record
class ReadStepParquet:
    schema: tuple[str, ...] | None = None


@record
class ReadStepJson:
    sub_path: str | None = None
    schema: tuple[str, ...] | None = None
    date_format: str | None = None
    encoding: str | None = None
    timestamp_format: str | None = None


@record
class ReadStepNdJson:
    schema: tuple[str, ...] | None = None
    date_format: str | None = None
    encoding: str | None = None
    timestamp_format: str | None = None


@record
class ReadStepNdGeoJson:
    schema: tuple[str, ...] | None = None


ReadStep = (
    ReadStepCsv
    | ReadStepGeoJson
    | ReadStepEsriShapefile
    | ReadStepParquet
    | ReadStepJson
    | ReadStepNdJson
    | ReadStepNdGeoJson
)


# --- Transform ---------------------------------------------------------------------------------


@record
class SqlQueryStep:
    alias: str | None = None
    query: str


@record
class TemporalTable:
    name: str
    primary_key: tuple[str, ...]


@record
class TransformSql:
    engine: str
    version: str | None = None
    query: str | None = None
    queries: tuple[SqlQueryStep, ...] | None = None
    temporal_tables: tuple[TemporalTable, ...] | None = None

    def steps(self) -> tuple[SqlQueryStep, ...]:
        """The query as a list of steps: ``query`` alone is one step with no alias."""
        if self.queries:
            return self.queries
        if self.query is not None:
            return (SqlQueryStep(query=self.query),)
        return ()


Transform = TransformSql


@record
class TransformInput:
    dataset_ref: str
    """A DatasetRef in its display form: ``did:odf:...``, ``name`` or ``account/name``."""
    alias: str | None = None


# --- Merge -------------------------------------------------------------------------------------


@record
class MergeStrategyAppend:
    pass


@record
class MergeStrategyLedger:
    primary_key: tuple[str, ...]


@record
class MergeStrategySnapshot:
    primary_key: tuple[str, ...]
    compare_columns: tuple[str, ...] | None = None


MergeStrategy = MergeStrategyAppend | MergeStrategyLedger | MergeStrategySnapshot
