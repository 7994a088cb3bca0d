"""A query result as it is shown: its columns under unique names, each row's values as Python
values (``table_rows``), and the two forms the CLI prints (``shown_result``): text cells for
tables (``common.humanize.human_cell``) or plain values for the machine formats
(``common.humanize.plain``). The daemon's HTTP query endpoint answers in these forms too, so
that ``odf sql`` through a daemon prints without loading pyarrow, byte for byte as in process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from common.humanize import human_cell, plain

if TYPE_CHECKING:
    import pyarrow as pa

    from coordinator.query.result import QueryResult


class Cells(Enum):
    """What each cell of a displayed result holds."""

    TEXT = "text"
    """As a table shows it (``human_cell``)."""
    VALUES = "values"
    """Exact, for JSON, YAML and CSV (``plain``)."""


@dataclass(frozen=True, slots=True)
class ShownResult:
    """A query result as shown: unique column names, the rows read back as cells."""

    columns: list[str]
    rows: list[list[Any]]
    num_records: int
    """Rows of the whole result (more than ``rows`` when a limit cut it)."""

    @property
    def cut(self) -> int:
        """How many rows were left out."""
        return self.num_records - len(self.rows)


def shown_result(result: QueryResult, cells: Cells) -> ShownResult:
    """``result`` with its columns made unique and each cell as ``cells`` says."""
    names = unique_names(result.table.column_names)
    shown = human_cell if cells is Cells.TEXT else plain
    rows = table_rows(result.table.rename_columns(names))
    return ShownResult(names, [[shown(row[n]) for n in names] for row in rows], result.num_records)


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names made unique for display: a repeated ``id`` becomes ``id_2``, ``id_3``..."""
    taken = {n.lower() for n in names}
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, k = name, 1
        while candidate.lower() in seen or (k > 1 and candidate.lower() in taken):
            k += 1
            candidate = f"{name}_{k}"
        seen.add(candidate.lower())
        out.append(candidate)
    return out


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as Python values; a column holding invalid UTF-8 (which ingest
    refuses, but older or foreign data may hold) is shown with U+FFFD instead of failing."""
    columns: dict[str, list[Any]] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            columns[name] = column.to_pylist()
        except UnicodeDecodeError:
            columns[name] = [
                _decoded(v) for v in column.cast(_binary_type(column.type)).to_pylist()
            ]
    return [{name: values[i] for name, values in columns.items()} for i in range(table.num_rows)]


def _binary_type(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with every string type replaced by binary (to read invalid UTF-8 as bytes)."""
    import pyarrow as pa

    if pa.types.is_string(dtype) or pa.types.is_string_view(dtype):
        return pa.binary()
    if pa.types.is_large_string(dtype):
        return pa.large_binary()
    if pa.types.is_list(dtype):
        return pa.list_(dtype.value_field.with_type(_binary_type(dtype.value_type)))
    if pa.types.is_large_list(dtype):
        return pa.large_list(dtype.value_field.with_type(_binary_type(dtype.value_type)))
    if pa.types.is_struct(dtype):
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        return pa.struct([f.with_type(_binary_type(f.type)) for f in fields])
    return dtype


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    return value
