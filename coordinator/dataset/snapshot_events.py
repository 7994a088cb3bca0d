"""From a DatasetSnapshot to the events a new dataset's chain starts with (after its Seed).

Pure: resolving names of input datasets is the caller's (``resolve``). As the reference
coordinator does when it creates a dataset, transforms are normalized (``query`` becomes a
one-step ``queries``) and transform inputs are resolved to ``did:odf`` ids with an alias
(the input's name unless given), so the chain rules can check them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from common.odf.errors import OdfError, ValidationError
from common.odf.events import (
    AddData,
    AddPushSource,
    ExecuteTransform,
    MetadataEvent,
    Seed,
    SetPollingSource,
    SetTransform,
)
from common.odf.fragments import DatasetKind, SqlQueryStep, TransformSql
from common.odf.identity import DatasetID
from common.odf.snapshot import DatasetSnapshot
from coordinator.dataset.commit import build_blocks
from coordinator.dataset.state import DatasetState

Resolver = Callable[[str], tuple[DatasetID, str]]
"""A dataset reference -> (its id, its name); raises an ``OdfError`` for unknown ones."""

_NOT_IN_SNAPSHOTS = (Seed, AddData, ExecuteTransform)


def normalize_transform(transform: TransformSql) -> TransformSql:
    """``query: q`` becomes ``queries: [{query: q}]``; other transforms are unchanged."""
    if transform.query is None:
        return transform
    if transform.queries:
        raise ValidationError("has both query and queries; use one of them", path="transform")
    return replace(transform, query=None, queries=(SqlQueryStep(query=transform.query),))


def snapshot_events(snapshot: DatasetSnapshot, resolve: Resolver) -> tuple[MetadataEvent, ...]:
    """The snapshot's events, checked, normalized and with inputs resolved."""
    out = []
    for i, event in enumerate(snapshot.metadata):
        where = f"metadata[{i}]"
        if isinstance(event, _NOT_IN_SNAPSHOTS):
            raise ValidationError(
                f"{type(event).__name__} events cannot appear in a DatasetSnapshot", path=where
            )
        try:
            out.append(_prepare(snapshot.kind, event, resolve))
        except ValidationError as e:
            raise e.at(where) from None
    return tuple(out)


def _prepare(kind: DatasetKind, event: MetadataEvent, resolve: Resolver) -> MetadataEvent:
    match event:
        case SetTransform():
            if kind is not DatasetKind.DERIVATIVE:
                raise ValidationError("a Root dataset cannot have a SetTransform event")
            return _prepare_set_transform(event, resolve)
        case SetPollingSource() | AddPushSource():
            if kind is not DatasetKind.ROOT:
                raise ValidationError(
                    f"a Derivative dataset cannot have a {type(event).__name__} event"
                )
            if event.preprocess is None:
                return event
            try:
                return replace(event, preprocess=normalize_transform(event.preprocess))
            except ValidationError as e:
                raise e.at("preprocess") from None
    return event


def _prepare_set_transform(event: SetTransform, resolve: Resolver) -> SetTransform:
    inputs = []
    for i, entry in enumerate(event.inputs):
        try:
            dataset_id, name = resolve(entry.dataset_ref)
        except OdfError as e:
            reason = e.reason if isinstance(e, ValidationError) else str(e)
            raise ValidationError(reason, path=f"inputs[{i}].datasetRef") from None
        inputs.append(replace(entry, dataset_ref=dataset_id.to_did(), alias=entry.alias or name))
    try:
        transform = normalize_transform(event.transform)
    except ValidationError as e:
        raise e.at("transform") from None
    return replace(event, inputs=tuple(inputs), transform=transform)


def check_snapshot_chain(
    seed: Seed, events: Sequence[MetadataEvent], system_time: datetime
) -> None:
    """Check the chain rules for a new chain ``seed, *events``; errors name ``metadata[i]``."""
    state = DatasetState()
    for i, event in enumerate((seed, *events)):
        try:
            _, state = build_blocks(state, [event], system_time)
        except ValidationError as e:
            raise ValidationError(e.reason, path=f"metadata[{i - 1}] ({e.path})") from None
