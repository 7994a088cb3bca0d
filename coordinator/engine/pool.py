"""A warm engine pool for a long-running coordinator (``odf serve``).

A command's ``EngineSession`` starts its engines and stops them when the command ends. The
daemon instead keeps one engine per pinned version (image digest or embedded build) running
across requests: ``EnginePool.session()`` gives a request an ``EngineSession`` whose engines
come from the pool and stay up when the request ends. The pool

- starts an engine on first use (a request waits for it; concurrent requests share it),
- checks its health before handing it out and every ``check_interval`` seconds, and starts
  it again when it has died (a crashed JVM, a killed container),
- stops an engine nobody has used for ``idle_timeout`` seconds (started again when needed),
- stops everything on ``close``.

Every pooled engine serves the same directories (``mounts``): the daemon gives it the
workspace's datasets and scratch directory, so one engine serves every request.

Engines are started from one long-lived thread of the pool, never from a request's thread: an
embedded engine dies with the thread that started it (``PR_SET_PDEATHSIG`` follows the parent
thread, not the process), and a request's thread ends with the request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field

from common.logs import get_logger
from coordinator.engine.client import EngineClient
from coordinator.engine.provider import EngineMounts, EngineProvider, EngineSession

log = get_logger(__name__)


@dataclass(slots=True)
class PoolStats:
    """What the pool has done so far (exported as metrics by the daemon)."""

    starts: int = 0
    restarts: int = 0
    """Engines started again because they had died."""
    idle_stops: int = 0
    running: int = 0


@dataclass(frozen=True, slots=True)
class EngineState:
    version: str
    serving: bool
    leases: int
    """Calls using it now."""
    idle_seconds: float


@dataclass(slots=True)
class _Pooled:
    client: EngineClient
    stack: ExitStack
    last_used: float
    leases: int = 0


@dataclass(slots=True)
class _Versions:
    default: str | None = None
    resolved: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class EnginePool:
    """Warm engines shared by every request of a daemon (see the module doc)."""

    def __init__(
        self,
        provider: EngineProvider,
        mounts: EngineMounts,
        *,
        idle_timeout: float,
        check_interval: float = 5.0,
    ) -> None:
        self.provider = provider
        self.mounts = mounts
        self.idle_timeout = idle_timeout
        self.check_interval = check_interval
        self.stats = PoolStats()
        self.on_lease: Callable[[], None] | None = None
        """Told of every lease, on the leasing thread, before it may wait for an engine (the
        daemon's query warm-up stops at the first lease not its own)."""
        self._engines: dict[str | None, _Pooled] = {}
        self._lock = threading.RLock()
        self._versions = _Versions()
        self._closed = threading.Event()
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="odf-engine-start")
        self._monitor = threading.Thread(target=self._watch, name="odf-engine-pool", daemon=True)
        self._monitor.start()

    def session(self) -> EngineSession:
        """The engines of one request, from the pool; ``close`` returns them, warm."""
        return PooledSession(self)

    def default_version(self) -> str | None:
        with self._versions.lock:
            if not self._versions.resolved:
                self._versions.default = self.provider.resolve_version()
                self._versions.resolved = True
            return self._versions.default

    def lease(self, version: str | None) -> EngineClient:
        """A serving engine of ``version``; give it back with ``release(version)``."""
        if self.on_lease is not None:
            self.on_lease()
        if version is None:
            version = self.default_version()
        with self._lock:
            if self._closed.is_set():
                raise RuntimeError("the engine pool is closed")
            pooled = self._engines.get(version)
            if pooled is not None and not pooled.client.is_serving():
                log.warning("engine.pool.dead", version=version)
                self._stop(version)
                self.stats.restarts += 1
                pooled = None
            if pooled is None:
                pooled = self._starter.submit(self._start, version).result()
            pooled.leases += 1
            pooled.last_used = time.monotonic()
            return pooled.client

    def release(self, version: str | None) -> None:
        if version is None:
            version = self.default_version()
        with self._lock:
            pooled = self._engines.get(version)
            if pooled is not None:
                pooled.leases = max(0, pooled.leases - 1)
                pooled.last_used = time.monotonic()

    def engines(self) -> list[EngineState]:
        """The engines running now (each asked whether it still serves)."""
        with self._lock:
            pooled = list(self._engines.items())
        now = time.monotonic()
        return [
            EngineState(
                version or "default",
                p.client.is_serving(),
                p.leases,
                0.0 if p.leases else now - p.last_used,
            )
            for version, p in pooled
        ]

    def close(self) -> None:
        """Stop every engine (a call still running on one fails: nothing is committed)."""
        self._closed.set()
        with self._lock:
            for version in list(self._engines):
                self._stop(version)
        self._monitor.join(timeout=self.check_interval + 1)
        self._starter.shutdown(wait=False)

    def _start(self, version: str | None) -> _Pooled:
        self.provider.check_version(version)
        stack = ExitStack()
        try:
            client = stack.enter_context(self.provider.engine(version, self.mounts))
        except BaseException:
            stack.close()
            raise
        pooled = _Pooled(client, stack, time.monotonic())
        self._engines[version] = pooled
        self.stats.starts += 1
        self.stats.running = len(self._engines)
        log.info("engine.pool.started", version=version)
        return pooled

    def _stop(self, version: str | None) -> None:
        pooled = self._engines.pop(version)
        self.stats.running = len(self._engines)
        try:
            pooled.stack.close()
        except Exception as e:  # a dead engine may fail to stop cleanly: it is gone either way
            log.warning("engine.pool.stop_failed", version=version, error=str(e))

    def _watch(self) -> None:
        while not self._closed.wait(self.check_interval):
            with self._lock:
                for version, pooled in list(self._engines.items()):
                    idle = time.monotonic() - pooled.last_used
                    if pooled.leases == 0 and idle > self.idle_timeout:
                        log.info("engine.pool.idle_stop", version=version, idle_s=round(idle))
                        self._stop(version)
                        self.stats.idle_stops += 1
                    elif not pooled.client.is_serving():
                        log.warning("engine.pool.dead", version=version)
                        self._stop(version)
                        self.stats.restarts += 1
                        try:
                            self._starter.submit(self._start, version).result()
                        except Exception as e:  # the next request tries again, and says why
                            log.warning("engine.pool.restart_failed", error=str(e))


class PooledSession(EngineSession):
    """An ``EngineSession`` whose engines belong to a pool: leased on first use, given back
    (still running) when the session closes."""

    def __init__(self, pool: EnginePool) -> None:
        super().__init__(pool.provider, pool.mounts)
        self.pool = pool

    def _start(self, version: str | None) -> EngineClient:
        return self.pool.lease(version)

    def default_version(self) -> str | None:
        return self.pool.default_version()

    def close(self) -> None:
        for version in self._engines:
            self.pool.release(version)
        self._engines.clear()
