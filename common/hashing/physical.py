"""Physical hashes: SHA3-256 of a file's exact bytes (data part files and checkpoints)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from common.odf.errors import NotFoundError, ValidationError
from common.odf.multihash import SHA3_256, Multihash

READ_CHUNK_BYTES = 1 << 20


def physical_hash_bytes(data: bytes | bytearray | memoryview) -> Multihash:
    """The ``sha3-256`` multihash of ``data``."""
    return Multihash(SHA3_256, hashlib.sha3_256(data).digest())


def physical_hash_file(path: str | Path) -> Multihash:
    """The ``sha3-256`` multihash of a file, read in chunks."""
    hasher = hashlib.sha3_256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(READ_CHUNK_BYTES):
                hasher.update(chunk)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ValidationError("not a regular file", path=str(path)) from None
    return Multihash(SHA3_256, hasher.digest())
