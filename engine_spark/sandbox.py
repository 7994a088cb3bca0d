"""What a transform may not call: functions that break reproducibility or leave the sandbox.

A replayed transaction must give the same output (``kamu verify``), and a transform may only
read its inputs. These built-in functions are removed from every request's session; a query
that uses one gets an InvalidQuery saying why.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import SparkSession

_JAVA = "calls arbitrary Java methods"
_RANDOM = "is random"
_CLOCK = "depends on the wall clock"
_FILES = "depends on file paths"
_PARTITIONS = "depends on how Spark partitions the data"
_ENVIRONMENT = "depends on the environment"

BLOCKED_FUNCTIONS: dict[str, str] = {
    "reflect": _JAVA,
    "java_method": _JAVA,
    "try_reflect": _JAVA,
    "rand": _RANDOM,
    "random": _RANDOM,
    "randn": _RANDOM,
    "randstr": _RANDOM,
    "uniform": _RANDOM,
    "uuid": _RANDOM,
    "shuffle": _RANDOM,
    "current_timestamp": _CLOCK,
    "now": _CLOCK,
    "current_date": _CLOCK,
    "curdate": _CLOCK,
    "localtimestamp": _CLOCK,
    "current_time": _CLOCK,
    "input_file_name": _FILES,
    "input_file_block_start": _FILES,
    "input_file_block_length": _FILES,
    "spark_partition_id": _PARTITIONS,
    "monotonically_increasing_id": _PARTITIONS,
    "current_user": _ENVIRONMENT,
    "user": _ENVIRONMENT,
    "session_user": _ENVIRONMENT,
}

_UNRESOLVED = re.compile(r"UNRESOLVED_ROUTINE\].*?routine `([^`]+)`", re.DOTALL)


def restrict_functions(session: SparkSession) -> None:
    """Drop the blocked functions from ``session``'s function registry (a child session's)."""
    jsession: Any = session._jsparkSession
    jvm: Any = session.sparkContext._jvm
    registry = jsession.sessionState().functionRegistry()
    builtin, system = jvm.scala.Option.apply("builtin"), jvm.scala.Option.apply("system")
    for name in BLOCKED_FUNCTIONS:
        identifier = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(name, builtin, system)
        registry.dropFunction(identifier)


def blocked_function_message(spark_message: str) -> str | None:
    """A clear message when Spark could not resolve a function because it is blocked."""
    match = _UNRESOLVED.search(spark_message)
    if not match:
        return None
    name = match.group(1).rsplit(".", 1)[-1].lower()
    reason = BLOCKED_FUNCTIONS.get(name)
    if reason is None:
        return None
    return (
        f"function {name}() is not allowed in a transform: it {reason}, so replaying the "
        "transaction could give a different result or read outside the inputs"
    )
