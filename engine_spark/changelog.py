"""An unbounded aggregation's updates as an RFC-015 changelog (pure pyarrow).

Spark's update mode emits, per micro-batch, the new row of every key the batch changed. The
engine keeps the last row it emitted per key (``emitted``, in the checkpoint) and turns the
transaction's updates into: ``+I`` (op 0, append) for a key seen for the first time, a
``-U``/``+U`` pair (op 2 then 3, correct-from/correct-to) with the old and the new row when
a key's row changed, and nothing when the row is unchanged. A key updated by several
micro-batches of one transaction is emitted once, with its last row: the changelog does not
depend on how Spark split the transaction. Rows are ordered by key, each pair together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine_spark.ordering import sortable

APPEND, CORRECT_FROM, CORRECT_TO = 0, 2, 3


@dataclass(frozen=True, slots=True)
class Changelog:
    rows: pa.Table
    """The changes, with an ``op_column`` appended."""
    emitted: pa.Table
    """The last emitted row per key after these changes (the next ``emitted``)."""


def changelog(
    updates: Sequence[pa.Table],
    emitted: pa.Table | None,
    keys: Sequence[str],
    op_column: str,
) -> Changelog:
    """``updates``: each micro-batch's updated rows, in batch order, all with one schema."""
    schema = updates[0].schema if updates else emitted.schema if emitted is not None else None
    if schema is None:
        raise ValueError("a changelog needs updates or an emitted state")
    previous = _by_key(emitted, keys) if emitted is not None else {}
    latest: dict[tuple[object, ...], dict[str, object]] = {}
    for table in updates:
        latest.update(_by_key(table.cast(schema), keys))
    changed: list[dict[str, object]] = []
    for key, row in latest.items():
        old = previous.get(key)
        if old is None:
            changed.append({**row, op_column: APPEND})
        elif old != row:
            changed.append({**old, op_column: CORRECT_FROM})
            changed.append({**row, op_column: CORRECT_TO})
    previous.update(latest)
    out_schema = schema.append(pa.field(op_column, pa.int32()))
    rows = pa.Table.from_pylist(changed, schema=out_schema)
    state = pa.Table.from_pylist(list(previous.values()), schema=schema)
    sort_keys = [(k, "ascending") for k in keys if sortable(schema.field(k).type)]
    if rows.num_rows > 1:
        rows = rows.sort_by([*sort_keys, (op_column, "ascending")])
    if state.num_rows > 1 and sort_keys:
        state = state.sort_by(sort_keys)
    return Changelog(rows=rows, emitted=state)


def _by_key(table: pa.Table, keys: Sequence[str]) -> dict[tuple[object, ...], dict[str, object]]:
    return {tuple(row[k] for k in keys): row for row in table.to_pylist()}
