"""A compacted data file records the logical hash of the file it wrote when struct nulls
expose slots (their values depend on how the reference reads that file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing import logical_hash, logical_hash_parquet, physical_hash_file
from common.odf.fragments import DataSlice, OffsetInterval
from coordinator.dataset import Dataset
from coordinator.ingest.compaction import _write_merged


def write_slice(ds: Dataset, start: int, rows: int, seed: int) -> DataSlice:
    rng = np.random.default_rng(seed)
    value = pa.array(rng.integers(0, 100, rows), pa.int64(), mask=rng.random(rows) < 0.4)
    place = pa.StructArray.from_arrays([value], names=["v"], mask=pa.array(rng.random(rows) < 0.2))
    table = pa.table({"offset": pa.array(np.arange(start, start + rows), pa.int64()), "s": place})
    staged = ds.layout.root / "staged"
    pq.write_table(table, staged)
    physical = physical_hash_file(staged)
    ds.data_path(physical).parent.mkdir(parents=True, exist_ok=True)
    staged.rename(ds.data_path(physical))
    return DataSlice(
        logical_hash=logical_hash_parquet(ds.data_path(physical)),
        physical_hash=physical,
        offset_interval=OffsetInterval(start=start, end=start + rows - 1),
        size=ds.data_path(physical).stat().st_size,
    )


def test_the_merged_slice_records_the_hash_of_its_file(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "ds")
    (tmp_path / "ds").mkdir()
    slices = [write_slice(ds, 0, 700, 1), write_slice(ds, 700, 900, 2)]
    out = tmp_path / "merged"
    merged = _write_merged(ds, slices, out)
    assert merged.logical_hash == logical_hash_parquet(out)
    assert merged.logical_hash != logical_hash(pq.read_table(out))  # zeros, in memory
    assert merged.offset_interval == OffsetInterval(start=0, end=1_599)
