"""The coordinator's container runtime: an OCI runtime through the ``docker`` SDK (Docker, or
Podman's Docker-compatible API), plus engine readiness exactly as the reference coordinator
checks it. Used by the container engine provider and the container fetch step.

Runtime selection (:func:`connect`):

1. ``DOCKER_HOST`` when set (explicit configuration wins);
2. Podman, when installed: its API socket, starting ``podman system service --time=0`` in the
   background when nothing answers there (the service outlives this process, like a daemon);
3. the default Docker socket.

Readiness (:func:`wait_for_engine`) follows kamu-cli: poll the container for the host port
published for the engine port, then TCP-connect (100 ms timeout) and read one byte with a 1 s
timeout: bytes or a read timeout mean ready; EOF (a proxy accepting with nothing behind it) or a
refused connection mean not yet. The whole wait is bounded, 30 s by default.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import docker
import docker.errors
from docker.models.containers import Container

from common.odf.errors import OdfError

ENGINE_PORT = "2884/tcp"
"""The port every reference engine serves gRPC on, and the one kamu-cli publishes."""

READY_TIMEOUT_S = 30.0
"""kamu-cli's default ``engine.startTimeout``."""

_POLL_S = 0.05
_CONNECT_TIMEOUT_S = 0.1
_READ_TIMEOUT_S = 1.0
_SERVICE_START_TIMEOUT_S = 15.0
_DOCKER_DEFAULT_SOCKET = Path("/var/run/docker.sock")


class ContainerRuntimeUnavailable(OdfError):
    """No container runtime can be reached or started on this machine."""


class EngineNotReadyError(OdfError):
    """An engine container did not accept connections on its port in time, or exited."""


@dataclass(frozen=True)
class Runtime:
    """A connected container runtime."""

    client: docker.DockerClient
    base_url: str
    published_host: str
    """Host on which ports published by containers are reachable from this process."""

    @property
    def is_podman(self) -> bool:
        components = self.client.version().get("Components") or []
        return any("podman" in str(c.get("Name", "")).lower() for c in components)


@dataclass(frozen=True)
class Endpoint:
    """Where a ready engine listens, and how long it took to become ready."""

    host: str
    port: int
    seconds_to_ready: float

    @property
    def target(self) -> str:
        """``host:port`` for ``grpc.insecure_channel``."""
        return f"{self.host}:{self.port}"


def podman_socket_path() -> Path:
    """Podman's API socket: the system one for root, the user's runtime dir otherwise."""
    if os.geteuid() == 0:
        return Path("/run/podman/podman.sock")
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}"
    return Path(runtime_dir) / "podman" / "podman.sock"


def connect(*, start_podman: bool = True) -> Runtime:
    """A client for the runtime chosen as described in the module docstring."""
    explicit = os.environ.get("DOCKER_HOST")
    if explicit:
        return _runtime(explicit, why="DOCKER_HOST")
    if shutil.which("podman"):
        sock = podman_socket_path()
        if start_podman:
            ensure_podman_service(sock)
        return _runtime(f"unix://{sock}", why="podman")
    if _DOCKER_DEFAULT_SOCKET.exists():
        return _runtime(f"unix://{_DOCKER_DEFAULT_SOCKET}", why="docker")
    raise ContainerRuntimeUnavailable(
        "no container runtime: podman is not installed, DOCKER_HOST is unset and "
        f"{_DOCKER_DEFAULT_SOCKET} does not exist (scripts/podman-service.sh installs Podman)"
    )


def _runtime(base_url: str, *, why: str) -> Runtime:
    client = docker.DockerClient(base_url=base_url, timeout=120)
    try:
        client.ping()
    except (docker.errors.DockerException, OSError) as e:
        client.close()
        raise ContainerRuntimeUnavailable(
            f"{why} runtime at {base_url} does not answer: {e}"
        ) from e
    parsed = urlparse(base_url)
    host = parsed.hostname if parsed.scheme in ("tcp", "http", "https") else None
    return Runtime(client=client, base_url=base_url, published_host=host or "127.0.0.1")


def ensure_podman_service(sock: Path) -> None:
    """Start Podman's API service on ``sock`` unless something already answers there."""
    sock.parent.mkdir(parents=True, exist_ok=True)
    with open(sock.parent / ".odf-py-service.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _socket_answers(sock):
            return
        sock.unlink(missing_ok=True)
        with open(sock.parent / "odf-py-service.log", "ab") as log:
            subprocess.Popen(
                ["podman", "system", "service", "--time=0", f"unix://{sock}"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                # Not the caller's directory: once that is deleted (a test's workspace), the
                # service fails every container start with "write child: broken pipe".
                cwd="/",
            )
        deadline = time.monotonic() + _SERVICE_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if _socket_answers(sock):
                return
            time.sleep(_POLL_S)
    raise ContainerRuntimeUnavailable(
        f"podman API service did not answer on {sock} within {_SERVICE_START_TIMEOUT_S:.0f} s; "
        f"see {sock.parent / 'odf-py-service.log'}"
    )


def _socket_answers(sock: Path) -> bool:
    if not sock.is_socket():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.")
    except OSError:
        return False


def image_present(client: docker.DockerClient, ref: str) -> bool:
    """Whether ``ref`` (a tag or ``repo@sha256:...``) names a local image."""
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


# --- Readiness ----------------------------------------------------------------------------------


def wait_for_engine(
    runtime: Runtime,
    container: Container,
    *,
    port: str = ENGINE_PORT,
    timeout: float = READY_TIMEOUT_S,
) -> Endpoint:
    """Wait, as kamu-cli does, until ``container`` serves on the host port published for ``port``.

    Raises EngineNotReadyError when the container exits or the timeout passes first.
    """
    started = time.monotonic()
    deadline = started + timeout
    host_port = _published_port(container, port, deadline)
    while time.monotonic() < deadline:
        if socket_ready(runtime.published_host, host_port):
            return Endpoint(runtime.published_host, host_port, time.monotonic() - started)
        _ensure_running(container, port)
        time.sleep(_POLL_S)
    raise EngineNotReadyError(
        f"container {container.name}: nothing served on {port} "
        f"(host {runtime.published_host}:{host_port}) within {timeout:.0f} s"
    )


def _published_port(container: Container, port: str, deadline: float) -> int:
    while time.monotonic() < deadline:
        _ensure_running(container, port)
        bindings = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
        for binding in bindings.get(port) or ():
            if binding.get("HostPort"):
                return int(binding["HostPort"])
        time.sleep(_POLL_S)
    raise EngineNotReadyError(f"container {container.name}: no host port published for {port}")


def _ensure_running(container: Container, port: str) -> None:
    """Refresh the container's state; raise when it is gone or has stopped."""
    try:
        container.reload()
    except docker.errors.NotFound:
        raise EngineNotReadyError(
            f"container {container.name} was removed before serving on {port}"
        ) from None
    if container.status in ("exited", "dead"):
        tail = container.logs(tail=20).decode(errors="replace").strip()
        raise EngineNotReadyError(
            f"container {container.name} exited before serving on {port}: {tail[-500:]!r}"
        )


def socket_ready(host: str, port: int, *, read_timeout: float = _READ_TIMEOUT_S) -> bool:
    """kamu-cli's check: connect, then read one byte; data or a read timeout mean ready.

    ``read_timeout`` is kamu-cli's 1 s unless a test needs a longer wait for a peer's close.
    """
    try:
        conn = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S)
    except OSError:
        return False
    with conn:
        conn.settimeout(read_timeout)
        try:
            return conn.recv(1) != b""
        except TimeoutError:
            return True
        except OSError:
            return False
