"""How the daemon runs one call: progress streamed while it works, cancellation, errors as gRPC
status codes, per-dataset serialization and a limit on parallel work.

``stream_call`` runs the work in its own thread and yields what it emits: progress reaches the
client while a long step (an ingest, a transaction) is still running. When the client cancels
or the deadline passes, the next progress report of the work raises ``CallCancelled``, which
unwinds it; since every commit is atomic, a cancelled call leaves each dataset at its old head
or at a new one, never between.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import grpc

from common.logs import get_logger
from common.odf.errors import OdfError
from coordinator.daemon.errors import ErrorKind, kind_of, message_of
from coordinator.dataset.writer_locks import CallWaits, timed_out, waiting_as
from coordinator.ingest.progress import Progress, ProgressTask

log = get_logger(__name__)

M = TypeVar("M")
Emit = Callable[[Any], None]

_POLL_S = 0.1


class CallCancelled(OdfError):
    """The client cancelled the call, or its deadline passed."""


_STATUS = {
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.FAILED: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.INTERNAL: grpc.StatusCode.INTERNAL,
}


def status_of(error: BaseException) -> grpc.StatusCode:
    """The gRPC status code of an error raised by the application."""
    if isinstance(error, CallCancelled):
        return grpc.StatusCode.CANCELLED
    return _STATUS[kind_of(error)]


def abort(context: grpc.ServicerContext, error: BaseException) -> NoReturn:
    code = status_of(error)
    if code is grpc.StatusCode.INTERNAL:
        log.error("daemon.call_failed", error=repr(error), exc_info=error)
    else:
        log.info("daemon.call_refused", code=code.name, error=message_of(error))
    context.abort(code, message_of(error))


def unary(context: grpc.ServicerContext, work: Callable[[], M]) -> M:
    """``work()``, its errors as status codes."""
    try:
        return work()
    except Exception as e:
        abort(context, e)


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


_DONE = object()


def stream_call(
    context: grpc.ServicerContext, work: Callable[[Emit], None], *, name: str
) -> Iterator[Any]:
    """Run ``work(emit)`` in a thread; yield each message it emits, as it emits it."""
    messages: queue.Queue[Any] = queue.Queue()
    finished = threading.Event()
    context.add_callback(finished.set)  # the call ended: completed, cancelled or timed out

    def emit(message: Any) -> None:
        if finished.is_set():
            raise CallCancelled(f"{name}: the call was cancelled or its deadline passed")
        messages.put(message)

    def run() -> None:
        try:
            work(emit)
            messages.put(_DONE)
        except BaseException as e:  # handed to the call's thread, which reports it
            messages.put(_Failed(e))

    threading.Thread(target=run, name=f"odf-call-{name}", daemon=True).start()
    while True:
        try:
            item = messages.get(timeout=_POLL_S)
        except queue.Empty:
            if finished.is_set() or not context.is_active():
                log.info("daemon.call_cancelled", call=name)
                return
            continue
        if item is _DONE:
            return
        if isinstance(item, _Failed):
            abort(context, item.error)
        yield item


@dataclass(frozen=True, slots=True)
class Waits:
    """How a call that may wait for other writers waits (``CallWaits``): it tells its client
    (a ``waiting`` event of the call's event type), stops once the client is gone, and waits
    at most the ``wait_timeout`` of its request (none: the workspace's)."""

    waits: CallWaits

    @classmethod
    def of(cls, context: grpc.ServicerContext, emit: Emit, event_type: Any, request: Any) -> Waits:
        def check() -> None:
            if not context.is_active():
                raise CallCancelled("the call was cancelled while it waited for another writer")

        timeout = request.wait_timeout if request.HasField("wait_timeout") else None
        return cls(CallWaits(lambda line: emit(event_type(waiting=line)), check, timeout))

    @contextmanager
    def hold(self, locks: DatasetLocks, names: Sequence[str], doing: str) -> Iterator[None]:
        """The daemon's locks of ``names``; within, the writer locks wait as the call does."""
        with locks.hold(names, doing, self.waits), waiting_as(self.waits):
            yield


class StreamedProgress(Progress):
    """Progress of the application, sent to the client as ``Progress`` messages (``wrap``
    puts one into the call's event type)."""

    def __init__(self, emit: Emit, wrap: Callable[[Any], Any], progress_type: Any) -> None:
        self._emit, self._wrap, self._type = emit, wrap, progress_type
        self._next = 0
        self._lock = threading.Lock()

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        with self._lock:
            self._next += 1
            task = self._next
        self._emit(
            self._wrap(self._type(task=task, description=description, total=total, unit=unit))
        )
        return _StreamedTask(self, task)

    def send(self, **fields: Any) -> None:
        self._emit(self._wrap(self._type(**fields)))


class _StreamedTask:
    def __init__(self, progress: StreamedProgress, task: int) -> None:
        self._progress, self._task = progress, task

    def advance(self, amount: int) -> None:
        self._progress.send(task=self._task, advance=amount)

    def close(self) -> None:
        self._progress.send(task=self._task, closed=True)


class DatasetLocks:
    """One lock per dataset (case-insensitive name): calls that change a dataset take its lock,
    so one dataset's changes run strictly one after another; ``slots`` bounds how many
    changing calls run at once across datasets. (Across processes, the application's writer
    locks, ``coordinator.dataset.writer_locks``, do the same for every writer.)"""

    def __init__(self, max_parallel: int) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._doing: dict[str, str] = {}
        """What the call holding each lock does (``pull``, ``scheduled pull``...)."""
        self._guard = threading.Lock()
        self.slots = threading.BoundedSemaphore(max_parallel)

    @contextmanager
    def hold(
        self, names: Sequence[str], doing: str = "write", waits: CallWaits | None = None
    ) -> Iterator[None]:
        """The locks of ``names`` (taken in a fixed order: no deadlock), and a slot. ``doing``:
        what this call does, for those waiting for it. A lock another call holds is waited
        for: without ``waits``, as long as it takes; with them, telling the call's client
        ("waiting for the daemon's scheduled pull of X"), checking it is still there, and up
        to its timeout."""
        keys = sorted({n.lower() for n in names})
        with self._guard:
            locks = [(k, self._locks.setdefault(k, threading.Lock())) for k in keys]
        named = {n.lower(): n for n in names}
        deadline = waits.deadline(math.inf) if waits is not None else math.inf
        with ExitStack() as stack:
            for key, lock in locks:
                if not lock.acquire(blocking=False):
                    what = f"the daemon's {self._doing.get(key, 'write')} of {named[key]}"
                    if waits is not None:
                        waits.tell(f"waiting for {what}")
                    while not lock.acquire(timeout=_POLL_S):
                        if waits is None:
                            continue
                        if time.monotonic() >= deadline:
                            assert waits.timeout is not None
                            raise timed_out(what, waits.timeout, waits.timeout_hint)
                        waits.check()
                stack.callback(lock.release)
                self._doing[key] = doing
            with self.slots:
                yield
