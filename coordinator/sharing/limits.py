"""Limits on remote content, checked before and while anything is read."""

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
MAX_MESSAGE_BYTES = 256 << 20
"""A Smart Transfer Protocol message, received by a client or a server (the largest real one
is a metadata batch: base64 of tar+gzip); refused from its frame header on."""
MAX_BATCH_BYTES = 256 << 20
"""What the blocks of one metadata batch may inflate to; refused as soon as it passes."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    max_block_bytes: int = MAX_BLOCK_BYTES
    max_new_blocks: int = MAX_NEW_BLOCKS
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_batch_bytes: int = MAX_BATCH_BYTES
    stall_seconds: float = 30.0
    stall_bytes: int = 256 << 10
    """A download that moves fewer than ``stall_bytes`` in a window of ``stall_seconds``
    (about 8.5 kB/s) is a stalled or dripping server: cut off (a read timeout alone lets a
    byte a minute go on forever)."""
    download_origins: tuple[str, ...] = ()
    """Origins (``https://host:port``) a smart server may send its download URLs to, besides
    its own (``--allow-origin``)."""


def origin(url: str) -> str:
    """``scheme://host:port`` of an http(s) URL, the port explicit (pure)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"
