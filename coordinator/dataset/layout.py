"""Path math of a dataset directory: the ODF dataset layout plus our private bookkeeping.

The public part is exactly the reference coordinator's layout, so a dataset directory can be
served as-is over the Simple Transfer Protocol (RFC-007) and one written by the reference
coordinator opens unchanged:

- ``blocks/<multihash>``: metadata block manifests (FlatBuffers);
- ``refs/head``: the multibase hash of the head block, no newline;
- ``data/<multihash>``: Parquet data slices, named by physical hash;
- ``checkpoints/<multihash>``: opaque engine checkpoints, named by physical hash;
- ``info/``: summary and configuration files.

Every name is a base16 multibase multihash (``f1620<64 hex>``). Our own files live in a
hidden ``.coordinator/`` directory (commit lock, commit journal, state cache, staging area)
that the transfer protocol never asks for.
"""

from __future__ import annotations

from pathlib import Path
from typing import overload

from common.odf.multihash import Multihash
from common.odf.record import positional_record

HEAD_REF = "head"
PRIVATE_DIR = ".coordinator"
PENDING_PREFIX = ".pending-"
"""Prefix of a file being written; it becomes visible only by an atomic rename."""


class _Under:
    """A path under the dataset's root: ``DatasetLayout(root).<name>`` is ``root/<parts>``."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    @overload
    def __get__(self, layout: None, owner: type) -> _Under: ...

    @overload
    def __get__(self, layout: DatasetLayout, owner: type) -> Path: ...

    def __get__(self, layout: DatasetLayout | None, owner: type) -> Path | _Under:
        return self if layout is None else layout.root.joinpath(*self.parts)


@positional_record
class DatasetLayout:
    """Where each part of one dataset lives on disk."""

    root: Path

    blocks_dir = _Under("blocks")
    refs_dir = _Under("refs")
    data_dir = _Under("data")
    checkpoints_dir = _Under("checkpoints")
    info_dir = _Under("info")
    head_ref_path = _Under("refs", HEAD_REF)

    def block_path(self, block_hash: Multihash) -> Path:
        return self.blocks_dir / block_hash.to_multibase()

    def data_path(self, physical_hash: Multihash) -> Path:
        return self.data_dir / physical_hash.to_multibase()

    def checkpoint_path(self, physical_hash: Multihash) -> Path:
        return self.checkpoints_dir / physical_hash.to_multibase()

    # --- private bookkeeping (not part of the ODF layout) ---------------------------------

    private_dir = _Under(PRIVATE_DIR)
    commit_lock_path = _Under(PRIVATE_DIR, "commit.lock")
    """Held (``flock``) by a committing process for the whole commit."""
    journal_path = _Under(PRIVATE_DIR, "commit.journal")
    """Names the objects an in-flight commit creates, for clean-up after a crash."""
    state_cache_path = _Under(PRIVATE_DIR, "state.json")
    staging_root = _Under(PRIVATE_DIR, "staging")

    def object_dirs(self) -> tuple[Path, ...]:
        """Directories whose files are written through a pending file and a rename."""
        return (self.blocks_dir, self.data_dir, self.checkpoints_dir, self.refs_dir)

    def public_dirs(self) -> tuple[Path, ...]:
        return (self.blocks_dir, self.refs_dir, self.data_dir, self.checkpoints_dir, self.info_dir)
