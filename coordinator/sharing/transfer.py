"""Synchronizing a dataset from a source: what the receiving side lacks, validated, fetched in
parallel, then committed at once.

``sync`` serves every direction: a pull (the local dataset receives from a remote), a clone
(a new, empty dataset receives), a push to ``file://`` (the target directory receives from
the local dataset, read as a source like any other).

1. Read the source's head; walk its chain back from there, block by block (each checked
   against its name), until a block the receiver has or the Seed.
2. Where the walk stopped decides: the receiver's head (fast-forward); the source's own head
   (the receiver is ahead); another block of the receiver (the chains diverged: refused,
   naming both heads and the last common block, unless forced); the Seed with a non-empty
   receiver (another dataset: always refused).
3. Fold the new blocks onto the receiver's state through every chain rule.
4. Fetch the data files and checkpoints the receiver lacks, in parallel, each checked against
   size and physical hash as it arrives and then stored under its name (content-addressed,
   unreferenced until the head moves: an interrupted pull resumes with what it already has).
5. Append the blocks (``dataset.append``): journal, blocks, a compare-and-swap of ``refs/head``
   against the head read in step 1. A failure anywhere leaves the head where it was, and the
   objects this sync stored are removed again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from common.logs import get_logger
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset, state_cache
from coordinator.dataset.append import ReceivedBlock, append_blocks
from coordinator.dataset.durable import fsync_dir, remove_durably
from coordinator.dataset.state import DatasetState
from coordinator.ingest.progress import NO_PROGRESS, Progress
from coordinator.sharing.errors import DivergedError, RejectedContentError, RemoteError
from coordinator.sharing.limits import DEFAULT_PARALLEL, Limits
from coordinator.sharing.objects import Destination, ObjectRef
from coordinator.sharing.remote_refs import HTTP_SCHEMES, SMART_SCHEMES, RemoteLocation
from coordinator.sharing.transport import DatasetSource
from coordinator.sharing.transport_file import FileSource
from coordinator.sharing.trust import Trust
from coordinator.sharing.validation import check_chain, check_parent, received_block

log = get_logger(__name__)


class Outcome(Enum):
    UP_TO_DATE = "up to date"
    UPDATED = "updated"
    RECEIVER_AHEAD = "ahead"


@dataclass(frozen=True, slots=True)
class SyncResult:
    outcome: Outcome
    old_head: Multihash | None
    new_head: Multihash | None
    blocks: int = 0
    """Blocks transferred."""
    objects: int = 0
    """Data files and checkpoints transferred (those the receiver already had are not)."""
    bytes: int = 0
    """Bytes of the transferred data files and checkpoints."""


def open_source(location: RemoteLocation, options: Options) -> DatasetSource:
    limits, parallel, trust = options.limits, options.parallel, options.trust
    if location.is_file:
        return FileSource(location, limits)
    if location.scheme not in HTTP_SCHEMES and location.scheme not in SMART_SCHEMES:
        raise RemoteError(f"{location}: unsupported scheme")
    from coordinator.sharing.transport_http import HttpSource  # requests: when needed

    if location.scheme in HTTP_SCHEMES:
        return HttpSource(location, limits, connections=parallel, trust=trust)
    from coordinator.sharing.transport_smart import SmartSource  # websockets: when needed

    plain = RemoteLocation(location.url.split("+", 1)[1])  # http(s)://...
    http = HttpSource(plain, limits, connections=parallel, trust=trust)
    return SmartSource(location, http, options.dialect)


@dataclass(frozen=True, slots=True)
class Options:
    limits: Limits = field(default_factory=Limits)
    parallel: int = DEFAULT_PARALLEL
    progress: Progress = NO_PROGRESS
    trust: Trust = field(default_factory=Trust)
    """What ``https://`` remotes are checked with, and the token reads carry."""
    force: bool = False
    """Overwrite a receiver that diverged or is ahead (push ``--force``): the blocks after the
    last common block are replaced by the new ones in one transaction."""
    dialect: str = "auto"
    """The Smart Transfer Protocol's dialect a client speaks (``transport_smart.DIALECTS``)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What a receiver lacks of a source, validated: the new blocks (oldest first, every chain
    rule checked on the state they extend), the objects they name, where the walk met the
    receiver's chain."""

    old_head: Multihash | None
    remote_head: Multihash
    new_blocks: list[ReceivedBlock]
    objects: list[ObjectRef]
    """Every data file and checkpoint the new blocks name (each once)."""
    reset_to: Multihash | None = None
    """A forced transfer onto a receiver that diverged or is ahead: its last common block,
    which the new blocks extend (the receiver's blocks after it are dropped by the same
    transaction that appends them)."""


def plan(
    receiver: Dataset, source: DatasetSource, what: str, options: Options
) -> Plan | SyncResult:
    """Steps 1-3 of the module docstring, reading the receiver only: a ``Plan``, or the
    result when there is nothing to transfer."""
    where = str(source.location)
    old_head = receiver.head()
    remote_head = source.read_head()
    if remote_head is None:
        raise RemoteError(f"{where}: no dataset there (no refs/head)")
    if remote_head == old_head:
        return SyncResult(Outcome.UP_TO_DATE, old_head, old_head)
    known = {h for h, _ in receiver.iter_blocks()} if old_head is not None else set()
    new_blocks, meet = walk(source, remote_head, known, where, options.limits.max_new_blocks)
    if old_head is not None and meet is None:
        raise RejectedContentError(
            f"{where}: refs/head {remote_head} is the head of another dataset's chain (no block"
            f" in common with {what}, whose head is {old_head})"
        )
    reset_to = None
    if meet is not None and meet != old_head:
        if not options.force:
            if not new_blocks:
                return SyncResult(Outcome.RECEIVER_AHEAD, old_head, old_head)
            raise DivergedError(what, local=old_head, remote=remote_head, common=meet)
        reset_to = meet
    base = receiver.state() if reset_to is None else state_at(receiver, reset_to)
    _, objects = check_chain(base, new_blocks, where, options.limits)
    return Plan(old_head, remote_head, new_blocks, objects, reset_to)


def state_at(dataset: Dataset, block: Multihash) -> DatasetState:
    """The dataset's state as of one of its blocks."""
    return state_cache.compute(dataset.chain, block)[0]


def sync(
    receiver: Dataset,
    source: DatasetSource,
    what: str,
    options: Options,
    check: Callable[[Plan], None] | None = None,
) -> SyncResult:
    """Bring ``receiver`` to ``source``'s head; see the module docstring. ``check`` sees the
    plan (the new blocks, checked) before any object is downloaded, and may refuse it."""
    planned = plan(receiver, source, what, options)
    if isinstance(planned, SyncResult):
        return planned
    if check is not None:
        check(planned)
    old_head = planned.old_head
    if planned.reset_to is not None and not planned.new_blocks:
        log.info("resetting to the last common block", dataset=what, block=str(planned.reset_to))
        receiver.reset(planned.reset_to, expected_head=old_head)
        return SyncResult(Outcome.UPDATED, old_head, planned.reset_to)
    missing = [o for o in planned.objects if not o.path_in(receiver.layout).exists()]
    receiver.layout.root.mkdir(parents=True, exist_ok=True)
    with receiver.staging_dir() as staging:
        stored = _fetch_all(source, missing, Destination(receiver.layout, staging), what, options)
    try:
        new_head = append_blocks(
            receiver, planned.new_blocks, expected_head=old_head, replacing_after=planned.reset_to
        )
    except BaseException:
        if receiver.head() != planned.remote_head:  # not past the commit point
            remove_durably(stored)
        raise
    return SyncResult(
        Outcome.UPDATED,
        old_head,
        new_head,
        blocks=len(planned.new_blocks),
        objects=len(missing),
        bytes=sum(o.size for o in missing),
    )


def walk(
    source: DatasetSource, head: Multihash, known: set[Multihash], where: str, limit: int
) -> tuple[list[ReceivedBlock], Multihash | None]:
    """The source's blocks the receiver lacks (oldest first) and the receiver's block where
    the walk stopped (``None``: it reached the Seed); at most ``limit`` blocks."""
    newest_first: list[ReceivedBlock] = []
    current: Multihash | None = head
    while current is not None and current not in known:
        if len(newest_first) >= limit:
            raise RejectedContentError(f"{where}: more than {limit} new blocks in one transfer")
        block = received_block(current, source.read_block(current), where)
        if newest_first:
            check_parent(newest_first[-1], block, where)
        newest_first.append(block)
        current = block.block.prev_block_hash
    newest_first.reverse()
    return newest_first, current


def _fetch_all(
    source: DatasetSource,
    objects: list[ObjectRef],
    into: Destination,
    what: str,
    options: Options,
) -> list[Path]:
    """Receive ``objects`` in parallel; returns the files stored. On the first failure the
    others are cancelled and everything stored is removed before the error is raised."""
    if not objects:
        return []
    progress = options.progress
    count = progress.task(f"{what}: objects", total=len(objects), unit="objects")
    volume = progress.task(f"{what}: bytes", total=sum(o.size for o in objects), unit="B")
    stored: list[Path] = []
    lock = threading.Lock()

    def one(ref: ObjectRef, on_bytes: Callable[[int], None]) -> None:
        source.fetch_object(ref, into, on_bytes)
        with lock:
            stored.append(ref.path_in(into.layout))
        count.advance(1)

    pool = ThreadPoolExecutor(max_workers=max(1, options.parallel), thread_name_prefix="fetch")
    try:
        futures: list[Future[None]] = [pool.submit(one, o, volume.advance) for o in objects]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in done if f.exception() is not None), None)
        if failed is not None:
            pool.shutdown(wait=True, cancel_futures=True)
            remove_durably(stored)
            error = failed.exception()
            assert error is not None
            raise error
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        remove_durably(stored)
        raise
    finally:
        pool.shutdown(wait=True)
        count.close()
        volume.close()
    for directory in {p.parent for p in stored}:
        fsync_dir(directory)
    return stored
