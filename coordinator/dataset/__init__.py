"""Dataset storage: the ODF dataset layout, the metadata chain and atomic commits.

Public API: ``Dataset`` (read blocks, ``state()``, ``commit``), ``DatasetState`` (the
summary the next transaction is prepared from), ``CommitItem`` and the errors in
``coordinator.dataset.errors``.
"""

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
