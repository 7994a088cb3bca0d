"""The daemon's servers: gRPC (token-authenticated; health open) and HTTP (``/healthz``).

``Daemon.run`` binds both addresses (port 0 picks a free one), writes ``daemon.json`` with the
addresses actually bound, reports SERVING, and blocks until ``stop`` is set (``odf serve``
sets it on SIGTERM and SIGINT); then it reports NOT_SERVING, lets running calls finish within
``grace`` seconds, and removes ``daemon.json``.

Exposure: loopback by default. Binding any other address needs TLS, or an explicit
``insecure`` (the token then travels in clear text).
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from common.grpc_auth import TokenInterceptor
from common.odf.errors import OdfError, ValidationError
from coordinator.app import Application
from coordinator.config import DaemonConfig, parse_host_port
from coordinator.daemon.rundir import DaemonInfo, RunDir

log = structlog.get_logger(__name__)

GRACE_S = 10.0
_WORKERS = 8


class DaemonBindError(OdfError):
    """An address the daemon was told to listen on cannot be bound."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert: Path
    key: Path


class Daemon:
    """Serves one workspace's application (see the module doc)."""

    def __init__(
        self, app: Application, listen: DaemonConfig, tls: TlsFiles | None, insecure: bool
    ) -> None:
        """Serve ``app`` on the addresses of ``listen``; ``insecure`` allows a non-loopback
        address without ``tls``."""
        self.app = app
        self.address, self.tls = listen.address, tls
        self.grace = GRACE_S
        self.grpc_host, _ = parse_host_port(listen.address, path="--address")
        self.http_host_port = parse_host_port(listen.http_address, path="--http-address")
        for host, option in (
            (self.grpc_host, "--address"),
            (self.http_host_port[0], "--http-address"),
        ):
            if not _is_loopback(host) and tls is None and not insecure:
                raise ValidationError(
                    f"{host} is not a loopback address: serving it needs TLS (--tls-cert and"
                    " --tls-key), or --insecure to send the token in clear text",
                    path=option,
                )
        self.rundir = RunDir(app.ws.odf_dir)
        self.health = health.HealthServicer()
        self.serving = threading.Event()

    def run(
        self, stop: threading.Event, on_serving: Callable[[DaemonInfo], None] | None = None
    ) -> None:
        """Serve until ``stop`` is set; ``on_serving`` is told where, once both servers listen."""
        with self.rundir.hold():
            token = self.rundir.new_token()
            server = grpc.server(
                ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="odf-daemon"),
                interceptors=[TokenInterceptor(token, what="daemon")],
            )
            health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
            address = self._bind_grpc(server)
            http = self._http_server()
            server.start()
            http_thread = threading.Thread(target=http.serve_forever, name="odf-daemon-http")
            http_thread.start()
            try:
                info = DaemonInfo(
                    pid=os.getpid(),
                    address=address,
                    http_address=_join(str(http.server_address[0]), http.server_address[1]),
                    started=datetime.now(UTC),
                )
                self.rundir.write_info(info)
                self.health.set("", health_pb2.HealthCheckResponse.SERVING)
                self.serving.set()
                log.info("daemon.serving", address=info.address, http=info.http_address)
                if on_serving is not None:
                    on_serving(info)
                stop.wait()
                log.info("daemon.stopping", grace_s=self.grace)
            finally:
                self.serving.clear()
                self.health.enter_graceful_shutdown()
                server.stop(self.grace).wait()
                http.shutdown()
                http_thread.join()
                http.server_close()
                log.info("daemon.stopped")

    def _bind_grpc(self, server: grpc.Server) -> str:
        try:
            if self.tls is None:
                port = server.add_insecure_port(self.address)
            else:
                credentials = grpc.ssl_server_credentials(
                    [(self.tls.key.read_bytes(), self.tls.cert.read_bytes())]
                )
                port = server.add_secure_port(self.address, credentials)
        except RuntimeError as e:
            raise DaemonBindError(f"cannot listen on {self.address}: {e}") from None
        if port == 0:
            raise DaemonBindError(f"cannot listen on {self.address} (in use?)")
        return _join(self.grpc_host, port)

    def _http_server(self) -> ThreadingHTTPServer:
        serving = self.serving

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/healthz":
                    self.send_error(404, "not found")
                    return
                ok = serving.is_set()
                body = b"ok\n" if ok else b"not serving\n"
                self.send_response(200 if ok else 503)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("daemon.http", request=format % args)

        try:
            return ThreadingHTTPServer(self.http_host_port, Handler)
        except OSError as e:
            host, port = self.http_host_port
            raise DaemonBindError(f"cannot listen on {_join(host, port)}: {e}") from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
