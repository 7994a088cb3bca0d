"""Errors of the ingestion pipeline, one family per phase.

Every message is one line that names where the problem is (file, line, column, field).
"""

from __future__ import annotations

from common.odf.errors import NotFoundError, OdfError, ValidationError


class ReadError(ValidationError):
    """Input data cannot be read: malformed record, wrong type for a column, bad option.

    ``path`` is ``file``, ``file:line`` or ``file:line: column 'x'``.
    """


class UnsupportedOptionError(ValidationError):
    """A read step option this implementation (like the reference) does not support."""


class SchemaError(ValidationError):
    """A DDL schema string cannot be parsed or names an unsupported type."""


class BadInputSchemaError(ValidationError):
    """The data read from the source has a schema the writer cannot accept."""


class MergeError(ValidationError):
    """The merge strategy cannot be applied (e.g. a primary-key column is missing)."""


class FetchError(OdfError):
    """Fetching from the polling source failed."""


class SourceNotFoundError(NotFoundError):
    """The source data (URL, file, glob) does not exist, or no ingest source is defined."""


class UnreachableError(FetchError):
    """The source could not be reached (connection failure, unexpected HTTP status)."""


class ProcessError(FetchError):
    """A fetch container or a prepare ``Pipe`` command exited with an error."""


class ParameterError(ValidationError):
    """A templated value or container environment variable is missing or malformed."""


class EventTimeError(ValidationError):
    """The event time cannot be extracted from the source metadata or path."""


class PreprocessError(OdfError):
    """The preprocess query failed, or no engine is configured to run it."""
