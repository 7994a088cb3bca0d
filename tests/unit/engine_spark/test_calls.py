"""Admission to the bounded queue and cancellation of one call (no Spark, no network)."""

from __future__ import annotations

import threading
import time

import pytest

from engine_spark.calls import (
    Admission,
    CallCancelledError,
    CallControl,
    EngineBusyError,
    bound,
    current,
)


def test_cancel_runs_hooks_once_and_keeps_the_first_reason() -> None:
    control = CallControl("TransformRequest")
    seen: list[str] = []
    control.on_cancel(lambda: seen.append("a"))
    control.cancel("client went away")
    control.cancel("timeout")
    assert seen == ["a"]
    assert control.reason == "client went away"
    with pytest.raises(CallCancelledError, match="TransformRequest cancelled: client went away"):
        control.raise_if_cancelled()


def test_a_hook_registered_after_cancellation_runs_at_once() -> None:
    control = CallControl("x")
    control.cancel("gone")
    seen: list[int] = []
    control.on_cancel(lambda: seen.append(1))
    assert seen == [1]


def test_a_finished_call_ignores_cancellation() -> None:
    control = CallControl("x")
    seen: list[int] = []
    control.on_cancel(lambda: seen.append(1))
    control.finish()
    control.cancel("late")
    assert not control.cancelled and seen == []


def test_a_removed_hook_does_not_run() -> None:
    control = CallControl("x")
    seen: list[int] = []
    remove = control.on_cancel(lambda: seen.append(1))
    remove()
    control.cancel("gone")
    assert seen == []


def test_a_queued_call_gives_up_its_place_when_cancelled() -> None:
    lock = threading.Lock()
    lock.acquire()
    control = CallControl("x")
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            control.acquire(lock)
        except CallCancelledError as e:
            errors.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    control.cancel("deadline passed")
    waiter.join(5)
    assert not waiter.is_alive()
    assert len(errors) == 1
    lock.release()
    assert lock.acquire(blocking=False)  # the cancelled waiter does not hold it


def test_admission_refuses_beyond_one_running_and_the_queue() -> None:
    admission = Admission(max_queue=1)
    a, b, c = CallControl("a"), CallControl("b"), CallControl("c")
    with admission.admit(a), admission.admit(b):
        with (
            pytest.raises(EngineBusyError, match="one call running and 1 queued"),
            admission.admit(c),
        ):
            pass
        admission.cancel_all("stopping")
        assert a.cancelled and b.cancelled and not c.cancelled
    with admission.admit(c):
        pass


def test_current_is_the_bound_control() -> None:
    assert current() is None
    control = CallControl("x")
    with bound(control):
        assert current() is control
    assert current() is None
