"""A lane of the ingest pipeline: one background thread that runs tasks in the order they
were given, while the caller goes on reading the next batch.

The slice writer hashes each batch and writes each row group in lanes of their own, so that
the CSV parser, the logical hash and the Parquet encoder (all of which release the GIL in
their native code) work at the same time on different batches. At most ``depth`` tasks are
queued or running: ``submit`` waits for the oldest beyond that, which bounds the memory the
lane holds. A task's error is raised to the caller by the ``submit`` or ``drain`` that waits
for it. ``ordered_map`` is the parallel form, for tasks that do not depend on each other (the
segments of a CSV file): several threads, the results in order.
"""

from __future__ import annotations

import concurrent.futures
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")


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


def ordered_map(
    task: Callable[[T], R], items: Iterable[T], *, workers: int, name: str
) -> Iterator[R]:
    """``task`` of each item on ``workers`` threads, the results in the items' order.

    Items are taken as results are consumed, at most ``workers`` + 1 ahead of the consumer,
    which bounds the memory held. A task's error is raised where its result would be; the
    threads end when the results are exhausted, or when the consumer stops early.
    """
    if workers < 1:
        raise ValueError("ordered_map runs at least one worker")
    pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=name)
    pending: deque[concurrent.futures.Future[R]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(task, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)
