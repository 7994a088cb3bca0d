"""Event-time temporal (as-of) joins: recognizing the query form in Spark's analyzed plan.

A stream joined with a versioned input (one of the transform's temporal tables) as of each
stream row's event time is written as a lateral subquery that picks the newest version:

    SELECT t.event_time, t.symbol, t.qty, p.price
    FROM tickers AS t
    [LEFT] JOIN LATERAL (
        SELECT p.* FROM prices AS p
        WHERE p.symbol = t.symbol AND p.event_time <= t.event_time
        ORDER BY p.event_time DESC, p.offset DESC
        LIMIT 1
    ) AS p [ON true]

Spark runs this as a plain batch query, and over all records it is exactly the as-of join:
for each stream row, the version of its key with the newest event time at or before the
row's (ties: the newest offset). Flink's ``FOR SYSTEM_TIME AS OF t.event_time`` does not
parse in Spark (a time-travel timestamp cannot refer to columns). The engine runs the same
query over the stream rows the versioned input's watermark has released and the versions
they can still need (``state.py``), so N transactions give what one gives.

The form is checked strictly, because a look-alike would need other state: the subquery's
filter is exactly an equality per primary key column (``p.k = <expression of the stream
row>``) plus ``p.event_time <= t.event_time`` with the stream's own event time; it orders
by ``event_time DESC, offset DESC`` of the versioned input, columns it selects (``p.*``:
Spark 4 loses the order of a ``LIMIT`` whose ``ORDER BY`` columns are projected away), and
takes one row; above the
lateral join there are only projections and filters, and the output's ``event_time`` is the
stream's. A lateral subquery over a temporal table in any other form is InvalidQuery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

from common.odf.fragments import DatasetVocabulary, TemporalTable
from engine_spark.errors import InvalidQueryError
from engine_spark.jvm_plan import (
    analyzed,
    child,
    conjuncts,
    expr_id,
    query_nodes,
    same_node,
    seq,
    unalias,
    view_name,
)

FORM = (
    "write an as-of join as `[LEFT] JOIN LATERAL (SELECT p.* FROM <table> AS p WHERE "
    "p.<key> = t.<column> [AND ...one per primary key column] AND p.event_time <= "
    "t.event_time ORDER BY p.event_time DESC, p.offset DESC LIMIT 1) [ON true]`, with only "
    "projections and filters above it"
)
_ABOVE = frozenset({"Project", "Filter", "SubqueryAlias"})
_STREAM_SIDE = frozenset({"Project", "Filter", "SubqueryAlias", "View"})
_SUBQUERY = frozenset({"SubqueryAlias", "GlobalLimit", "LocalLimit", "Project", "Sort", "Filter"})
_JOIN_TYPES = {"Inner": "inner", "LeftOuter": "left"}


@dataclass(frozen=True, slots=True)
class AsOfJoin:
    """The query's as-of join: the stream's and the versioned input's aliases, the
    versioned input's primary key and the join type (``inner`` or ``left``)."""

    stream: str
    versioned: str
    primary_key: tuple[str, ...]
    join_type: str


def as_of_join(
    result: DataFrame,
    streams: frozenset[str],
    tables: Mapping[str, TemporalTable],
    vocab: DatasetVocabulary,
) -> AsOfJoin | None:
    """The query's as-of join; None when no lateral subquery reads a temporal table;
    InvalidQuery when one does but not in the form above (``FORM``)."""
    root = analyzed(result)
    views = streams | frozenset(tables)
    laterals = [
        n
        for n in query_nodes(root, views)
        if str(n.nodeName()) == "LateralJoin" and _reads(n.right().plan(), frozenset(tables))
    ]
    if not laterals:
        return None
    if len(laterals) != 1:
        raise _refused("one as-of join per query")
    return _Recognizer(root, laterals[0], streams, tables, vocab).recognize()


def _refused(what: str) -> InvalidQueryError:
    return InvalidQueryError(
        f"a lateral subquery over a temporal table is an event-time as-of join, and it needs "
        f"{what}: {FORM}"
    )


@dataclass(frozen=True, slots=True)
class _Recognizer:
    root: Any
    lateral: Any
    streams: frozenset[str]
    tables: Mapping[str, TemporalTable]
    vocab: DatasetVocabulary

    def recognize(self) -> AsOfJoin:
        join_type = _JOIN_TYPES.get(str(self.lateral.joinType()))
        if join_type is None or not _true_or_none(self.lateral.condition()):
            raise _refused("an inner join, or a left join `ON true`")
        self._check_above()
        stream = self._stream_view()
        versioned, filters, orders = self._subquery()
        table = self.tables[view_name(versioned)]
        stream_time = _column(stream, self.vocab.event_time_column)
        self._check_orders(orders, versioned)
        self._check_filters(filters, versioned, stream_time, table)
        self._check_output_time(stream_time)
        return AsOfJoin(view_name(stream), view_name(versioned), table.primary_key, join_type)

    def _check_above(self) -> None:
        node = self.root
        while not same_node(node, self.lateral):
            if str(node.nodeName()) not in _ABOVE or node.children().size() != 1:
                raise _refused(f"only projections and filters above it (found {node.nodeName()})")
            if node.subqueries().size() > 0:
                raise _refused("no subqueries above it")
            node = child(node, 0)

    def _stream_view(self) -> Any:
        node = self.lateral.left()
        while str(node.nodeName()) != "View":
            if str(node.nodeName()) not in _STREAM_SIDE or node.children().size() != 1:
                raise _refused(f"one stream input on its left side (found {node.nodeName()})")
            node = child(node, 0)
        if view_name(node) not in self.streams:
            raise _refused(f"a stream input on its left side, not {view_name(node)!r}")
        return node

    def _subquery(self) -> tuple[Any, list[Any], list[Any]]:
        """The versioned input's view, the filter conjuncts and the sort orders."""
        node = self.lateral.right().plan()
        filters: list[Any] = []
        orders: list[Any] = []
        limits = 0
        while str(node.nodeName()) != "View":
            kind = str(node.nodeName())
            if kind not in _SUBQUERY or node.children().size() != 1:
                raise _refused(f"a subquery of one temporal table (found {kind})")
            if kind in ("GlobalLimit", "LocalLimit"):
                if str(node.limitExpr().toString()) != "1":
                    raise _refused("LIMIT 1")
                if kind == "LocalLimit" and str(child(node, 0).nodeName()) != "Sort":
                    # Spark 4 decorrelates a LIMIT whose ORDER BY is not right below it into
                    # a row_number() without order: any version could be picked.
                    raise _refused(
                        "the ORDER BY columns among the subquery's columns "
                        "(`SELECT p.*`, or select p.event_time and p.offset)"
                    )
                limits += 1
            elif kind == "Sort":
                if orders:
                    raise _refused("one ORDER BY")
                orders = list(seq(node.order()))
            elif kind == "Filter":
                filters.extend(conjuncts(node.condition()))
            node = child(node, 0)
        if view_name(node) not in self.tables:
            raise _refused(f"a temporal table in the subquery, not {view_name(node)!r}")
        if limits == 0:
            raise _refused("LIMIT 1")
        return node, filters, orders

    def _check_orders(self, orders: list[Any], versioned: Any) -> None:
        wanted = [self.vocab.event_time_column, self.vocab.offset_column]
        found = [
            _column_name(o.child(), versioned) for o in orders if str(o.direction().sql()) == "DESC"
        ]
        if len(orders) != 2 or found != wanted:
            raise _refused("ORDER BY p.event_time DESC, p.offset DESC (the newest version)")

    def _check_filters(
        self, filters: list[Any], versioned: Any, stream_time: Any, table: TemporalTable
    ) -> None:
        event_time = self.vocab.event_time_column
        keys: list[str] = []
        times = 0
        for condition in filters:
            kind = str(condition.nodeName())
            left, right = condition.left(), condition.right()
            if kind == "GreaterThanOrEqual":
                kind, left, right = "LessThanOrEqual", right, left
            if kind == "LessThanOrEqual" and _column_name(left, versioned) == event_time:
                if not _outer_is(right, stream_time):
                    raise _refused(f"p.{event_time} <= t.{event_time} (the stream's event time)")
                times += 1
                continue
            if kind == "EqualTo":
                if not _has_outer(left):
                    left, right = right, left
                name = _column_name(right, versioned)
                if name is not None and _has_outer(left) and not _has_outer(right):
                    keys.append(name)
                    continue
            raise _refused(
                f"only equalities on the primary key {list(table.primary_key)} and the "
                f"event-time condition in its WHERE (found {condition.sql()})"
            )
        if times != 1:
            raise _refused(f"p.{event_time} <= t.{event_time} in its WHERE")
        if sorted(keys) != sorted(table.primary_key):
            raise _refused(
                f"one equality per primary key column {list(table.primary_key)} of "
                f"{table.name!r} (found {sorted(keys)})"
            )

    def _check_output_time(self, stream_time: Any) -> None:
        name = self.vocab.event_time_column
        for expression in _output_expressions(self.root):
            if str(expression.name()).lower() != name.lower():
                continue
            column = unalias(expression)
            if str(column.nodeName()) == "AttributeReference" and _same_id(column, stream_time):
                return
        raise _refused(f"the stream's {name} as the output's {name}")


def _reads(plan: Any, tables: frozenset[str]) -> bool:
    return any(
        str(n.nodeName()) == "View" and view_name(n) in tables for n in query_nodes(plan, tables)
    )


def _true_or_none(condition: Any) -> bool:
    return not bool(condition.isDefined()) or str(condition.get().sql()).lower() == "true"


def _column(view: Any, name: str) -> Any:
    for attribute in seq(view.output()):
        if str(attribute.name()) == name:
            return attribute
    raise _refused(f"column {name!r} in {view_name(view)!r}")


def _column_name(expression: Any, view: Any) -> str | None:
    """The name of the ``view`` column ``expression`` is (an attribute of its output)."""
    if str(expression.nodeName()) != "AttributeReference":
        return None
    for attribute in seq(view.output()):
        if _same_id(attribute, expression):
            return str(attribute.name())
    return None


def _same_id(a: Any, b: Any) -> bool:
    return bool(expr_id(a) == expr_id(b))


def _outer_is(expression: Any, attribute: Any) -> bool:
    return str(expression.nodeName()) == "OuterReference" and _same_id(expression.e(), attribute)


def _has_outer(expression: Any) -> bool:
    if str(expression.nodeName()) == "OuterReference":
        return True
    return any(_has_outer(c) for c in seq(expression.children()))


def _output_expressions(root: Any) -> list[Any]:
    if str(root.nodeName()) == "Project":
        return list(seq(root.projectList()))
    return list(seq(root.output()))
