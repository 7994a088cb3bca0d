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

from common.odf.multihash import Multihash
from common.odf.record import positional_record

HEAD_REF = "head"
PENDING_PREFIX = ".pending-"
"""Prefix of a file being written; it becomes visible only by an atomic rename."""


@positional_record
class DatasetLayout:
    """Where each part of one dataset lives on disk."""

    root: Path

    @property
    def blocks_dir(self) -> Path:
        return self.root / "blocks"

    @property
    def refs_dir(self) -> Path:
        return self.root / "refs"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def info_dir(self) -> Path:
        return self.root / "info"

    @property
    def head_ref_path(self) -> Path:
        return self.refs_dir / HEAD_REF

    def block_path(self, block_hash: Multihash) -> Path:
        return self.blocks_dir / block_hash.to_multibase()

    def data_path(self, physical_hash: Multihash) -> Path:
        return self.data_dir / physical_hash.to_multibase()

    def checkpoint_path(self, physical_hash: Multihash) -> Path:
        return self.checkpoints_dir / physical_hash.to_multibase()

    # --- private bookkeeping (not part of the ODF layout) ---------------------------------

    @property
    def private_dir(self) -> Path:
        return self.root / ".coordinator"

    @property
    def commit_lock_path(self) -> Path:
        """Held (``flock``) by a committing process for the whole commit."""
        return self.private_dir / "commit.lock"

    @property
    def journal_path(self) -> Path:
        """Names the objects an in-flight commit creates, for clean-up after a crash."""
        return self.private_dir / "commit.journal"

    @property
    def state_cache_path(self) -> Path:
        return self.private_dir / "state.json"

    @property
    def staging_root(self) -> Path:
        return self.private_dir / "staging"

    def object_dirs(self) -> tuple[Path, ...]:
        """Directories whose files are written through a pending file and a rename."""
        return (self.blocks_dir, self.data_dir, self.checkpoints_dir, self.refs_dir)

    def public_dirs(self) -> tuple[Path, ...]:
        return (self.blocks_dir, self.refs_dir, self.data_dir, self.checkpoints_dir, self.info_dir)
