"""Which Spark exceptions are the query's fault, and how to say so in one message.

Spark 4 tags its errors with an SQLSTATE. The classes below are about the query or its data,
so they become ``InvalidQueryError``; everything else (JVM crashes, I/O, internal assertions)
propagates unchanged and is reported as an internal error with its backtrace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import CapturedException

from engine_spark.errors import InvalidQueryError

USER_SQLSTATE_CLASSES = frozenset({"0A", "21", "22", "42", "54"})
"""SQLSTATE classes that are the query's fault: feature not supported, cardinality violation,
data exception (ANSI arithmetic, casts, datetime), syntax or access rule violation (unknown
table/column, type mismatch, parse errors), program limit exceeded (an array or string larger
than Spark allows: ``sequence(1, 1e10)``)."""
STACK_OVERFLOW = "java.lang.StackOverflowError"
STACK_OVERFLOW_MESSAGE = (
    "the query needs deeper recursion than the engine's stack allows (StackOverflowError): a"
    " regular expression that backtracks catastrophically on long values, or an expression"
    " nested too deeply; rewrite it (a simpler or possessive pattern, fewer nested calls)"
)

_PLAN_LINE = re.compile(r"^\s*('|[+:]-|==\s*(Parsed|Analyzed|Optimized|Physical))")
_MAX_MESSAGE_LINES = 12
_MAX_CAUSES = 20


def is_user_error(exc: BaseException) -> bool:
    """True when ``exc`` is a Spark error caused by the query or the data it reads."""
    if overflowed_the_stack(exc):
        return True
    if not isinstance(exc, CapturedException | PySparkException):
        return False
    state = _sql_state(exc)
    return state is not None and state[:2] in USER_SQLSTATE_CLASSES


def overflowed_the_stack(exc: BaseException) -> bool:
    """Whether a JVM ``StackOverflowError`` is among the causes of ``exc`` (the driver's, when
    Spark folds or analyses the query; a task's, wrapped in the job's failure)."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    for _ in range(_MAX_CAUSES):
        if java is None:
            return False
        try:
            if str(java.getClass().getName()) == STACK_OVERFLOW:
                return True
            # a job aborted by a task's error names it in its message (the cause may be gone)
            if STACK_OVERFLOW in str(java.getMessage()):
                return True
            java = java.getCause()
        except Exception:  # a Java object the gateway cannot reach any more
            return False
    return False


def user_message(exc: BaseException) -> str:
    """Spark's message without the logical plan dump that follows it."""
    if overflowed_the_stack(exc):
        return STACK_OVERFLOW_MESSAGE
    text = exc.getMessage() if isinstance(exc, CapturedException) else str(exc)
    lines: list[str] = []
    for line in str(text).strip().splitlines():
        if _PLAN_LINE.match(line) or line.startswith("JVM stacktrace"):
            break
        lines.append(line.rstrip())
    message = "\n".join(lines[:_MAX_MESSAGE_LINES]).strip()
    return message.rstrip(";").strip() or type(exc).__name__


@contextmanager
def query_errors(step: str | None = None, *, in_step: bool = True) -> Iterator[None]:
    """Turn user-caused Spark errors raised inside the block into ``InvalidQueryError``."""
    try:
        yield
    except InvalidQueryError:
        raise
    except Exception as exc:
        if is_user_error(exc):
            message = user_message(exc)
            raise InvalidQueryError(message, step=step, in_step=in_step) from exc
        raise


def _sql_state(exc: BaseException) -> str | None:
    getter = getattr(exc, "getSqlState", None)
    if getter is None:
        return None
    try:
        state = getter()
    except Exception:
        return None
    return str(state) if state else None
