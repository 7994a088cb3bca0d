"""Running a transform's SQL steps: each aliased step becomes a temp view, one step is output.

Steps run in the order given; the single step without an alias is the output (kamu normalizes
``query`` into ``queries = [{query}]``). Only queries are accepted: DDL, DML and other commands
(``CREATE``, ``INSERT``, ``SET``, ``CACHE``...) are rejected before they run, and SQL on raw
files (``SELECT * FROM parquet.`/path```) is disabled, so a transform can only read its inputs.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from common.odf.fragments import SqlQueryStep, TransformSql
from engine_spark.errors import InvalidQueryError
from engine_spark.inputs import register_view
from engine_spark.spark_errors import query_errors

_COMMAND_TRAIT = "org.apache.spark.sql.catalyst.plans.logical.Command"


def output_step(transform: TransformSql) -> SqlQueryStep:
    """The step without an alias; InvalidQuery unless there is exactly one."""
    steps = transform.steps()
    if not steps:
        raise InvalidQueryError("the transform has no query")
    outputs = [s for s in steps if s.alias is None]
    if len(outputs) != 1:
        raise InvalidQueryError(
            f"exactly one query step must have no alias (it is the output); found {len(outputs)}"
        )
    aliases = [s.alias for s in steps if s.alias is not None]
    duplicates = sorted({a for a in aliases if aliases.count(a) > 1})
    if duplicates:
        raise InvalidQueryError(f"query step alias {duplicates[0]!r} is used more than once")
    return outputs[0]


def run_steps(session: SparkSession, transform: TransformSql) -> DataFrame:
    """Register every aliased step as a view and return the output step's DataFrame."""
    output = output_step(transform)
    for step in transform.steps():
        if step.alias is not None:
            register_view(run_sql(session, step.query, step.alias), step.alias)
    return run_sql(session, output.query, None)


def run_sql(session: SparkSession, query: str, alias: str | None) -> DataFrame:
    """Analyze one query step (Spark analyzes eagerly, so name and type errors surface here)."""
    with query_errors(alias):
        _ensure_query(session, query, alias)
        return session.sql(query)


def _ensure_query(session: SparkSession, query: str, alias: str | None) -> None:
    jsession: Any = session._jsparkSession
    plan = jsession.sessionState().sqlParser().parsePlan(query)
    name = str(plan.getClass().getSimpleName())
    command = session.sparkContext._jvm.java.lang.Class.forName(_COMMAND_TRAIT)  # type: ignore[union-attr]
    if command.isInstance(plan) or name.endswith(("Command", "Statement")):
        raise InvalidQueryError(
            f"only queries (SELECT ...) are allowed, found a {name} statement",
            step=alias,
            in_step=True,
        )
