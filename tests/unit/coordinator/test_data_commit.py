"""Commits that carry data files: staging, hash checks, moves, and reading them back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from common.hashing import physical_hash_file
from common.odf.errors import NotFoundError
from common.odf.events import AddData
from common.odf.fragments import Checkpoint, DataSlice
from common.odf.multihash import Multihash
from coordinator.dataset import CommitItem, Dataset, StagedFileError
from coordinator.dataset import commit as tx
from coordinator.query.tail import tail_records
from tests.unit.coordinator.events import add_data_for, at, seed, set_schema, write_slice


def new_dataset(tmp_path: Path, *, with_schema: bool = False) -> Dataset:
    ds = Dataset(tmp_path / "ds")
    ds.commit_events([seed()], expected_head=None, system_time=at(0))
    if with_schema:
        ds.commit(set_schema(), expected_head=ds.head())
    return ds


def first_slice(staging: Path) -> tuple[Path, AddData, DataSlice]:
    """Records 0..4 written in ``staging``, the AddData that commits them first, its newData."""
    path = write_slice(staging, 0, 5)
    event = add_data_for(path, None, 0, 5)
    assert event.new_data is not None
    return path, event, event.new_data


def test_first_data_commit_with_schema_is_atomic(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    with ds.staging_dir() as staging:
        path = write_slice(staging, 0, 5)
        event = add_data_for(path, None, 0, 5)
        hashes = ds.commit_events(
            [set_schema(), CommitItem(event, data_file=path)],
            expected_head=ds.head(),
            system_time=at(1),
        )
        assert not path.exists()  # moved, not copied
    assert event.new_data is not None
    stored = ds.data_path(event.new_data.physical_hash)
    assert stored.parent.name == "data" and stored.name.startswith("f1620")
    assert pq.read_table(stored).num_rows == 5
    assert ds.head() == hashes[-1]
    state = ds.state()
    assert (state.last_offset, state.data_size) == (4, stored.stat().st_size)
    assert not list(ds.layout.staging_root.iterdir())


def test_staged_file_must_match_the_event(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, with_schema=True)
    head = ds.head()
    with ds.staging_dir() as staging:
        path, event, new_data = first_slice(staging)
        wrong_hash = replace(
            event, new_data=replace(new_data, physical_hash=Multihash.sha3_256(b"x"))
        )
        with pytest.raises(StagedFileError, match=r"AddData.newData: .* has physical hash"):
            ds.commit(wrong_hash, data_file=path, expected_head=head)
        wrong_size = replace(event, new_data=replace(new_data, size=1))
        with pytest.raises(StagedFileError, match=r"bytes, the event says 1"):
            ds.commit(wrong_size, data_file=path, expected_head=head)
        with pytest.raises(StagedFileError, match="no file given"):
            ds.commit(event, expected_head=head)
        with pytest.raises(StagedFileError, match="has no newCheckpoint"):
            ds.commit(event, data_file=path, checkpoint_file=path, expected_head=head)
        assert path.exists()
    assert ds.head() == head
    assert not any(ds.layout.data_dir.iterdir())


def test_checkpoint_files_are_stored_by_hash(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "deriv")
    ds.commit_events([seed()], expected_head=None)
    with ds.staging_dir() as staging:
        ckpt = staging / "checkpoint"
        ckpt.write_bytes(b"engine state")
        h = physical_hash_file(ckpt)
        # A root dataset's AddData may carry a checkpoint too.
        event = AddData(new_checkpoint=Checkpoint(physical_hash=h, size=12), new_watermark=at(0))
        ds.commit(event, checkpoint_file=ckpt, expected_head=ds.head())
    assert ds.checkpoint_path(h).read_bytes() == b"engine state"
    assert ds.state().last_checkpoint == h


def test_tail_reads_the_latest_records_across_slices(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, with_schema=True)
    prev = None
    for start, count in ((0, 3), (3, 4), (7, 2)):
        with ds.staging_dir() as staging:
            path = write_slice(staging, start, count)
            ds.commit(
                add_data_for(path, prev, start, count), data_file=path, expected_head=ds.head()
            )
        prev = start + count - 1
    assert tail_records(ds, 5).column("offset").to_pylist() == [4, 5, 6, 7, 8]
    assert tail_records(ds, 3, skip=2).column("offset").to_pylist() == [4, 5, 6]
    assert tail_records(ds, 100).num_rows == 9
    assert tail_records(ds, 5, skip=100).num_rows == 0
    second = [h for h, _ in ds.iter_blocks()][1]  # the head's parent: 7 records then
    assert tail_records(ds, 5, as_of=second).column("offset").to_pylist() == [2, 3, 4, 5, 6]


def _two_slices(tmp_path: Path) -> tuple[Dataset, Multihash, Path]:
    """A dataset with two data slices; the head of the first, and the second's data file."""
    ds = new_dataset(tmp_path)
    with ds.staging_dir() as staging:
        path = write_slice(staging, 0, 5)
        first = ds.commit_events(
            [set_schema(), CommitItem(add_data_for(path, None, 0, 5), data_file=path)],
            expected_head=ds.head(),
            system_time=at(1),
        )[-1]
        path = write_slice(staging, 5, 3, name="more")
        event = add_data_for(path, 4, 5, 3)
        ds.commit(event, data_file=path, expected_head=first, system_time=at(2))
    assert event.new_data is not None
    return ds, first, ds.data_path(event.new_data.physical_hash)


def test_reset_removes_later_blocks_and_their_files(tmp_path: Path) -> None:
    ds, first, later_data = _two_slices(tmp_path)
    removed = ds.reset(first, expected_head=ds.head())
    assert len(removed) == 1 and ds.head() == first
    assert not ds.layout.block_path(removed[0]).exists() and not later_data.exists()
    assert ds.state().last_offset == 4
    with pytest.raises(NotFoundError):
        ds.reset(removed[0], expected_head=first)  # no longer in the chain


def test_a_reset_interrupted_after_the_head_moved_is_completed(tmp_path: Path) -> None:
    ds, first, later_data = _two_slices(tmp_path)
    second = ds.head()
    assert second is not None

    def crash(step: str) -> None:
        if step == "head_replaced":
            raise KeyboardInterrupt  # the process dies at the commit point

    tx.step_hook = crash
    try:
        with pytest.raises(KeyboardInterrupt):
            ds.reset(first, expected_head=second)
    finally:
        tx.step_hook = None
    assert ds.head() == first and later_data.exists()  # moved, not yet cleaned
    again = Dataset(ds.layout.root)
    with again.staging_dir() as staging:  # the next writer recovers first
        path = write_slice(staging, 5, 2, name="other")
        again.commit(add_data_for(path, 4, 5, 2), data_file=path, expected_head=first)
    assert not later_data.exists() and not ds.layout.block_path(second).exists()


def test_hashed_items_are_not_read_again_but_their_sizes_are_checked(tmp_path: Path) -> None:
    """``hashed``: the caller computed the hashes from these staged files (one pass): the
    commit trusts them, so a wrong hash is stored as named, while a size that differs from
    the file (a file changed after hashing) is still refused."""
    ds = new_dataset(tmp_path, with_schema=True)
    head = ds.head()
    with ds.staging_dir() as staging:
        path, event, new_data = first_slice(staging)
        wrong_size = replace(event, new_data=replace(new_data, size=1))
        with pytest.raises(StagedFileError, match=r"bytes, the event says 1"):
            ds.commit_events(
                [CommitItem(wrong_size, data_file=path, hashed=True)], expected_head=head
            )
        ds.commit_events([CommitItem(event, data_file=path, hashed=True)], expected_head=head)
    stored = ds.data_path(new_data.physical_hash)
    assert physical_hash_file(stored) == new_data.physical_hash
