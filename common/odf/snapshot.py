"""DatasetSnapshot: how a dataset is described by a person, before it exists."""

from __future__ import annotations

from dataclasses import dataclass

from common.odf.events import MetadataEvent
from common.odf.fragments import DatasetKind


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetSnapshot:
    name: str
    """A DatasetAlias: ``name`` or ``account/name``."""
    kind: DatasetKind
    metadata: tuple[MetadataEvent, ...]
