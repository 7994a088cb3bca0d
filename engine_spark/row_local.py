"""Row-local queries: each output row depends on one input row only (split transactions).

A query is row-local when its analysed plan holds only Project, Filter, Generate, Union and
aliases over the input relations, with deterministic expressions and no subqueries. Such a
query over a run of whole input files gives exactly the rows it gives for those files inside
the whole input, so a transaction can be cut into slices at input block boundaries.
Anything else (Aggregate, Join, Window, Sort, Limit, Distinct, Deduplicate, a subquery, a
non-deterministic expression such as ``rand()``) is not row-local, with the reason.
"""

from __future__ import annotations

from typing import Any

from engine_spark import jvm_plan

_ROW_LOCAL_NODES = frozenset({"Project", "Filter", "Generate", "Union", "SubqueryAlias", "View"})
_INPUT_RELATIONS = frozenset({"LogicalRDD", "LocalRelation", "Relation", "LogicalRelation"})


def not_row_local(plan: Any) -> str | None:
    """Why the analysed ``plan`` is not row-local; ``None`` when it is."""
    for node in jvm_plan.walk(plan):
        name = str(node.nodeName())
        if name in _INPUT_RELATIONS:
            continue
        if name not in _ROW_LOCAL_NODES:
            return f"{name} combines rows"
        if node.subqueries().size() > 0:
            return f"a subquery in {name}"
        for expression in jvm_plan.seq(node.expressions()):
            if not expression.deterministic():
                return f"a non-deterministic expression in {name}: {expression.sql()}"
    return None
