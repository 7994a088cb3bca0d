"""Writers take turns: one lock per dataset, shared by every process of the workspace.

A writer (an ingest, a pull, a transform, a compaction, a reset, a push received...) holds the
writer lock of each dataset it changes for its whole transaction, from reading the head it
prepares from to the commit, so two writers of one dataset, in one process or in two (two
one-shot commands, or a command beside ``odf serve``), run one after the other instead of the
second failing on the compare-and-swap of the head (which stays as the last guard).

The locks are ``flock``\\ s on ``.odf/locks/<dataset id>.lock`` (by id: a rename does not change
the file), released by the kernel when the holder dies. While it holds a lock, the holder
writes who it is into the file (pid, daemon or one-shot command, what it does), so a writer
that has to wait can say what for ("waiting for the daemon's pull of X"). Several datasets are
locked in one order (by id), so two writers never wait for each other. Waiting is bounded: past
the timeout, a ``WriterWaitTimeoutError`` names the holder and how to wait longer.

A thread may take a lock it already holds again (a use case calling another): only the
outermost ``hold`` releases it. Other threads of the process wait like other processes.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.logs import get_logger
from coordinator.config import DEFAULT_WAIT_TIMEOUT_S
from coordinator.dataset.errors import LockTimeoutError
from coordinator.tempdirs import require_real_dir

if TYPE_CHECKING:
    from coordinator.dataset.dataset import Dataset

log = get_logger(__name__)

LOCKS_DIR = "locks"
"""The directory of the lock files, in the workspace's ``.odf``."""
DAEMON = "daemon"
"""The owner of the locks ``odf serve`` takes."""
COMMAND = "command"
"""The owner of the locks a one-shot command takes."""

COMMAND_TIMEOUT_HINT = "--wait-timeout SECONDS, or writers.waitTimeout in .odf/config.yaml"
"""How a user of the command line makes a writer wait longer."""

_POLL_FIRST_S = 0.01
_POLL_MAX_S = 0.2
_ANONYMOUS_AFTER_S = 0.5
"""A holder that has not yet written who it is after this long is described anonymously."""

OnWait = Callable[[str], None]
"""Told once per dataset a writer has to wait for, with one line: ``waiting for ...``."""


Check = Callable[[], None]
"""Called while a writer waits; raises to stop waiting (e.g. the caller's call was cancelled)."""


@dataclass(frozen=True, slots=True)
class CallWaits:
    """How the writers of one call wait, rather than as the locks say (``waiting_as``): a
    daemon tells the client of the call (``tell``), stops waiting once it is gone (``check``,
    called at every poll, raises) and waits as long as the client asked (``timeout``)."""

    tell: OnWait
    check: Check
    timeout: float | None = None
    timeout_hint: str = COMMAND_TIMEOUT_HINT

    def deadline(self, default: float) -> float:
        return time.monotonic() + (self.timeout if self.timeout is not None else default)


_call: ContextVar[CallWaits | None] = ContextVar("odf_writers_call", default=None)


@contextmanager
def waiting_as(waits: CallWaits) -> Iterator[None]:
    """Within the block (in this thread), writers wait as ``waits`` says."""
    token = _call.set(waits)
    try:
        yield
    finally:
        _call.reset(token)


def timed_out(what: str, timeout: float, hint: str) -> WriterWaitTimeoutError:
    return WriterWaitTimeoutError(
        f"gave up waiting for {what} after {timeout:g}s; try again later, or wait longer ({hint})"
    )


class WriterWaitTimeoutError(LockTimeoutError):
    """Another writer held a dataset for longer than this writer may wait."""


@dataclass(frozen=True, slots=True)
class Writer:
    """Who holds a dataset's writer lock, as written in its lock file."""

    pid: int
    owner: str
    """``DAEMON`` or ``COMMAND``."""
    operation: str
    """What it does: ``pull``, ``ingest``, ``transform``..."""
    dataset: str

    def describe(self) -> str:
        if self.owner == DAEMON:
            return f"the daemon's {self.operation} of {self.dataset}"
        return f"another odf process (pid {self.pid}) writing {self.dataset}"

    def to_json(self) -> str:
        return json.dumps(
            {
                "pid": self.pid,
                "owner": self.owner,
                "operation": self.operation,
                "dataset": self.dataset,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Writer | None:
        """The writer in a lock file's text; ``None`` when it is empty or half written."""
        try:
            value = json.loads(text)
            return cls(
                int(value["pid"]),
                str(value["owner"]),
                str(value["operation"]),
                str(value["dataset"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(slots=True)
class _Held:
    thread: int
    fd: int
    depth: int


def lock_exclusively(
    fd: int, waiting: Callable[[], None], *, first_delay: float, max_delay: float
) -> None:
    """Take the exclusive ``flock`` of ``fd``, polling: while another process holds it, call
    ``waiting`` (which raises to give up), then sleep, from ``first_delay`` doubling up to
    ``max_delay`` seconds."""
    delay = first_delay
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waiting()
        time.sleep(delay)
        delay = min(delay * 2, max_delay)


_held: dict[Path, _Held] = {}
"""The lock files this process holds, and which thread holds each."""
_held_guard = threading.Lock()


@dataclass(eq=False, slots=True)
class WriterLocks:
    """The writer locks of one workspace (``directory``: its ``.odf/locks``)."""

    directory: Path
    _: KW_ONLY
    owner: str = COMMAND
    timeout: float = DEFAULT_WAIT_TIMEOUT_S
    """Seconds a writer waits, in all, for the datasets it locks."""
    on_wait: OnWait | None = None
    timeout_hint: str = "writers.waitTimeout in .odf/config.yaml"
    """How to wait longer, named in the timeout error."""

    def path(self, dataset_key: str) -> Path:
        return self.directory / f"{dataset_key}.lock"

    def hold(self, datasets: Iterable[Dataset], operation: str) -> AbstractContextManager[None]:
        """Hold the writer locks of ``datasets`` (each a ``Dataset``), in id order."""
        return self.hold_keys({_key(d): d.alias for d in datasets}, operation)

    @staticmethod
    def keys(datasets: Iterable[Dataset]) -> list[str]:
        """The lock keys of ``datasets`` (for ``hold_keys``)."""
        return [_key(d) for d in datasets]

    @contextmanager
    def hold_keys(self, datasets: dict[str, str], operation: str) -> Iterator[None]:
        """Hold the locks of datasets given as {id multibase: name}, in id order; waits (and
        tells ``on_wait``) while others hold them, up to ``timeout`` seconds in all."""
        call = _call.get()
        deadline = time.monotonic() + self.timeout if call is None else call.deadline(self.timeout)
        with ExitStack() as stack:
            for key in sorted(datasets):
                stack.enter_context(self._one(key, datasets[key], operation, deadline))
            yield

    def holder(self, dataset_key: str) -> Writer | None:
        """Who holds the lock of a dataset now, as far as its file tells (``None``: nobody
        wrote, or the file is being written)."""
        try:
            return Writer.from_json(self.path(dataset_key).read_text(encoding="utf-8"))
        except OSError:
            return None

    @contextmanager
    def _one(self, key: str, name: str, operation: str, deadline: float) -> Iterator[None]:
        path = self.path(key)
        me = threading.get_ident()
        with _held_guard:
            held = _held.get(path)
            if held is not None and held.thread == me:
                held.depth += 1
                reentered = True
            else:
                reentered = False
        if reentered:
            try:
                yield
            finally:
                self._release(path)
            return
        fd = self._acquire(path, name, operation, deadline)
        with _held_guard:
            _held[path] = _Held(me, fd, 1)
        try:
            yield
        finally:
            self._release(path)

    def _acquire(self, path: Path, name: str, operation: str, deadline: float) -> int:
        require_real_dir(self.directory, create=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            started = time.monotonic()
            told = False

            def waiting() -> None:
                nonlocal told
                holder = self.holder(path.stem)
                if not told and (
                    holder is not None or time.monotonic() - started > _ANONYMOUS_AFTER_S
                ):
                    told = True
                    self._tell_waiting(name, holder)
                call = _call.get()
                if time.monotonic() >= deadline:
                    what = holder.describe() if holder is not None else f"another writer of {name}"
                    if call is not None and call.timeout is not None:
                        raise timed_out(what, call.timeout, call.timeout_hint)
                    raise timed_out(what, self.timeout, self.timeout_hint)
                if call is not None:
                    call.check()

            lock_exclusively(fd, waiting, first_delay=_POLL_FIRST_S, max_delay=_POLL_MAX_S)
            if told:
                log.info("writers.acquired", dataset=name, waited=time.monotonic() - started)
            me = Writer(os.getpid(), self.owner, operation, name)
            os.ftruncate(fd, 0)
            os.pwrite(fd, me.to_json().encode(), 0)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _tell_waiting(self, name: str, holder: Writer | None) -> None:
        what = holder.describe() if holder is not None else f"another writer of {name}"
        line = f"waiting for {what}"
        log.info("writers.waiting", dataset=name, holder=what)
        call = _call.get()
        on_wait = call.tell if call is not None else self.on_wait
        if on_wait is not None:
            on_wait(line)

    @staticmethod
    def _release(path: Path) -> None:
        with _held_guard:
            held = _held[path]
            held.depth -= 1
            if held.depth > 0:
                return
            del _held[path]
        try:
            os.ftruncate(held.fd, 0)  # nobody holds it: no stale holder for the next waiter
        finally:
            os.close(held.fd)  # releases the lock


def _key(dataset: Dataset) -> str:
    """The name of a dataset's lock file: its id, or for a dataset without a Seed block
    (which only a delete can change), its name."""
    dataset_id = dataset.state().id
    return dataset_id.to_multibase() if dataset_id is not None else f"name-{dataset.alias.lower()}"
