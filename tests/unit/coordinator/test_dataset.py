"""Dataset storage on a real directory: layout, reading, commits, conflicts, state cache."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from common.odf.events import AddData, SetInfo, SetVocab
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash
from coordinator.dataset import (
    AppendValidationError,
    ConflictError,
    Dataset,
    DatasetState,
    LockTimeoutError,
    commit,
)
from coordinator.dataset.commit import commit_lock
from coordinator.dataset.state import fold
from tests.unit.coordinator.events import at, seed, set_schema, source_state, watermark_only


def new_dataset(tmp_path: Path) -> Dataset:
    ds = Dataset(tmp_path / "ds")
    ds.commit_events([seed(), set_schema()], expected_head=None, system_time=at(0))
    return ds


def files_of(ds: Dataset) -> set[str]:
    root = ds.layout.root
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and ".coordinator" not in p.parts
    }


def same_state(a: DatasetState, b: DatasetState) -> None:
    assert replace(a, origins=()) == replace(b, origins=())
    assert sorted(a.origins, key=str) == sorted(b.origins, key=str)


def test_layout_is_the_odf_layout(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    head = ds.head()
    assert head is not None
    head_text = (ds.layout.root / "refs" / "head").read_bytes()
    assert head_text == head.to_multibase().encode()  # no newline
    assert head_text.startswith(b"f1620")
    blocks = sorted((ds.layout.root / "blocks").iterdir())
    assert len(blocks) == 2
    for p in blocks:
        assert block_hash(p.read_bytes()).to_multibase() == p.name
    assert files_of(ds) == {"refs/head"} | {f"blocks/{p.name}" for p in blocks}


def test_iter_blocks_goes_from_head_to_seed(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    h3 = ds.commit(SetInfo(description="d"), expected_head=ds.head(), system_time=at(1))
    blocks = list(ds.iter_blocks())
    assert [b.sequence_number for _, b in blocks] == [2, 1, 0]
    assert blocks[0][0] == h3
    assert blocks[1][1].event == set_schema()
    assert ds.get_block(h3).prev_block_hash == blocks[1][0]
    assert block_hash(ds.get_block_bytes(h3)) == h3


def test_state_summarises_the_chain(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    assert ds.id == seed().dataset_id
    ds.commit(SetVocab(event_time_column="date"), expected_head=ds.head(), system_time=at(1))
    ds.commit(
        AddData(new_watermark=at(0), new_source_state=source_state("e1")),
        expected_head=ds.head(),
        system_time=at(2),
    )
    state = ds.state()
    assert state.vocab.event_time_column == "date"
    assert state.vocab.offset_column == "offset"
    assert state.last_watermark == at(0)
    assert state.source_state("default") == source_state("e1")
    assert state.sequence_number == 3
    assert state.schema == set_schema()


def test_invalid_event_leaves_dataset_unchanged(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    before, head = files_of(ds), ds.head()
    with pytest.raises(AppendValidationError, match=r"^AddData.prevOffset: is 3"):
        ds.commit(AddData(prev_offset=3, new_watermark=at(0)), expected_head=head)
    with pytest.raises(AppendValidationError, match="Seed must be the first block"):
        ds.commit_events([SetInfo(description="ok"), seed()], expected_head=head)
    assert files_of(ds) == before
    assert ds.head() == head


def test_stale_expected_head_is_a_conflict(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    old = ds.head()
    other = Dataset(ds.layout.root)  # a second writer with its own view
    new = other.commit(watermark_only(None, at(0)), expected_head=old)
    before = files_of(ds)
    with pytest.raises(ConflictError, match="modified concurrently") as err:
        ds.commit(watermark_only(None, at(1)), expected_head=old)
    assert err.value.actual == new
    assert files_of(ds) == before
    # Retrying from the new head succeeds.
    ds.commit(watermark_only(None, at(1)), expected_head=ds.state().head)
    assert ds.state().last_watermark == at(1)


def test_system_time_defaults_to_now_but_never_goes_back(tmp_path: Path) -> None:
    ds = Dataset(tmp_path / "future")
    far = at(24 * 365 * 100)
    ds.commit(seed(), expected_head=None, system_time=far)
    ds.commit(SetInfo(description="x"), expected_head=ds.head())
    assert ds.state().system_time == far


def test_state_cache_matches_a_full_fold(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    for i in range(5):
        ds.commit(
            AddData(new_watermark=at(i), new_source_state=source_state(f"e{i}")),
            expected_head=ds.head(),
            system_time=at(i),
        )
    ds.commit(SetInfo(description="x"), expected_head=ds.head(), system_time=at(9))
    full = fold(list(reversed(list(ds.iter_blocks()))))
    assert json.loads(ds.layout.state_cache_path.read_text())["head"] == str(ds.head())
    same_state(Dataset(ds.layout.root).state(), full)  # from the cache
    # A cache saved at an older head is brought up to date.
    stale = Dataset(ds.layout.root)
    stale.state()
    other = Dataset(ds.layout.root)
    other.commit(watermark_only(None, at(20)), expected_head=ds.head(), system_time=at(20))
    os.replace(ds.layout.state_cache_path, tmp_path / "newer")
    (tmp_path / "newer").unlink()
    stale._state = None
    same_state(stale.state(), fold(list(reversed(list(ds.iter_blocks())))))


@pytest.mark.parametrize("content", ["{not json", '{"format": 1, "head": "f00"}', ""])
def test_damaged_state_cache_is_ignored(tmp_path: Path, content: str) -> None:
    ds = new_dataset(tmp_path)
    expected = ds.state()
    ds.layout.state_cache_path.write_text(content)
    same_state(Dataset(ds.layout.root).state(), expected)


def test_interrupted_commit_leftovers_are_rolled_back(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    head = ds.head()
    before = files_of(ds)
    # What a commit killed after moving its data in, before the head, leaves behind.
    orphan_data = ds.layout.data_dir / Multihash.sha3_256(b"orphan").to_multibase()
    orphan_block = ds.layout.blocks_dir / Multihash.sha3_256(b"block").to_multibase()
    orphan_data.write_bytes(b"orphan")
    orphan_block.write_bytes(b"block")
    pending = ds.layout.refs_dir / ".pending-999999-abc"
    pending.write_bytes(b"f1620")
    journal = {
        "new_head": orphan_block.name,
        "created": [f"data/{orphan_data.name}", f"blocks/{orphan_block.name}"],
    }
    ds.layout.journal_path.write_text(json.dumps(journal))
    assert ds.head() == head  # leftovers are ignored by readers
    ds.commit(SetInfo(description="next"), expected_head=head)
    assert not orphan_data.exists() and not orphan_block.exists() and not pending.exists()
    assert not ds.layout.journal_path.exists()
    assert len(files_of(ds)) == len(before) + 1


def test_commit_after_a_finished_one_lists_no_object_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O(1) in the chain's length: with no journal there can be no pending leftovers in the
    object directories (one file per block), so the commit path does not list them."""
    ds = new_dataset(tmp_path)
    listed: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def scandir(path: str | os.PathLike[str]) -> object:
        listed.append(os.fspath(path))
        return real_scandir(path)

    def listdir(path: str | os.PathLike[str]) -> list[str]:
        listed.append(os.fspath(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    Dataset(ds.layout.root).commit(SetInfo(description="next"), expected_head=ds.head())
    object_dirs = {str(d) for d in ds.layout.object_dirs()}
    assert not object_dirs & set(listed)


def test_interrupted_commit_pending_objects_are_removed(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    head = ds.head()
    assert head is not None
    # Killed while writing its block: the journal names the block, a pending file is left.
    pending = ds.layout.blocks_dir / ".pending-999999-abc"
    pending.write_bytes(b"half a block")
    block = Multihash.sha3_256(b"never written")
    journal = {"new_head": block.to_multibase(), "created": [f"blocks/{block.to_multibase()}"]}
    ds.layout.journal_path.write_text(json.dumps(journal))
    ds.commit(SetInfo(description="next"), expected_head=head)
    assert not pending.exists() and not ds.layout.journal_path.exists()


def test_completed_commit_journal_keeps_objects(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    head = ds.head()
    assert head is not None
    # Killed after the head moved, before the journal was removed.
    ds.layout.journal_path.write_text(
        json.dumps({"new_head": str(head), "created": [f"blocks/{head}"]})
    )
    ds.clean_leftovers()
    assert ds.layout.block_path(head).exists()
    assert not ds.layout.journal_path.exists()
    assert ds.state().head == head


def test_staging_dirs_are_private_and_cleaned(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    with ds.staging_dir() as d1, ds.staging_dir() as d2:
        assert d1 != d2 and d1.is_dir() and not any(d1.iterdir())
        (d1 / "data").write_bytes(b"x")
        ds.clean_leftovers()  # in use: kept
        assert (d1 / "data").exists()
    assert not d1.exists() and not d2.exists()
    # A killed writer's directory (its lock is no longer held) is removed later.
    stale = ds.layout.staging_root / "12345-dead"
    stale.mkdir()
    (ds.layout.staging_root / "12345-dead.lock").touch()
    old = time.time() - 3600
    os.utime(stale, (old, old))
    with ds.staging_dir():
        pass
    assert not stale.exists()


def test_commit_waits_for_the_lock(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    with (
        commit_lock(ds.layout),
        pytest.raises(LockTimeoutError, match="committing for over"),
        commit_lock(ds.layout, timeout=0.05),
    ):
        pass


def test_step_hook_sees_each_point_of_a_commit_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook fault tests stop writers with: what is on disk at each point it names."""
    ds = new_dataset(tmp_path)
    old = ds.head()
    seen: list[tuple[str, bool, bool]] = []

    def hook(step: str) -> None:
        seen.append((step, ds.head() != old, ds.layout.journal_path.exists()))

    monkeypatch.setattr(commit, "step_hook", hook)
    ds.commit(watermark_only(None, at(1)), expected_head=old)
    assert seen == [
        ("locking", False, False),
        ("locked", False, False),
        ("stored", False, True),  # journal and objects written, head not yet moved
        ("head_replaced", True, True),  # commit point passed, journal not yet removed
    ]
    seen.clear()
    with pytest.raises(ConflictError):
        ds.commit(watermark_only(None, at(2)), expected_head=old)
    assert [step for step, _, _ in seen] == ["locking", "locked"]


def test_state_is_prepared_without_scanning_the_chain(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path)
    for i in range(40):
        ds.commit(watermark_only(None, at(i)), expected_head=ds.head(), system_time=at(i))
    reopened = Dataset(ds.layout.root)
    reads: list[Multihash] = []
    original = reopened.chain.get_block

    def counting(h: Multihash) -> object:
        reads.append(h)
        return original(h)

    reopened.chain.get_block = counting  # type: ignore[method-assign,assignment]
    state = reopened.state()
    assert state.sequence_number == 41 and state.last_watermark == at(39)
    # The head, the Seed, SetDataSchema and the last AddData: not the 42 blocks.
    assert len(reads) <= 4
