"""The error hierarchy shared by every package.

Each error carries structured attributes and builds its one-line message from them,
so that the CLI and the engine can show it as-is.
"""

from __future__ import annotations


class OdfError(Exception):
    """Base of every error raised on purpose by this project."""


class ValidationError(OdfError):
    """Input (a file, a string, a field) does not follow the spec.

    ``path`` names where the problem is: a field path such as ``metadata[2].read.separator``,
    a file name, or ``file:line:column``.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.reason = message
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)

    def at(self, prefix: str) -> ValidationError:
        """The same error with its path nested under ``prefix``."""
        if not prefix:
            return self
        if self.path is None:
            path = prefix
        elif self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}"
        return type(self)(self.reason, path=path)


class DecodeError(ValidationError):
    """Bytes that should hold an ODF object (FlatBuffers, multibase, ...) are malformed."""


class UnsupportedVersionError(ValidationError):
    """A manifest or block carries a version we cannot read."""


class NotFoundError(OdfError):
    """A dataset, block, reference or file does not exist."""
