"""Shared staging (``engine.stagingDir``): a transaction's exchange files where every node reads.

On a Spark cluster the executors, not the driver, read the input slices and write the output;
they reach only storage mounted on every node. With a shared staging directory a transaction
puts its exchange area there (a fresh ``odf-tx-*`` directory, removed when the transaction ends
and by the next transaction once its process is dead): the inputs' data files (hard links when
the workspace is on the same filesystem, else copies; Arrow IPC slices are written there
directly), the output data file and the checkpoint. After the engine call the outputs are moved
into the dataset's private staging directory, where the transaction hashes and commits them as
without shared staging; until the commit nothing is visible in the dataset.

Executors write into the exchange area with their own user's rights: on a real cluster they run
as the coordinator's user, or the directory's ACLs let them write (the area is created 0700).
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coordinator.tempdirs import check_shared_dir, owned_temp_dir

AREA_PREFIX = "odf-tx-"


@contextmanager
def exchange_area(shared: Path | None, staging: Path) -> Iterator[Path]:
    """Where a transaction's exchange files go: ``staging`` itself, or a fresh private
    directory under the shared staging directory ``shared``, removed on exit."""
    if shared is None:
        yield staging
        return
    check_shared_dir(shared)
    with owned_temp_dir(AREA_PREFIX, shared) as area:
        yield area


def stage_file(source: Path, target: Path) -> Path:
    """``source`` at ``target``: a hard link (same filesystem, no bytes copied) or a copy."""
    try:
        os.link(source, target)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copyfile(source, target)
    return target


def bring_back(source: Path, target: Path) -> None:
    """Move an output file from the exchange area into the dataset's staging directory (a
    rename on one filesystem, else a copy); a missing ``source`` (no output) moves nothing."""
    if not source.exists():
        return
    target.parent.mkdir(exist_ok=True)
    shutil.move(source, target)
