"""The daemon's own dataset locks (``daemon.calls.DatasetLocks``): a call that waits for another
call is told what that call does, and can stop waiting."""

from __future__ import annotations

import threading

import pytest

from coordinator.daemon.calls import DatasetLocks
from coordinator.dataset.writer_locks import (
    COMMAND_TIMEOUT_HINT,
    CallWaits,
    WriterWaitTimeoutError,
)


def test_a_waiting_call_is_told_what_holds_the_dataset_and_may_give_up() -> None:
    locks = DatasetLocks(max_parallel=2)
    told: list[str] = []
    checks: list[int] = []

    def check() -> None:
        checks.append(1)
        if len(checks) == 2:
            raise TimeoutError("the client left")

    failed: list[BaseException] = []

    def waiting_call() -> None:
        try:
            with locks.hold(["Weather"], "pull", CallWaits(told.append, check)):
                pass
        except TimeoutError as e:
            failed.append(e)

    with locks.hold(["weather"], "scheduled pull"):
        thread = threading.Thread(target=waiting_call)
        thread.start()
        thread.join(timeout=30)
    assert told == ["waiting for the daemon's scheduled pull of Weather"]
    assert [str(e) for e in failed] == ["the client left"]
    with locks.hold(["weather"], "pull", CallWaits(told.append, check)):  # released: no wait
        pass
    assert len(told) == 1


def test_a_waiting_call_gives_up_after_its_timeout() -> None:
    locks = DatasetLocks(max_parallel=2)
    failed: list[BaseException] = []

    def waiting_call() -> None:
        with (
            pytest.raises(WriterWaitTimeoutError) as e,
            locks.hold(
                ["weather"], "ingest", CallWaits(lambda line: None, lambda: None, timeout=0.3)
            ),
        ):
            pass
        failed.append(e.value)

    with locks.hold(["weather"], "push"):
        thread = threading.Thread(target=waiting_call)
        thread.start()
        thread.join(timeout=30)
    assert [str(e) for e in failed] == [
        "gave up waiting for the daemon's push of weather after 0.3s; try again later, or wait"
        f" longer ({COMMAND_TIMEOUT_HINT})"
    ]
