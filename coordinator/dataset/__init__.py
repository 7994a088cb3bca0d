"""Dataset storage: the ODF dataset layout, the metadata chain and atomic commits.

Public API: ``Dataset`` (read blocks, ``state()``, ``commit``), ``DatasetState`` (the
summary the next transaction is prepared from), ``CommitItem`` and the errors in
``coordinator.dataset.errors``.

The names are imported when first used (PEP 562): a light module of this package (``layout``,
``listing``) is then importable without the FlatBuffers model (CLI start time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from coordinator.dataset.commit import CommitItem
    from coordinator.dataset.dataset import Dataset
    from coordinator.dataset.errors import (
        AlreadyExistsError,
        AppendValidationError,
        ConflictError,
        CorruptDatasetError,
        DatasetNotFoundError,
        LockTimeoutError,
        RefCASError,
        StagedFileError,
    )
    from coordinator.dataset.layout import DatasetLayout
    from coordinator.dataset.state import DatasetState

_WHERE = {
    "AlreadyExistsError": "errors",
    "AppendValidationError": "errors",
    "CommitItem": "commit",
    "ConflictError": "errors",
    "CorruptDatasetError": "errors",
    "Dataset": "dataset",
    "DatasetLayout": "layout",
    "DatasetNotFoundError": "errors",
    "DatasetState": "state",
    "LockTimeoutError": "errors",
    "RefCASError": "errors",
    "StagedFileError": "errors",
}

__all__ = [
    "AlreadyExistsError",
    "AppendValidationError",
    "CommitItem",
    "ConflictError",
    "CorruptDatasetError",
    "Dataset",
    "DatasetLayout",
    "DatasetNotFoundError",
    "DatasetState",
    "LockTimeoutError",
    "RefCASError",
    "StagedFileError",
]


__getattr__ = lazy_exports(__name__, _WHERE, globals())
