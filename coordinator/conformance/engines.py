"""The engine under test: an image run as the reference coordinator runs engines, an engine
already serving at an address, or our embedded engine. Each is a context manager giving an
``EngineUnderTest``: the gRPC client (coordinator/engine's) and where exchange files go.

An image's container gets the case files the way kamu-cli mounts them: inputs read-only under
``/opt/engine/in``, outputs (data slices, checkpoints) writable under ``/opt/engine/out``,
gRPC on port 2884 published on the loopback, ready when the port answers (kamu's check) and
then the gRPC health service (if it has one). Requests name files by the container's paths.
An embedded or remote engine sees the host's paths; a remote one must share the file system
(give it the kit's work directory as a data root).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from common.logs import get_logger
from coordinator.engine.client import EngineClient
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.engine.errors import EngineUnavailableError
from coordinator.engine.provider import EngineMounts
from coordinator.engine.remote import RemoteEngineProvider

log = get_logger(__name__)

ENGINE_IN = "/opt/engine/in"
ENGINE_OUT = "/opt/engine/out"


@dataclass(frozen=True, slots=True)
class ExchangeDirs:
    """Host directories for inputs and outputs, and where the engine sees them."""

    host_in: Path
    host_out: Path
    engine_in: str
    engine_out: str

    @classmethod
    def same_paths(cls, root: Path) -> ExchangeDirs:
        return cls(root / "in", root / "out", str(root / "in"), str(root / "out"))

    def engine_path(self, host: Path) -> str:
        """The path the engine is given for a host file under one of the directories."""
        for base, mapped in ((self.host_in, self.engine_in), (self.host_out, self.engine_out)):
            if host.is_relative_to(base):
                rel = host.relative_to(base).as_posix()
                return mapped if rel == "." else f"{mapped}/{rel}"
        raise ValueError(f"{host} is not under the exchange directories")


@dataclass(frozen=True, slots=True)
class EngineUnderTest:
    client: EngineClient
    dirs: ExchangeDirs
    description: str


class EngineTarget(Protocol):
    """How to obtain the engine under test, given the kit's work directory."""

    @property
    def description(self) -> str: ...

    def start(self, workdir: Path) -> AbstractContextManager[EngineUnderTest]: ...


@dataclass(frozen=True, slots=True)
class EmbeddedTarget:
    """Our engine as a local process (coordinator/engine's embedded provider)."""

    master: str = "local[2]"
    start_timeout: float = 300.0

    @property
    def description(self) -> str:
        return "embedded engine"

    @contextmanager
    def start(self, workdir: Path) -> Iterator[EngineUnderTest]:
        dirs = ExchangeDirs.same_paths(workdir)
        provider = EmbeddedEngineProvider(master=self.master, start_timeout=self.start_timeout)
        mounts = EngineMounts.of([dirs.host_in], [dirs.host_out])
        with provider.engine(None, mounts) as client:
            yield EngineUnderTest(client, dirs, client.description)


@dataclass(frozen=True, slots=True)
class AddressTarget:
    """An engine already serving at ``HOST:PORT`` (or ``unix:/path``), sharing our files."""

    address: str
    start_timeout: float = 60.0

    @property
    def description(self) -> str:
        return f"engine at {self.address}"

    @contextmanager
    def start(self, workdir: Path) -> Iterator[EngineUnderTest]:
        dirs = ExchangeDirs.same_paths(workdir)
        provider = RemoteEngineProvider(address=self.address, start_timeout=self.start_timeout)
        with provider.engine(None, EngineMounts()) as client:
            yield EngineUnderTest(client, dirs, client.description)


@dataclass(frozen=True, slots=True)
class ImageTarget:
    """An engine image, run as kamu-cli runs engines (see the module docstring)."""

    image: str
    start_timeout: float = 300.0

    @property
    def description(self) -> str:
        return f"engine image {self.image}"

    @contextmanager
    def start(self, workdir: Path) -> Iterator[EngineUnderTest]:
        from coordinator.engine.container import _stop  # the docker SDK, only when needed
        from coordinator.engine.container_runtime import (
            ENGINE_PORT,
            ContainerRuntimeUnavailable,
            EngineNotReadyError,
            connect,
            image_present,
            wait_for_engine,
        )

        dirs = ExchangeDirs(workdir / "in", workdir / "out", ENGINE_IN, ENGINE_OUT)
        dirs.host_in.mkdir(parents=True, exist_ok=True)
        dirs.host_out.mkdir(parents=True, exist_ok=True)
        try:
            runtime = connect()
        except ContainerRuntimeUnavailable as e:
            raise EngineUnavailableError(f"--image: {e}") from None
        if not image_present(runtime.client, self.image):
            raise EngineUnavailableError(
                f"engine image {self.image!r} is not in the container runtime at"
                f" {runtime.base_url} (pull or build it first)"
            )
        container = runtime.client.containers.run(
            self.image,
            detach=True,
            volumes={
                str(dirs.host_in): {"bind": ENGINE_IN, "mode": "ro"},
                str(dirs.host_out): {"bind": ENGINE_OUT, "mode": "rw"},
            },
            ports={ENGINE_PORT: ("127.0.0.1", None)},
            labels={"io.odf-py.conformance": "1"},
        )
        log.info("conformance.container_started", image=self.image, container=container.name)
        try:
            try:
                endpoint = wait_for_engine(
                    runtime, container, port=ENGINE_PORT, timeout=self.start_timeout
                )
            except EngineNotReadyError as e:
                raise EngineUnavailableError(str(e)) from None
            description = f"engine container {container.name} ({self.image})"
            with EngineClient(endpoint.target, description=description) as client:
                client.wait_until_ready(self.start_timeout)
                yield EngineUnderTest(client, dirs, description)
        finally:
            _stop(container)
