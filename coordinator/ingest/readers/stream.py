"""What a reader returns: a schema and record batches produced lazily, in file order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True, slots=True)
class DataStream:
    """Batches of one schema, read as they are consumed (memory stays bounded).

    Iterating may raise ``ReadError`` for a bad record further down the file.
    """

    schema: pa.Schema
    batches: Iterable[pa.RecordBatch]

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self.batches)

    @classmethod
    def of_table(cls, table: pa.Table, max_rows: int = 65536) -> DataStream:
        return cls(table.schema, table.to_batches(max_chunksize=max_rows))
