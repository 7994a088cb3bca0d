"""The daemon's HTTP listener: a thread per connection, each one bounded in time and number.

- **Connection caps**: at most ``max_connections`` connections at once, at most
  ``max_per_client`` from one client address. One over a cap is refused on the accepting
  thread without reading it (plain HTTP: a ``503`` written without waiting, then closed; TLS:
  closed), so it never holds a thread.
- **Deadlines**, enforced by one watchdog thread that shuts the socket down when its deadline
  passes (a per-``recv`` timeout alone lets a client sending one byte a second hold a thread
  for ever): the TLS handshake, request line and headers within ``header_timeout`` of the
  connection; a request body within ``body_timeout`` plus one second per ``MIN_BODY_RATE``
  bytes it announced; a WebSocket silent (no complete frame, and less than
  ``WS_PROGRESS_BYTES`` of one) for ``idle_timeout``. ``idle_timeout`` is also every socket's
  ``recv``/``send`` timeout.
- **TLS**: with a certificate, every connection is wrapped on its own thread (the handshake
  under the header deadline), so the accepting thread never waits for a client.

Headers are also bounded in size by the standard library (a line of 64 KiB, 100 lines: 431).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from common.logs import get_logger

log = get_logger(__name__)

MIN_BODY_RATE = 16 << 10
"""Bytes a second a request body must average, after ``body_timeout``."""
WS_PROGRESS_BYTES = 64 << 10
"""Bytes of a WebSocket frame that count as activity (a frame dripped slower is cut)."""
_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
    b"Connection: close\r\n\r\ntoo many connections\n"
)


@dataclass(frozen=True, slots=True)
class HttpBounds:
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    idle_timeout: float = 120.0
    max_connections: int = 128
    max_per_client: int = 32

    def body_deadline(self, length: int) -> float:
        """Seconds a body of ``length`` bytes may take to arrive."""
        return self.body_timeout + length / MIN_BODY_RATE


class ConnectionCap:
    """How many connections are open, in all and per client; admits while under both caps."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self.open: dict[str, int] = {}
        self.guard = threading.Lock()

    def admit(self, client: str) -> bool:
        with self.guard:
            mine = self.open.get(client, 0)
            if sum(self.open.values()) >= self.total or mine >= self.per_client:
                return False
            self.open[client] = mine + 1
            return True

    def release(self, client: str) -> None:
        with self.guard:
            left = self.open[client] - 1
            if left:
                self.open[client] = left
            else:
                del self.open[client]


class Deadline:
    """One connection's current deadline (none, or a monotonic time) in a ``Watchdog``."""

    def __init__(self, watchdog: Watchdog, sock: socket.socket) -> None:
        self.watchdog = watchdog
        self.sock = sock
        self.at: float | None = None
        self.why = ""

    def set(self, seconds: float, why: str) -> None:
        self.watchdog.set(self, time.monotonic() + seconds, why)

    def clear(self) -> None:
        self.watchdog.set(self, None, "")


class Watchdog:
    """Shuts down the socket of every ``Deadline`` that passes (one thread for all)."""

    def __init__(self, on_cut: Callable[[str], None]) -> None:
        self.on_cut = on_cut
        self.heap: list[tuple[float, int, Deadline]] = []
        self.order = itertools.count()
        self.wake = threading.Condition()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="odf-daemon-http-deadlines")
        self.thread.daemon = True
        self.thread.start()

    def set(self, deadline: Deadline, at: float | None, why: str) -> None:
        with self.wake:
            deadline.at, deadline.why = at, why
            if at is not None:
                heapq.heappush(self.heap, (at, next(self.order), deadline))
                self.wake.notify()

    def stop(self) -> None:
        with self.wake:
            self.stopped = True
            self.wake.notify()
        self.thread.join()

    def _run(self) -> None:
        with self.wake:
            while not self.stopped:
                now = time.monotonic()
                while self.heap and self.heap[0][0] <= now:
                    at, _, deadline = heapq.heappop(self.heap)
                    if deadline.at == at:  # else moved or cleared since
                        deadline.at = None
                        self._cut(deadline)
                self.wake.wait(self.heap[0][0] - now if self.heap else None)

    def _cut(self, deadline: Deadline) -> None:
        log.info("daemon.http_cut", why=deadline.why)
        self.on_cut(deadline.why)
        with contextlib.suppress(OSError):
            # the plain socket's shutdown, also under an SSLSocket (its own would unwrap)
            socket.socket.shutdown(deadline.sock, socket.SHUT_RDWR)


class BoundedHTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with the bounds of the module doc, optionally over TLS."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        bounds: HttpBounds,
        tls: ssl.SSLContext | None,
        on_refused: Callable[[str], None],
    ) -> None:
        self.bounds, self.tls, self.on_refused = bounds, tls, on_refused
        self.cap = ConnectionCap(bounds.max_connections, bounds.max_per_client)
        self.current = threading.local()
        super().__init__(address, handler)
        self.watchdog = Watchdog(on_refused)

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def process_request(self, request: Any, client_address: Any) -> None:
        """On the accepting thread: refuse at once over a cap, else start the connection's
        thread."""
        if not self.cap.admit(str(client_address[0])):
            self.on_refused("cap")
            if self.tls is None:
                with contextlib.suppress(OSError):
                    request.setblocking(False)
                    request.send(_REFUSAL)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.cap.release(str(client_address[0]))
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.cap.release(str(client_address[0]))

    def finish_request(self, request: Any, client_address: Any) -> None:
        deadline = Deadline(self.watchdog, request)
        deadline.set(self.bounds.header_timeout, "header")
        request.settimeout(self.bounds.idle_timeout)
        try:
            if self.tls is None:
                self._handle(request, client_address, deadline)
                return
            # the plain socket is detached into the TLS one, which is closed here
            with self.tls.wrap_socket(
                request, server_side=True, do_handshake_on_connect=False
            ) as wrapped:
                deadline.sock = wrapped
                try:
                    wrapped.do_handshake()
                except (OSError, ValueError) as e:
                    log.info("daemon.tls_refused", client=client_address[0], error=str(e))
                    return
                self._handle(wrapped, client_address, deadline)
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(wrapped, socket.SHUT_WR)
        finally:
            deadline.clear()

    def _handle(self, request: socket.socket, client_address: Any, deadline: Deadline) -> None:
        self.current.deadline = deadline  # for BoundedHandler.setup, on this thread
        self.RequestHandlerClass(request, client_address, self)  # type: ignore[arg-type]

    def server_close(self) -> None:
        super().server_close()
        self.watchdog.stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.info("daemon.http_error", client=client_address[0], exc_info=True)


class BoundedHandler(BaseHTTPRequestHandler):
    """A request handler of a ``BoundedHTTPServer``: ``deadline`` is its connection's; the
    header deadline ends once the headers are read."""

    deadline: Deadline

    def setup(self) -> None:
        server = self.server
        assert isinstance(server, BoundedHTTPServer)
        self.bounds = server.bounds
        self.scheme = server.scheme
        self.deadline = server.current.deadline
        super().setup()

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.deadline.clear()
        return ok

    def read_body_within(self, length: int) -> None:
        """Start the deadline of a body of ``length`` bytes (``HttpBounds.body_deadline``)."""
        self.deadline.set(self.bounds.body_deadline(length), "body")


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context
