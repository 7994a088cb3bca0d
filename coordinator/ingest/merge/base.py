"""The contract shared by the merge strategies."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from common.arrow_values import int_scalar
from coordinator.ingest.errors import MergeError
from coordinator.ingest.history import History
from coordinator.ingest.readers.stream import DataStream
from coordinator.ingest.system_columns import OP_TYPE


class Merge(Protocol):
    @property
    def sort_keys(self) -> tuple[str, ...]:
        """Columns the merged records are stably sorted by (ascending, NULLs first)."""
        ...

    @property
    def streaming(self) -> bool:
        """Whether ``merge`` keeps memory bounded (else it holds the whole input)."""
        ...

    def merge(self, new: DataStream, history: History) -> DataStream:
        """``new`` combined with ``history``: ``op`` first, then the columns of ``new``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamingMerge:
    """A strategy that streams the new records in event-time order (Append, Ledger)."""

    op_column: str
    event_time_column: str

    @property
    def sort_keys(self) -> tuple[str, ...]:
        return (self.event_time_column,)

    @property
    def streaming(self) -> bool:
        return True


def with_op_schema(schema: pa.Schema, op_column: str) -> pa.Schema:
    return pa.schema([pa.field(op_column, OP_TYPE, nullable=False), *schema])


def with_op(batch: pa.RecordBatch, op: int, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with a constant ``op`` column in front (``schema`` = with_op_schema)."""
    ops = pa.repeat(int_scalar(op, OP_TYPE), batch.num_rows)
    return pa.RecordBatch.from_arrays([ops, *batch.columns], schema=schema)


def append_all(new: DataStream, op_column: str) -> DataStream:
    schema = with_op_schema(new.schema, op_column)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in new:
            yield with_op(batch, 0, schema)

    return DataStream(schema, batches())


def require_columns(schema: pa.Schema, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise MergeError(
            f"{what} column {missing[0]!r} is not in the data (columns: {', '.join(schema.names)})",
            path="merge",
        )
