"""Errors of sharing: a remote that cannot be reached or read, refused content, divergence."""

from __future__ import annotations

from common.odf.errors import OdfError, ValidationError
from common.odf.multihash import Multihash


class RemoteError(OdfError):
    """The remote dataset could not be read or written (missing, unreachable, refused)."""


class RejectedContentError(ValidationError):
    """Remote content failed validation; nothing of it was accepted."""


class DivergedError(OdfError):
    """Neither head descends from the other: the chains have diverged."""

    def __init__(
        self, what: str, *, local: Multihash | None, remote: Multihash | None, common: Multihash
    ) -> None:
        self.local = local
        self.remote = remote
        self.common = common
        super().__init__(
            f"{what}: the chains have diverged: local head {local or '(none)'}, remote head"
            f" {remote or '(none)'}, last common block {common}"
        )
