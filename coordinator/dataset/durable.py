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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
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


def _write_file(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; durably unless ``sync`` is false.

    Without ``sync`` the file is still never seen half-written, but may be lost (or be
    empty after a power loss): only for caches that are checked when read.
    """
    tmp = pending_name(path)
    try:
        _write_file(tmp, data, sync=sync)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


PARALLEL_FSYNCS = 8


def write_new_all(files: Sequence[tuple[Path, bytes]]) -> None:
    """Write immutable content-addressed objects (``(path, bytes)``) that do not exist yet.

    Each appears atomically: written under a pending name, fsync'd, renamed. The fsyncs of
    several run in parallel (the filesystem commits them together, not one journal commit
    after the other), and each directory is fsync'd once. Durable when this returns; on an
    error the pending files are removed (objects already renamed stay: they are complete).
    """
    todo = [(path, data) for path, data in files if not path.exists()]
    pending: list[Path] = []
    try:
        for path, data in todo:
            pending.append(pending_name(path))
            _write_file(pending[-1], data, sync=False)
        if len(pending) == 1:
            _fsync_file(pending[0])
        elif pending:
            with ThreadPoolExecutor(min(PARALLEL_FSYNCS, len(pending))) as pool:
                list(pool.map(_fsync_file, pending))
        for tmp, (path, _) in zip(pending, todo, strict=True):
            os.replace(tmp, path)
    except BaseException:
        for tmp in pending:
            tmp.unlink(missing_ok=True)
        raise
    for directory in {path.parent for path, _ in todo}:
        fsync_dir(directory)


def move_in(src: Path, dst: Path) -> bool:
    """Move a finished file into its content-addressed place ``dst``, durably.

    The source is fsync'd first so that the name never points at unwritten data. When ``dst``
    already exists (same content, same hash) the source is removed and ``False`` returned.
    Falls back to copy + rename when ``src`` is on another filesystem.
    """
    if dst.exists():
        src.unlink(missing_ok=True)
        return False
    _fsync_file(src)
    try:
        os.rename(src, dst)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        _copy_in(src, dst)
        src.unlink(missing_ok=True)
    fsync_dir(dst.parent)
    return True


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_in(src: Path, dst: Path) -> None:
    tmp = pending_name(dst)
    try:
        shutil.copyfile(src, tmp)
        _fsync_file(tmp)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
