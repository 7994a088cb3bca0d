"""``odf list`` from the state cache: the same figures as the full state, or nothing."""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.app.listing import DatasetSummary, summarize, summary_of_state
from coordinator.dataset import Dataset, listing
from tests.unit.coordinator.events import add_data_for, at, seed, set_schema, write_slice


def summary_from_state(ds: Dataset) -> DatasetSummary:
    return summary_of_state(ds.alias, Dataset(ds.layout.root, alias=ds.alias).state())


def dataset_with_data(tmp_path: Path) -> Dataset:
    ds = Dataset(tmp_path / "ds")
    ds.commit_events([seed(), set_schema()], expected_head=None, system_time=at(0))
    staged = tmp_path / "staged"
    staged.mkdir()
    event = add_data_for(write_slice(staged, 0, 7), None, 0, 7)
    ds.commit(event, data_file=staged / "data", expected_head=ds.head(), system_time=at(1))
    return ds


def test_the_cache_holds_what_the_full_state_gives(tmp_path: Path) -> None:
    ds = dataset_with_data(tmp_path)
    cached = listing.read(ds.layout)
    assert cached is not None
    assert summarize(ds.layout.root, "ds") == summary_from_state(ds)
    assert (cached.blocks, cached.records, cached.kind) == (3, 7, "Root")
    assert cached.watermark is not None and cached.size > 0


def test_anything_but_a_current_intact_cache_is_computed_the_full_way(tmp_path: Path) -> None:
    ds = dataset_with_data(tmp_path)
    path = ds.layout.state_cache_path
    doc = json.loads(path.read_text())
    # A cache written before the figures existed: computed, then saved with them.
    path.write_text(json.dumps({k: v for k, v in doc.items() if k != listing.SUMMARY_KEY}))
    assert listing.read(ds.layout) is None
    assert summarize(ds.layout.root, "ds") == summary_from_state(ds)
    assert listing.read(ds.layout) is not None
    # A head that moved on without the cache (another writer's cache write failed).
    path.write_text(json.dumps({**doc, "head": "f1620" + "00" * 32}))
    assert listing.read(ds.layout) is None
    # Damaged figures, a damaged block it names.
    for bad in ({"blocks": -1}, {"records": "7"}, {"updated": 5}):
        path.write_text(json.dumps({**doc, listing.SUMMARY_KEY: {**doc["summary"], **bad}}))
        assert listing.read(ds.layout) is None, bad
    path.write_text(json.dumps(doc))
    assert listing.read(ds.layout) is not None
    seed_block = dict(doc["origins"])["seed"]
    (ds.layout.blocks_dir / seed_block).write_bytes(b"not a block")
    assert listing.read(ds.layout) is None
    broken = summarize(ds.layout.root, "ds")
    assert broken.head is None and broken.error is not None
    assert "content does not match its hash" in broken.error
