"""Engine errors: the user's fault (InvalidQuery) versus ours (InternalError).

This module does not import pyspark: the servicer maps these classes to protocol responses
without a JVM. ``engine_spark.spark_errors`` turns Spark exceptions into them.
"""

from __future__ import annotations

from common.odf.errors import OdfError, ValidationError


class EngineError(OdfError):
    """Base of the errors raised on purpose by the engine."""


class InvalidQueryError(EngineError):
    """The query cannot run on the given inputs: syntax, names, types, ANSI failures, schema.

    Reported to the coordinator as ``InvalidQuery``; ``message`` names the problem and, when
    known, the query step (``step`` is the step's alias, or ``None`` for the output step).
    """

    def __init__(self, message: str, *, step: str | None = None, in_step: bool = False) -> None:
        self.reason = message
        self.step = step
        where = f"query step {step!r}" if step is not None else "output query"
        super().__init__(f"{where}: {message}" if in_step else message)


class EngineInternalError(EngineError):
    """The engine itself failed; reported as ``InternalError`` with the backtrace."""


class InputDataError(ValidationError):
    """An input file, schema file or checkpoint sent by the coordinator cannot be used.

    Not a query error: reported as ``InternalError`` naming the file.
    """
