"""Writer locks (``coordinator.dataset.writer_locks``): across processes and threads, with the
holder named to whoever waits, a bounded wait, re-entry by the holding thread, and one order
for several datasets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

import pytest

from common.serde.yaml_codec import load_snapshots
from coordinator.app import Application
from coordinator.dataset.writer_locks import (
    COMMAND,
    COMMAND_TIMEOUT_HINT,
    DAEMON,
    LOCKS_DIR,
    CallWaits,
    Writer,
    WriterLocks,
    WriterWaitTimeoutError,
    waiting_as,
)
from coordinator.workspace import Workspace
from tests.support.cli import REPO
from tests.support.datasets import derivative, root
from tests.support.threads import raised_in_a_thread

HOLDER = """
import sys
from pathlib import Path
from coordinator.dataset.writer_locks import WriterLocks
locks = WriterLocks(Path(sys.argv[1]), owner=sys.argv[2])
with locks.hold_keys({"fed01aa": "weather"}, sys.argv[3]):
    print("held", flush=True)
    sys.stdin.read()
"""


@contextmanager
def held_by_process(directory: Path, owner: str, operation: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock of dataset ``fed01aa`` ("weather") until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), owner, operation],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield proc
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_the_holder_is_written_while_held_and_cleared_after(tmp_path: Path) -> None:
    locks = WriterLocks(tmp_path, owner=DAEMON)
    with locks.hold_keys({"fed01aa": "weather"}, "pull"):
        assert locks.holder("fed01aa") == Writer(os.getpid(), DAEMON, "pull", "weather")
    assert locks.holder("fed01aa") is None
    assert (tmp_path / "fed01aa.lock").read_text() == ""


@pytest.mark.process
def test_a_writer_waits_for_another_process_and_says_for_whom(tmp_path: Path) -> None:
    told: list[str] = []
    locks = WriterLocks(tmp_path, on_wait=told.append, timeout=60)
    with held_by_process(tmp_path, COMMAND, "pull") as other:
        acquired = threading.Event()

        def write() -> None:
            with locks.hold_keys({"fed01aa": "weather"}, "ingest"):
                acquired.set()

        thread = threading.Thread(target=write)
        thread.start()
        time.sleep(0.5)
        assert not acquired.is_set()  # still waiting for the other process
        assert told == [f"waiting for another odf process (pid {other.pid}) writing weather"]
    thread.join(timeout=30)
    assert acquired.is_set()
    assert told == [f"waiting for another odf process (pid {other.pid}) writing weather"]


@pytest.mark.process
def test_waiting_for_the_daemon_names_what_it_does_and_times_out(tmp_path: Path) -> None:
    told: list[str] = []
    locks = WriterLocks(tmp_path, on_wait=told.append, timeout=0.5, timeout_hint="--wait-timeout")
    with held_by_process(tmp_path, DAEMON, "pull"):
        started = time.monotonic()
        with (
            pytest.raises(WriterWaitTimeoutError) as e,
            locks.hold_keys({"fed01aa": "weather"}, "pull"),
        ):
            pass
        assert 0.5 <= time.monotonic() - started < 5
    assert told == ["waiting for the daemon's pull of weather"]
    assert str(e.value) == (
        "gave up waiting for the daemon's pull of weather after 0.5s; try again later,"
        " or wait longer (--wait-timeout)"
    )


@pytest.mark.process
def test_a_killed_holder_releases_its_lock(tmp_path: Path) -> None:
    locks = WriterLocks(tmp_path, timeout=10)
    with held_by_process(tmp_path, COMMAND, "pull") as other:
        other.send_signal(signal.SIGKILL)
        other.wait(timeout=30)
        with locks.hold_keys({"fed01aa": "weather"}, "pull"):
            assert locks.holder("fed01aa") == Writer(os.getpid(), COMMAND, "pull", "weather")


def test_the_holding_thread_may_hold_again(tmp_path: Path) -> None:
    locks = WriterLocks(tmp_path, timeout=0.2)
    with locks.hold_keys({"fed01aa": "weather"}, "pull"):
        with locks.hold_keys({"fed01aa": "weather", "fed01bb": "taxi"}, "transform"):
            assert locks.holder("fed01bb") is not None
        assert locks.holder("fed01bb") is None
        assert locks.holder("fed01aa") is not None  # released by the outermost hold only
    assert locks.holder("fed01aa") is None


def test_other_threads_wait_like_other_processes(tmp_path: Path) -> None:
    told: list[str] = []
    locks = WriterLocks(tmp_path, owner=DAEMON, on_wait=told.append, timeout=0.3)
    with locks.hold_keys({"fed01aa": "weather"}, "pull"):
        failed = raised_in_a_thread(
            lambda: _enter(locks.hold_keys({"fed01aa": "weather"}, "ingest")),
            WriterWaitTimeoutError,
        )
    assert len(failed) == 1
    assert told == ["waiting for the daemon's pull of weather"]


def test_several_datasets_are_locked_in_one_order(tmp_path: Path) -> None:
    """Two threads locking the same two datasets, named in opposite orders, never deadlock."""
    locks = WriterLocks(tmp_path, timeout=30)
    done = [0, 0]

    def write(index: int, names: dict[str, str]) -> None:
        for _ in range(50):
            with locks.hold_keys(names, "pull"):
                done[index] += 1

    a = threading.Thread(target=write, args=(0, {"fed01aa": "a", "fed01bb": "b"}))
    b = threading.Thread(target=write, args=(1, {"fed01bb": "b", "fed01aa": "a"}))
    a.start()
    b.start()
    a.join(timeout=60)
    b.join(timeout=60)
    assert done == [50, 50]


def test_a_half_written_holder_reads_as_unknown() -> None:
    assert Writer.from_json('{"pid": 12, "owner": "dae') is None
    assert Writer.from_json("") is None
    assert Writer(7, COMMAND, "pull", "x").describe() == "another odf process (pid 7) writing x"


def test_a_wait_told_elsewhere_stops_when_its_check_raises(tmp_path: Path) -> None:
    """A daemon's call tells its own client and stops waiting once that client is gone."""
    own: list[str] = []
    told: list[str] = []
    checks = []

    def check() -> None:
        checks.append(1)
        if len(checks) == 3:
            raise RuntimeError("cancelled")

    locks = WriterLocks(tmp_path, owner=DAEMON, on_wait=own.append, timeout=30)
    with locks.hold_keys({"fed01aa": "weather"}, "pull"):
        failed = raised_in_a_thread(
            lambda: _enter(
                waiting_as(CallWaits(told.append, check)),
                locks.hold_keys({"fed01aa": "x"}, "pull"),
            ),
            RuntimeError,
        )
    assert failed == ["cancelled"]
    assert told == ["waiting for the daemon's pull of weather"]
    assert own == []


def test_a_call_waits_as_long_as_it_asked(tmp_path: Path) -> None:
    locks = WriterLocks(tmp_path, owner=DAEMON, timeout=600)
    told: list[str] = []
    waits = CallWaits(told.append, lambda: None, timeout=0.3)
    with locks.hold_keys({"fed01aa": "weather"}, "pull"):
        failed = raised_in_a_thread(
            lambda: _enter(waiting_as(waits), locks.hold_keys({"fed01aa": "weather"}, "ingest")),
            WriterWaitTimeoutError,
        )
    assert failed == [
        "gave up waiting for the daemon's pull of weather after 0.3s; try again later, or wait"
        f" longer ({COMMAND_TIMEOUT_HINT})"
    ]


def test_compaction_and_reset_hold_the_dependents_too(tmp_path: Path) -> None:
    """While a dataset reading it is being written, a compaction or a reset of its input waits
    (the dependent could be consuming the blocks they change); told as a wait for it."""
    ws = Workspace.init(tmp_path)
    for text in (
        root("readings", ["value BIGINT"]),
        derivative("doubled", "SELECT event_time, value * 2 AS v FROM readings", ["readings"]),
    ):
        for snapshot in load_snapshots(text):
            ws.create_dataset(snapshot)
    app = Application(ws)
    told: list[str] = []
    app.writers.on_wait, app.writers.timeout = told.append, 0.3
    dependent = ws.open_dataset("doubled")
    other = WriterLocks(ws.odf_dir / LOCKS_DIR)
    with other.hold([dependent], "pull"):
        failed = [
            *raised_in_a_thread(lambda: app.compact("readings"), WriterWaitTimeoutError),
            *raised_in_a_thread(lambda: app.reset("readings", "f1"), WriterWaitTimeoutError),
        ]
    holder = f"another odf process (pid {os.getpid()}) writing doubled"
    assert told == [f"waiting for {holder}"] * 2
    assert [e.split(" after ")[0] for e in failed] == [f"gave up waiting for {holder}"] * 2


def _enter(*blocks: AbstractContextManager[None]) -> None:
    """Enter ``blocks`` (in order) and leave them."""
    with ExitStack() as stack:
        for block in blocks:
            stack.enter_context(block)
