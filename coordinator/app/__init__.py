"""The coordinator's application layer: ``Application``, the one composition root.

The CLI (``coordinator.cli``) and the daemon call its use cases (add, list, delete, log, tail,
schema, ingest, pull, set-transform, verify, query); it calls the domain packages
(``transform``, ``ingest``, ``verify``, ``evolution``, ``query``), which call ``dataset`` and
``engine``. ``snapshots`` reads DatasetSnapshot files for ``add``; ``listing`` summarizes a
dataset for ``list``; ``pull_events`` are what ``pull`` reports; ``UseCases`` is what the CLI
asks of a workspace, in process (``Application``) or through its daemon.

The names are imported when first used (PEP 562): ``odf list`` and ``odf log`` import only
the light modules they need, not the whole application (CLI start time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from coordinator.app.application import AddedDataset, Application, IngestFile, ReplayProgress
    from coordinator.app.listing import DatasetSummary
    from coordinator.app.pull_events import (
        DerivativeDone,
        PullEvent,
        PullFailed,
        PullStarted,
        RootPulled,
        TransactionCommitted,
    )
    from coordinator.app.snapshots import SnapshotSource, read_snapshots, snapshot_files
    from coordinator.app.use_cases import (
        IngestOptions,
        PullOptions,
        QueryOptions,
        TransformOptions,
        UseCases,
        VerifyOptions,
    )

_WHERE = {
    "AddedDataset": "application",
    "Application": "application",
    "DatasetSummary": "listing",
    "DerivativeDone": "pull_events",
    "IngestFile": "application",
    "IngestOptions": "use_cases",
    "PullEvent": "pull_events",
    "PullFailed": "pull_events",
    "PullOptions": "use_cases",
    "PullStarted": "pull_events",
    "QueryOptions": "use_cases",
    "ReplayProgress": "application",
    "RootPulled": "pull_events",
    "SnapshotSource": "snapshots",
    "TransactionCommitted": "pull_events",
    "TransformOptions": "use_cases",
    "UseCases": "use_cases",
    "VerifyOptions": "use_cases",
    "read_snapshots": "snapshots",
    "snapshot_files": "snapshots",
}

__all__ = [
    "AddedDataset",
    "Application",
    "DatasetSummary",
    "DerivativeDone",
    "IngestFile",
    "IngestOptions",
    "PullEvent",
    "PullFailed",
    "PullOptions",
    "PullStarted",
    "QueryOptions",
    "ReplayProgress",
    "RootPulled",
    "SnapshotSource",
    "TransactionCommitted",
    "TransformOptions",
    "UseCases",
    "VerifyOptions",
    "read_snapshots",
    "snapshot_files",
]


__getattr__ = lazy_exports(__name__, _WHERE, globals())
