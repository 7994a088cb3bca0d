"""Size limits on remote content, checked before and while anything is read."""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD_BYTES = 1024
"""``refs/head`` is one multibase multihash (69 characters for SHA3-256)."""
MAX_BLOCK_BYTES = 16 << 20
"""A block manifest; real ones are a few kilobytes (a schema, a query)."""
DEFAULT_MAX_OBJECT_BYTES = 64 << 30
"""A data file or checkpoint, unless ``--max-object-size`` says otherwise."""
DEFAULT_PARALLEL = 8
"""Objects transferred at once, unless ``--parallel`` says otherwise."""
MAX_NEW_BLOCKS = 1_000_000
"""Blocks one transfer may bring: a remote that makes up an endless chain is cut off."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    max_block_bytes: int = MAX_BLOCK_BYTES
    max_new_blocks: int = MAX_NEW_BLOCKS
