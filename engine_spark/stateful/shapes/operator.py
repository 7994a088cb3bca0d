"""The operator a stateful shape rewrites: where it stands in the query's analyzed plan, and
the rows entering it once the rows a runner kept are put back under it."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from engine_spark.jvm_plan import analyzed, frame, path_to, query_nodes, single_operator


def operator_path(result: DataFrame, name: str) -> list[Any]:
    """The nodes from the root of ``result``'s analyzed plan down to its (first) ``name``
    operator, both included; the shape was recognised, so there is one."""
    root = analyzed(result)
    operator = next(n for n in query_nodes(root, frozenset()) if str(n.nodeName()) == name)
    path = path_to(root, operator)
    assert path is not None
    return path


def rows_entering(result: DataFrame, operator: Any, kept: str | None) -> DataFrame:
    """The rows entering ``operator`` (a node of ``result``'s plan) and those of the Parquet
    file ``kept`` (None: no rows kept), one frame."""
    session = result.sparkSession
    below = frame(session, operator.child())
    if kept is None:
        return below
    return below.unionByName(session.read.schema(below.schema).parquet(kept))


def recognised_path(
    result: DataFrame,
    inputs: frozenset[str],
    allowed: frozenset[str],
    name: str,
    above: frozenset[str],
) -> list[Any] | None:
    """The nodes from the root of ``result``'s analyzed plan down to its one ``name`` operator
    when every node down to the views ``inputs`` is one of ``allowed`` and has no subquery
    (``jvm_plan.single_operator``) and every node above the operator is one of ``above``; None
    otherwise."""
    root = analyzed(result)
    operator = single_operator(root, inputs, allowed, name)
    if operator is None:
        return None
    path = path_to(root, operator)
    assert path is not None
    if any(str(n.nodeName()) not in above for n in path[:-1]):
        return None
    return path
