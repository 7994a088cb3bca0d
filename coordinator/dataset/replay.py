"""Replaying a metadata chain from its Seed through every chain rule (metadata integrity)."""

from __future__ import annotations

from common.odf.errors import ValidationError
from coordinator.dataset.chain import MetadataChain
from coordinator.dataset.errors import CorruptDatasetError
from coordinator.dataset.rules import validate_append
from coordinator.dataset.state import DatasetState, advance


def replay_chain(chain: MetadataChain) -> DatasetState:
    """Check every block of the chain, oldest first; returns the state at the head.

    Each block is read back and checked against its hash, then against the chain rules as if
    it were being appended. Raises ``CorruptDatasetError`` naming the first bad block.
    """
    blocks = list(chain.iter_blocks())
    state = DatasetState()
    for h, block in reversed(blocks):
        try:
            validate_append(state, block)
        except ValidationError as e:
            raise CorruptDatasetError(
                f"block {block.sequence_number} ({h}) breaks the chain rules: {e}"
            ) from None
        state = advance(state, h, block)
    return state
