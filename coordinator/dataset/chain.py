"""Reading a dataset's metadata chain: the head reference and the blocks it links to."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from common.odf.block import MetadataBlock
from common.odf.errors import DecodeError, NotFoundError
from common.odf.multihash import Multihash
from common.serde.block_codec import block_hash, decode_block
from coordinator.dataset.errors import CorruptDatasetError
from coordinator.dataset.layout import DatasetLayout


@dataclass(frozen=True, slots=True)
class NamedBlock:
    """A block of a chain and its name (its hash: what links point at)."""

    name: Multihash
    block: MetadataBlock


class MetadataChain:
    """Read access to ``refs/head`` and ``blocks/`` of one dataset directory.

    Blocks are checked against their hash on every read, so a damaged or misnamed block file
    is reported instead of being silently used.
    """

    def __init__(self, layout: DatasetLayout) -> None:
        self.layout = layout

    def head(self) -> Multihash | None:
        """The head block's hash, or ``None`` for a dataset with no blocks yet."""
        try:
            text = self.layout.head_ref_path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        try:
            return Multihash.from_multibase(text)
        except (DecodeError, UnicodeError) as e:
            raise CorruptDatasetError(
                f"{self.layout.head_ref_path}: not a multihash: {e}"
            ) from None

    def get_block_bytes(self, hash_: Multihash) -> bytes:
        """The stored manifest bytes of a block, verified against its hash."""
        path = self.layout.block_path(hash_)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"block {hash_} not found in {self.layout.root}") from None
        if block_hash(data) != hash_:
            raise CorruptDatasetError(f"{path}: content does not match its hash")
        return data

    def get_block(self, hash_: Multihash) -> MetadataBlock:
        data = self.get_block_bytes(hash_)
        try:
            return decode_block(data)
        except DecodeError as e:
            raise CorruptDatasetError(f"{self.layout.block_path(hash_)}: {e}") from None

    def iter_blocks(
        self, start: Multihash | None = None
    ) -> Iterator[tuple[Multihash, MetadataBlock]]:
        """Blocks from ``start`` (default: the head) back to the Seed, newest first."""
        current = start if start is not None else self.head()
        while current is not None:
            block = self.get_block(current)
            yield current, block
            current = block.prev_block_hash
