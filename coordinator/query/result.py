"""What an ad-hoc query gives back (``odf sql``): light to import, for the daemon's thin
client, which prints a result without running a query itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True, slots=True)
class QueryResult:
    """The first rows of a result (all when no limit), and how many rows it has in all."""

    table: pa.Table
    num_records: int

    @property
    def cut(self) -> int:
        """How many rows were left out."""
        return self.num_records - int(self.table.num_rows)
