"""The daemon: the coordinator API over gRPC, HTTP for operations, the scheduler, warm engines.

``Daemon.run`` keeps the application's engines warm (``EnginePool``), binds both addresses
(port 0 picks a free one), serves ``odf.coordinator.v1.Coordinator`` (token-authenticated), the
standard health service and reflection over gRPC, and ``/healthz`` and ``/metrics``
(Prometheus) over HTTP, with the workspace's datasets there too (the Simple Transfer
Protocol, ``sharing.serving``: ``odf pull http://HOST:PORT/NAME``; the Smart Transfer
Protocol's pull, ``smart_pull``, and its push authenticated with the token, ``smart_push``,
committed under the same dataset locks as the gRPC calls); it writes ``daemon.json``
with the addresses actually bound, starts the scheduler, reports SERVING, and blocks until
``stop`` is set (``odf serve`` sets it on SIGTERM and SIGINT). Arrow Flight SQL is served on a
third address unless it is off (``flight_sql``). Then it takes no more work
(NOT_SERVING, the scheduler stops picking), lets running calls and the running scheduled pull
finish within ``grace`` seconds, stops the engines (which fails whatever still runs: a
transaction is committed whole or not at all), and removes ``daemon.json``.

Exposure: loopback by default. Binding any other address needs TLS, or an explicit
``insecure`` (the token then travels in clear text). With TLS, both addresses serve it (gRPC,
and HTTPS on the HTTP address). ``daemon.requireTokenForReads`` makes every HTTP request but
``/healthz`` carry the token (``Authorization: Bearer``); a push always needs it. The HTTP
listener's connections are bounded in number and time (``http_listener``).

The HTTP address also serves the web UI (``/ui/``, the root redirecting there;
``coordinator.ui``, with its own login), told of every commit the daemon makes.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from pyarrow import ArrowException

from common.logs import get_logger
from common.odf.errors import OdfError, ValidationError
from coordinator.app import Application
from coordinator.app.use_cases import QueryOptions
from coordinator.config import DaemonConfig, parse_host_port
from coordinator.daemon import metrics as metrics_module
from coordinator.daemon import smart_pull
from coordinator.daemon.access import Authority, Scope, ScopedTokenInterceptor, TokenStore
from coordinator.daemon.activity import Activity, ActivityInterceptor
from coordinator.daemon.calls import DatasetLocks
from coordinator.daemon.flight_front import FlightFront, Fronted, FrontLimits, private_socket_dir
from coordinator.daemon.flight_sql import FlightSqlServer
from coordinator.daemon.grpc_generated import coordinator_pb2, coordinator_pb2_grpc
from coordinator.daemon.http_listener import (
    BoundedHandler,
    BoundedHTTPServer,
    HttpBounds,
    tls_context,
)
from coordinator.daemon.metrics import Metrics
from coordinator.daemon.query_http import QUERY_PATH, serve_query
from coordinator.daemon.query_warm_up import QueryWarmUp, RecentQueries
from coordinator.daemon.rundir import DaemonInfo, RunDir
from coordinator.daemon.scheduler import Scheduler
from coordinator.daemon.service import CoordinatorService
from coordinator.daemon.smart_push import PushServer
from coordinator.daemon.status import daemon_status
from coordinator.daemon.ui_operations import DaemonOperations
from coordinator.dataset.writer_locks import DAEMON
from coordinator.query import QueryResult
from coordinator.sharing.serving import open_object, parse_request_path
from coordinator.ui.server import WebUi

log = get_logger(__name__)

GRACE_S = 10.0
_WORKERS = 16
TOKEN_VALIDATE_PATH = "/platform/token/validate"
"""kamu-cli's check of a stored access token (200: good, 401: not), answered for its `login`."""
SERVICE_NAME = coordinator_pb2.DESCRIPTOR.services_by_name["Coordinator"].full_name


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
        app.writers.owner = DAEMON  # a command waiting for a dataset says it waits for us
        self.address, self.tls = listen.address, tls
        self.grace = GRACE_S
        self.grpc_host, _ = parse_host_port(listen.address, path="--address")
        self.http_host_port = parse_host_port(listen.http_address, path="--http-address")
        self.flight_sql_address = listen.flight_sql_address
        hosts = [(self.grpc_host, "--address"), (self.http_host_port[0], "--http-address")]
        if self.flight_sql_address is not None:
            flight_host, _ = parse_host_port(self.flight_sql_address, path="--flight-sql-address")
            hosts.append((flight_host, "--flight-sql-address"))
        for host, option in hosts:
            if not _is_loopback(host) and tls is None and not insecure:
                raise ValidationError(
                    f"{host} is not a loopback address: serving it needs TLS (--tls-cert and"
                    " --tls-key), or --insecure to send the token in clear text",
                    path=option,
                )
        self.rundir = RunDir(app.ws.odf_dir)
        self.health = health.HealthServicer()
        self.serving = threading.Event()
        self.metrics = Metrics()
        self.locks = DatasetLocks(app.config.daemon.max_parallel)

    def run(
        self, stop: threading.Event, on_serving: Callable[[DaemonInfo], None] | None = None
    ) -> None:
        """Serve until ``stop`` is set; ``on_serving`` is told where, once both servers listen."""
        with self.rundir.hold():
            authority = Authority(self.rundir.new_token(), TokenStore(self.app.ws.odf_dir))
            scheduler = Scheduler(self.app, self.locks, self.metrics, self.rundir.path)
            activity = Activity()
            server = grpc.server(
                ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="odf-daemon"),
                interceptors=[ScopedTokenInterceptor(authority), ActivityInterceptor(activity)],
            )
            started = datetime.now(UTC)

            def committed(dataset: str) -> None:
                scheduler.notify(dataset)
                web.hub.committed(dataset)

            recent = RecentQueries(self.rundir.path)
            service = CoordinatorService(
                self.app,
                self.locks,
                self.metrics,
                committed,
                lambda: daemon_status(started, scheduler, self.app.pool, activity),
                recent=recent,
            )
            coordinator_pb2_grpc.add_CoordinatorServicer_to_server(service, server)
            health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
            reflection.enable_server_reflection(
                (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
            )
            address = self._bind_grpc(server)
            pushes = PushServer(
                self.app.ws,
                authority,
                self.rundir.path,
                self._hold_for_push,
                committed,
            )
            operations = DaemonOperations(self.app, self.locks, self.metrics, service)
            web = WebUi(self.app, operations, authority.scope_of, secure=self.tls is not None)

            def http_query(sql: str, options: QueryOptions) -> QueryResult:
                with activity.call("Query", ""):  # as the gRPC call is: logged, in status
                    return service.query(sql, options)

            http = self._http_server(pushes, web, http_query)
            flight_sql = self._flight_sql_server(authority)
            pool = self.app.keep_engines_warm(
                idle_timeout=self.app.config.daemon.engine_idle_timeout
            )
            self.metrics.watch_pool(lambda: pool.stats)
            warm_up = QueryWarmUp(self.app, recent.load(), self.app.config.daemon.warm_up_seconds)
            server.start()
            http_thread = threading.Thread(target=http.serve_forever, name="odf-daemon-http")
            http_thread.start()
            try:
                info = DaemonInfo(
                    pid=os.getpid(),
                    address=address,
                    http_address=_join(str(http.server_address[0]), http.server_address[1]),
                    started=started,
                    tls_cert=str(self.tls.cert.resolve()) if self.tls else None,
                    flight_sql_address=flight_sql.address if flight_sql else None,
                )
                self.rundir.write_info(info)
                scheduler.start()
                self.health.set("", health_pb2.HealthCheckResponse.SERVING)
                self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
                self.serving.set()
                warm_up.start()
                log.info("daemon.serving", address=info.address, http=info.http_address)
                if on_serving is not None:
                    on_serving(info)
                stop.wait()
                log.info("daemon.stopping", grace_s=self.grace)
            finally:
                self.serving.clear()
                self.health.enter_graceful_shutdown()
                warm_up.stop(self.grace)
                stopping = server.stop(self.grace)
                if not scheduler.stop(self.grace):
                    log.warning("daemon.scheduled_pull_cancelled", dataset=scheduler.busy)
                stopping.wait()
                if flight_sql is not None:
                    flight_sql.close(self.grace)
                pool.close()
                http.shutdown()
                http_thread.join()
                http.server_close()
                web.stop()
                log.info("daemon.stopped")

    @contextmanager
    def _hold_for_push(self, name: str) -> Iterator[None]:
        """What a received push commits under: the daemon's lock of the dataset, and its
        writer lock when it exists (a new dataset appears whole, under the workspace lock)."""
        with self.locks.hold([name], "push"):
            try:
                target = [self.app.dataset(name)]
            except OdfError:
                target = []
            with self.app.writers.hold(target, "push"):
                yield

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

    def _flight_sql_server(self, authority: Authority) -> Fronted | None:
        """The Flight SQL server on a private socket and its bounded front on the public
        address (``flight_front``); ``None`` when it is off."""
        if self.flight_sql_address is None:
            return None
        host, port = parse_host_port(self.flight_sql_address, path="--flight-sql-address")
        tls = (self.tls.cert.read_bytes(), self.tls.key.read_bytes()) if self.tls else None
        config = self.app.config.daemon
        limits = FrontLimits(
            max_message_bytes=config.flight_sql_max_request_bytes,
            max_call_bytes=config.flight_sql_max_request_bytes,
            max_calls=config.flight_sql_max_calls,
            call_timeout=config.flight_sql_call_timeout,
            handshake_timeout=config.flight_sql_handshake_timeout,
        )
        socket_dir = private_socket_dir()
        socket = socket_dir / "flight.sock"
        try:
            server = FlightSqlServer(
                self.app, self.locks, self.metrics, authority, f"grpc+unix://{socket}", None
            )
        except (OSError, ArrowException) as e:
            shutil.rmtree(socket_dir, ignore_errors=True)
            raise DaemonBindError(f"cannot serve Flight SQL on {socket}: {e}") from None
        try:
            front = FlightFront(_join(host, port), socket, tls, limits, results=server)
        except (OSError, RuntimeError) as e:
            server.close(0)
            shutil.rmtree(socket_dir, ignore_errors=True)
            raise DaemonBindError(f"cannot listen on {self.flight_sql_address}: {e}") from None
        return Fronted(front, server, socket_dir, _join(host, front.port))

    def _http_server(
        self, pushes: PushServer, web: WebUi, query: Callable[[str, QueryOptions], QueryResult]
    ) -> BoundedHTTPServer:
        serving = self.serving
        metrics = self.metrics
        workspace = self.app.ws
        config = self.app.config.daemon
        token_for_reads = config.require_token_for_reads

        class Handler(BoundedHandler):
            def do_GET(self) -> None:
                if self.path == "/healthz":
                    ok = serving.is_set()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"not serving\n")
                elif web.serves(self.path) and parse_request_path(self.path) is None:
                    web.handle(self)  # the web UI: its own login, whatever the config says
                elif pushes.is_push(self):
                    pushes.serve(self)
                elif smart_pull.is_pull(self):
                    may_read = not token_for_reads or pushes.authorized(self, Scope.READ)
                    smart_pull.serve_pull(self, workspace, may_read)
                elif self.path == TOKEN_VALIDATE_PATH:  # kamu-cli's `login`: a good token?
                    good = pushes.authorized(self, Scope.READ)
                    body = b"{}" if good else b'{"message":"not a token of this daemon"}'
                    self._send(200 if good else 401, body, "application/json")
                elif token_for_reads and not pushes.authorized(self, Scope.READ):
                    self.close_connection = True
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", "Bearer")
                    body = b"reading this daemon needs its token (Bearer)\n"
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                elif self.path == "/metrics":
                    self._send(200, metrics.render(), metrics_module.CONTENT_TYPE)
                else:
                    self._send_object()

            def do_POST(self) -> None:
                if self.path == QUERY_PATH:
                    serve_query(self, lambda h: pushes.authorized(h, Scope.READ), query)
                elif web.serves(self.path):
                    web.handle(self)
                else:
                    self.send_error(404, "not found")

            def do_PUT(self) -> None:
                if pushes.is_upload(self.path):
                    pushes.upload(self)
                else:
                    self.send_error(404, "not found")

            def _send_object(self) -> None:
                """A dataset's object (Simple Transfer Protocol, ``sharing.serving``)."""
                request = parse_request_path(self.path)
                found = open_object(workspace, request) if request is not None else None
                if found is None:
                    self.send_error(404, "not found")
                    return
                fd, size = found
                with os.fdopen(fd, "rb") as file:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    shutil.copyfileobj(file, self.wfile, 1 << 20)

            def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("daemon.http", request=format % args)

        bounds = HttpBounds(
            header_timeout=config.http_header_timeout,
            body_timeout=config.http_body_timeout,
            idle_timeout=config.http_idle_timeout,
            max_connections=config.http_max_connections,
            max_per_client=config.http_max_connections_per_client,
        )
        try:
            tls = tls_context(str(self.tls.cert), str(self.tls.key)) if self.tls else None
            return BoundedHTTPServer(
                self.http_host_port,
                Handler,
                bounds,
                tls,
                lambda why: metrics.http_refused.labels(why).inc(),
            )
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
