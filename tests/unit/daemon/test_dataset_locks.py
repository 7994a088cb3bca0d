"""The daemon's own dataset locks (``daemon.calls.DatasetLocks``): a call that waits for another
call is told what that call does, and can stop waiting."""

from __future__ import annotations

import threading

from coordinator.daemon.calls import DatasetLocks


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
            with locks.hold(["Weather"], "pull", told.append, check):
                pass
        except TimeoutError as e:
            failed.append(e)

    with locks.hold(["weather"], "scheduled pull"):
        thread = threading.Thread(target=waiting_call)
        thread.start()
        thread.join(timeout=30)
    assert told == ["waiting for the daemon's scheduled pull of Weather"]
    assert [str(e) for e in failed] == ["the client left"]
    with locks.hold(["weather"], "pull", told.append):  # released: no wait
        pass
    assert len(told) == 1
