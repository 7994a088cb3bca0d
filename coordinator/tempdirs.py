"""Temporary and staging directories that are safe against symlinks and killed commands.

- ``require_real_dir``: a directory the coordinator creates for its own temporary files (a
  dataset's ``.coordinator/staging``) must be a real directory, never a symbolic link: a link
  would make clean-ups delete files at its target. Such a path is refused with an error.
- ``remove_tree``: deletes a directory without following symbolic links (a link is unlinked,
  its target untouched; ``shutil.rmtree`` works on file descriptors and never descends into
  links).
- ``owned_temp_dir``: a fresh ``mkdtemp`` directory holding a lock file that its process keeps
  ``flock``ed while the directory is in use. The kernel drops the lock when the process dies,
  so ``clean_dead`` (run before each new directory is made) removes exactly the leftovers of
  killed commands, never a directory a live command is using, whatever its age.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from common.odf.errors import OdfError
from common.processes import pid_alive as pid_alive  # where the coordinator looked for it

LOCK_NAME = ".odf-owner.lock"
MIN_AGE_SECONDS = 10.0
"""Directories younger than this are never cleaned: their creator may not hold the lock yet."""
UNLOCKED_AGE_SECONDS = 86400.0
"""Directories without a lock file (made by older versions) are cleaned after a day."""


class UnsafePathError(OdfError):
    """A path the coordinator uses for temporary files is a symbolic link or not a directory."""


class SharedStagingError(OdfError):
    """The shared staging directory (``engine.stagingDir``) cannot be used."""


def check_shared_dir(shared: Path) -> None:
    """``shared`` must be an existing, writable real directory (not a link)."""
    where = f"engine.stagingDir {str(shared)!r}"
    try:
        st = shared.lstat()
    except OSError as e:
        raise SharedStagingError(f"{where}: {e.strerror or e} (create it on shared storage)") from e
    if stat.S_ISLNK(st.st_mode):
        raise SharedStagingError(f"{where}: is a symbolic link; give the directory it points to")
    if not stat.S_ISDIR(st.st_mode):
        raise SharedStagingError(f"{where}: is not a directory")
    if not os.access(shared, os.W_OK | os.X_OK):
        raise SharedStagingError(f"{where}: is not writable by this user")


def require_real_dir(path: Path, *, create: bool = False) -> bool:
    """Check that ``path`` is a real directory (not a symbolic link); make it when missing and
    ``create``. Returns whether it exists; raises ``UnsafePathError`` for anything else."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        if not create:
            return False
        with suppress(FileExistsError):
            path.mkdir()
        st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(
            f"{path}: is a symbolic link; refusing to use it for temporary files"
            " (remove the link; the coordinator creates this directory itself)"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{path}: is not a directory; refusing to use it for temporary files")
    return True


def remove_tree(path: Path) -> None:
    """Delete ``path`` without following symbolic links; missing is fine, errors are ignored."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        import shutil  # here: the commands that only read (odf list, odf log) start faster

        shutil.rmtree(path, ignore_errors=True)
    else:
        with suppress(OSError):
            path.unlink()


@contextmanager
def owned_temp_dir(prefix: str, parent: Path | None = None) -> Iterator[Path]:
    """``with owned_temp_dir("odf-engine-") as d:`` a new private directory (in ``parent``, by
    default the system's temporary directory), removed on exit, and by ``clean_dead`` once its
    process is dead."""
    import tempfile  # here: the commands that only read (odf list, odf log) start faster

    clean_dead(prefix, parent)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path / LOCK_NAME, flags, 0o600)
    except BaseException:
        remove_tree(path)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        remove_tree(path)
        os.close(fd)


def clean_dead(
    prefix: str,
    parent: Path | None = None,
    *,
    min_age: float = MIN_AGE_SECONDS,
    unlocked_age: float = UNLOCKED_AGE_SECONDS,
) -> list[Path]:
    """Remove the ``prefix*`` directories of ``parent`` whose owning process is dead (their
    lock is not held). Only real directories of this user are considered: symbolic links,
    files and other users' directories are never touched. Returns what was removed."""
    import tempfile

    directory = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    try:
        entries = [e for e in os.scandir(directory) if e.name.startswith(prefix)]
    except OSError:
        return []
    removed = []
    now = time.time()
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        age = now - st.st_mtime
        if age < min_age:
            continue
        held = lock_held(Path(entry.path) / LOCK_NAME)
        if held is True or (held is None and age < unlocked_age):
            continue
        remove_tree(Path(entry.path))
        removed.append(Path(entry.path))
    return removed


def lock_held(lock_path: Path) -> bool | None:
    """Whether a live process holds ``lock_path`` (``None``: there is no such lock file; a
    symbolic link or unreadable file counts as held, so that nothing is removed)."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
