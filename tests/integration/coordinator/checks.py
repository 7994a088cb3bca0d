"""Invariants of a dataset after a crash or a concurrent run, checked from the files alone."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq

from common.hashing import physical_hash_file
from common.odf.events import AddData
from coordinator.dataset import Dataset
from coordinator.dataset.layout import PENDING_PREFIX
from coordinator.dataset.replay import replay_chain


def check_consistent(ds: Dataset) -> dict[int, int]:
    """Verify chain, data files and records; returns ``{batch: number of records}``.

    The chain must replay through every rule, each data file must match its slice (size,
    physical hash, offsets), offsets must be ``0..n-1`` without gaps, and every batch must be
    either wholly present or absent, never duplicated.
    """
    state = replay_chain(ds.chain)
    offsets: list[int] = []
    cities: list[str] = []
    for _, block in ds.iter_blocks():
        event = block.event
        if not isinstance(event, AddData) or event.new_data is None:
            continue
        path = ds.data_path(event.new_data.physical_hash)
        assert path.stat().st_size == event.new_data.size
        assert physical_hash_file(path) == event.new_data.physical_hash
        table = pq.read_table(path)
        interval = event.new_data.offset_interval
        assert table.column("offset").to_pylist() == list(range(interval.start, interval.end + 1))
        offsets += table.column("offset").to_pylist()
        cities += table.column("city").to_pylist()
    assert sorted(offsets) == list(range(state.next_offset))
    duplicated = [c for c, n in Counter(cities).items() if n > 1]
    assert not duplicated, f"records committed twice: {duplicated}"
    batches = Counter(int(c.split("-")[0][1:]) for c in cities)
    return dict(batches)


def check_no_leftovers(ds: Dataset) -> None:
    """No journal, no pending file, and every stored object is referenced by the chain."""
    layout = ds.layout
    assert not layout.journal_path.exists()
    referenced = set()
    for h, block in ds.iter_blocks():
        referenced.add(layout.block_path(h))
        event = block.event
        if isinstance(event, AddData) and event.new_data is not None:
            referenced.add(layout.data_path(event.new_data.physical_hash))
    stored = {
        p for d in (layout.blocks_dir, layout.data_dir, layout.checkpoints_dir) for p in d.iterdir()
    }
    assert stored == referenced, f"unreferenced: {stored - referenced}"
    for d in (*layout.object_dirs(), layout.private_dir):
        assert not [p for p in d.iterdir() if p.name.startswith(PENDING_PREFIX)]
