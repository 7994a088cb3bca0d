"""``Result``: the records of a read or a query, as Arrow, pandas or polars."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl


class Result:
    """Records read once from their source, then kept: ``to_reader`` streams them when it is
    the first call (a large read need not fit in memory); any other call reads them all and
    keeps the table, so the conversions may follow each other."""

    def __init__(
        self, source: pa.RecordBatchReader | pa.Table, *, total: int | None = None
    ) -> None:
        self._reader = source if isinstance(source, pa.RecordBatchReader) else None
        self._table = source if isinstance(source, pa.Table) else None
        self.schema: pa.Schema = source.schema
        """The records' columns."""
        self.total = total
        """How many records the query produced in all (a ``limit`` may have cut the rest);
        ``None`` when not known before reading."""

    def to_reader(self) -> pa.RecordBatchReader:
        """The records as a stream of record batches."""
        if self._table is not None:
            return self._table.to_reader()
        reader = self._stream()
        self._reader = None
        return reader

    def to_arrow(self) -> pa.Table:
        """The records as a pyarrow ``Table``."""
        if self._table is None:
            self._table = self._stream().read_all()
            self._reader = None
        return self._table

    def to_pandas(self) -> pd.DataFrame:
        """The records as a pandas ``DataFrame`` (needs pandas)."""
        return self.to_arrow().to_pandas()

    def to_polars(self) -> pl.DataFrame:
        """The records as a polars ``DataFrame`` (needs polars)."""
        import polars as pl

        frame = pl.from_arrow(self.to_arrow())
        assert isinstance(frame, pl.DataFrame)
        return frame

    def __len__(self) -> int:
        return int(self.to_arrow().num_rows)

    def __repr__(self) -> str:
        rows = f"{self._table.num_rows} rows" if self._table is not None else "not read yet"
        return f"<odf.Result {rows}: {', '.join(self.schema.names)}>"

    def _stream(self) -> pa.RecordBatchReader:
        if self._reader is None:
            from common.odf.errors import OdfError

            raise OdfError("this result was already streamed by to_reader(); run it again")
        return self._reader
