"""Hard compaction of a root dataset (``odf compact --hard``): a new chain with fewer, larger
data files.

As the reference's hard compaction: the chain is rewritten from its seed. Every event is kept,
in order, with its system time, except that a run of consecutive ``AddData`` blocks (nothing
else between them) whose records fit in ``max_records`` becomes one ``AddData``: its slice is
the runs' records as they were (offsets, ``op``, system and event times unchanged) in one
Parquet file, with the run's last watermark, source state and checkpoint. The records, and so
every query over the dataset, are the same; the block hashes are not, which is why it is
explicit (``--hard``) and refused while derivatives have consumed the dataset.

The new chain is built in a directory of its own and swapped with the old one in a single
atomic step (``renameat2`` with ``RENAME_EXCHANGE``): the dataset is at its old chain or its
new one, never between, and never missing.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from common.hashing import LogicalHasher, logical_hash_parquet, physical_hash_file
from common.odf.block import MetadataBlock
from common.odf.errors import OdfError
from common.odf.events import AddData, Seed
from common.odf.fragments import DatasetKind, DataSlice, OffsetInterval
from common.odf.multihash import Multihash
from coordinator.dataset import CommitItem, Dataset
from coordinator.dataset.commit import commit_lock
from coordinator.ingest import DEFAULT_MAX_RECORDS
from coordinator.ingest.slice_file import ROW_GROUP_ROWS
from coordinator.tempdirs import remove_tree

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class CompactionError(OdfError):
    """The dataset cannot be compacted (a derivative, or no atomic swap on this system)."""


@dataclass(frozen=True, slots=True)
class Compacted:
    dataset: str
    head: Multihash
    blocks_before: int
    blocks_after: int
    files_before: int
    files_after: int


def compact(
    dataset: Dataset, datasets_dir: Path, *, max_records: int = DEFAULT_MAX_RECORDS
) -> Compacted:
    """Rewrite ``dataset`` (a root dataset in ``datasets_dir``) with merged slices."""
    state = dataset.state()
    if state.kind is not DatasetKind.ROOT:
        raise CompactionError(
            f"dataset {dataset.alias!r} is not a root dataset: a derivative's transactions"
            " cannot be merged without breaking their replay"
        )
    with commit_lock(dataset.layout):  # other writers wait, then find the new chain
        return _compact_locked(dataset, datasets_dir, max_records)


def _compact_locked(dataset: Dataset, datasets_dir: Path, max_records: int) -> Compacted:
    blocks = list(reversed(list(dataset.iter_blocks())))
    staging = datasets_dir / f".creating-{os.getpid()}-{secrets.token_hex(6)}"
    try:
        new = Dataset(staging, alias=dataset.alias)
        work = staging.parent / f".creating-{os.getpid()}-work-{secrets.token_hex(6)}"
        work.mkdir()
        try:
            head = _write_chain(dataset, new, blocks, work, max_records)
        finally:
            remove_tree(work)
        if dataset.layout.info_dir.is_dir():
            shutil.copytree(dataset.layout.info_dir, new.layout.info_dir, dirs_exist_ok=True)
        _exchange(staging, dataset.layout.root)  # the commit point
    finally:
        remove_tree(staging)  # the old chain after the exchange, the partial new one before
    files_before = sum(1 for _, b in blocks if _has_data(b))
    after = list(Dataset(dataset.layout.root, alias=dataset.alias).iter_blocks())
    return Compacted(
        dataset=dataset.alias,
        head=head,
        blocks_before=len(blocks),
        blocks_after=len(after),
        files_before=files_before,
        files_after=sum(1 for _, b in after if _has_data(b)),
    )


def _has_data(block: MetadataBlock) -> bool:
    return isinstance(block.event, AddData) and block.event.new_data is not None


def _write_chain(
    old: Dataset,
    new: Dataset,
    blocks: list[tuple[Multihash, MetadataBlock]],
    work: Path,
    max_records: int,
) -> Multihash:
    head: Multihash | None = None
    for group in _groups(blocks, max_records):
        last = group[-1]
        event = last.event
        if not isinstance(event, AddData):
            item = CommitItem(event)
        elif len(group) == 1:
            item = CommitItem(event, data_file=_copy_data(old, event, work))
        else:
            item = _merged(old, group, work)
        if isinstance(item.event, Seed):
            head = None
        head = new.commit_events([item], expected_head=head, system_time=last.system_time)[-1]
    assert head is not None
    return head


def _groups(
    blocks: list[tuple[Multihash, MetadataBlock]], max_records: int
) -> Iterator[list[MetadataBlock]]:
    """Blocks in order, consecutive AddData runs grouped while their records fit."""
    run: list[MetadataBlock] = []
    records = 0
    for _, block in blocks:
        event = block.event
        if isinstance(event, AddData):
            n = _records(event)
            if run and records + n > max_records:
                yield run
                run, records = [], 0
            run.append(block)
            records += n
            continue
        if run:
            yield run
            run, records = [], 0
        yield [block]
    if run:
        yield run


def _records(event: AddData) -> int:
    if event.new_data is None:
        return 0
    o = event.new_data.offset_interval
    return o.end - o.start + 1


def _copy_data(old: Dataset, event: AddData, work: Path) -> Path | None:
    if event.new_data is None:
        return None
    target = work / f"copy-{secrets.token_hex(6)}"
    shutil.copyfile(old.data_path(event.new_data.physical_hash), target)
    return target


def _merged(old: Dataset, group: list[MetadataBlock], work: Path) -> CommitItem:
    """One ``AddData`` for a run: the run's slices in one file (none for watermark-only runs),
    with the first block's previous offset and checkpoint and the last block's new state."""
    adds = [b.event for b in group if isinstance(b.event, AddData)]
    assert len(adds) == len(group)
    first, last = adds[0], adds[-1]
    slices = [e.new_data for e in adds if e.new_data is not None]
    path = work / f"merged-{secrets.token_hex(6)}" if slices else None
    event = AddData(
        prev_checkpoint=first.prev_checkpoint,
        prev_offset=first.prev_offset,
        new_data=_write_merged(old, slices, path) if path is not None else None,
        new_checkpoint=last.new_checkpoint,
        new_watermark=last.new_watermark,
        new_source_state=last.new_source_state,
    )
    return CommitItem(event, data_file=path)


def _write_merged(old: Dataset, slices: list[DataSlice], path: Path) -> DataSlice:
    """The slices' records in one Parquet file (the data writer's settings), hashed."""
    schema = pq.read_schema(old.data_path(slices[-1].physical_hash))
    hasher = LogicalHasher(schema)
    with pq.ParquetWriter(
        path,
        schema,
        compression="snappy",
        use_dictionary=True,
        data_page_version="1.0",
        write_statistics=True,
    ) as writer:
        for s in slices:
            table = pq.read_table(old.data_path(s.physical_hash)).cast(schema)
            for batch in table.to_batches():
                hasher.update(batch)
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
    logical_hash = hasher.multihash()
    if hasher.depends_on_reads:  # struct nulls: the reference reads the file
        logical_hash = logical_hash_parquet(path)
    return DataSlice(
        logical_hash=logical_hash,
        physical_hash=physical_hash_file(path),
        offset_interval=OffsetInterval(
            start=slices[0].offset_interval.start, end=slices[-1].offset_interval.end
        ),
        size=path.stat().st_size,
    )


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories atomically (Linux ``renameat2(RENAME_EXCHANGE)``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        raise CompactionError("this system cannot swap directories atomically") from None
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result != 0:
        errno = ctypes.get_errno()
        raise CompactionError(f"cannot swap the compacted chain in: {os.strerror(errno)}")
