"""The latest records of a dataset (``odf tail``), read from its newest data files only."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf.events import AddData, ExecuteTransform
from common.odf.fragments import DataSlice
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset


def tail_records(ds: Dataset, n: int, *, skip: int = 0, as_of: Multihash | None = None) -> pa.Table:
    """The latest ``n`` records (after skipping the latest ``skip``), oldest first; ``as_of``:
    as the dataset was at that block (default: its head)."""
    state = ds.state()
    offset_column = state.vocab.offset_column
    wanted = n + skip
    slices: list[DataSlice] = []
    covered = 0
    for _, block in ds.iter_blocks(as_of):
        if covered >= wanted:
            break
        event = block.event
        if isinstance(event, AddData | ExecuteTransform) and event.new_data is not None:
            slices.append(event.new_data)
            o = event.new_data.offset_interval
            covered += o.end - o.start + 1
    if not slices:
        schema = state.arrow_schema()
        return (schema or pa.schema([])).empty_table()
    tables = [pq.read_table(ds.data_path(s.physical_hash)) for s in reversed(slices)]
    table = pa.concat_tables(tables, promote_options="default")
    table = table.sort_by(offset_column)
    end = max(table.num_rows - skip, 0)
    return table.slice(max(end - n, 0), end - max(end - n, 0))
