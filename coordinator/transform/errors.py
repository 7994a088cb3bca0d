"""Errors of derivative transformations; all are ``OdfError`` (one line in the CLI)."""

from __future__ import annotations

from common.odf.errors import OdfError


class TransformError(OdfError):
    """A transformation cannot proceed."""


class TransformSetupError(TransformError):
    """The dataset or its inputs are not set up for transformation (no transform, no input)."""


class InputDivergedError(TransformError):
    """An input's chain no longer contains the blocks the dataset already processed."""


class InputDataMissingError(TransformError):
    """A data file an input's metadata names is not stored locally."""


class OutputSchemaError(TransformError):
    """The engine's output schema is not the dataset's schema plus added columns."""


class RecordedInputError(TransformError):
    """What a recorded transaction read from an input cannot be found again in its chain."""
