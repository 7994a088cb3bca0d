"""Whether an input's data files hold exactly the records of its offset interval, by footers.

An input slice is whole blocks (the coordinator never cuts a block), so its Parquet data files
usually hold exactly the interval's records and filtering them by offset is a no-op that still
costs an eager analysis of one more plan node and a comparison per row. The files' Parquet
footers answer it without reading a row: when every row group's ``offset`` column has min/max
statistics inside the interval and no nulls, and the files hold as many records as the
interval has offsets, the filter keeps every row.

Anything else (an Arrow IPC file, a footer without statistics, an unreadable footer, a file
with other offsets or another record count) keeps the filter: the rows are then checked one
by one as before. A footer is the file's own claim about its rows; a file whose statistics
contradict its rows is corrupt in a way Spark's own row-group pruning would be misled by too.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf.fragments import OffsetInterval
from engine_spark.errors import InputDataError
from engine_spark.exchange import DataFormat, detect_format

_OFFSET_PHYSICAL_TYPE = "INT64"


def holds_exactly(paths: Sequence[str], offset_column: str, interval: OffsetInterval) -> bool:
    """Whether the Parquet files at ``paths`` hold just the records of ``interval`` (module
    doc); ``False`` whenever their footers cannot show it."""
    records = 0
    for path in paths:
        try:
            if detect_format(path) is not DataFormat.PARQUET:
                return False
            metadata = pq.read_metadata(path)
        except (InputDataError, OSError, pa.ArrowException):
            return False  # reading the file reports what is wrong with it
        if not _row_groups_within(metadata, offset_column, interval):
            return False
        records += metadata.num_rows
    return records == interval.end - interval.start + 1


def _row_groups_within(
    metadata: pq.FileMetaData, offset_column: str, interval: OffsetInterval
) -> bool:
    schema = metadata.schema
    found = [i for i in range(metadata.num_columns) if schema.column(i).path == offset_column]
    if len(found) != 1:
        return False
    (index,) = found
    for group in range(metadata.num_row_groups):
        column = metadata.row_group(group).column(index)
        stats = column.statistics
        if (
            column.physical_type != _OFFSET_PHYSICAL_TYPE
            or stats is None
            or not stats.has_min_max
            or not stats.has_null_count
            or stats.null_count != 0
            or not interval.start <= stats.min <= stats.max <= interval.end
        ):
            return False
    return True
