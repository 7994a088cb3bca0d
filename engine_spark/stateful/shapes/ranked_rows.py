"""Ranked rows: the latest row per key and the top N (per key or global), recomputed from the
rows that make the ranking, emitted as a changelog with retractions.

The shapes, over one input (``rank()`` and ``dense_rank()`` as well as ``row_number()``; the
rank selected or not; ``PARTITION BY`` or none)::

    SELECT k, v, event_time FROM (
        SELECT *, row_number() OVER (PARTITION BY k ORDER BY event_time DESC) AS rn FROM t
    ) WHERE rn = 1                                            -- the latest row per key
    SELECT * EXCEPT (rn) FROM (... rank() OVER (PARTITION BY k ORDER BY v DESC) AS rn ...)
    WHERE rn = 1                                              -- every row tied for the top
    SELECT ..., rn FROM (... row_number() OVER (ORDER BY v DESC) AS rn ...) WHERE rn <= 3

For append-only inputs a row's rank only grows as records arrive (a rank counts the rows, or
the distinct values, ordered before it), so a row out of the top N stays out, and the top N
of all records is the top N of (the rows in the top N before, plus the new records): they
are the state, as they enter the window function, like ``topn_recompute.py`` keeps them
(whose runner handles the one shape it started with: ``row_number()`` per key with the
number selected). Each transaction computes the whole ranking anew and emits its difference
to the rows emitted before (``group_changes``), grouped by the selected partition keys (and
the selected rank of a ``row_number()``): in a group, a row that left and a row that entered
are a ``-U``/``+U`` pair, a row left without a replacement a ``-D`` (rank ties can shrink),
one entering without a predecessor ``+I``; unchanged rows are not emitted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from engine_spark.changelog import APPEND, CORRECT_FROM, CORRECT_TO, Changelog
from engine_spark.jvm_plan import (
    expr_id,
    is_attribute,
    query_nodes,
    seq,
    unalias,
    view_name,
)
from engine_spark.ordering import sort_by_values
from engine_spark.stateful.shapes.operator import recognised_path

RETRACT = 1
"""``-D`` (RFC-015 ``-R``): a row no longer in the result."""

RANKS = frozenset({"RowNumber", "Rank", "DenseRank"})
WINDOW_PLAN = frozenset({"Project", "Filter", "SubqueryAlias", "View", "Window", "ResolvedHint"})
"""The nodes a plan with a window function over an input may have, down to the input."""
ABOVE_WINDOW = frozenset({"Project", "SubqueryAlias", "Filter"})
"""The nodes allowed above the window function."""


@dataclass(frozen=True, slots=True)
class RankedRows:
    limit: int
    """N: the rank of the last row kept (``rn <= N``, ``rn < N + 1``, ``rn = 1``)."""
    function: str
    """``RowNumber``, ``Rank`` or ``DenseRank``."""
    input: str
    """The input view the window function reads."""
    groups: tuple[str, ...]
    """The output columns the changelog is grouped by (empty: the whole result)."""
    kept_columns: tuple[str, ...]
    """The columns of the rows that enter the window function (what the state keeps)."""
    unique: bool = False
    """Each group holds one row (every key and a ``row_number()`` selected)."""


def ranked_rows(result: DataFrame, inputs: frozenset[str]) -> RankedRows | None:
    """The query's ranking when it has one of the shapes above (``inputs``: the streamed
    inputs); None otherwise."""
    path = recognised_path(result, inputs, WINDOW_PLAN, "Window", ABOVE_WINDOW)
    if path is None:
        return None
    window = path[-1]
    expressions = list(seq(window.windowExpressions()))
    if len(expressions) != 1 or str(expressions[0].nodeName()) != "Alias":
        return None
    function = expressions[0].child()
    if str(function.nodeName()) != "WindowExpression" or window.orderSpec().size() == 0:
        return None
    kind = str(function.windowFunction().nodeName())
    if kind not in RANKS:
        return None
    rank = expr_id(expressions[0])
    filters = [n for n in path[:-1] if str(n.nodeName()) == "Filter"]
    if len(filters) != 1:
        return None
    limit = rank_limit(filters[0].condition(), rank)
    views = [
        view_name(n)
        for n in query_nodes(window, inputs)
        if str(n.nodeName()) == "View" and view_name(n) in inputs
    ]
    kept_columns = tuple(str(a.name()) for a in seq(window.child().output()))
    if limit is None or len(views) != 1 or len(set(kept_columns)) != len(kept_columns):
        return None
    if str(expressions[0].name()) in kept_columns:
        return None
    partition = list(seq(window.partitionSpec()))
    if not all(is_attribute(p) for p in partition):
        return None
    keys = [output_name(path, expr_id(p)) for p in partition]
    rank_name = output_name(path, rank) if kind == "RowNumber" else None
    selected = [k for k in keys if k is not None]
    groups = selected if len(selected) == len(keys) else []
    if rank_name is not None:
        groups.append(rank_name)
    unique = rank_name is not None and len(selected) == len(keys)
    return RankedRows(limit, kind, views[0], tuple(groups), kept_columns, unique)


def rank_limit(condition: Any, rank: Any) -> int | None:
    """N of ``rank <= N``, ``rank < N + 1`` or ``rank = 1`` (either way round); None for
    any other condition."""
    kind = str(condition.nodeName())
    if kind not in _FLIPPED:
        return None
    left, right = condition.left(), condition.right()
    if is_attribute(right) and not is_attribute(left):
        left, right, kind = right, left, _FLIPPED[kind]
    if not is_attribute(left) or expr_id(left) != rank:
        return None
    if str(right.nodeName()) != "Literal" or right.value() is None:
        return None
    value = int(right.value())
    if kind == "EqualTo":
        return 1 if value == 1 else None
    limit = {"LessThanOrEqual": value, "LessThan": value - 1}.get(kind, 0)
    return limit if limit >= 1 else None


_FLIPPED = {
    "EqualTo": "EqualTo",
    "LessThanOrEqual": "GreaterThanOrEqual",
    "LessThan": "GreaterThan",
    "GreaterThanOrEqual": "LessThanOrEqual",
    "GreaterThan": "LessThan",
}


def output_name(path: Sequence[Any], attribute: Any) -> str | None:
    """The root's output name of the attribute (exprId ``attribute``) of ``path[-1]``'s
    output, followed up through the projections of ``path`` (renamed or not); None when it
    is not selected."""
    current = attribute
    for node in reversed(path[:-1]):
        if str(node.nodeName()) != "Project":
            continue
        found = [
            expr_id(e)
            for e in seq(node.projectList())
            if expr_id(e) == current
            or (
                str(e.nodeName()) == "Alias"
                and is_attribute(unalias(e))
                and expr_id(unalias(e)) == current
            )
        ]
        if not found:
            return None
        current = found[0]
    names = {expr_id(a): str(a.name()) for a in seq(path[0].output())}
    return names.get(current)


def group_changes(
    after: pa.Table, before: pa.Table | None, groups: Sequence[str], op_column: str
) -> Changelog:
    """The changelog from the rows emitted ``before`` to the result ``after`` (both whole
    results), group by group: pairs of a row that left and one that entered as ``-U``/``+U``,
    then rows that left as ``-D``, then rows that entered as ``+I``. Groups in the order of
    the sorted result (then groups that emptied); rows of a group in value order."""
    after = sort_by_values(after, groups, [])
    old = _grouped(before.cast(after.schema) if before is not None else None, groups)
    new = _grouped(after, groups)
    changed: list[dict[str, Any]] = []
    for key in [*new, *(k for k in old if k not in new)]:
        removed = _minus(old.get(key, []), new.get(key, []))
        added = _minus(new.get(key, []), old.get(key, []))
        for gone, came in zip(removed, added, strict=False):
            changed += [{**gone, op_column: CORRECT_FROM}, {**came, op_column: CORRECT_TO}]
        changed += [{**r, op_column: RETRACT} for r in removed[len(added) :]]
        changed += [{**r, op_column: APPEND} for r in added[len(removed) :]]
    schema = after.schema.append(pa.field(op_column, pa.int32()))
    return Changelog(rows=pa.Table.from_pylist(changed, schema=schema), emitted=after)


def _grouped(table: pa.Table | None, groups: Sequence[str]) -> dict[Hashable, list[dict[str, Any]]]:
    grouped: dict[Hashable, list[dict[str, Any]]] = {}
    for row in table.to_pylist() if table is not None else ():
        grouped.setdefault(_frozen([row[g] for g in groups]), []).append(row)
    return grouped


def _minus(rows: list[dict[str, Any]], others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` less ``others`` as multisets, in the order of ``rows``."""
    left = Counter(_frozen(r.values()) for r in others)
    kept = []
    for row in rows:
        key = _frozen(row.values())
        if left[key] > 0:
            left[key] -= 1
        else:
            kept.append(row)
    return kept


def _frozen(values: Iterable[Any]) -> Hashable:
    return tuple(_freeze(v) for v in values)


def _freeze(value: Any) -> Hashable:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value  # type: ignore[no-any-return]
