"""Atomic commits to a dataset: data files, then blocks, then a compare-and-swap of the head.

One commit appends one or more blocks (e.g. ``SetDataSchema`` + ``AddData``, or a Seed and
the events of a snapshot) and becomes visible all at once. Under the dataset's commit lock
(``flock`` on ``.coordinator/commit.lock``, released by the kernel if the process dies):

1. recover from an interrupted earlier commit (see ``recover``);
2. compare ``refs/head`` with the head the caller prepared its transaction from; a moved
   head is a ``ConflictError`` and nothing is written;
3. build the blocks and check every chain rule (``rules.validate_append``);
4. write a journal naming the objects this commit is about to create and its new head;
5. move staged data and checkpoint files into ``data/<hash>`` and ``checkpoints/<hash>``;
6. write the block files;
7. replace ``refs/head`` (pending file, fsync, rename, fsync of ``refs/``): the commit point;
8. delete the journal.

Every file appears by an atomic rename, so a crash at any instant leaves the head at its old
block or its new one. Objects of a commit that died before step 7 are unreferenced; the next
commit finds the journal, sees the head is not the journal's, and deletes them, together
with any pending files.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from common.logs import get_logger
from common.odf.block import MetadataBlock
from common.odf.errors import DecodeError
from common.odf.events import AddData, ExecuteTransform, MetadataEvent
from common.odf.fragments import Checkpoint, DataSlice
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash, encode_block
from coordinator.dataset import durable
from coordinator.dataset.chain import MetadataChain
from coordinator.dataset.errors import ConflictError, LockTimeoutError, StagedFileError
from coordinator.dataset.layout import PENDING_PREFIX, DatasetLayout
from coordinator.dataset.rules import validate_append
from coordinator.dataset.state import DatasetState, advance
from coordinator.dataset.writer_locks import lock_exclusively
from coordinator.tempdirs import pid_alive, require_real_dir

log = get_logger(__name__)

LOCK_TIMEOUT_SECONDS = 120.0

step_hook: Callable[[str], None] | None = None
"""For fault tests only, ``None`` otherwise: called with the name of each point a commit
reaches, in the committing thread, so a test can stop or kill the writer exactly there:

- ``"locking"``: the events are prepared, the commit lock is about to be taken;
- ``"locked"``: the lock is held, nothing of the commit is written yet;
- ``"stored"``: journal, data files and blocks are written, the head is not yet replaced;
- ``"head_replaced"``: the commit point has passed, the journal is not yet removed.
"""


def reached(step: str) -> None:
    """Tell ``step_hook``, if any, that a commit reached ``step``."""
    if step_hook is not None:
        step_hook(step)


@dataclass(frozen=True, slots=True)
class CommitItem:
    """One event to append, with the staged files its ``newData``/``newCheckpoint`` name."""

    event: MetadataEvent
    data_file: Path | None = None
    checkpoint_file: Path | None = None
    hashed: bool = False
    """The event's hashes were computed by this process from these very staged files (in a
    staging directory only it writes): the commit checks their sizes and does not read them
    again. Otherwise every staged file is hashed and compared."""


@dataclass(frozen=True, slots=True)
class _Move:
    """Store ``src`` as ``dst``; with no ``src``, ``dst`` must already be stored."""

    src: Path | None
    dst: Path


@contextmanager
def commit_lock(layout: DatasetLayout, timeout: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the dataset's commit lock; waits up to ``timeout`` seconds for another writer."""
    require_real_dir(layout.private_dir, create=True)  # clean-ups delete files in it
    fd = os.open(layout.commit_lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        deadline = time.monotonic() + timeout

        def waiting() -> None:
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"{layout.root}: another process has been committing for over {timeout:.0f}s"
                )

        lock_exclusively(fd, waiting, first_delay=0.005, max_delay=0.1)
        yield
    finally:
        os.close(fd)  # releases the lock


# --- recovery ------------------------------------------------------------------------------


def recover(layout: DatasetLayout, chain: MetadataChain) -> None:
    """Undo what an interrupted commit left behind. Call only while holding the lock.

    If a journal exists and the head is not the journal's new head, the commit never reached
    its commit point: the objects it created are deleted. Pending files in the object
    directories can only belong to dead writers (every writer holds the lock) and are deleted.

    O(1) in the chain's length when the last commit finished: every writer (commit or reset)
    writes its journal before it creates any file in an object directory and removes the
    journal only after the last of them is renamed into place, so pending leftovers there
    imply a journal, and the object directories (one file per block) are scanned only then.
    """
    journal = _read_journal(layout)
    if journal is not None:
        new_head, created, removed = journal
        if chain.head() != new_head:
            log.info("rolling back an interrupted commit", dataset=str(layout.root))
            durable.remove_durably(created)
        elif removed:
            log.info("completing an interrupted reset", dataset=str(layout.root))
            durable.remove_durably(removed)
        _remove_pending_objects(layout)
        durable.remove_durably([layout.journal_path])
    _remove_dead_pending(layout.private_dir)


def _remove_pending_objects(layout: DatasetLayout) -> None:
    """Delete the pending files an interrupted writer left in the object directories."""
    for directory in layout.object_dirs():
        if directory.is_dir():
            with os.scandir(directory) as entries:
                leftovers = [Path(e.path) for e in entries if e.name.startswith(PENDING_PREFIX)]
            durable.remove_durably(leftovers)


def _remove_dead_pending(directory: Path) -> None:
    if not directory.is_dir():
        return
    dead = []
    for p in directory.iterdir():
        if p.name.startswith(PENDING_PREFIX):
            pid = durable.pid_of_pending(p.name)
            if pid is None or not _alive(pid):
                dead.append(p)
    durable.remove_durably(dead)


def _alive(pid: int) -> bool:
    return pid == os.getpid() or pid_alive(pid)


def _read_journal(layout: DatasetLayout) -> tuple[Multihash, list[Path], list[Path]] | None:
    try:
        text = layout.journal_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
        head = Multihash.from_multibase(doc["new_head"])
        created = [layout.root / rel for rel in doc["created"]]
        removed = [layout.root / rel for rel in doc.get("removed", [])]
    except (ValueError, KeyError, TypeError, DecodeError):
        # Written atomically, so this is not a torn write: leave it for a person to look at.
        raise DecodeError(f"{layout.journal_path}: unreadable commit journal") from None
    for p in [*created, *removed]:
        if p.resolve().parent.parent != layout.root.resolve():
            raise DecodeError(f"{layout.journal_path}: names a path outside the dataset: {p}")
    return head, created, removed


def _write_journal(
    layout: DatasetLayout,
    new_head: Multihash,
    created: list[Path],
    removed: Sequence[Path] = (),
) -> None:
    doc = {
        "new_head": new_head.to_multibase(),
        "created": [str(p.relative_to(layout.root)) for p in created],
        "removed": [str(p.relative_to(layout.root)) for p in removed],
    }
    durable.write_atomic(layout.journal_path, json.dumps(doc).encode())


def write_reset(layout: DatasetLayout, target: Multihash, removed: list[Path]) -> None:
    """Move the head back to ``target`` and delete ``removed`` (the blocks after it and the
    objects only they named). The journal names both first, so a reset interrupted after
    the head moved is completed by the next ``recover``, and one interrupted before it
    changes nothing: the chain is never left naming a deleted block, and no block the head
    cannot reach stays behind (``odf verify`` reports such blocks as tampering)."""
    _write_journal(layout, target, [], removed)
    durable.write_atomic(layout.head_ref_path, target.to_multibase().encode("ascii"))
    reached("head_replaced")
    durable.remove_durably(removed)
    _drop_journal(layout)


# --- staged files ----------------------------------------------------------------------------


def check_staged_files(layout: DatasetLayout, item: CommitItem) -> list[_Move]:
    """Check the staged files against the event; returns the moves that store them."""
    event = item.event
    moves = []
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    if isinstance(event, AddData | ExecuteTransform):
        new_data, new_checkpoint = event.new_data, event.new_checkpoint
    kind = type(event).__name__
    for stored, staged, path_of, field, what in (
        (new_data, item.data_file, layout.data_path, "newData", "data"),
        (
            new_checkpoint,
            item.checkpoint_file,
            layout.checkpoint_path,
            "newCheckpoint",
            "checkpoint",
        ),
    ):
        if stored is not None:
            h = stored.physical_hash
            where = f"{kind}.{field}"
            moves += _check_one(staged, path_of(h), h, stored.size, where, hashed=item.hashed)
        elif staged is not None:
            raise StagedFileError(
                f"a {what} file was given but the event has no {field}", path=kind
            )
    return moves


def _check_one(
    src: Path | None, dst: Path, expected: Multihash, size: int, where: str, *, hashed: bool
) -> list[_Move]:
    from common.hashing import physical_hash_file

    if src is None:
        if dst.exists():
            return [_Move(None, dst)]
        raise StagedFileError(f"no file given and {dst.name} is not stored yet", path=where)
    actual_size = src.stat().st_size
    if actual_size != size:
        raise StagedFileError(f"{src} has {actual_size} bytes, the event says {size}", path=where)
    if hashed:
        return [_Move(src, dst)]
    actual = physical_hash_file(src)
    if actual != expected:
        raise StagedFileError(
            f"{src} has physical hash {actual}, the event says {expected}", path=where
        )
    return [_Move(src, dst)]


# --- the transaction ---------------------------------------------------------------------------


def build_blocks(
    state: DatasetState, events: Sequence[MetadataEvent], system_time: datetime
) -> tuple[list[tuple[Multihash, bytes]], DatasetState]:
    """Chain ``events`` onto ``state``'s head, validating each; returns blocks and new state."""
    blocks = []
    for event in events:
        block = MetadataBlock(
            system_time=system_time,
            prev_block_hash=state.head,
            sequence_number=state.sequence_number + 1,
            event=event,
        )
        validate_append(state, block)
        data = encode_block(block)
        h = block_hash(data)
        blocks.append((h, data))
        state = advance(state, h, block)
    return blocks, state


def write_transaction(
    layout: DatasetLayout,
    blocks: list[tuple[Multihash, bytes]],
    moves: list[_Move],
    removed: Sequence[Path] = (),
) -> None:
    """Steps 4-8 of a commit: journal, objects, blocks, head, journal removal.

    ``removed``: files the new head no longer reaches (the blocks of a branch the new blocks
    replace, and the objects only they named), deleted once the head has moved; the journal
    names them, so ``recover`` completes their removal after a crash past the commit point
    and keeps them after a crash before it (the old head still names them)."""
    for d in layout.public_dirs():
        d.mkdir(parents=True, exist_ok=True)
    for m in moves:
        if m.src is None and not m.dst.exists():  # e.g. an orphan that recovery removed
            raise StagedFileError(f"{m.dst.name} is not stored and no file was given")
    new_head = blocks[-1][0]
    created = {m.dst for m in moves if m.src is not None and not m.dst.exists()}
    created |= {layout.block_path(h) for h, _ in blocks if not layout.block_path(h).exists()}
    _write_journal(layout, new_head, sorted(created), removed)
    durable.store_objects(
        [(m.src, m.dst) for m in moves if m.src is not None],
        [(layout.block_path(h), data) for h, data in blocks],
    )
    reached("stored")
    durable.write_atomic(layout.head_ref_path, new_head.to_multibase().encode("ascii"))
    reached("head_replaced")
    durable.remove_durably(list(removed))
    _drop_journal(layout)


def _drop_journal(layout: DatasetLayout) -> None:
    """Remove the journal of a finished commit or reset, without an fsync of its directory.

    Its removal needs no durability: a journal that reappears after a power loss names the
    head the chain is at, so ``recover`` only deletes it again (and, for a reset, its already
    deleted ``removed`` files).
    """
    layout.journal_path.unlink(missing_ok=True)


def check_expected_head(name: str, chain: MetadataChain, expected_head: Multihash | None) -> None:
    actual = chain.head()
    if actual != expected_head:
        raise ConflictError(name, expected=expected_head, actual=actual)
