"""The daemon's engine warmed at start by replaying the workspace's recent queries (issue 32).

A fresh engine's JVM runs a query two to five times slower than it will once the JIT has
compiled the query's path (the Parquet reader, the Arrow conversion, Spark's scheduling and
generated code): over its first few dozen queries. So a daemon that has served queries before
remembers them (``RecentQueries``: the last ``KEEP`` distinct texts of ``Query`` calls that
succeeded quickly, in ``.odf/run/recent_queries.json``), and at its next start replays them
on its engine (``QueryWarmUp``), off the request path:

- only queries that took at most ``MAX_QUERY_SECONDS`` (or whose time is unknown: an engine
  started during the call), with the limit they were asked with; one whose replay takes
  longer after its first (on a cold JVM any query is slow) is not replayed again;
- for at most ``daemon.warmUpSeconds`` (0: never) once its engine has started, and at most
  ``MAX_ROUNDS`` rounds;
- stopped by the first engine lease of anything else (a query, a pull, Flight SQL, the
  scheduler): that request runs at once, beside at most the one replay in flight;
- a workspace never queried through the daemon replays nothing and starts no engine early.

A replay that fails (a dataset since removed) is dropped quietly; results are discarded.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.logs import get_logger
from common.odf.errors import OdfError

if TYPE_CHECKING:
    from coordinator.app.application import Application

log = get_logger(__name__)

RECENT_FILE = "recent_queries.json"
KEEP = 8
"""Distinct queries remembered (the most recent)."""
MAX_QUERY_SECONDS = 2.0
"""Slower queries are neither remembered nor replayed."""
MAX_SQL_BYTES = 16 << 10
"""Longer query texts are not remembered."""
MAX_FILE_BYTES = 256 << 10
"""A larger file is not read (it was not written by a daemon)."""
MAX_ROUNDS = 30
"""Replays of each query at most (the JIT has compiled a query's path by then)."""


@dataclass(frozen=True, slots=True)
class RecentQuery:
    sql: str
    limit: int | None


class RecentQueries:
    """The last ``KEEP`` distinct quick queries of a daemon, kept across its restarts."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / RECENT_FILE
        self._lock = threading.Lock()

    def load(self) -> list[RecentQuery]:
        """The remembered queries, oldest first; none when the file is absent or not one
        this class wrote."""
        try:
            if self.path.stat().st_size > MAX_FILE_BYTES:
                return []
            entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        if not isinstance(entries, list):
            return []
        found = []
        for e in entries[-KEEP:]:
            if not isinstance(e, dict):
                continue
            sql, limit = e.get("sql"), e.get("limit")
            if not isinstance(sql, str) or len(sql.encode()) > MAX_SQL_BYTES:
                continue
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
                continue
            found.append(RecentQuery(sql, limit))
        return found

    def record(self, sql: str, limit: int | None, seconds: float | None) -> None:
        """Remember a query that succeeded in ``seconds`` (``None``: unknown, an engine
        started meanwhile) as the most recent; a slow or long one is not remembered. Never
        raises: a warm-up is worth no failed call."""
        too_slow = seconds is not None and seconds > MAX_QUERY_SECONDS
        if too_slow or len(sql.encode()) > MAX_SQL_BYTES:
            return
        query = RecentQuery(sql, limit)
        with self._lock:
            queries = self.load()
            if queries and queries[-1] == query:
                return
            others = [q for q in queries if q != query]
            queries = [*others[-(KEEP - 1) :], query]
            text = json.dumps([{"sql": q.sql, "limit": q.limit} for q in queries])
            temp = self.path.with_name(f".{RECENT_FILE}.{os.getpid()}")
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(temp, self.path)
            except OSError as e:
                log.warning("warm_up.record_failed", path=str(self.path), error=str(e))


class QueryWarmUp:
    """Replays ``queries`` on ``app``'s engine pool in a thread (see the module doc)."""

    def __init__(self, app: Application, queries: list[RecentQuery], budget: float) -> None:
        self.app = app
        self.queries = list(queries)
        self.budget = budget
        self.stopped = threading.Event()
        self.replayed = 0
        self._thread = threading.Thread(target=self._run, name="odf-query-warm-up", daemon=True)

    def start(self) -> None:
        """Start replaying, unless there is nothing to replay or no time for it."""
        if not self.queries or self.budget <= 0 or self.app.pool is None:
            return
        self.app.pool.on_lease = self._leased
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the replay in flight (waiting at most ``timeout`` seconds for it)."""
        self.stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _leased(self) -> None:
        if threading.current_thread() is not self._thread:
            self.stopped.set()  # a real request: it goes first

    def _run(self) -> None:
        from coordinator.app.use_cases import QueryOptions

        started = time.monotonic()
        reason = "rounds"
        pool = self.app.pool
        try:
            if pool is not None:  # the engine first: a replay's time is then the query's own
                pool.lease(None)
                pool.release(None)
            deadline = time.monotonic() + self.budget  # the budget is for replays
            for round_ in range(MAX_ROUNDS):
                for query in list(self.queries):
                    if self.stopped.is_set():
                        reason = "request"
                        return
                    if time.monotonic() >= deadline:
                        reason = "budget"
                        return
                    began = time.monotonic()
                    try:
                        self.app.query(query.sql, QueryOptions(limit=query.limit))
                        self.replayed += 1
                    except OdfError as e:
                        log.debug("warm_up.dropped", sql=query.sql, error=str(e))
                        self.queries.remove(query)
                        continue
                    slow = time.monotonic() - began > MAX_QUERY_SECONDS
                    if slow and round_ > 0:  # heavy, even on a warmer JVM: no more
                        self.queries.remove(query)
                if not self.queries:
                    reason = "none left"
                    return
        except Exception as e:  # the pool closed under it (the daemon stops): nothing to do
            reason = f"error: {type(e).__name__}"
        finally:
            if pool is not None and pool.on_lease == self._leased:
                pool.on_lease = None
            log.info(
                "warm_up.done",
                queries=self.replayed,
                seconds=round(time.monotonic() - started, 3),
                ended=reason,
            )
