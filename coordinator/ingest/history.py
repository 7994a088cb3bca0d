"""The data already in a dataset, as the Ledger and Snapshot merge strategies need it.

The previous data slices are read oldest first, only the columns asked for. Slices written
before a column was added (``SetDataSchema`` may add columns) read it as NULL. The list of
files is found only when first needed (Append never needs it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


class History:
    """The dataset's data files, oldest first, and the schema they are read with."""

    def __init__(
        self, files: Sequence[Path] | Callable[[], Sequence[Path]], schema: pa.Schema | None
    ) -> None:
        self._files = files
        self.schema = schema
        """The current ``SetDataSchema`` (None before any data)."""

    @classmethod
    def empty(cls) -> History:
        return cls((), None)

    @property
    def files(self) -> tuple[Path, ...]:
        if callable(self._files):
            self._files = tuple(self._files())
        return tuple(self._files)

    @property
    def is_empty(self) -> bool:
        return self.schema is None or not self.files

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        """All previous records with ``columns`` (default: all), in offset order."""
        if self.schema is None:
            raise ValueError("history without a schema has no data")
        names = list(columns) if columns is not None else self.schema.names
        target = pa.schema([self.schema.field(n).with_nullable(True) for n in names])
        tables = [_read_file(f, target) for f in self.files]
        if not tables:
            return target.empty_table()
        return pa.concat_tables(tables)


def _read_file(path: Path, target: pa.Schema) -> pa.Table:
    file = pq.ParquetFile(path)
    try:
        present = set(file.schema_arrow.names)
        table = file.read(columns=[n for n in target.names if n in present])
    finally:
        file.close()
    columns = [
        table.column(f.name).cast(f.type) if f.name in present else pa.nulls(table.num_rows, f.type)
        for f in target
    ]
    return pa.Table.from_arrays(columns, schema=target)
