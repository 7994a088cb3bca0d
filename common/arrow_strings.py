"""UTF-8 validity of Arrow string columns (ODF ``string`` is Arrow's ``utf8``: UTF-8 only).

Shared by ingest (every batch the writer receives is checked) and by verification (a stored
data file's string columns, on the coordinator or in the engine's executor tasks).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq


def invalid_utf8_column(batch: pa.RecordBatch) -> str | None:
    """The first column of ``batch`` (strings at any depth) holding invalid UTF-8, if any."""
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if not has_strings(field.type):
            continue
        try:
            column.validate(full=True)
        except pa.ArrowInvalid as e:
            if "UTF8" not in str(e):
                raise
            return str(field.name)
    return None


def invalid_utf8_in_parquet(parquet: pq.ParquetFile) -> str | None:
    """The first column of a Parquet file whose strings are not valid UTF-8 (readers fail on
    such values), read batch by batch, string columns only."""
    names = [f.name for f in parquet.schema_arrow if has_strings(f.type)]
    if not names:
        return None
    for batch in parquet.iter_batches(columns=names):
        column = invalid_utf8_column(batch)
        if column is not None:
            return column
    return None


def has_strings(dtype: pa.DataType) -> bool:
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return True
    if pa.types.is_string_view(dtype):
        return True
    if (
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
    ):
        return has_strings(dtype.value_type)
    if pa.types.is_map(dtype):
        return has_strings(dtype.key_type) or has_strings(dtype.item_type)
    if pa.types.is_struct(dtype):
        return any(has_strings(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_dictionary(dtype):
        return has_strings(dtype.value_type)
    return False
