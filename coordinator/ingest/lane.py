"""A lane of the ingest pipeline: one background thread that runs tasks in the order they
were given, while the caller goes on reading the next batch.

The slice writer hashes each batch and writes each row group in lanes of their own, so that
the CSV parser, the logical hash and the Parquet encoder (all of which release the GIL in
their native code) work at the same time on different batches. At most ``depth`` tasks are
queued or running: ``submit`` waits for the oldest beyond that, which bounds the memory the
lane holds. A task's error is raised to the caller by the ``submit`` or ``drain`` that waits
for it.
"""

from __future__ import annotations

import concurrent.futures
from collections import deque
from collections.abc import Callable
from typing import ParamSpec

P = ParamSpec("P")


class Lane:
    def __init__(self, name: str, depth: int = 2) -> None:
        if depth < 1:
            raise ValueError("a lane holds at least one task")
        self._name = name
        self._depth = depth
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._queued: deque[concurrent.futures.Future[object]] = deque()

    def submit(self, task: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> None:
        """Run ``task(*args, **kwargs)`` after the tasks already given."""
        while len(self._queued) >= self._depth:
            self._queued.popleft().result()
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=self._name)
        self._queued.append(self._pool.submit(task, *args, **kwargs))

    def drain(self) -> None:
        """Wait until every task given has run; the first error among them is raised."""
        while self._queued:
            self._queued.popleft().result()

    def close(self) -> None:
        """Drain, then end the thread (also when a task failed)."""
        try:
            self.drain()
        finally:
            self._queued.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
