"""Errors of engine provisioning and engine calls; all are ``OdfError`` (one line in the CLI)."""

from __future__ import annotations

from common.odf.errors import OdfError


class EngineError(OdfError):
    """An engine call failed: the engine crashed, broke the protocol or reported an error."""


class EngineInvalidQueryError(EngineError):
    """The engine rejected the query (``InvalidQuery``): the user's SQL is at fault."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"invalid query: {detail}")
        self.detail = detail
        """The engine's message alone."""


class EngineInternalError(EngineError):
    """The engine failed while running a request (``InternalError``)."""

    def __init__(self, message: str, *, backtrace: str | None = None) -> None:
        super().__init__(message)
        self.backtrace = backtrace


class EngineUnimplementedError(EngineError):
    """The engine does not implement the RPC (gRPC UNIMPLEMENTED): an older engine, or one
    without an extension of ours."""


class EngineContractError(EngineError):
    """The engine answered, but its output breaks the engine contract (files, intervals)."""


class EngineUnavailableError(OdfError):
    """No engine can be started or reached: runtime, image, address or process missing."""


class EngineVersionError(OdfError):
    """A dataset is pinned to an engine version that this provider cannot run."""
