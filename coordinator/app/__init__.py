"""The coordinator's application layer: ``Application``, the one composition root.

The CLI (``coordinator.cli``) and the daemon call its use cases (add, list, delete, log, tail,
schema, ingest, pull, set-transform, verify, query); it calls the domain packages
(``transform``, ``ingest``, ``verify``, ``evolution``, ``query``), which call ``dataset`` and
``engine``. ``snapshots`` reads DatasetSnapshot files for ``add``; ``UseCases`` is what the
CLI asks of a workspace, in process (``Application``) or through its daemon.
"""

from coordinator.app.application import (
    AddedDataset,
    Application,
    DatasetSummary,
    DerivativeDone,
    IngestFile,
    PullEvent,
    PullFailed,
    PullStarted,
    ReplayProgress,
    RootPulled,
    TransactionCommitted,
)
from coordinator.app.snapshots import SnapshotSource, read_snapshots, snapshot_files
from coordinator.app.use_cases import UseCases

__all__ = [
    "AddedDataset",
    "Application",
    "DatasetSummary",
    "DerivativeDone",
    "IngestFile",
    "PullEvent",
    "PullFailed",
    "PullStarted",
    "ReplayProgress",
    "RootPulled",
    "SnapshotSource",
    "TransactionCommitted",
    "UseCases",
    "read_snapshots",
    "snapshot_files",
]
