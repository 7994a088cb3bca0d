"""Stopping engine calls from another thread: a caller runs its work in a ``with
EngineCancel()`` block; each engine call made meanwhile (in that thread or context) registers its
gRPC stream there, and ``EngineCancel.cancel()`` cancels them. The engine sees the call
cancelled and stops the work it runs for it (Spark cancels the call's job group), so the
engine is free for the next call within seconds (``bench/bench_cancel.py``).
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from typing import Any

from coordinator.engine.errors import EngineError


class EngineCallCancelled(EngineError):
    """An engine call stopped because its caller cancelled it."""


class EngineCancel:
    """Cancels the engine calls made in its ``with`` block, now or once cancelled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: list[Any] = []
        self._token: Token[EngineCancel | None] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            streams = list(self._streams)
        for stream in streams:
            stream.cancel()

    def attach(self, stream: Any) -> None:
        """A call's stream (with a ``cancel()``), cancelled at once if this is."""
        with self._lock:
            if not self.cancelled:
                self._streams.append(stream)
                return
        stream.cancel()

    def detach(self, stream: Any) -> None:
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)

    def __enter__(self) -> EngineCancel:
        """Within the block, engine calls made in this context may be stopped by ``cancel``."""
        self._token = _current.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)


_current: ContextVar[EngineCancel | None] = ContextVar("odf_engine_cancel", default=None)


def current() -> EngineCancel | None:
    """The ``EngineCancel`` of this context, if any."""
    return _current.get()
