"""``sync`` between two dataset directories in process (the file:// transport): what moves,
what is refused, and that a refused transfer changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.odf.multihash import Multihash
from coordinator.dataset import ConflictError, Dataset
from coordinator.dataset import commit as tx
from coordinator.dataset.append import append_blocks
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import Destination, ObjectKind, ObjectRef, ObjectSink
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.transfer import Options, Outcome, sync
from coordinator.sharing.transport_file import FileSource
from coordinator.sharing.validation import received_block
from tests.unit.coordinator.events import add_data_for, at, seed, set_schema, write_slice


def source_dataset(root: Path, slices: int, name: bytes = b"src") -> Dataset:
    ds = Dataset(root)
    ds.commit_events([seed(name), set_schema()], expected_head=None, system_time=at(0))
    append_slices(ds, 0, slices)
    return ds


def append_slices(ds: Dataset, first: int, count: int) -> None:
    with ds.staging_dir() as staging:
        for i in range(first, first + count):
            f = write_slice(staging, i * 10, 10, name=f"s{i}")
            prev = None if i == 0 else i * 10 - 1
            ds.commit(
                add_data_for(f, prev, i * 10, 10),
                data_file=f,
                expected_head=ds.head(),
                system_time=at(i + 1),
            )


def source_of(ds: Dataset, limits: Limits | None = None) -> FileSource:
    return FileSource(RemoteLocation(f"file://{ds.layout.root}"), limits or Limits())


def files_of(ds: Dataset) -> set[str]:
    return {
        f"{p.parent.name}/{p.name}"
        for d in ("blocks", "data", "checkpoints", "refs")
        if (ds.layout.root / d).is_dir()
        for p in (ds.layout.root / d).iterdir()
    }


def test_clone_then_update_moves_only_what_is_new(tmp_path: Path) -> None:
    src = source_dataset(tmp_path / "src", 2)
    dst = Dataset(tmp_path / "dst")
    first = sync(dst, source_of(src), "dst", Options())
    assert (first.outcome, first.blocks, first.objects) == (Outcome.UPDATED, 4, 2)
    assert dst.head() == src.head() and files_of(dst) == files_of(src)
    append_slices(src, 2, 1)
    second = sync(dst, source_of(src), "dst", Options())
    assert (second.blocks, second.objects, second.old_head) == (1, 1, first.new_head)
    assert sync(dst, source_of(src), "dst", Options()).outcome is Outcome.UP_TO_DATE
    assert dst.state().last_offset == 29


def test_a_receiver_ahead_is_reported_and_left_alone(tmp_path: Path) -> None:
    src = source_dataset(tmp_path / "src", 1)
    dst = Dataset(tmp_path / "dst")
    sync(dst, source_of(src), "dst", Options())
    append_slices(dst, 1, 1)
    head = dst.head()
    assert sync(dst, source_of(src), "dst", Options()).outcome is Outcome.RECEIVER_AHEAD
    assert dst.head() == head


def test_another_datasets_chain_is_refused(tmp_path: Path) -> None:
    dst = source_dataset(tmp_path / "dst", 1, name=b"one")
    other = source_dataset(tmp_path / "other", 2, name=b"two")
    before = files_of(dst)
    with pytest.raises(RejectedContentError, match="head of another dataset's chain"):
        sync(dst, source_of(other), "dst", Options())
    assert files_of(dst) == before


def test_oversized_head_and_blocks_are_refused(tmp_path: Path) -> None:
    src = source_dataset(tmp_path / "src", 1)
    dst = Dataset(tmp_path / "dst")
    with pytest.raises(RejectedContentError, match="larger than the 100 bytes a block may have"):
        sync(dst, source_of(src, Limits(max_block_bytes=100)), "dst", Options())
    with pytest.raises(RejectedContentError, match="more than 2 new blocks in one transfer"):
        sync(dst, source_of(src), "dst", Options(limits=Limits(max_new_blocks=2)))
    src.layout.head_ref_path.write_bytes(b"f" * 5000)
    with pytest.raises(RejectedContentError, match="refs/head: larger than 1024 bytes"):
        sync(dst, source_of(src), "dst", Options())
    assert not dst.layout.root.exists() or files_of(dst) == set()


def test_an_object_is_cut_off_as_soon_as_it_exceeds_its_size(tmp_path: Path) -> None:
    layout = Dataset(tmp_path / "ds").layout
    staging = tmp_path / "staging"
    staging.mkdir()
    h = Multihash.from_multibase("f1620" + "ab" * 32)
    ref = ObjectRef(ObjectKind.DATA, h, 10, h)
    with pytest.raises(RejectedContentError, match="is larger than the 10 bytes"):  # noqa: SIM117
        with ObjectSink(ref, Destination(layout, staging), "remote") as sink:
            sink.write(b"12345")
            sink.write(b"1234567")
    with pytest.raises(RejectedContentError, match="has physical hash"):  # noqa: SIM117
        with ObjectSink(ref, Destination(layout, staging), "remote") as sink:
            sink.write(b"0123456789")
    assert list(staging.iterdir()) == [] and not layout.data_path(h).exists()


def test_received_blocks_must_hash_to_their_name(tmp_path: Path) -> None:
    src = source_dataset(tmp_path / "src", 1)
    head = src.head()
    assert head is not None
    data = src.get_block_bytes(head)
    assert received_block(head, data, "remote").block.sequence_number == 2
    with pytest.raises(RejectedContentError, match="the block was changed"):
        received_block(head, data[:-1] + bytes([data[-1] ^ 1]), "remote")


def test_append_is_a_compare_and_swap(tmp_path: Path) -> None:
    src = source_dataset(tmp_path / "src", 2)
    dst = Dataset(tmp_path / "dst")
    blocks = [
        received_block(h, src.get_block_bytes(h), "src")
        for h, _ in reversed(list(src.iter_blocks()))
    ]
    with pytest.raises(ConflictError):
        append_blocks(dst, blocks[:2], expected_head=blocks[0].name)
    assert dst.head() is None
    append_blocks(dst, blocks[:2], expected_head=None)
    with pytest.raises(ConflictError):
        append_blocks(dst, blocks[2:3], expected_head=None)
    assert dst.head() == blocks[1].name


def test_a_dataset_in_the_reference_layout_clones_byte_for_byte(tmp_path: Path) -> None:
    """Blocks of both manifest versions (2 and 3), ``refs/head`` without a newline, the
    reference's ``info/summary``: pulled as stored, never re-encoded."""
    from tests.unit.coordinator.events import watermark_only
    from tests.unit.coordinator.test_foreign_dataset import write_foreign

    root = tmp_path / "kamu" / "cities"
    names = write_foreign(root, [seed(b"kamu"), set_schema(), watermark_only(None, at(5))])
    dst = Dataset(tmp_path / "dst")
    result = sync(dst, source_of(Dataset(root)), "dst", Options())
    assert result.blocks == 3 and str(dst.head()) == names[-1]
    for name in names:
        assert (dst.layout.blocks_dir / name).read_bytes() == (root / "blocks" / name).read_bytes()
    assert not (dst.layout.info_dir / "summary").exists()  # info/ is never transferred


def _diverged(tmp_path: Path) -> tuple[Dataset, Dataset, Multihash]:
    """A target that diverged from the source after their common block (returned)."""
    src = source_dataset(tmp_path / "src", 1)
    dst = Dataset(tmp_path / "dst")
    sync(dst, source_of(src), "dst", Options())
    common = dst.head()
    assert common is not None
    append_slices(src, 1, 2)
    with dst.staging_dir() as staging:  # the target's own branch: another slice at offset 10
        f = write_slice(staging, 10, 5, name="theirs")
        dst.commit(add_data_for(f, 9, 10, 5), data_file=f, expected_head=common, system_time=at(9))
    return src, dst, common


def test_a_forced_transfer_replaces_the_diverged_branch_in_one_head_move(tmp_path: Path) -> None:
    src, dst, common = _diverged(tmp_path)
    theirs = dst.head()
    heads: list[Multihash | None] = []

    def watch(step: str) -> None:
        heads.append(dst.head())

    tx.step_hook = watch
    try:
        result = sync(dst, source_of(src), "dst", Options(force=True))
    finally:
        tx.step_hook = None
    assert result.new_head == src.head() and dst.head() == src.head()
    assert common not in heads, "the target was at the common block in between"
    assert heads == [theirs, src.head()]  # "stored", then "head_replaced": one move
    assert files_of(dst) == files_of(src)  # the dropped branch's block and slice are gone
    assert dst.state().last_offset == 29


@pytest.mark.parametrize("step", ["stored", "head_replaced"])
def test_a_forced_transfer_killed_mid_commit_leaves_one_of_the_two_heads(
    tmp_path: Path, step: str
) -> None:
    src, dst, _ = _diverged(tmp_path)
    theirs, before = dst.head(), files_of(dst)

    def crash(reached_step: str) -> None:
        if reached_step == step:
            raise KeyboardInterrupt  # the process dies here

    tx.step_hook = crash
    try:
        with pytest.raises(KeyboardInterrupt):
            sync(dst, source_of(src), "dst", Options(force=True))
    finally:
        tx.step_hook = None
    Dataset(dst.layout.root).clean_leftovers()  # what the next writer does first
    if step == "stored":  # before the commit point: the old branch, nothing of the new
        assert dst.head() == theirs and files_of(dst) == before
    else:  # past it: the new head, the dropped branch removed by recovery
        assert dst.head() == src.head() and files_of(dst) == files_of(src)
