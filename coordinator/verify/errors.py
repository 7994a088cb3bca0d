"""Errors of verification; all are ``OdfError`` (one line in the CLI)."""

from __future__ import annotations

from common.odf.errors import OdfError


class ReplayError(OdfError):
    """A recorded transaction cannot be run again (input, checkpoint or engine missing)."""


class VerificationFailed(OdfError):
    """Verification found problems; the report names each block and what differs."""
