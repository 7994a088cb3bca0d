"""What a reader returns: a schema and record batches produced lazily, in file order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

BATCH_ROWS = 64 * 1024
"""Rows per batch when a file is read, or a table cut, batch by batch."""


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
    def of_table(cls, table: pa.Table, max_rows: int = BATCH_ROWS) -> DataStream:
        return cls(table.schema, table.to_batches(max_chunksize=max_rows))


def read_batches(
    reader: Any, translate: Callable[[pa.ArrowInvalid], Exception]
) -> Iterator[pa.RecordBatch]:
    """The batches of a pyarrow streaming reader (CSV, JSON), its parse errors translated."""
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowInvalid as e:
            raise translate(e) from None
        yield batch
