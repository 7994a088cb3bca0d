"""Objects of a dataset (data files, checkpoints) received into a dataset's object store.

An object is written in a staging directory of the receiving dataset while its physical hash
(``common.hashing.physical``) is computed over the bytes as they arrive, in the receiving
thread, with no second read; more bytes than announced are refused at once, and only a file
of exactly the announced size and physical hash is fsync'd and renamed to its name. Anything
else is deleted: nothing unverified ever carries an object's name. The disk writes the file
back while it is being received (``durable.HashedFile``), so the final fsync finds little
left to do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import TracebackType

from common.odf.multihash import Multihash
from coordinator.dataset.durable import HashedFile
from coordinator.dataset.layout import DatasetLayout
from coordinator.sharing.errors import RejectedContentError


class ObjectKind(Enum):
    DATA = "data"
    CHECKPOINT = "checkpoints"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """An object a block names: where it lives (``data/<hash>``), its announced size."""

    kind: ObjectKind
    physical_hash: Multihash
    size: int
    block: Multihash
    """The first block naming it (for error messages)."""

    @property
    def key(self) -> str:
        """The object key (``data/f1620...``): built from a hash, so free of path tricks."""
        return f"{self.kind.value}/{self.physical_hash.to_multibase()}"

    def path_in(self, layout: DatasetLayout) -> Path:
        if self.kind is ObjectKind.DATA:
            return layout.data_path(self.physical_hash)
        return layout.checkpoint_path(self.physical_hash)


@dataclass(frozen=True, slots=True)
class Destination:
    """Where received objects go: the dataset's object store, through ``staging`` (a private
    directory of the dataset's staging area, on the same filesystem)."""

    layout: DatasetLayout
    staging: Path


class ObjectSink:
    """``with ObjectSink(ref, layout, source) as sink: sink.write(chunk)...``; stored on a
    clean exit when size and hash match, deleted otherwise."""

    def __init__(self, ref: ObjectRef, into: Destination, source: str) -> None:
        self.ref = ref
        self.final = ref.path_in(into.layout)
        self.source = source
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.pending = into.staging / f"{ref.kind.value}-{ref.physical_hash.to_multibase()}"
        self._file = HashedFile(self.pending)

    @property
    def received(self) -> int:
        return self._file.size

    def write(self, chunk: bytes | bytearray | memoryview) -> None:
        view = memoryview(chunk)
        if self.received + view.nbytes > self.ref.size:
            raise self.rejected(f"is larger than the {self.ref.size} bytes its block names")
        self._file.write(view)

    def rejected(self, why: str) -> RejectedContentError:
        return RejectedContentError(
            f"{self.source}: {self.ref.key} (named by block {self.ref.block}) {why}"
        )

    def __enter__(self) -> ObjectSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None:
                self._finish()
                return
        except BaseException:
            self._discard()
            raise
        self._discard()

    def _finish(self) -> None:
        if self.received != self.ref.size:
            raise self.rejected(f"has {self.received} bytes, its block names {self.ref.size}")
        actual = self._file.physical_hash()
        if actual != self.ref.physical_hash:
            raise self.rejected(f"has physical hash {actual}: its content was changed")
        self._file.sync()
        self._file.close()
        os.replace(self.pending, self.final)

    def _discard(self) -> None:
        self._file.close()
        self.pending.unlink(missing_ok=True)
