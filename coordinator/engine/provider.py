"""Engine provisioning behind one interface, and the engines of one command.

An ``EngineProvider`` knows how to obtain an engine of a given (pinned) version: start it as
a local process (embedded), run its image in a container, or connect to one that is already
running (remote). ``EngineSession`` holds the engines of one command: each is started on first
use, kept warm for every transaction of the command, and stopped when the command ends, so a
command with nothing to do starts no engine at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from common.logs import get_logger

if TYPE_CHECKING:  # gRPC: imported only when an engine is really started
    from coordinator.engine.client import EngineClient

log = get_logger(__name__)

JVM_OPTIONS = "-XX:+ExitOnOutOfMemoryError"
"""Given to the engine's JVM: a JVM out of heap exits (the call fails) instead of hanging with
a dead scheduler thread (a transaction that never ends)."""


def jvm_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """``JAVA_TOOL_OPTIONS`` with ``JVM_OPTIONS`` added to what ``base`` has."""
    current = (base or {}).get("JAVA_TOOL_OPTIONS", "")
    return {"JAVA_TOOL_OPTIONS": f"{current} {JVM_OPTIONS}".strip()}


@dataclass(frozen=True, slots=True)
class EngineMounts:
    """Host directories the engine reads (inputs) and writes (outputs).

    Requests name files by their host paths; an engine in a container sees each directory at
    the same path, read-only or writable. Embedded and container engines are started with
    these directories as their data roots (``--data-root``), so they touch no other files;
    a remote engine has the roots it was started with.
    """

    read_only: tuple[Path, ...] = ()
    read_write: tuple[Path, ...] = ()

    @classmethod
    def of(cls, read_only: Iterable[Path], read_write: Iterable[Path]) -> EngineMounts:
        rw = _unique(read_write)
        ro = tuple(p for p in _unique(read_only) if p not in rw)
        return cls(read_only=ro, read_write=rw)

    @property
    def all(self) -> tuple[Path, ...]:
        return (*self.read_only, *self.read_write)

    def create(self) -> None:
        """Create every directory (an engine's data roots and mounts must exist)."""
        for path in self.all:
            path.mkdir(parents=True, exist_ok=True)

    def data_root_args(self) -> list[str]:
        """``--data-root DIR`` for each directory: the engine serves files under these only."""
        return [arg for path in self.all for arg in ("--data-root", str(path))]


def server_command(
    python: str, socket: str, master: str, driver_memory: str | None, mounts: EngineMounts
) -> list[str]:
    """The engine server's command line (run by ``python``): serving on the Unix socket
    ``socket`` only, files under ``mounts``; the master reaches Spark unchanged."""
    memory = ["--driver-memory", driver_memory] if driver_memory else []
    return [
        *(python, "-m", "engine_spark", "--ports", "", "--unix-socket", socket),
        *("--master", master, *memory, *mounts.data_root_args()),
    ]


def _unique(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(p.resolve() for p in paths))


class EngineProvider(Protocol):
    """How to obtain an engine; see the module docstring."""

    @property
    def kind(self) -> str:
        """``embedded``, ``container`` or ``remote``."""
        ...

    def resolve_version(self) -> str | None:
        """The exact engine version new transforms are pinned to (``SetTransform.version``).

        An image reference with its digest for containers, the engine build for the embedded
        engine, ``None`` when it cannot be known (a remote engine).
        """
        ...

    def check_version(self, version: str | None) -> None:
        """Raise ``EngineVersionError`` unless this provider can run the pinned ``version``."""
        ...

    def engine(
        self, version: str | None, mounts: EngineMounts
    ) -> AbstractContextManager[EngineClient]:
        """A ready engine of ``version`` (``None``: the provider's own), stopped on exit."""
        ...


def _quietly(version: str | None) -> AbstractContextManager[object]:
    del version
    return nullcontext()


class EngineSession:
    """The engines of one command, started on demand (one per pinned version).

    ``with EngineSession(provider, mounts) as engines: engines.get(version)``.
    """

    def __init__(self, provider: EngineProvider, mounts: EngineMounts | None = None) -> None:
        self.provider = provider
        self.mounts = mounts or EngineMounts()
        self._stack = ExitStack()
        self._engines: dict[str | None, EngineClient] = {}
        self._default: str | None = None
        self._default_resolved = False
        self.starting: Callable[[str | None], AbstractContextManager[object]] = _quietly
        """Wraps each engine start (given its version): how a command shows that it waits
        for one (``starting engine ...``); by default nothing is shown."""

    def __enter__(self) -> EngineSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every engine this session started."""
        self._engines.clear()
        self._stack.close()

    @property
    def started(self) -> int:
        """How many engines this session has started so far."""
        return len(self._engines)

    def get(self, version: str | None) -> EngineClient:
        """The engine for transforms pinned to ``version`` (``None``: the provider's own)."""
        if version is None:
            version = self.default_version()
        client = self._engines.get(version)
        if client is None:
            client = self._engines[version] = self._start(version)
        return client

    def _start(self, version: str | None) -> EngineClient:
        """The engine of ``version`` for this session, started now (stopped on ``close``)."""
        self.provider.check_version(version)
        with self.starting(version):
            return self._stack.enter_context(self.provider.engine(version, self.mounts))

    def default_version(self) -> str | None:
        """The version the provider runs when none is pinned (resolved once per session)."""
        if not self._default_resolved:
            self._default = self.provider.resolve_version()
            self._default_resolved = True
        return self._default
