"""Run the Spark engine server as a subprocess (``python -m engine_spark``) for tests and benches.

Imports nothing from ``engine_spark``: the server runs in its own process, exactly as an image
or a coordinator would start it, and is reached through gRPC only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from common.engine_rpc import engine_pb2_grpc
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
ENGINE_SERVICE = "engine.Engine"


def open_channel(target: str, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
    """A channel to ``target``: over TLS with ``credentials``, else in plain text."""
    if credentials is None:
        return grpc.insecure_channel(target)
    return grpc.secure_channel(target, credentials)


def health_status(
    target: str, *, timeout: float = 2.0, credentials: grpc.ChannelCredentials | None = None
) -> int | None:
    """The Health/Check status of the engine service at ``target``, None if unreachable."""
    with open_channel(target, credentials) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(
                health_pb2.HealthCheckRequest(service=ENGINE_SERVICE), timeout=timeout
            )
        except grpc.RpcError:
            return None
    return int(reply.status)


def wait_until_serving(
    target: str,
    *,
    timeout: float = 180.0,
    process: subprocess.Popen[bytes] | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> float:
    """Poll health until SERVING; returns the seconds waited. Raises TimeoutError/RuntimeError."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"engine server exited with code {process.returncode} before ready")
        if health_status(target, credentials=credentials) == health_pb2.HealthCheckResponse.SERVING:
            return time.monotonic() - started
        time.sleep(0.2)
    raise TimeoutError(f"engine at {target} not serving after {timeout:.0f} s")


@dataclass
class EngineServerProcess:
    """A running ``python -m engine_spark`` and how to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    unix_socket: str | None
    credentials: grpc.ChannelCredentials | None = None
    """TLS credentials of a client (the server was started with a certificate)."""

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self) -> grpc.Channel:
        return open_channel(self.target, self.credentials)

    def stub(self, channel: grpc.Channel) -> engine_pb2_grpc.EngineStub:
        return engine_pb2_grpc.EngineStub(channel)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; returns the exit code (SIGKILL after ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)


@contextmanager
def engine_server_process(
    *,
    master: str = "local[2]",
    unix_socket: str | None = None,
    data_roots: Sequence[Path] = (),
    host: str | None = "127.0.0.1",
    credentials: grpc.ChannelCredentials | None = None,
    extra_args: Sequence[str] = (),
    wait: bool = True,
    ready_timeout: float = 180.0,
    log_path: Path | None = None,
    repo: Path = REPO,
) -> Iterator[EngineServerProcess]:
    """Start the engine on a free loopback port; stop it with SIGTERM on exit.

    ``data_roots``: the directories its requests may name files under (``--data-root``).
    ``host``: ``None`` leaves the bind address to the engine's default. ``credentials``: the
    client side of TLS when ``extra_args`` give the server a certificate. ``repo``: the
    checkout whose engine runs (another one: a benchmark's baseline).
    """
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "engine_spark",
        *(["--host", host] if host is not None else []),
        "--ports",
        str(port),
        "--master",
        master,
        *(["--unix-socket", unix_socket] if unix_socket else []),
        *(arg for root in data_roots for arg in ("--data-root", str(root))),
        *extra_args,
    ]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    log: IO[bytes] | int = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        process = subprocess.Popen(args, cwd=repo, env=env, stdout=log, stderr=log)
        server = EngineServerProcess(
            process=process, port=port, unix_socket=unix_socket, credentials=credentials
        )
        try:
            if wait:
                wait_until_serving(
                    server.target,
                    timeout=ready_timeout,
                    process=process,
                    credentials=credentials,
                )
            yield server
        finally:
            server.terminate()
    finally:
        if not isinstance(log, int):
            log.close()


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (openssl), and its key."""
    cert, key = directory / "engine.crt", directory / "engine.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
