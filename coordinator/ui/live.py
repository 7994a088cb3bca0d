"""What open pages are told as it happens (server-sent events, ``/ui/events``).

``Hub`` fans events out to subscribers (one bounded queue each: a page too slow to read loses
its oldest events, never blocks the daemon). ``commit`` events come from the daemon's commits
(``Hub.committed``, told by the daemon) and from a scan of the datasets' heads every
``SCAN_S`` seconds while someone listens (a commit by another process, a push, a scheduled
pull); ``job`` events are the progress of pulls and verifications started from the UI.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.logs import get_logger

log = get_logger(__name__)

SCAN_S = 1.0
QUEUE_EVENTS = 256
HEARTBEAT_S = 15.0

Heads = Callable[[], dict[str, str]]
"""Every dataset's name and head hash (what a scan compares)."""


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    data: dict[str, Any]

    def encoded(self) -> bytes:
        """The event in the ``text/event-stream`` format (JSON data: one line)."""
        return f"event: {self.kind}\ndata: {json.dumps(self.data)}\n\n".encode()


class Subscription:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.events: queue.Queue[Event] = queue.Queue(QUEUE_EVENTS)

    def offer(self, event: Event) -> None:
        while True:
            try:
                self.events.put_nowait(event)
                return
            except queue.Full:
                with contextlib.suppress(queue.Empty):
                    self.events.get_nowait()

    def next(self, timeout: float) -> Event | None:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.hub._leave(self)


class Hub:
    def __init__(self, heads: Heads) -> None:
        self.heads = heads
        self._subscribers: set[Subscription] = set()
        self._guard = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._seen: dict[str, str] | None = None
        self._jobs = itertools.count(1)
        self._thread: threading.Thread | None = None

    def subscribe(self) -> Subscription:
        subscription = Subscription(self)
        with self._guard:
            self._subscribers.add(subscription)
            if self._thread is None:
                self._thread = threading.Thread(target=self._scan_loop, name="odf-ui-live")
                self._thread.daemon = True
                self._thread.start()
        self._wake.set()
        return subscription

    def _leave(self, subscription: Subscription) -> None:
        with self._guard:
            self._subscribers.discard(subscription)

    def _listening(self) -> list[Subscription]:
        with self._guard:
            return list(self._subscribers)

    def publish(self, event: Event) -> None:
        for subscription in self._listening():
            subscription.offer(event)

    def committed(self, dataset: str) -> None:
        """The daemon committed to ``dataset``: look at the heads now."""
        del dataset  # the scan finds it, with its head
        self._wake.set()

    def new_job(self) -> str:
        return f"job-{next(self._jobs)}"

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()

    def _scan_loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(SCAN_S)
            self._wake.clear()
            if not self._listening():
                self._seen = None
                continue
            try:
                self.scan()
            except Exception:  # a broken dataset must not end the live updates
                log.warning("ui.scan_failed", exc_info=True)

    def scan(self) -> None:
        """Publish a ``commit`` event for each dataset whose head moved since the last scan."""
        heads = self.heads()
        seen, self._seen = self._seen, heads
        if seen is None:
            return
        for name, head in heads.items():
            if seen.get(name) != head:
                self.publish(Event("commit", {"dataset": name, "head": head}))
        for name in seen.keys() - heads.keys():
            self.publish(Event("commit", {"dataset": name, "head": None}))
