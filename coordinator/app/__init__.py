"""The coordinator's application layer: ``Application``, the one composition root.

The CLI (``coordinator.cli``) and the daemon call its use cases (add, list, delete, log, tail,
schema, ingest, pull, set-transform, verify, query); it calls the domain packages
(``transform``, ``ingest``, ``verify``, ``evolution``, ``query``), which call ``dataset`` and
``engine``. ``snapshots`` reads DatasetSnapshot files for ``add``.
"""

from coordinator.app.application import (
    Application,
    DatasetSummary,
    DerivativeDone,
    IngestFile,
    PullEvent,
    RootPulled,
    TransactionCommitted,
)
from coordinator.app.snapshots import SnapshotSource, read_snapshots, snapshot_files

__all__ = [
    "Application",
    "DatasetSummary",
    "DerivativeDone",
    "IngestFile",
    "PullEvent",
    "RootPulled",
    "SnapshotSource",
    "TransactionCommitted",
    "read_snapshots",
    "snapshot_files",
]
