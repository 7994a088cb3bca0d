"""The daemon's own dataset locks (``daemon.calls.DatasetLocks``): a call that waits for another
call is told what that call does, and can stop waiting."""

from __future__ import annotations

from coordinator.daemon.calls import DatasetLocks
from coordinator.dataset.writer_locks import (
    COMMAND_TIMEOUT_HINT,
    CallWaits,
    WriterWaitTimeoutError,
)
from tests.support.threads import raised_in_a_thread


def hold_and_leave(locks: DatasetLocks, name: str, waits: CallWaits) -> None:
    with locks.hold([name], "ingest", waits):
        pass


def test_a_waiting_call_is_told_what_holds_the_dataset_and_may_give_up() -> None:
    locks = DatasetLocks(max_parallel=2)
    told: list[str] = []
    checks: list[int] = []

    def check() -> None:
        checks.append(1)
        if len(checks) == 2:
            raise TimeoutError("the client left")

    waits = CallWaits(told.append, check)
    with locks.hold(["weather"], "scheduled pull"):
        failed = raised_in_a_thread(lambda: hold_and_leave(locks, "Weather", waits), TimeoutError)
    assert told == ["waiting for the daemon's scheduled pull of Weather"]
    assert failed == ["the client left"]
    hold_and_leave(locks, "weather", waits)  # released: no wait
    assert len(told) == 1


def test_a_waiting_call_gives_up_after_its_timeout() -> None:
    locks = DatasetLocks(max_parallel=2)
    waits = CallWaits(lambda line: None, lambda: None, timeout=0.3)
    with locks.hold(["weather"], "push"):
        failed = raised_in_a_thread(
            lambda: hold_and_leave(locks, "weather", waits), WriterWaitTimeoutError
        )
    assert failed == [
        "gave up waiting for the daemon's push of weather after 0.3s; try again later, or wait"
        f" longer ({COMMAND_TIMEOUT_HINT})"
    ]
