"""ODF 0.35 metadata events: what a MetadataBlock records."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True, kw_only=True)
class AddData:
    """Data has been ingested into a root dataset."""

    prev_checkpoint: Multihash | None = None
    prev_offset: int | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: datetime | None = None
    new_source_state: SourceState | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteTransform:
    """A derivative dataset's query has been run over new input data."""

    query_inputs: tuple[ExecuteTransformInput, ...]
    prev_checkpoint: Multihash | None = None
    prev_offset: int | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Seed:
    """Establishes the identity of a dataset; always the first block."""

    dataset_id: DatasetID
    dataset_kind: DatasetKind


@dataclass(frozen=True, slots=True, kw_only=True)
class SetPollingSource:
    fetch: FetchStep
    prepare: tuple[PrepStep, ...] | None = None
    read: ReadStep
    preprocess: Transform | None = None
    merge: MergeStrategy


@dataclass(frozen=True, slots=True, kw_only=True)
class SetTransform:
    inputs: tuple[TransformInput, ...]
    transform: Transform


@dataclass(frozen=True, slots=True, kw_only=True)
class SetVocab:
    offset_column: str | None = None
    operation_type_column: str | None = None
    system_time_column: str | None = None
    event_time_column: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetAttachments:
    attachments: Attachments


@dataclass(frozen=True, slots=True, kw_only=True)
class SetInfo:
    description: str | None = None
    keywords: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetLicense:
    short_name: str
    name: str
    spdx_id: str | None = None
    website_url: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SetDataSchema:
    """The Arrow schema of the dataset's data, as the bytes of an Arrow IPC Schema flatbuffer."""

    schema: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPushSource:
    source_name: str
    read: ReadStep
    preprocess: Transform | None = None
    merge: MergeStrategy


@dataclass(frozen=True, slots=True, kw_only=True)
class DisablePushSource:
    source_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
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
