"""MergeStrategy::Ledger: append the records whose primary key was never seen before.

As in the reference: the new data is anti-joined with every historic record on key equality,
where NULL never equals NULL (a key with a NULL is always new); duplicates within one input
are all appended; a changed non-key value of a seen key is ignored. The historic keys are held
in memory, the new data is streamed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from common.arrow_values import sequence
from coordinator.ingest.errors import MergeError
from coordinator.ingest.history import History
from coordinator.ingest.merge.base import (
    StreamingMerge,
    append_all,
    require_columns,
    with_op,
    with_op_schema,
)
from coordinator.ingest.readers.stream import DataStream

_ROW = "__odf_row"


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerMerge(StreamingMerge):
    primary_key: tuple[str, ...]

    def merge(self, new: DataStream, history: History) -> DataStream:
        if not self.primary_key:
            raise MergeError("Ledger needs a non-empty primaryKey", path="merge.primaryKey")
        require_columns(new.schema, self.primary_key, "primary key")
        if history.is_empty:
            return append_all(new, self.op_column)
        seen = history.read(self.primary_key).group_by(list(self.primary_key)).aggregate([])
        seen = _cast_keys(seen, new.schema, self.primary_key)
        schema = with_op_schema(new.schema, self.op_column)

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in new:
                kept = self._unseen(batch, seen)
                if kept.num_rows:
                    yield with_op(kept, 0, schema)

        return DataStream(schema, batches())

    def _unseen(self, batch: pa.RecordBatch, seen: pa.Table) -> pa.RecordBatch:
        keys = pa.Table.from_arrays(
            [*(batch.column(k) for k in self.primary_key), sequence(0, batch.num_rows)],
            names=[*self.primary_key, _ROW],
        )
        rows = keys.join(seen, keys=list(self.primary_key), join_type="left anti")[_ROW]
        return batch.take(rows.combine_chunks().sort())


def _cast_keys(seen: pa.Table, schema: pa.Schema, primary_key: tuple[str, ...]) -> pa.Table:
    """Historic keys in the types of the new data, so the join can compare them."""
    columns = []
    for name in primary_key:
        target = schema.field(name).type
        column = seen.column(name)
        if not column.type.equals(target):
            try:
                column = column.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise MergeError(
                    f"primary key column {name!r} is {target} in the new data but"
                    f" {column.type} in the dataset",
                    path="merge.primaryKey",
                ) from None
        columns.append(column)
    return pa.Table.from_arrays(columns, names=list(primary_key))
