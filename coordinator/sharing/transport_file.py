"""``file://``: a dataset directory in the ODF layout on a local or mounted filesystem.

Read as the Simple Transfer Protocol would over HTTP: only the four kinds of keys, each
opened without following a symbolic link in its last component and read up to its limit.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from common.odf.multihash import Multihash
from coordinator.sharing.errors import RejectedContentError, RemoteError
from coordinator.sharing.limits import MAX_HEAD_BYTES, Limits
from coordinator.sharing.objects import Destination, ObjectRef
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.transport import CHUNK_BYTES, check_block_size, parse_head, sink_for


class FileSource:
    def __init__(self, location: RemoteLocation, limits: Limits) -> None:
        self.location = location
        self.root = Path(location.file_path())
        self.limits = limits

    def read_head(self) -> Multihash | None:
        try:
            data = self._read(self.root / "refs" / "head", MAX_HEAD_BYTES + 1)
        except FileNotFoundError:
            return None
        return parse_head(data, self.location)

    def read_block(self, block_hash: Multihash) -> bytes:
        key = f"blocks/{block_hash.to_multibase()}"
        try:
            data = self._read(self.root / key, self.limits.max_block_bytes + 1)
        except FileNotFoundError:
            raise RemoteError(f"{self.location}/{key}: missing") from None
        check_block_size(len(data), block_hash, self.location, self.limits)
        return data

    def fetch_object(
        self, ref: ObjectRef, into: Destination, on_bytes: Callable[[int], None]
    ) -> None:
        try:
            fd = self._open(self.root / ref.key)
        except FileNotFoundError:
            raise RejectedContentError(
                f"{self.location}: {ref.key} (named by block {ref.block}) is missing"
            ) from None
        with os.fdopen(fd, "rb", buffering=0) as file, sink_for(ref, into, self.location) as sink:
            while chunk := file.read(CHUNK_BYTES):
                sink.write(chunk)
                on_bytes(len(chunk))

    def close(self) -> None:
        pass

    def _open(self, path: Path) -> int:
        try:
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise RejectedContentError(
                    f"{self.location}: {path.relative_to(self.root)} is a symbolic link"
                ) from None
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                raise FileNotFoundError(path) from None
            raise RemoteError(f"{path}: {e.strerror}") from None

    def _read(self, path: Path, limit: int) -> bytes:
        with os.fdopen(self._open(path), "rb") as file:
            return file.read(limit)
