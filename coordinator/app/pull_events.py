"""What ``pull`` reports, event by event: the application's values, shared with the daemon's
client (which builds them from the daemon's messages without importing the application)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.odf.events import ExecuteTransform
from common.odf.multihash import Multihash

if TYPE_CHECKING:
    from coordinator.ingest.context import IngestResult
    from coordinator.transform.transaction import TransactionResult


@dataclass(frozen=True, slots=True)
class RootPulled:
    """A root dataset's polling source committed (or found nothing new)."""

    dataset: str
    result: IngestResult


@dataclass(frozen=True, slots=True)
class TransactionCommitted:
    """A derivative dataset committed one transaction: its ``ExecuteTransform`` at ``head``."""

    dataset: str
    head: Multihash
    event: ExecuteTransform
    input_records: int
    output_records: int

    @classmethod
    def of(cls, dataset: str, result: TransactionResult) -> TransactionCommitted:
        return cls(dataset, result.head, result.event, result.input_records, result.output_records)


@dataclass(frozen=True, slots=True)
class DerivativeDone:
    """A dataset has nothing more to do here, and why (``up to date``, waiting, a clone...)."""

    dataset: str
    reason: str


@dataclass(frozen=True, slots=True)
class PullFailed:
    """A dataset could not be pulled (``error``), or was skipped because an input of it
    failed (``skipped``: that input's name); the pull goes on with the others."""

    dataset: str
    error: str
    skipped: str | None = None


@dataclass(frozen=True, slots=True)
class PullStarted:
    """The pull of a dataset begins (for progress displays)."""

    dataset: str


PullEvent = RootPulled | TransactionCommitted | DerivativeDone | PullFailed | PullStarted
