"""The pipeline lane runs its tasks in order on its own thread, holds at most ``depth`` of
them, and hands a task's error back to the caller."""

from __future__ import annotations

import threading

import pytest

from coordinator.ingest.lane import Lane


def test_tasks_run_in_the_order_given_on_one_other_thread() -> None:
    lane = Lane("test-lane", depth=3)
    done: list[tuple[int, str]] = []
    for i in range(50):
        lane.submit(lambda i=i: done.append((i, threading.current_thread().name)))
    lane.close()
    assert [i for i, _ in done] == list(range(50))
    names = {name for _, name in done}
    assert len(names) == 1 and names != {threading.current_thread().name}


def test_submit_waits_while_depth_tasks_are_pending() -> None:
    lane = Lane("test-lane", depth=2)
    release = threading.Event()
    started = threading.Event()

    def blocked() -> None:
        started.set()
        release.wait(10)

    lane.submit(blocked)
    started.wait(10)
    lane.submit(lambda: None)  # one running, one queued: the lane is full
    third = threading.Thread(target=lane.submit, args=(lambda: None,))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # held back until the running task ends
    release.set()
    third.join(10)
    assert not third.is_alive()
    lane.close()


def test_a_task_error_reaches_the_caller_and_the_lane_still_closes() -> None:
    lane = Lane("test-lane")
    ran: list[int] = []

    def fail() -> None:
        raise ValueError("bad batch")

    lane.submit(fail)
    lane.submit(lambda: ran.append(1))
    with pytest.raises(ValueError, match="bad batch"):
        lane.close()
    assert ran == [1]  # the later task was not lost mid-way: the thread ended cleanly
    lane.submit(lambda: ran.append(2))  # a closed lane starts a new thread when used again
    lane.close()
    assert ran == [1, 2]


def test_a_lane_holds_at_least_one_task() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Lane("test-lane", depth=0)
