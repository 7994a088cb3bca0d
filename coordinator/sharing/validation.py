"""Remote content checked before it is accepted (pure: bytes and blocks in, verdicts out).

- each block's bytes hash to the name it was asked by, and decode;
- walking back from the remote head, sequence numbers go down by one to the Seed;
- folded onto the receiving side's state, every chain rule holds (``dataset.rules``: links,
  sequence numbers, the Seed only first, event ordering, contiguous offsets, watermarks,
  checkpoints, schemas);
- each data file and checkpoint a block names has a size within the limit (its bytes are
  then checked against size and physical hash as they arrive, ``objects.ObjectSink``).
"""

from __future__ import annotations

from collections.abc import Sequence

from common.odf.errors import DecodeError, OdfError
from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash, decode_block
from coordinator.dataset.append import ReceivedBlock
from coordinator.dataset.rules import validate_append
from coordinator.dataset.state import DatasetState, advance
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import ObjectKind, ObjectRef


def received_block(name: Multihash, data: bytes, source: str) -> ReceivedBlock:
    """The block ``name`` from its bytes; refused unless they hash to ``name`` and decode."""
    actual = block_hash(data)
    if actual != name:
        raise RejectedContentError(
            f"{source}/blocks/{name}: its bytes hash to {actual}: the block was changed"
        )
    try:
        block = decode_block(data)
    except (DecodeError, ValueError) as e:
        raise RejectedContentError(f"{source}/blocks/{name}: not a metadata block: {e}") from None
    return ReceivedBlock(name, data, block)


def check_parent(child: ReceivedBlock, parent: ReceivedBlock, source: str) -> None:
    """``parent`` (reached by ``child.prevBlockHash``) sits just before ``child``."""
    if parent.block.sequence_number != child.block.sequence_number - 1:
        raise RejectedContentError(
            f"{source}/blocks/{parent.name}: sequence number {parent.block.sequence_number},"
            f" but block {child.name} ({child.block.sequence_number}) links to it"
        )


def check_chain(
    state: DatasetState, blocks: Sequence[ReceivedBlock], source: str, limits: Limits
) -> tuple[DatasetState, list[ObjectRef]]:
    """Fold ``blocks`` (oldest first) onto ``state`` through every chain rule; returns the
    new state and the objects the blocks name (each once, sizes within ``limits``)."""
    objects: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}
    for b in blocks:
        try:
            validate_append(state, b.block)
        except OdfError as e:
            raise RejectedContentError(
                f"{source}/blocks/{b.name} (sequence number {b.block.sequence_number}) breaks a"
                f" chain rule: {e}"
            ) from None
        for ref in objects_of(b):
            if ref.size > limits.max_object_bytes:
                raise RejectedContentError(
                    f"{source}: {ref.key} (named by block {b.name}) has {ref.size} bytes, over"
                    f" the limit of {limits.max_object_bytes}"
                )
            objects.setdefault((ref.kind, ref.physical_hash), ref)
        state = advance(state, b.name, b.block)
    return state, list(objects.values())


def objects_of(b: ReceivedBlock) -> list[ObjectRef]:
    event = b.block.event
    refs = []
    if isinstance(event, AddData | ExecuteTransform):
        if event.new_data is not None:
            d = event.new_data
            refs.append(ObjectRef(ObjectKind.DATA, d.physical_hash, d.size, b.name))
        if event.new_checkpoint is not None:
            c = event.new_checkpoint
            refs.append(ObjectRef(ObjectKind.CHECKPOINT, c.physical_hash, c.size, b.name))
    return refs
