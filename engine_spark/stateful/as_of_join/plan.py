"""Running a recognized as-of join (``join.py``) as an equi-join plus a ranking.

Spark decorrelates the lateral subquery into a product of the distinct stream event times
with the versions, then a ranked window per (key, time): quadratic in the records. The form
is recognized strictly, so its meaning is known: for each stream row, the version of its key
with the newest event time at or before the row's (ties: the newest offset); with a left
join, a row without one gets nulls. This module computes exactly that (the stream rows with
a row id, joined to the versions on the key equality and ``v.event_time <= t.event_time``,
``row_number() OVER (PARTITION BY row id ORDER BY v.event_time DESC, v.offset DESC) = 1``)
and puts it in place of the ``LateralJoin`` in the analyzed plan, with the same output
attributes, so the user's projections and filters above it run unchanged over the matched
rows. A form this cannot express (a key compared with an expression of the stream row, a
subquery that computes columns, duplicate column names) keeps Spark's plan.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from common.odf.fragments import DatasetVocabulary
from engine_spark.jvm_plan import (
    analyzed,
    child,
    conjuncts,
    expr_id,
    frame,
    path_to,
    query_nodes,
    replace_on_path,
    seq,
    view_name,
)

_ROW_ID = "__odf_asof_row"
_RANK = "__odf_asof_rank"


def equi_join_plan(
    session: SparkSession,
    result: DataFrame,
    views: frozenset[str],
    versioned: str,
    vocab: DatasetVocabulary,
) -> DataFrame | None:
    """``result`` with its (recognized) lateral as-of join over ``versioned`` run as an
    equi-join and a ranking; None when the form is beyond that rewrite."""
    root = analyzed(result)
    laterals = [n for n in query_nodes(root, views) if str(n.nodeName()) == "LateralJoin"]
    path = path_to(root, laterals[0]) if len(laterals) == 1 else None
    if path is None:
        return None
    matched = _matched(session, laterals[0], versioned, vocab)
    if matched is None:
        return None
    return frame(session, replace_on_path(session, path, analyzed(matched)))


def _matched(
    session: SparkSession, lateral: Any, versioned: str, vocab: DatasetVocabulary
) -> DataFrame | None:
    """The lateral join's rows (same output attributes), or None when beyond the rewrite."""
    subquery = lateral.right().plan()
    view, conditions = _view_and_filters(subquery)
    if view is None or view_name(view) != versioned:
        return None
    left_names = _names(lateral.left().output())
    view_names = _names(view.output())
    selected = _names(subquery.output())
    if left_names is None or view_names is None or selected is None:
        return None
    if not set(selected) <= set(view_names):
        return None  # the subquery computes columns, not only selects them
    stream = frame(session, lateral.left())
    versions = frame(session, view)
    on = _join_condition(conditions, stream, versions, left_names, view_names, vocab)
    if on is None:
        return None
    rows = stream.withColumn(_ROW_ID, F.monotonically_increasing_id())
    how = "left" if str(lateral.joinType()) == "LeftOuter" else "inner"
    joined = rows.join(versions, on, how)
    newest = Window.partitionBy(rows[_ROW_ID]).orderBy(
        versions[vocab.event_time_column].desc(), versions[vocab.offset_column].desc()
    )
    ranked = joined.withColumn(_RANK, F.row_number().over(newest)).where(F.col(_RANK) == 1)
    columns = [stream[n] for n in left_names.values()] + [versions[n] for n in selected.values()]
    return ranked.select(*columns)


def _view_and_filters(subquery: Any) -> tuple[Any | None, list[Any]]:
    node = subquery
    conditions: list[Any] = []
    while str(node.nodeName()) != "View":
        if node.children().size() != 1:
            return None, []
        if str(node.nodeName()) == "Filter":
            conditions.extend(conjuncts(node.condition()))
        node = child(node, 0)
    return node, conditions


def _join_condition(
    conditions: list[Any],
    stream: DataFrame,
    versions: DataFrame,
    left_names: dict[int, str],
    view_names: dict[int, str],
    vocab: DatasetVocabulary,
) -> Column | None:
    """The filter's conjuncts (already checked: key equalities and the event-time bound)
    as a join condition, or None when one compares with more than a stream column."""
    terms: list[Column] = []
    for condition in conditions:
        kind = str(condition.nodeName())
        left, right = condition.left(), condition.right()
        if kind == "GreaterThanOrEqual":
            kind, left, right = "LessThanOrEqual", right, left
        if str(left.nodeName()) == "OuterReference":
            left, right = right, left
        version_column = _attribute_name(left, view_names)
        stream_column = (
            _attribute_name(right.e(), left_names)
            if str(right.nodeName()) == "OuterReference"
            else None
        )
        if version_column is None or stream_column is None:
            return None
        if kind == "EqualTo":
            terms.append(versions[version_column] == stream[stream_column])
        elif kind == "LessThanOrEqual" and version_column == vocab.event_time_column:
            terms.append(versions[version_column] <= stream[stream_column])
        else:
            return None
    if not terms:
        return None
    on = terms[0]
    for term in terms[1:]:
        on = on & term
    return on


def _names(attributes: Any) -> dict[int, str] | None:
    """Output attributes by expression id, None when two share a name (case-insensitive)."""
    names = {int(expr_id(a)): str(a.name()) for a in seq(attributes)}
    if len({n.lower() for n in names.values()}) != len(names):
        return None
    return names


def _attribute_name(expression: Any, names: dict[int, str]) -> str | None:
    if str(expression.nodeName()) != "AttributeReference":
        return None
    return names.get(int(expr_id(expression)))
