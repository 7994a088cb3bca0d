"""Errors raised by dataset storage and the metadata chain rules."""

from __future__ import annotations

from collections.abc import Sequence

from common.odf.errors import NotFoundError, OdfError, ValidationError
from common.odf.multihash import Multihash


class AppendValidationError(ValidationError):
    """A block would break a metadata chain rule; nothing was written.

    ``path`` names the offending event field (e.g. ``AddData.prevOffset``).
    """


class ConflictError(OdfError):
    """The dataset's head moved since the caller read it: another writer committed first.

    The caller's transaction was not committed and can be prepared again from the new head.
    """

    def __init__(
        self, dataset: str, *, expected: Multihash | None, actual: Multihash | None
    ) -> None:
        self.dataset = dataset
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"dataset {dataset!r} was modified concurrently: expected head {expected or '(none)'},"
            f" found {actual or '(none)'}; prepare the transaction again and retry"
        )


RefCASError = ConflictError
"""Alias: a failed compare-and-swap of ``refs/head`` is a conflict."""


class LockTimeoutError(OdfError):
    """Another process held the dataset's commit lock for too long."""


class StagedFileError(ValidationError):
    """A staged data or checkpoint file does not match the event that references it."""


class AlreadyExistsError(OdfError):
    """A dataset with this name or id is already in the workspace."""


class DatasetNotFoundError(NotFoundError):
    """No dataset in the workspace has this name or id."""

    def __init__(self, ref: str, known: Sequence[str] = ()) -> None:
        """``known``: the workspace's dataset names, to suggest the closest ones."""
        self.ref = ref
        super().__init__(f"dataset {ref!r} not found in the workspace{did_you_mean(ref, known)}")


def did_you_mean(wanted: str, known: Sequence[str]) -> str:
    """``"; did you mean 'weather'?"`` (or two choices) when a known name is close, else ""."""
    import difflib  # only on this error path

    by_key = {k.lower(): k for k in known}
    close = difflib.get_close_matches(wanted.lower(), list(by_key), n=2, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(by_key[c]) for c in close) + "?"


class CorruptDatasetError(OdfError):
    """The dataset's files on disk are inconsistent (e.g. ``refs/head`` names a missing block)."""
