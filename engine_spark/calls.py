"""One engine call's life: admission to a bounded queue, and cancellation.

The server admits at most ``running + max_queue`` engine calls at a time (``Admission``); the
next one is turned away (RESOURCE_EXHAUSTED) instead of waiting without bound. Each admitted
call gets a ``CallControl``: the client cancelling or missing its deadline, the per-request
timeout or the server stopping cancel it, which runs the hooks the engine registered (cancel
the call's Spark jobs) and makes the call give up its place in the queue. The engine finds
the control of the call it serves with ``current()`` (a context variable the servicer binds
around the backend call), so the backend's methods keep the protocol's signatures.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from common.odf.errors import OdfError

_POLL_S = 0.1


class CallCancelledError(OdfError):
    """The call was cancelled (``reason`` says by whom) before it finished."""


class EngineBusyError(OdfError):
    """The queue of engine calls is full."""


class CallControl:
    """Cancellation of one call: ``cancel(reason)`` once, hooks run at most once each."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._finished = False
        self._reason: str | None = None
        self._hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str) -> None:
        """Cancel the call unless it has finished; runs every registered hook."""
        with self._lock:
            if self._finished or self._cancelled.is_set():
                return
            self._reason = reason
            self._cancelled.set()
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def finish(self) -> None:
        """The call is done: later cancellations are no-ops."""
        with self._lock:
            self._finished = True
            self._hooks.clear()

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run ``hook`` when the call is cancelled (now, if it already is); returns a remover."""
        with self._lock:
            run_now = self._cancelled.is_set()
            if not run_now:
                self._hooks.append(hook)
        if run_now:
            hook()

        def remove() -> None:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return remove

    def raise_if_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise CallCancelledError(f"{self.name} cancelled: {self._reason}")

    def acquire(self, lock: threading.Lock) -> None:
        """Wait for ``lock`` (the engine's turn) unless the call is cancelled meanwhile."""
        while not lock.acquire(timeout=_POLL_S):
            self.raise_if_cancelled()
        if self._cancelled.is_set():
            lock.release()
            self.raise_if_cancelled()


_current: ContextVar[CallControl | None] = ContextVar("engine_call", default=None)


def current() -> CallControl | None:
    """The control of the call this thread serves (``None`` outside the server)."""
    return _current.get()


@contextmanager
def bound(control: CallControl) -> Iterator[CallControl]:
    """Make ``control`` the current call's control within the block."""
    token = _current.set(control)
    try:
        yield control
    finally:
        _current.reset(token)


class Admission:
    """At most ``1 + max_queue`` engine calls in the server: one running, the rest queued."""

    def __init__(self, max_queue: int) -> None:
        if max_queue < 0:
            raise ValueError("max_queue must be >= 0")
        self.limit = max_queue + 1
        self._lock = threading.Lock()
        self._active: set[CallControl] = set()

    @contextmanager
    def admit(self, control: CallControl) -> Iterator[CallControl]:
        """Hold a place for ``control``; raise ``EngineBusyError`` when there is none."""
        with self._lock:
            if len(self._active) >= self.limit:
                raise EngineBusyError(
                    f"the engine is busy: one call running and {self.limit - 1} queued"
                    " (--max-queue); try again later"
                )
            self._active.add(control)
        try:
            yield control
        finally:
            with self._lock:
                self._active.discard(control)

    def cancel_all(self, reason: str) -> None:
        """Cancel every admitted call (the server is stopping or its engine died)."""
        with self._lock:
            active = list(self._active)
        for control in active:
            control.cancel(reason)
