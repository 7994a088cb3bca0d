"""Appending blocks made elsewhere (pulled from or pushed by another repository).

The blocks are stored exactly as received (never re-encoded: their names are the hashes of
those bytes) by the same transaction as a commit: under the commit lock, after recovery, a
compare-and-swap of ``refs/head`` against the head the caller planned from, every chain rule
checked again, the data and checkpoint files they name already stored (received first), the
journal, the blocks, then the head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common.odf.block import MetadataBlock
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash
from coordinator.dataset import commit as tx
from coordinator.dataset import state_cache
from coordinator.dataset.dataset import Dataset
from coordinator.dataset.errors import AppendValidationError
from coordinator.dataset.rules import validate_append
from coordinator.dataset.state import advance


@dataclass(frozen=True, slots=True)
class ReceivedBlock:
    """A block's stored bytes, its name and its decoded form."""

    name: Multihash
    data: bytes
    block: MetadataBlock


def append_blocks(
    dataset: Dataset,
    blocks: Sequence[ReceivedBlock],
    *,
    expected_head: Multihash | None,
    replacing_after: Multihash | None = None,
) -> Multihash:
    """Append ``blocks`` (oldest first) atomically; returns the new head.

    ``replacing_after``: a block of the chain (a forced push's last common block) that the
    new blocks extend instead of the head; the blocks after it are dropped by the same
    transaction (one head move: the dataset is at its old head or the new one, never at
    the common block), with the objects only they named.

    ``ConflictError`` when the head is no longer ``expected_head``; ``AppendValidationError``
    when a block breaks a chain rule or does not hash to its name; ``StagedFileError`` when
    a file a block names is not stored. Nothing changes on any error.
    """
    if not blocks:
        raise ValueError("no blocks to append")
    for b in blocks:
        if block_hash(b.data) != b.name:
            raise AppendValidationError(f"block {b.name}: its bytes do not hash to its name")
    dataset.layout.root.mkdir(parents=True, exist_ok=True)
    with tx.commit_lock(dataset.layout):
        tx.recover(dataset.layout, dataset.chain)
        tx.check_expected_head(dataset.alias, dataset.chain, expected_head)
        removed: list[Path] = []
        if replacing_after is None or replacing_after == expected_head:
            state = dataset.state()
        else:
            named = frozenset(p for b in blocks for p in dataset.objects_of(b.block.event))
            _, removed = dataset.dropped_after(replacing_after, still_named=named)
            state = state_cache.compute(dataset.chain, replacing_after)[0]
        moves = []
        for b in blocks:
            validate_append(state, b.block)
            moves += tx.check_staged_files(dataset.layout, tx.CommitItem(b.block.event))
            state = advance(state, b.name, b.block)
        tx.write_transaction(dataset.layout, [(b.name, b.data) for b in blocks], moves, removed)
    state_cache.save(dataset.chain, state)
    return blocks[-1].name
