"""The engine image in a container, through the ``docker`` SDK (Docker or Podman's socket).

- The image is selected by digest: a configured tag is resolved to ``repository@sha256:...``
  when a transform is created, that reference is pinned in ``SetTransform.version``, and every
  transaction runs exactly the pinned image (never whatever the tag points to now).
- One container per command, kept warm for all its transactions. It has no network at all
  (``network_mode: none``): gRPC goes over a Unix socket in a mounted private directory.
- Requests name files by their host paths, and each directory the engine needs is mounted at
  the same path: inputs read-only, output (staging) directories writable.
- Containers are labelled with the coordinator's pid; those of dead coordinators (killed
  commands) are removed the next time an engine is started.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from common.logs import get_logger
from common.odf.errors import OdfError
from coordinator.config import DEFAULT_DRIVER_MEMORY
from coordinator.engine.client import EngineClient
from coordinator.engine.container_runtime import Runtime, connect
from coordinator.engine.errors import EngineUnavailableError, EngineVersionError
from coordinator.engine.provider import EngineMounts, jvm_environment, server_command
from coordinator.tempdirs import owned_temp_dir, pid_alive

log = get_logger(__name__)

SOCKET_DIR_IN_CONTAINER = "/run/odf-engine"
SOCKET_NAME = "engine.sock"
STOP_TIMEOUT_S = 20
LABEL = "io.odf-py.engine"
LABEL_PID = "io.odf-py.coordinator-pid"
LABEL_HOST = "io.odf-py.coordinator-host"
DIGEST_MARK = "@sha256:"
_LOG_TAIL_LINES = 30
_RUNTIME_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
"""What a call to the runtime raises (the SDK lets connection errors through)."""


def is_pinned_reference(ref: str) -> bool:
    """Whether ``ref`` names an image by digest (``repo@sha256:...`` or an image id)."""
    return DIGEST_MARK in ref or ref.startswith("sha256:")


def pinned_reference(ref: str, attrs: dict[str, Any]) -> str:
    """The digest reference of an image found as ``ref`` (pure, from its inspect data)."""
    if is_pinned_reference(ref):
        return ref
    repository = _repository(ref)
    digests = [str(d) for d in attrs.get("RepoDigests") or ()]
    for d in digests:
        if d.split("@", 1)[0] == repository:
            return d
    if digests:
        return digests[0]
    image_id = str(attrs.get("Id") or "")
    if not image_id.startswith("sha256:"):
        raise EngineUnavailableError(f"engine image {ref!r} has no digest and no image id")
    return image_id


def _repository(ref: str) -> str:
    """``host/repo:tag`` -> ``host/repo`` (a port in the host part is not a tag)."""
    name, _, tag = ref.rpartition(":")
    return name if name and "/" not in tag else ref


@dataclass(frozen=True, kw_only=True)  # no slots: ``runtime`` is a cached property
class ContainerEngineProvider:
    image: str
    master: str = "local[2]"
    driver_memory: str | None = DEFAULT_DRIVER_MEMORY
    start_timeout: float = 300.0

    @property
    def kind(self) -> str:
        return "container"

    @cached_property
    def runtime(self) -> Runtime:
        try:
            return connect()
        except OdfError as e:
            raise EngineUnavailableError(f"container engine: {e}") from None
        except _RUNTIME_ERRORS as e:
            where = os.environ.get("DOCKER_HOST") or "the default socket"
            raise EngineUnavailableError(
                f"container engine: no container runtime answers at {where}: {e}"
            ) from None

    def resolve_version(self) -> str:
        """The configured image as ``repository@sha256:<digest>``."""
        return pinned_reference(self.image, self._inspect(self.image))

    def check_version(self, version: str | None) -> None:
        if version is not None and not is_pinned_reference(version):
            raise EngineVersionError(
                f"the transform is pinned to engine {version!r}, which is not an image digest;"
                " it was created with the embedded engine (provider: embedded)"
            )

    @contextmanager
    def engine(self, version: str | None, mounts: EngineMounts) -> Iterator[EngineClient]:
        self.check_version(version)
        ref = version if version is not None else self.resolve_version()
        self._inspect(ref)
        _remove_orphans(self.runtime.client)
        # The socket directory is private (0700): the engine image runs as root, which is the
        # coordinator's user under rootless Podman and bypasses permissions under a rootful
        # runtime. Cleaned by the next run if this one is killed.
        with (
            owned_temp_dir("odf-engine-") as socket_dir,
            self._container(ref, mounts, socket_dir) as container,
        ):
            client = EngineClient(
                f"unix:{socket_dir / SOCKET_NAME}",
                description=f"engine container {container.name} ({ref})",
                after_call=_chown_outputs(container, mounts),
            )
            with client:
                waited = client.wait_until_ready(
                    self.start_timeout, failed=lambda: _exited(container)
                )
                log.info("engine.ready", provider="container", image=ref, seconds=waited)
                yield client

    # --- plumbing -----------------------------------------------------------------------------

    def _inspect(self, ref: str) -> dict[str, Any]:
        try:
            attrs: dict[str, Any] = self.runtime.client.images.get(ref).attrs
        except docker.errors.ImageNotFound:
            raise EngineUnavailableError(
                f"engine image {ref!r} is not in the container runtime at"
                f" {self.runtime.base_url} (build it with scripts/build-images.sh, or pull it)"
            ) from None
        except _RUNTIME_ERRORS as e:
            raise EngineUnavailableError(f"cannot inspect engine image {ref!r}: {e}") from None
        return attrs

    @contextmanager
    def _container(self, ref: str, mounts: EngineMounts, socket_dir: Path) -> Iterator[Any]:
        mounts.create()
        volumes = {str(p): {"bind": str(p), "mode": "ro"} for p in mounts.read_only}
        volumes |= {str(p): {"bind": str(p), "mode": "rw"} for p in mounts.read_write}
        volumes[str(socket_dir)] = {"bind": SOCKET_DIR_IN_CONTAINER, "mode": "rw"}
        address = f"{SOCKET_DIR_IN_CONTAINER}/{SOCKET_NAME}"
        command = server_command("python", address, self.master, self.driver_memory, mounts)
        name = f"odf-engine-{secrets.token_hex(5)}"
        try:
            container = self.runtime.client.containers.run(
                ref,
                command,
                name=name,
                detach=True,
                network_mode="none",
                user="0",  # see the socket directory: root reaches it, nobody else
                volumes=volumes,
                environment=jvm_environment(),
                labels={
                    LABEL: "1",
                    LABEL_PID: str(os.getpid()),
                    LABEL_HOST: socket.gethostname(),
                },
            )
        except _RUNTIME_ERRORS as e:
            raise EngineUnavailableError(f"cannot start engine container from {ref}: {e}") from None
        log.info("engine.started", provider="container", container=name, image=ref)
        timeout = STOP_TIMEOUT_S
        try:
            yield container
        except KeyboardInterrupt:
            timeout = 0  # interrupted: kill it at once, do not wait for a clean stop
            raise
        finally:
            _stop(container, timeout)


def _exited(container: Any) -> str | None:
    try:
        container.reload()
    except docker.errors.NotFound:
        return "was removed before it was ready"
    except _RUNTIME_ERRORS as e:
        return f"cannot be watched: the container runtime failed ({e})"
    if container.status not in ("exited", "dead"):
        return None
    tail = container.logs(tail=_LOG_TAIL_LINES).decode(errors="replace")
    code = container.attrs.get("State", {}).get("ExitCode")
    return f"exited with code {code} before it was ready: {' '.join(tail.split())[-1500:]}"


def _chown_outputs(container: Any, mounts: EngineMounts) -> Any:
    """After each call, hand the engine's files to the coordinator's user (root engines)."""
    if os.geteuid() == 0 or not mounts.read_write:
        return None
    owner = f"{os.geteuid()}:{os.getegid()}"
    paths = [str(p) for p in mounts.read_write]

    def chown() -> None:
        container.exec_run(["chown", "-R", owner, *paths])

    return chown


def _stop(container: Any, timeout: float = STOP_TIMEOUT_S) -> None:
    """Stop (SIGTERM, SIGKILL after ``timeout``; 0: SIGKILL at once) and remove the engine."""
    try:
        container.stop(timeout=timeout)
    except _RUNTIME_ERRORS as e:
        log.warning("engine.stop_failed", container=container.name, error=str(e))
    try:
        container.remove(force=True)
    except _RUNTIME_ERRORS as e:
        log.warning("engine.remove_failed", container=container.name, error=str(e))
    log.info("engine.stopped", provider="container", container=container.name)


def _remove_orphans(client: docker.DockerClient) -> None:
    """Remove engine containers left by coordinators on this host that no longer run."""
    host = socket.gethostname()
    try:
        containers = client.containers.list(all=True, filters={"label": LABEL})
    except _RUNTIME_ERRORS:
        return
    for c in containers:
        labels = c.labels or {}
        pid = labels.get(LABEL_PID, "")
        if labels.get(LABEL_HOST) != host or not pid.isdigit() or pid_alive(int(pid)):
            continue
        log.info("engine.remove_orphan", container=c.name, coordinator_pid=pid)
        with suppress(*_RUNTIME_ERRORS):
            c.remove(force=True)
