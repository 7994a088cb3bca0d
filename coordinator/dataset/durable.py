"""Crash-safe file operations: every change becomes visible by one atomic rename.

A file is written under a ``.pending-<pid>-<token>`` name in its final directory, flushed
and fsync'd, renamed over its final name, and the directory is fsync'd so that the rename
itself survives a power loss. A crash at any instant therefore leaves either the old file,
or the new one, plus perhaps a pending leftover that nobody reads.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common.hashing.physical import PhysicalHasher
from common.odf.multihash import Multihash
from coordinator.dataset.layout import PENDING_PREFIX


def pending_name(final: Path) -> Path:
    """A unique temporary name next to ``final``, tagged with this process's id."""
    return final.parent / f"{PENDING_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"


def pid_of_pending(name: str) -> int | None:
    """The writer's process id encoded in a pending file name, if it has one."""
    rest = name[len(PENDING_PREFIX) :]
    head, _, _ = rest.partition("-")
    return int(head) if head.isdigit() else None


def fsync_dir(path: Path) -> None:
    _fsync(path, os.O_DIRECTORY)


def _fsync(path: Path, flags: int = 0) -> None:
    """fsync the file (or, with ``O_DIRECTORY``, the directory) at ``path``."""
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range`` (not in ``os``), or ``None`` where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing ``length`` bytes of ``fd`` from ``offset`` to the disk, without waiting
    (releases the GIL). A file written in large pieces this way is mostly on disk already when
    its ``fsync`` comes: the disk works while the writer goes on, not after it. Only a hint:
    ``fsync`` remains what makes the file durable; a no-op where the call does not exist."""
    function = _sync_file_range()
    if function is not None:
        function(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


WRITEBACK_BYTES = 8 << 20
"""How much a ``HashedFile`` grows between two starts of its writeback."""


class HashedFile:
    """A new file (never an existing one), written sequentially: its physical hash is
    computed from the bytes as they go by (``PhysicalHasher`` releases the GIL on large
    writes), and the disk writes it back as it grows (``start_writeback`` every
    ``WRITEBACK_BYTES``), so the ``fsync`` that makes it durable later finds little left."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._hasher = PhysicalHasher()
        self.size = 0
        self._written_back = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        size = view.nbytes
        self._hasher.update(view)
        while view:
            view = view[os.write(self._fd, view) :]
        self.size += size
        if self.size - self._written_back >= WRITEBACK_BYTES:
            start_writeback(self._fd, self._written_back, self.size - self._written_back)
            self._written_back = self.size
        return size

    def physical_hash(self) -> Multihash:
        """The multihash of everything written so far."""
        return self._hasher.multihash()

    def sync(self) -> None:
        """Make the bytes written durable (``fsync``)."""
        os.fsync(self._fd)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_file(path: Path, data: bytes, *, sync: bool, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, sync: bool = True, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically; durably unless ``sync`` is false; a new
    file of ``mode`` (less the umask; ``0o600`` for secrets).

    Without ``sync`` the file is still never seen half-written, but may be lost (or be
    empty after a power loss): only for caches that are checked when read.
    """
    tmp = pending_name(path)
    try:
        _write_file(tmp, data, sync=sync, mode=mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def _rename_in(src: Path, dst: Path) -> None:
    """Rename a synced file into place; copy (synced) and remove it across file systems."""
    try:
        os.rename(src, dst)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        _copy_in(src, dst)
        src.unlink(missing_ok=True)


def _copy_in(src: Path, dst: Path) -> None:
    tmp = pending_name(dst)
    try:
        shutil.copyfile(src, tmp)
        _fsync(tmp)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_MAX_SYNC_THREADS = 8


def store_objects(moves: Sequence[tuple[Path, Path]], writes: Sequence[tuple[Path, bytes]]) -> None:
    """Store finished files (``moves``: source, place) and new immutable objects (``writes``:
    place, bytes) at their content-addressed places, durably.

    Every object is complete and fsync'd under a private name (its source, or a pending file
    in its final directory) before it is renamed into place, and every directory that got a
    name is fsync'd before this returns, as with one object at a time; the fsyncs of the
    files, then of the directories, run concurrently (an fsync waits for the disk, not the
    CPU, and a journaling file system commits concurrent ones together). An object whose
    place is taken already (same content) is not written again; its source is removed.
    """
    pending: list[tuple[Path, Path]] = []
    try:
        for dst, data in writes:
            if not dst.exists():
                tmp = pending_name(dst)
                pending.append((tmp, dst))
                _write_file(tmp, data, sync=False)
        sources = []
        for src, dst in moves:
            if dst.exists():
                src.unlink(missing_ok=True)
            else:
                sources.append((src, dst))
        _concurrently(_fsync, [p for p, _ in [*sources, *pending]])
        for src, dst in sources:
            _rename_in(src, dst)
        for tmp, dst in pending:
            os.replace(tmp, dst)
    except BaseException:
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)
        raise
    _concurrently(fsync_dir, {dst.parent for _, dst in [*sources, *pending]})


def _concurrently(sync: Callable[[Path], None], paths: Iterable[Path]) -> None:
    todo = list(paths)
    if len(todo) <= 1:
        for p in todo:
            sync(p)
        return
    with ThreadPoolExecutor(min(len(todo), _MAX_SYNC_THREADS)) as pool:
        for done in [pool.submit(sync, p) for p in todo]:
            done.result()


def flush(path: Path) -> None:
    """Write a finished file's data to the disk now (``fsync``), e.g. while it is being read
    for its hashes: storing it later (``store_objects``) then waits for nothing."""
    _fsync(path)


def remove_durably(paths: list[Path]) -> None:
    """Unlink files (missing ones are fine) and fsync their directories."""
    dirs = set()
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            continue
        dirs.add(p.parent)
    for d in dirs:
        fsync_dir(d)
