"""The engine's class-data sharing archive, across two real engine starts (``python -m
engine_spark``) with a fresh cache directory: the first's JVM writes the archive as it exits
(a detached process renames it into place), the second maps it. Two starts are the least that
can show it (~10-20 s on 2 cores, warm-up off; minutes under heavy load); the other
engine-process fixtures share the user's cache, so they cannot start fresh."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine_spark.class_data_sharing import ARCHIVE_SUFFIX, TEMP_SUFFIX
from tests.support.engine_server import engine_server_process

pytestmark = [pytest.mark.spark, pytest.mark.grpc]


def _children(pid: int) -> list[int]:
    """Child processes of every thread of ``pid`` (the JVM is started by a worker thread)."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return [int(p) for task in tasks for p in (task / "children").read_text().split()]


def _mapped_files(pid: int) -> str:
    return "".join(Path(f"/proc/{child}/maps").read_text() for child in _children(pid))


def test_first_start_writes_the_archive_and_the_next_maps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ODF_ENGINE_CDS", raising=False)
    cache = tmp_path / "cache" / "odf" / "cds"
    # Left by a killed run: a temporary archive of a process that no longer exists.
    cache.mkdir(parents=True)
    dead = cache / f"{'0' * 32}.999999999.dead{TEMP_SUFFIX}"
    dead.write_bytes(b"half")
    os.utime(dead, (0, 0))

    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    with engine_server_process(extra_args=["--warm-up", "off"], log_path=first_log) as first:
        assert not list(cache.glob(f"*{ARCHIVE_SUFFIX}"))  # written only when the JVM exits
        assert first.terminate() == 0  # at once: a detached process waits for the archive
    # Its JVM writes ~110 MB as it exits: seconds, or a minute on a loaded machine.
    deadline = time.monotonic() + 300
    while not (archives := list(cache.glob(f"*{ARCHIVE_SUFFIX}"))):
        assert time.monotonic() < deadline, os.listdir(cache)
        time.sleep(0.5)
    assert len(archives) == 1, os.listdir(cache)
    assert archives[0].stat().st_size > 1_000_000
    assert not list(cache.glob(f"*{TEMP_SUFFIX}"))  # its own renamed, the dead one removed

    with engine_server_process(extra_args=["--warm-up", "off"], log_path=second_log) as second:
        assert str(archives[0]) in _mapped_files(second.process.pid)
    assert os.listdir(cache) == [archives[0].name]  # used, not rewritten
    for log in (first_log, second_log):
        assert "[cds" not in log.read_text(errors="replace")  # no JVM CDS warnings
