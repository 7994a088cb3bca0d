"""The staging area: private directories where writers prepare files before a commit.

Each ``staging_dir`` is a fresh directory ``.coordinator/staging/<id>/`` whose process holds
an ``flock`` on the sibling file ``<id>.lock`` while the directory is in use. The kernel drops
the lock when the process dies, so ``clean_stale`` tells leftovers of killed writers from
directories still in use, however old they are. Staged files are moved into the dataset by
the commit (same filesystem, so a rename); the directory is removed when the ``with`` ends.

``.coordinator`` and ``.coordinator/staging`` must be real directories: a symbolic link there
is refused (``UnsafePathError``) before anything is created or removed, and clean-ups never
follow links (a link inside the staging area is unlinked, its target untouched).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coordinator.dataset.layout import DatasetLayout
from coordinator.tempdirs import lock_held, remove_tree, require_real_dir

_LOCK_SUFFIX = ".lock"
_MIN_AGE_SECONDS = 10.0
"""Entries younger than this are never cleaned: their creator may not hold the lock yet."""


@contextmanager
def staging_dir(layout: DatasetLayout) -> Iterator[Path]:
    """A new empty directory for files to be committed; removed (with its content) on exit."""
    clean_stale(layout)
    _checked_root(layout, create=True)
    name = f"{os.getpid()}-{secrets.token_hex(6)}"
    lock_path = layout.staging_root / (name + _LOCK_SUFFIX)
    path = layout.staging_root / name
    fd = os.open(
        lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        path.mkdir()
        yield path
    finally:
        remove_tree(path)
        lock_path.unlink(missing_ok=True)
        os.close(fd)


def clean_stale(layout: DatasetLayout, *, min_age: float = _MIN_AGE_SECONDS) -> list[Path]:
    """Remove staging directories whose owner is gone; returns what was removed."""
    root = layout.staging_root
    if not _checked_root(layout, create=False):
        return []
    removed = []
    now = time.time()
    for entry in root.iterdir():
        if entry.name.endswith(_LOCK_SUFFIX):
            continue
        lock_path = root / (entry.name + _LOCK_SUFFIX)
        if _younger_than(entry, now, min_age) or _held(lock_path):
            continue
        remove_tree(entry)
        lock_path.unlink(missing_ok=True)
        removed.append(entry)
    for lock_path in root.glob("*" + _LOCK_SUFFIX):
        entry = root / lock_path.name[: -len(_LOCK_SUFFIX)]
        stale = not entry.exists() and not _younger_than(lock_path, now, min_age)
        if stale and not _held(lock_path):
            lock_path.unlink(missing_ok=True)
    return removed


def _checked_root(layout: DatasetLayout, *, create: bool) -> bool:
    """Whether the staging root exists (made when ``create``); symbolic links are refused."""
    if not layout.root.is_dir():
        return False
    return require_real_dir(layout.private_dir, create=create) and require_real_dir(
        layout.staging_root, create=create
    )


def _younger_than(path: Path, now: float, age: float) -> bool:
    try:
        return now - path.lstat().st_mtime < age
    except FileNotFoundError:
        return True


def _held(lock_path: Path) -> bool:
    """A missing lock file is not held; a link or unreadable one counts as held (kept)."""
    return lock_held(lock_path) is True
