"""Deterministic row order of a query result, so a replayed transaction hashes the same.

Inputs enter Spark in offset order (one partition per file, files oldest first, unions in
input order). A plan made only of row-wise operators (projection, filter, union, explode, ...)
keeps that order through ``collect``: the output is in input order (a local sort within a
partition is deterministic too). A plan that shuffles
(aggregation, join, window, distinct, ...) has no defined order, so the engine sorts the rows
by value: ``event_time``, then every other sortable column in result order, then ``op``. When
the query itself ends in ``ORDER BY``, Spark's order is kept.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from enum import Enum
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

ORDER_PRESERVING_NODES = frozenset(
    {
        "Project",
        "Filter",
        "Union",
        "SubqueryAlias",
        "View",
        "Generate",
        "LocalRelation",
        "LogicalRDD",
        "MapInArrow",
        "Relation",
        "LogicalRelation",
        "OneRowRelation",
        "Range",
        "ResolvedHint",
        "Expand",
    }
)
"""Logical plan nodes that emit rows in the order their children produce them. Also order
preserving: a local ``Sort`` (``SORT BY``, and how a multi-file input is put in offset order)
and a ``Repartition`` without shuffle (``coalesce``). ``MapInArrow`` is an Arrow IPC input
read in place (``arrow_scan.py``): each partition's rows in file order; a query cannot make
one."""


class RowOrder(Enum):
    INPUT = "input"
    """Row-wise plan: rows in input order."""
    QUERY = "query"
    """The query ends in ORDER BY: Spark's order."""
    VALUES = "values"
    """Anything else: the engine sorts rows by value."""


def result_order(df: DataFrame) -> RowOrder:
    """How the rows of ``df`` are ordered, from its optimized logical plan."""
    plan = df._jdf.queryExecution().optimizedPlan()
    return classify_plan(_PlanNode(plan))


def analyzed_order(df: DataFrame) -> RowOrder:
    """``result_order`` from the analyzed plan: for a plan analyzed over empty inputs (Spark
    Connect, ``connect.py``), whose optimized plan may be folded into an empty relation."""
    return classify_plan(_PlanNode(df._jdf.queryExecution().analyzed()))


def is_row_wise(df: DataFrame) -> bool:
    """Whether ``df``'s analyzed plan is made of row-wise operators only (before the
    optimizer folds anything away, e.g. a join with an empty input)."""
    plan = df._jdf.queryExecution().analyzed()
    return _all_order_preserving(_PlanNode(plan))


class _PlanNode:
    """The things ``classify_plan`` needs from a JVM plan node, each fetched once (every
    read is a py4j round trip)."""

    def __init__(self, jnode: Any) -> None:
        self._jnode = jnode

    @functools.cached_property
    def name(self) -> str:
        return str(self._jnode.nodeName())

    @property
    def is_global_sort(self) -> bool:
        # Scala's ``Sort.global`` (a Python keyword, hence getattr).
        return self.name == "Sort" and bool(getattr(self._jnode, "global")())

    @property
    def preserves_order(self) -> bool:
        if self.name == "Sort":
            return not self.is_global_sort
        if self.name == "Repartition":
            return not bool(self._jnode.shuffle())
        return self.name in ORDER_PRESERVING_NODES

    @functools.cached_property
    def children(self) -> list[_PlanNode]:
        seq = self._jnode.children()
        return [_PlanNode(seq.apply(i)) for i in range(seq.size())]


def classify_plan(root: Any) -> RowOrder:
    """``root`` has ``name``, ``is_global_sort``, ``preserves_order`` and ``children``."""
    node = root
    while node.preserves_order and len(node.children) == 1:
        node = node.children[0]
    if node.is_global_sort:
        return RowOrder.QUERY
    return RowOrder.INPUT if _all_order_preserving(node) else RowOrder.VALUES


def _all_order_preserving(node: Any) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if not current.preserves_order:
            return False
        stack.extend(current.children)
    return True


def sort_by_values(table: pa.Table, leading: Sequence[str], trailing: Sequence[str]) -> pa.Table:
    """Rows sorted by ``leading`` columns, then the other sortable columns, then ``trailing``.

    Nested and null-typed columns cannot be compared and are left out of the key; rows that
    differ only there keep their relative order (the sort is stable).
    """
    middle = [n for n in table.column_names if n not in leading and n not in trailing]
    keys = [
        (name, "ascending")
        for name in (*leading, *middle, *trailing)
        if sortable(table.schema.field(name).type)
    ]
    if not keys or table.num_rows < 2:
        return table
    return table.sort_by(keys)


def sortable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_null(t) or pa.types.is_dictionary(t))
