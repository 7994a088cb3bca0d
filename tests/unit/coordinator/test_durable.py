"""Storing a commit's objects: all of them in place or, on a failure, no pending leftovers;
writeback of a file being received."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.hashing.physical import PhysicalHasher
from coordinator.dataset import durable
from coordinator.dataset.durable import start_writeback
from coordinator.dataset.layout import PENDING_PREFIX


def test_objects_are_moved_and_written_into_place(tmp_path: Path) -> None:
    data, blocks = tmp_path / "data", tmp_path / "blocks"
    data.mkdir()
    blocks.mkdir()
    staged = tmp_path / "staged"
    staged.write_bytes(b"records")
    taken = tmp_path / "taken"
    taken.write_bytes(b"same")
    (data / "h2").write_bytes(b"same")
    durable.store_objects(
        [(staged, data / "h1"), (taken, data / "h2")],
        [(blocks / "b1", b"block one"), (blocks / "b2", b"block two")],
    )
    assert (data / "h1").read_bytes() == b"records"
    assert (data / "h2").read_bytes() == b"same"
    assert not staged.exists()
    assert not taken.exists()  # its place held the same content already
    assert (blocks / "b1").read_bytes() == b"block one"
    assert (blocks / "b2").read_bytes() == b"block two"
    assert not [
        p for p in [*data.iterdir(), *blocks.iterdir()] if p.name.startswith(PENDING_PREFIX)
    ]


def test_an_existing_object_is_not_written_again(tmp_path: Path) -> None:
    (tmp_path / "b1").write_bytes(b"stored")
    durable.store_objects([], [(tmp_path / "b1", b"stored")])
    assert (tmp_path / "b1").read_bytes() == b"stored"
    assert [p.name for p in tmp_path.iterdir()] == ["b1"]


def test_a_failed_store_leaves_no_pending_file(tmp_path: Path) -> None:
    blocks = tmp_path / "blocks"
    blocks.mkdir()
    with pytest.raises(FileNotFoundError):
        durable.store_objects(
            [(tmp_path / "missing", tmp_path / "data-h1")], [(blocks / "b1", b"block")]
        )
    assert list(blocks.iterdir()) == []
    assert not (tmp_path / "data-h1").exists()


def test_writeback_of_a_range_keeps_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with open(path, "wb") as f:
        f.write(b"x" * 100_000)
        f.flush()
        start_writeback(f.fileno(), 0, 100_000)
        start_writeback(f.fileno(), 50_000, 10**9)  # past the end: nothing to do, no error
    assert path.read_bytes() == b"x" * 100_000


def test_a_hashed_file_is_hashed_and_written_back_as_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "new"
    file = durable.HashedFile(path)
    pieces = [bytes([i]) * (3 << 20) for i in range(4)]  # past WRITEBACK_BYTES
    assert [file.write(memoryview(p)) for p in pieces] == [len(p) for p in pieces]
    file.sync()
    file.close()
    assert file.closed
    content = path.read_bytes()
    assert content == b"".join(pieces) and file.size == len(content)
    whole = PhysicalHasher()
    whole.update(content)
    assert file.physical_hash() == whole.multihash()
    with pytest.raises(FileExistsError):  # only ever a new file
        durable.HashedFile(path)
