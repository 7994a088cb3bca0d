"""Ad-hoc SQL over the datasets of a workspace (``odf sql``).

Public API: ``run_query`` (returns a ``QueryResult``), ``single_query``, and the lexer
functions of ``coordinator.query.references`` (``mentioned_names``, ``statements``).
"""

from coordinator.query.references import SqlSyntaxError, mentioned_names, statements
from coordinator.query.runner import QueryResult, QueryView, run_query, single_query

__all__ = [
    "QueryResult",
    "QueryView",
    "SqlSyntaxError",
    "mentioned_names",
    "run_query",
    "single_query",
    "statements",
]
