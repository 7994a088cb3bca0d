"""ODF 0.35 metadata events: what a MetadataBlock records."""

from __future__ import annotations

from datetime import datetime

from common.odf.fragments import (
    Attachments,
    Checkpoint,
    DatasetKind,
    DataSlice,
    ExecuteTransformInput,
    FetchStep,
    MergeStrategy,
    PrepStep,
    ReadStep,
    SourceState,
    Transform,
    TransformInput,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.odf.record import record


@record
class AddData:
    """Data has been ingested into a root dataset."""

    prev_checkpoint: Multihash | None = None
    prev_offset: int | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: datetime | None = None
    new_source_state: SourceState | None = None


@record
class ExecuteTransform:
    """A derivative dataset's query has been run over new input data."""

    query_inputs: tuple[ExecuteTransformInput, ...]
    prev_checkpoint: Multihash | None = None
    prev_offset: int | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: datetime | None = None


@record
class Seed:
    """Establishes the identity of a dataset; always the first block."""

    dataset_id: DatasetID
    dataset_kind: DatasetKind


@record
class SetPollingSource:
    fetch: FetchStep
    prepare: tuple[PrepStep, ...] | None = None
    read: ReadStep
    preprocess: Transform | None = None
    merge: MergeStrategy


@record
class SetTransform:
    inputs: tuple[TransformInput, ...]
    transform: Transform


@record
class SetVocab:
    offset_column: str | None = None
    operation_type_column: str | None = None
    system_time_column: str | None = None
    event_time_column: str | None = None


@record
class SetAttachments:
    attachments: Attachments


@record
class SetInfo:
    description: str | None = None
    keywords: tuple[str, ...] | None = None


@record
class SetLicense:
    short_name: str
    name: str
    spdx_id: str | None = None
    website_url: str


@record
class SetDataSchema:
    """The Arrow schema of the dataset's data, as the bytes of an Arrow IPC Schema flatbuffer."""

    schema: bytes


@record
class AddPushSource:
    source_name: str
    read: ReadStep
    preprocess: Transform | None = None
    merge: MergeStrategy


@record
class DisablePushSource:
    source_name: str


@record
class DisablePollingSource:
    pass


MetadataEvent = (
    AddData
    | ExecuteTransform
    | Seed
    | SetPollingSource
    | SetTransform
    | SetVocab
    | SetAttachments
    | SetInfo
    | SetLicense
    | SetDataSchema
    | AddPushSource
    | DisablePushSource
    | DisablePollingSource
)
