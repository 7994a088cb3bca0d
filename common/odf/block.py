"""MetadataBlock and the manifest that wraps its serialized form."""

from __future__ import annotations

from datetime import datetime

from common.odf.events import MetadataEvent
from common.odf.multihash import Multihash
from common.odf.record import record

ODF_METADATA_BLOCK_MULTICODEC = 0x400000
"""Multicodec ``odf-metadata-block``: the manifest ``kind`` of every block."""

BLOCK_VERSION_WRITE = 2
"""ODF 0.35 blocks: Timestamp structs written unaligned."""

BLOCK_VERSIONS_READ = (2, 3)
"""Version 3 is the later layout with 4-aligned Timestamp structs; the content is the same."""


@record
class MetadataBlock:
    system_time: datetime
    prev_block_hash: Multihash | None = None
    sequence_number: int
    event: MetadataEvent
