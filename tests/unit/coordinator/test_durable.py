"""Crash-safe writes of content-addressed objects, many at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.dataset.durable import start_writeback, write_new_all


def test_objects_are_written_once_each(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    existing = tmp_path / "a" / "kept"
    existing.write_bytes(b"already there")
    files = [(tmp_path / d / f"o{i}", bytes([i]) * 100) for d in "ab" for i in range(5)]
    write_new_all([*files, (existing, b"other bytes")])
    for path, data in files:
        assert path.read_bytes() == data
    assert existing.read_bytes() == b"already there"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "kept",
        *(f"o{i}" for i in range(5)),
    ]


def test_a_failed_write_leaves_no_pending_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    files = [(tmp_path / "a" / "one", b"1"), (tmp_path / "missing" / "two", b"2")]
    with pytest.raises(FileNotFoundError):
        write_new_all(files)
    assert list((tmp_path / "a").iterdir()) == []


def test_writeback_of_a_range_keeps_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with open(path, "wb") as f:
        f.write(b"x" * 100_000)
        f.flush()
        start_writeback(f.fileno(), 0, 100_000)
        start_writeback(f.fileno(), 50_000, 10**9)  # past the end: nothing to do, no error
    assert path.read_bytes() == b"x" * 100_000
