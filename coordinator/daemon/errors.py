"""Errors of calls to the daemon, for its clients (gRPC and HTTP alike), and how the daemon
sorts the application's errors into the kinds each transport turns into a status code.

Light to import: a thin client raises these without loading gRPC."""

from __future__ import annotations

from enum import Enum

from common.odf.errors import NotFoundError, OdfError, ValidationError
from coordinator.engine.errors import EngineInvalidQueryError, EngineUnavailableError


class DaemonCallError(OdfError):
    """The daemon refused or failed a call; the message is the daemon's."""


class DaemonNotFoundError(DaemonCallError, NotFoundError):
    pass


class DaemonInvalidError(DaemonCallError):
    pass


class ErrorKind(Enum):
    """What went wrong in a call, as the client is told: each transport has a status for each."""

    NOT_FOUND = "not_found"
    INVALID = "invalid"
    UNAVAILABLE = "unavailable"
    FAILED = "failed"
    INTERNAL = "internal"


def kind_of(error: BaseException) -> ErrorKind:
    """The kind of an error raised by the application."""
    if isinstance(error, NotFoundError):
        return ErrorKind.NOT_FOUND
    if isinstance(error, ValidationError | EngineInvalidQueryError):
        return ErrorKind.INVALID
    if isinstance(error, EngineUnavailableError):
        return ErrorKind.UNAVAILABLE
    if isinstance(error, OdfError | OSError):
        return ErrorKind.FAILED
    return ErrorKind.INTERNAL


def message_of(error: BaseException) -> str:
    """One line naming what is wrong, as the in-process CLI prints it after ``error:``."""
    if isinstance(error, OSError) and not isinstance(error, OdfError):
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror or error}"
    text = " ".join(str(error).split()) if not isinstance(error, OdfError) else str(error)
    return text or type(error).__name__


def client_error(kind: ErrorKind | None, message: str) -> OdfError:
    """The error a client raises for a call the daemon answered with ``kind`` and ``message``
    (what the in-process command would have raised, as far as the CLI shows it)."""
    if kind is ErrorKind.NOT_FOUND:
        return DaemonNotFoundError(message)
    if kind is ErrorKind.INVALID:
        return DaemonInvalidError(message)
    return DaemonCallError(message)
