"""``Dataset``: one dataset directory, read and appended to through its metadata chain."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

from common.odf.block import MetadataBlock
from common.odf.errors import NotFoundError, ValidationError
from common.odf.events import AddData, ExecuteTransform, MetadataEvent
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.dataset import commit as tx
from coordinator.dataset import staging, state_cache
from coordinator.dataset.chain import MetadataChain
from coordinator.dataset.errors import CorruptDatasetError
from coordinator.dataset.layout import DatasetLayout
from coordinator.dataset.state import DatasetState, next_system_time

CommitItem = tx.CommitItem


MIN_BLOCK_PREFIX = 8
"""Characters of a block hash that name a block (``odf reset``, ``odf sql --as-of``)."""


class Dataset:
    """A dataset in the ODF on-disk layout (``blocks/``, ``refs/head``, ``data/``, ...).

    Reading never takes a lock: ``refs/head`` and every object change only by atomic
    renames. Writing goes through ``commit``/``commit_events``, which serialize writers with a
    lock and a compare-and-swap of the head.
    """

    def __init__(self, root: Path, *, alias: str | None = None) -> None:
        self.layout = DatasetLayout(root)
        self.alias = alias if alias is not None else root.name
        """The dataset's name in its workspace (the directory name)."""
        self.chain = MetadataChain(self.layout)
        self._state: DatasetState | None = None

    def __repr__(self) -> str:
        return f"Dataset({self.alias!r}, {str(self.layout.root)!r})"

    # --- reading ----------------------------------------------------------------------------

    @property
    def id(self) -> DatasetID:
        """The ``did:odf`` identity from the Seed block."""
        state = self.state()
        if state.id is None:
            raise CorruptDatasetError(f"dataset {self.alias!r} has no Seed block")
        return state.id

    def head(self) -> Multihash | None:
        """The hash of the last block, or ``None`` when the chain is empty."""
        return self.chain.head()

    def get_block(self, hash_: Multihash) -> MetadataBlock:
        return self.chain.get_block(hash_)

    def get_block_bytes(self, hash_: Multihash) -> bytes:
        """The stored block manifest, exactly as hashed (verified on read)."""
        return self.chain.get_block_bytes(hash_)

    def iter_blocks(
        self, start: Multihash | None = None
    ) -> Iterator[tuple[Multihash, MetadataBlock]]:
        """``(hash, block)`` pairs from ``start`` (default: the head) back to the Seed."""
        return self.chain.iter_blocks(start)

    def state(self) -> DatasetState:
        """The summary of the dataset as of its current head (see ``DatasetState``).

        Prepared from the head and the last data block, not by scanning the chain: a cached
        state is brought up to date with the blocks added since it was saved.
        """
        head = self.head()
        if self._state is not None and self._state.head == head:
            return self._state
        state, cache_current = state_cache.compute(self.chain, head)
        if not cache_current:
            state_cache.save(self.chain, state)
        self._state = state
        return state

    def data_path(self, physical_hash: Multihash) -> Path:
        """Where the data slice with this physical hash is stored (``data/<hash>``)."""
        return self.layout.data_path(physical_hash)

    def checkpoint_path(self, physical_hash: Multihash) -> Path:
        """Where the checkpoint with this physical hash is stored (``checkpoints/<hash>``)."""
        return self.layout.checkpoint_path(physical_hash)

    # --- writing ----------------------------------------------------------------------------

    def staging_dir(self) -> AbstractContextManager[Path]:
        """``with ds.staging_dir() as d:`` a private empty directory on the dataset's filesystem.

        Write data and checkpoint files there, then pass them to ``commit``, which moves
        them into place. The directory and anything left in it are removed on exit, and
        leftovers of killed processes are removed by later calls.
        """
        return staging.staging_dir(self.layout)

    def commit(
        self,
        event: MetadataEvent,
        *,
        data_file: Path | None = None,
        checkpoint_file: Path | None = None,
        expected_head: Multihash | None,
        system_time: datetime | None = None,
    ) -> Multihash:
        """Append one event; returns the new head. See ``commit_events``."""
        item = CommitItem(event, data_file, checkpoint_file)
        return self.commit_events([item], expected_head=expected_head, system_time=system_time)[-1]

    def commit_events(
        self,
        items: Sequence[CommitItem | MetadataEvent],
        *,
        expected_head: Multihash | None,
        system_time: datetime | None = None,
    ) -> list[Multihash]:
        """Append several events atomically (all or none); returns their block hashes.

        ``expected_head`` is the head the caller prepared the events from (``state().head``);
        if another writer moved it, ``ConflictError`` is raised and nothing changes. Staged
        files are checked against the ``newData``/``newCheckpoint`` of their event (size and
        physical hash, ``StagedFileError``) and moved into ``data/`` and ``checkpoints/``;
        a file already stored under that hash needs no staged file. Every chain rule is
        checked (``AppendValidationError``). All blocks get ``system_time`` (default: now).
        """
        entries = [i if isinstance(i, CommitItem) else CommitItem(i) for i in items]
        if not entries:
            raise ValueError("nothing to commit")
        moves = [m for e in entries for m in tx.check_staged_files(self.layout, e)]
        self.layout.root.mkdir(parents=True, exist_ok=True)
        tx.reached("locking")
        with tx.commit_lock(self.layout):
            tx.reached("locked")
            tx.recover(self.layout, self.chain)
            tx.check_expected_head(self.alias, self.chain, expected_head)
            state = self.state()
            when = system_time if system_time is not None else next_system_time(state)
            blocks, new_state = tx.build_blocks(state, [e.event for e in entries], when)
            tx.write_transaction(self.layout, blocks, moves)
        self._state = new_state
        state_cache.save(self.chain, new_state)
        return [h for h, _ in blocks]

    def find_block(self, prefix: str, *, path: str) -> Multihash:
        """The block of the chain whose hash starts with ``prefix`` (8 characters at least);
        ``ValidationError`` naming ``path`` unless exactly one does."""
        text = prefix.strip()
        matches = [h for h, _ in self.iter_blocks() if h.to_multibase().startswith(text)]
        if len(text) < MIN_BLOCK_PREFIX or len(matches) != 1:
            why = "matches several blocks" if len(matches) > 1 else "is not a block"
            raise ValidationError(f"{text!r} {why} of dataset {self.alias!r}", path=path)
        return matches[0]

    def reset(self, target: Multihash, *, expected_head: Multihash | None) -> list[Multihash]:
        """Move the head back to ``target``, a block of the chain; the blocks after it and
        the data and checkpoint files only they name are deleted (``commit.write_reset``).
        Returns the removed blocks' hashes, newest first."""
        with tx.commit_lock(self.layout):
            tx.recover(self.layout, self.chain)
            tx.check_expected_head(self.alias, self.chain, expected_head)
            dropped, removed = self.dropped_after(target)
            tx.write_reset(self.layout, target, removed)
        self._state = None
        return dropped

    def dropped_after(
        self, target: Multihash, *, still_named: frozenset[Path] = frozenset()
    ) -> tuple[list[Multihash], list[Path]]:
        """What moving the head back to ``target`` drops: the blocks after it (newest first),
        and the files to delete: those blocks and the objects only they name (except
        ``still_named``, e.g. objects of blocks that replace them)."""
        dropped: list[tuple[Multihash, MetadataBlock]] = []
        for h, block in self.iter_blocks():
            if h == target:
                break
            dropped.append((h, block))
        else:
            raise NotFoundError(f"block {target} is not in the chain of dataset {self.alias!r}")
        kept = {p for _, b in self.iter_blocks(target) for p in self._objects(b.event)}
        kept |= still_named
        removed = [self.layout.block_path(h) for h, _ in dropped]
        removed += [p for _, b in dropped for p in self._objects(b.event) if p not in kept]
        return [h for h, _ in dropped], list(dict.fromkeys(removed))

    def objects_of(self, event: MetadataEvent) -> list[Path]:
        """The data and checkpoint files an event names, in this dataset's layout."""
        return self._objects(event)

    def _objects(self, event: MetadataEvent) -> list[Path]:
        """The data and checkpoint files an event names."""
        found = []
        if isinstance(event, AddData | ExecuteTransform):
            if event.new_data is not None:
                found.append(self.data_path(event.new_data.physical_hash))
            if event.new_checkpoint is not None:
                found.append(self.checkpoint_path(event.new_checkpoint.physical_hash))
        return found

    def clean_leftovers(self) -> None:
        """Remove what interrupted commits and killed writers left behind (never live data)."""
        if not self.layout.root.is_dir():
            return
        with tx.commit_lock(self.layout):
            tx.recover(self.layout, self.chain)
        staging.clean_stale(self.layout)
