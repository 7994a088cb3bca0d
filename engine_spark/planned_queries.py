"""Ad-hoc queries planned before (``ExecuteQuery``: ``odf sql``, the daemon's queries, Flight
SQL): a warm engine runs a query it has seen over the same input files on the DataFrame it
planned then, instead of planning it again.

A query's physical plan is a function of its transform, of the views' names and of the files
under them; Spark keeps the plan of a DataFrame (its ``QueryExecution``) and runs it again on
each action, so a query kept here costs only its job: no session, no file source (footers,
listing), no analysis, no sandbox walk, no optimisation, no physical planning or code
generation (together 40-130 ms of a 100k-record ``count(*)``; docs/performance.md).

When is the kept plan the plan the query would get now? The key holds the transform, each
view's alias, schema and data files, and each file's identity and state (device, inode, size,
modification time in ns): a file written again, replaced, grown or touched is another key.
ODF data files are written once under their hash, so a dataset that moves on adds files (a new
key) and never changes one under a kept plan. Spark runs the plan again from its files; a
shuffle it wrote in an earlier run is read again instead of being recomputed (Spark skips a
shuffle's map stage whose output it still holds), which is only sound because the files under
it are those of the key.

Only queries over small Parquet inputs are kept (at most ``SMALL_INPUT_BYTES`` together, the
sizes at which fixed cost is most of a query; ``session.small_input_settings``): the shuffle
files a kept plan holds on to stay small, and Arrow IPC inputs (staged per request, or local
relations) are never kept. At most ``capacity`` plans, the least recently used dropped first
(Spark's context cleaner then removes their shuffles).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.odf import engine_protocol as ep
from engine_spark.errors import InputDataError
from engine_spark.exchange import DataFormat, detect_format
from engine_spark.session import SMALL_INPUT_BYTES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine_spark.ordering import RowOrder


@dataclass(frozen=True, slots=True)
class PlannedQuery:
    """A query's DataFrame, planned (its executed plan made), and the order of its rows."""

    frame: DataFrame
    order: RowOrder


def plan_key(request: ep.QueryRequest) -> Hashable | None:
    """The key of ``request``'s plan, ``None`` when it is not to be kept (an input not a
    Parquet file, a file that cannot be stat'ed, inputs over ``SMALL_INPUT_BYTES``)."""
    total = 0
    views = []
    for view in request.inputs:
        files = []
        for path in view.data_paths:
            try:
                st = os.stat(path)
                if detect_format(path) is not DataFormat.PARQUET:
                    return None
            except (OSError, InputDataError):  # reading the inputs reports it
                return None
            total += st.st_size
            if total > SMALL_INPUT_BYTES:
                return None
            files.append((path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        views.append((view.alias, view.schema, tuple(files)))
    key = (request.transform, tuple(views))
    try:
        hash(key)
    except TypeError:  # a transform with an unhashable part: not kept
        return None
    return key


class PlannedQueries:
    """The plans of the ``capacity`` queries most recently run (thread-safe)."""

    def __init__(self, capacity: int = 32) -> None:
        self._capacity = capacity
        self._plans: OrderedDict[Hashable, PlannedQuery] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> PlannedQuery | None:
        with self._lock:
            found = self._plans.get(key)
            if found is not None:
                self._plans.move_to_end(key)
            return found

    def keep(self, key: Hashable, planned: PlannedQuery) -> None:
        with self._lock:
            self._plans[key] = planned
            self._plans.move_to_end(key)
            while len(self._plans) > self._capacity:
                self._plans.popitem(last=False)

    def drop(self, key: Hashable) -> None:
        with self._lock:
            self._plans.pop(key, None)

    def __len__(self) -> int:
        return len(self._plans)
