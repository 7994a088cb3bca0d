"""Ad-hoc SQL over the datasets of a workspace (``odf sql``).

Public API: ``run_query`` (returns a ``QueryResult``), ``single_query``, and the lexer
functions of ``coordinator.query.references`` (``mentioned_names``, ``statements``).
``run_query`` and ``QueryView`` (the runner: pyarrow, the engine client, the workspace) are
imported on first use, so a thin client of the daemon that only checks and prints a query
does not load them.
"""

from typing import TYPE_CHECKING, Any

from coordinator.query.references import (
    SqlSyntaxError,
    mentioned_names,
    single_query,
    statements,
)
from coordinator.query.result import QueryResult

if TYPE_CHECKING:
    from coordinator.query.runner import QueryView, run_query

__all__ = [
    "QueryResult",
    "QueryView",
    "SqlSyntaxError",
    "mentioned_names",
    "run_query",
    "single_query",
    "statements",
]


def __getattr__(name: str) -> Any:
    if name in ("QueryView", "run_query"):
        from coordinator.query import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
