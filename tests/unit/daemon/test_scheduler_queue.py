"""The scheduler's durable queue and lineage rules, and the daemon's dataset locks."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from coordinator.config import Schedule
from coordinator.daemon.calls import DatasetLocks
from coordinator.daemon.scheduler import DurableQueue, QueueState, next_cron_time
from coordinator.transform.lineage import closure

pytestmark = pytest.mark.unit


def test_the_queue_is_a_set_in_order_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    queue = DurableQueue(path)
    assert not queue.existed and queue.state == QueueState()
    assert queue.state.add(["b", "c", "b"])
    assert not queue.state.add(["c"])
    queue.state.heads["a"] = "f1620aa"
    queue.save()
    again = DurableQueue(path)
    assert again.existed
    assert again.state == QueueState(["b", "c"], {"a": "f1620aa"})
    path.write_text("{not json")
    assert DurableQueue(path).state == QueueState()  # unreadable: start empty, say so in logs


def test_upstream_closure() -> None:
    upstream = {"d": ["b", "c"], "b": ["a"], "c": ["a"], "a": []}
    assert closure("d", lambda n: upstream.get(n, [])) == {"a", "b", "c"}
    assert closure("a", lambda n: upstream.get(n, [])) == set()
    cycle = {"x": ["y"], "y": ["x"]}
    assert closure("x", lambda n: cycle[n]) == {"x", "y"}  # a cycle ends


def test_cron_times() -> None:
    every_15 = Schedule("d", cron="*/15 * * * *")
    start = 1_700_000_000.0  # 22:13:20 UTC
    assert next_cron_time(every_15, start) == 1_700_000_100.0  # 22:15:00


def test_dataset_locks_serialize_one_dataset_and_bound_parallel_work() -> None:
    locks = DatasetLocks(max_parallel=2)
    inside: list[str] = []
    overlap = threading.Event()

    def work(names: list[str], tag: str) -> None:
        with locks.hold(names):
            if any(t.startswith(tag[0]) for t in inside):
                overlap.set()  # two holders of the same dataset at once
            inside.append(tag)
            time.sleep(0.05)
            inside.remove(tag)

    threads = [threading.Thread(target=work, args=(["A", "b"], f"a{i}")) for i in range(4)]
    threads += [threading.Thread(target=work, args=(["a"], f"a{i + 4}")) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlap.is_set()
