"""Which Spark exceptions are the query's fault, and how to say so in one message.

Spark 4 tags its errors with a condition (``[MULTIPLE_EVENT_TIME_COLUMNS]``) and an SQLSTATE,
both listed in ``error/error-conditions.json`` of the ``spark-common-utils`` jar. The one
table of what is the query's fault (``fault``):

* the conditions in ``QUERY_CONDITIONS`` are the query's whatever their SQLSTATE (the
  streaming analysis errors: two event-time columns under a stateful operator, a window
  function or an operator Spark cannot run incrementally, a stateful operator without a
  watermark, Spark's unsupported-operation check), each with the construct it names;
* the conditions in ``ENGINE_CONDITIONS`` (and ``..._PREFIXES``) are the engine's although
  their SQLSTATE class says otherwise (its streaming checkpoint and state store, which the
  query does not write);
* a condition in ``WRAPPER_CONDITIONS`` (a streaming query that failed, an error in the
  engine's own batch function) is whatever its cause is;
* any other condition is the query's when its SQLSTATE class is in
  ``USER_SQLSTATE_CLASSES`` (42: syntax and analysis, 22: data exceptions the query causes
  in ANSI mode, ...), and the engine's otherwise.

The query's faults become ``InvalidQueryError``; everything else (JVM crashes, I/O, internal
assertions) propagates unchanged and is reported as an internal error with its backtrace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import CapturedException

from engine_spark.errors import InvalidQueryError

USER_SQLSTATE_CLASSES = frozenset({"0A", "21", "22", "42", "54"})
"""SQLSTATE classes that are the query's fault: feature not supported, cardinality violation,
data exception (ANSI arithmetic, casts, datetime), syntax or access rule violation (unknown
table/column, type mismatch, parse errors), program limit exceeded (an array or string larger
than Spark allows: ``sequence(1, 1e10)``)."""
QUERY_CONDITIONS: Mapping[str, str] = {
    "MULTIPLE_EVENT_TIME_COLUMNS": (
        "a stateful operator (aggregation, DISTINCT, window, join) over rows with more than "
        "one event-time column (both sides' event time passed up from a join): select one "
        "side's event time below it, or only an expression of the other"
    ),
    "NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING": "a window function (OVER ...) over a stream",
    "UNSUPPORTED_STREAMING_OPERATOR_WITHOUT_WATERMARK": (
        "a stateful operator over rows without an event time bounded by a watermark (an "
        "input's event-time column, passed up unchanged)"
    ),
    "STREAMING_OUTPUT_MODE": "an operator that cannot be emitted incrementally",
    "CALL_ON_STREAMING_DATASET_UNSUPPORTED": "an operation on a stream",
    "NESTED_SEQUENTIAL_STREAMING_UNION": "a union of streams",
    "_LEGACY_ERROR_TEMP_3102": "an operator Spark cannot run incrementally over streams",
}
"""Conditions caused by the query whatever their SQLSTATE, with the construct each names."""

ENGINE_CONDITIONS = frozenset(
    {"ILLEGAL_STATE_STORE_VALUE", "STREAM_STREAM_JOIN_INCOMPATIBLE_STATE_STORE_CONFIGS"}
)
ENGINE_CONDITION_PREFIXES = (
    "STATE_STORE_",
    "STDS_",
    "STREAMING_CHECKPOINT_",
    "STREAMING_STATEFUL_OPERATOR_",
)
"""Conditions in a query's SQLSTATE class (42) that are the engine's (the names above, and
those starting with a prefix): its streaming checkpoint, state store and their settings,
which the query does not choose."""

WRAPPER_CONDITIONS = frozenset({"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR"})
"""Conditions that carry another error: the fault is their cause's."""

STACK_OVERFLOW = "java.lang.StackOverflowError"
STACK_OVERFLOW_MESSAGE = (
    "the query needs deeper recursion than the engine's stack allows (StackOverflowError): a"
    " regular expression that backtracks catastrophically on long values, or an expression"
    " nested too deeply; rewrite it (a simpler or possessive pattern, fewer nested calls)"
)

_PLAN_LINE = re.compile(r"^\s*('|[+:]-|==\s*(Parsed|Analyzed|Optimized|Physical))")
_MAX_MESSAGE_LINES = 12
_MAX_CAUSES = 20


@dataclass(frozen=True, slots=True)
class Fault:
    """A Spark error the query caused: the error itself (a wrapper's cause) and the
    construct to name, when the condition's own message does not."""

    error: BaseException
    construct: str | None = None


def fault(exc: BaseException) -> Fault | None:
    """The query's fault in ``exc`` (the table above), or None when it is the engine's."""
    if overflowed_the_stack(exc):
        return Fault(exc)
    for error in _causes(exc):
        condition = _condition(error)
        if condition in WRAPPER_CONDITIONS:
            continue
        if is_query_fault(condition, _sql_state(error)):
            return Fault(error, QUERY_CONDITIONS.get(condition or ""))
        return None
    return None


def is_query_fault(condition: str | None, state: str | None) -> bool:
    """One row of the table: whether an error of ``condition`` with SQLSTATE ``state`` is the
    query's fault (a wrapper's own row is not: its cause decides)."""
    if condition in QUERY_CONDITIONS:
        return True
    if condition in ENGINE_CONDITIONS or condition in WRAPPER_CONDITIONS:
        return False
    if condition is not None and condition.startswith(ENGINE_CONDITION_PREFIXES):
        return False
    return state is not None and state[:2] in USER_SQLSTATE_CLASSES


def is_user_error(exc: BaseException) -> bool:
    """True when ``exc`` is a Spark error caused by the query or the data it reads."""
    return fault(exc) is not None


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


def fault_message(found: Fault) -> str:
    """The fault's one message: the construct (when the table names one), then Spark's."""
    message = user_message(found.error)
    return f"{found.construct}: {message}" if found.construct else message


@contextmanager
def query_errors(step: str | None = None, *, in_step: bool = True) -> Iterator[None]:
    """Turn user-caused Spark errors raised inside the block into ``InvalidQueryError``."""
    try:
        yield
    except InvalidQueryError:
        raise
    except Exception as exc:
        found = fault(exc)
        if found is not None:
            raise InvalidQueryError(fault_message(found), step=step, in_step=in_step) from exc
        raise


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then the errors it carries (pyspark's converted causes), outermost first."""
    error: BaseException | None = exc
    for _ in range(_MAX_CAUSES):
        if error is None:
            return
        yield error
        error = getattr(error, "cause", None) or error.__cause__


def _condition(exc: BaseException) -> str | None:
    for name in ("getCondition", "getErrorClass"):
        getter = getattr(exc, name, None)
        if getter is None:
            continue
        try:
            condition = getter()
        except Exception:
            continue
        if condition:
            return str(condition)
    return None


def _sql_state(exc: BaseException) -> str | None:
    if not isinstance(exc, CapturedException | PySparkException):
        return None
    getter = getattr(exc, "getSqlState", None)
    if getter is None:
        return None
    try:
        state = getter()
    except Exception:
        return None
    return str(state) if state else None
