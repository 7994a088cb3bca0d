"""The Flight SQL listener's front: the only thing on the public Flight SQL address.

pyarrow's Flight server (``flight_sql.FlightSqlServer``) sets gRPC's receive limit to
unlimited and does not let it be configured, so a peer could make it read a message of any
size before the token is even checked. The front is a grpcio server that bounds what it
accepts and forwards each call, byte for byte, to that server, which listens only on a Unix
socket in a directory of its own (mode 0700):

- one request message at most ``max_message_bytes`` (gRPC refuses a larger one with
  RESOURCE_EXHAUSTED before reading it whole), and at most ``max_call_bytes`` and
  ``MAX_REQUESTS`` messages per call;
- ``DoExchange`` is refused here (the service is read-only), unknown methods get
  UNIMPLEMENTED;
- at most ``2 * max_calls + 4`` calls of any kind at once (more: UNAVAILABLE; the server
  behind counts its queries and result streams against ``max_calls`` itself), the client's
  deadline and at most ``call_timeout`` for each call, a peer that does not finish the connection's
  handshake in ``handshake_timeout`` or stays idle ``IDLE_MS`` is disconnected;
- TLS ends here (the daemon's certificate); the private link is plain.

Headers, trailers and status pass through unchanged (the bearer token answered to basic auth
is a response header; Flight's error details are trailers). A client that cancels its call
cancels the forwarded one, and results are forwarded one message at a time as the client
reads them, never buffered whole.
"""

from __future__ import annotations

import logging
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc
import pyarrow as pa
import pyarrow.flight as flight

from common.logs import get_logger

log = get_logger(__name__)

SERVICE = "/arrow.flight.protocol.FlightService/"
REFUSED = frozenset({"DoExchange"})
"""Methods the read-only service never serves: refused without forwarding a byte."""
MAX_REQUESTS = {"Handshake": 8, "DoPut": 64}
"""Request messages a call may send; every other method takes exactly one."""
IDLE_MS = 300_000
READ_AHEAD = 2
"""Messages of a result read from the server behind ahead of the client."""
_POLL_S = 0.5
_HOP = ("user-agent", "grpc-", ":", "te", "content-type")


@dataclass(frozen=True, slots=True)
class FrontLimits:
    """What one call may send and how many run at once (``daemon.flightSql*``)."""

    max_message_bytes: int
    max_call_bytes: int
    max_calls: int
    call_timeout: float
    handshake_timeout: float = 10.0


def concurrent_calls(limits: FrontLimits) -> int:
    """Calls of any kind the front serves at once: the queries and streams the server allows,
    as many metadata calls again, and a few to spare."""
    return 2 * limits.max_calls + 4


@dataclass(frozen=True, slots=True)
class ResultStream:
    """A ``DoGet`` the front answers itself: the headers to send, then the messages."""

    headers: tuple[tuple[str, str], ...]
    messages: Iterator[bytes]
    """Serialized ``FlightData``, produced as the client reads them."""


class ResultSource(Protocol):
    """The server behind, for the ``DoGet`` calls the front answers itself (statement
    results: ``flight_sql.FlightSqlServer.open_result``)."""

    def open_result(
        self, ticket: bytes, authorization: str | bytes, active: Callable[[], bool]
    ) -> ResultStream | None: ...


_STATUS = (
    (flight.FlightUnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (flight.FlightUnauthorizedError, grpc.StatusCode.PERMISSION_DENIED),
    (flight.FlightUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (flight.FlightCancelledError, grpc.StatusCode.CANCELLED),
    (flight.FlightTimedOutError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (flight.FlightInternalError, grpc.StatusCode.INTERNAL),
)
"""Flight's errors as gRPC statuses, as pyarrow's server sends them (any other: UNKNOWN)."""


class _TooMuch(Exception):
    """A call's requests went past its bounds (the front answers RESOURCE_EXHAUSTED)."""


class _RefusalsLoggedOnce(logging.Filter):
    """gRPC logs a traceback when a request iterator raises; a refusal is logged once by
    the front itself (``flight_sql.request_refused``), so that traceback is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _TooMuch))


_REFUSALS_LOGGED_ONCE = _RefusalsLoggedOnce()


class FlightFront:
    """Listens on ``address`` (``host:port``) and forwards to the Flight server that
    ``backend`` is the Unix-socket location of (see the module doc)."""

    def __init__(
        self,
        address: str,
        backend_socket: Path,
        tls: tuple[bytes, bytes] | None,
        limits: FrontLimits,
        results: ResultSource | None = None,
    ) -> None:
        self.limits = limits
        logging.getLogger("grpc._channel").addFilter(_REFUSALS_LOGGED_ONCE)
        self._channel = grpc.insecure_channel(
            f"unix:{backend_socket}",
            options=[
                ("grpc.max_receive_message_length", -1),  # from our own server
                ("grpc.max_send_message_length", limits.max_message_bytes),
            ],
        )
        self._server = grpc.server(
            ThreadPoolExecutor(
                max_workers=concurrent_calls(limits) + 1, thread_name_prefix="odf-fsql"
            ),
            handlers=[_Forwarding(self._channel, limits, results)],
            maximum_concurrent_rpcs=concurrent_calls(limits) + 1,
            options=[
                ("grpc.max_receive_message_length", limits.max_message_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.server_handshake_timeout_ms", int(limits.handshake_timeout * 1000)),
                ("grpc.max_connection_idle_ms", IDLE_MS),
                ("grpc.max_concurrent_streams", concurrent_calls(limits) + 1),
                ("grpc.http2.max_pings_without_data", 2),
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                ("grpc.so_reuseport", 0),
            ],
        )
        if tls is None:
            self.port = self._server.add_insecure_port(address)
        else:
            credentials = grpc.ssl_server_credentials([(tls[1], tls[0])])
            self.port = self._server.add_secure_port(address, credentials)
        if self.port == 0:
            raise OSError(f"cannot listen on {address} (in use?)")
        self._server.start()

    def stop(self, grace: float) -> None:
        """Stop taking calls; the running ones get ``grace`` seconds."""
        self._server.stop(grace).wait()
        self._channel.close()


class _Forwarding(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def __init__(
        self, channel: grpc.Channel, limits: FrontLimits, results: ResultSource | None
    ) -> None:
        self.channel, self.limits, self.results = channel, limits, results
        self.calls = threading.BoundedSemaphore(concurrent_calls(limits))

    def service(self, handler_call_details: Any) -> Any:
        method = str(handler_call_details.method)
        if not method.startswith(SERVICE):
            return None
        name = method[len(SERVICE) :]
        if name in REFUSED:
            return grpc.stream_stream_rpc_method_handler(_refuse(name))
        forward = self.channel.stream_stream(method, None, None)  # bytes in, bytes out
        if name == "DoGet" and self.results is not None:
            return grpc.stream_stream_rpc_method_handler(self._get(forward, self.results))
        return grpc.stream_stream_rpc_method_handler(self._behaviour(name, forward))

    def _behaviour(self, name: str, forward: Any) -> Any:
        max_requests = MAX_REQUESTS.get(name, 1)

        def behaviour(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            with self._slot(context):
                yield from self._relay(forward, requests, max_requests, context)

        return behaviour

    def _get(self, forward: Any, results: ResultSource) -> Any:
        """``DoGet``: a statement's result is answered here, from its file (``ResultSource``);
        any other ticket is relayed."""

        def behaviour(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            with self._slot(context):
                left = context.time_remaining()
                seconds = self.limits.call_timeout if left is None else left
                sent = _Bounded(requests, 1, self.limits.max_call_bytes)
                request = _arrived(sent, min(seconds, self.limits.call_timeout), context)
                stream = _opened(results, request, context)
                if stream is None:
                    yield from self._relay(forward, iter(request), 1, context)
                    return
                context.send_initial_metadata(stream.headers)
                try:
                    yield from _read_ahead(stream.messages, context)
                except flight.FlightError as e:
                    context.abort(_status_of(e), _message_of(e))

        return behaviour

    @contextmanager
    def _slot(self, context: grpc.ServicerContext) -> Iterator[None]:
        if not self.calls.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"busy: {concurrent_calls(self.limits)} Flight SQL calls at once",
            )
        try:
            yield
        finally:
            self.calls.release()

    def _relay(
        self,
        forward: Any,
        requests: Iterator[bytes],
        max_requests: int,
        context: grpc.ServicerContext,
    ) -> Iterator[bytes]:
        """The call passed on to the server behind, its answer passed back."""
        limits = self.limits
        left = context.time_remaining()
        timeout = limits.call_timeout if left is None else min(left, limits.call_timeout)
        sent = _Bounded(requests, max_requests, limits.max_call_bytes)
        metadata = [(k, v) for k, v in context.invocation_metadata() if not k.startswith(_HOP)]
        call = forward(iter(sent), metadata=metadata, timeout=timeout)
        context.add_callback(call.cancel)
        try:
            context.send_initial_metadata(_passed(call.initial_metadata()))
            yield from _read_ahead(call, context)
            context.set_trailing_metadata(_passed(call.trailing_metadata()))
        except grpc.RpcError as e:
            if sent.refusal is not None:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, sent.refusal)
            context.set_trailing_metadata(_passed(e.trailing_metadata()))
            context.abort(e.code(), e.details() or "")


def _arrived(sent: _Bounded, seconds: float, context: grpc.ServicerContext) -> list[bytes]:
    """All of a call's request messages, which must have come (the client half-closing its
    side) within ``seconds``: a client that sends its ticket slowly or never ends its
    request does not hold a call slot past them."""
    box: queue.Queue[list[bytes] | BaseException] = queue.Queue(1)

    def read() -> None:
        try:
            box.put(list(sent))
        except BaseException as e:
            box.put(e)

    threading.Thread(target=read, name="odf-fsql-request", daemon=True).start()
    try:
        got = box.get(timeout=seconds)
    except queue.Empty:
        context.abort(
            grpc.StatusCode.DEADLINE_EXCEEDED, f"the request did not arrive within {seconds:g} s"
        )
    if isinstance(got, _TooMuch):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(got))
    if isinstance(got, BaseException):
        raise got
    return got


def _opened(
    results: ResultSource, request: list[bytes], context: grpc.ServicerContext
) -> ResultStream | None:
    """The result the ``DoGet`` request's ticket names, if the front answers it itself."""
    if len(request) != 1:
        return None  # the server behind answers what is wrong
    try:
        ticket = flight.Ticket.deserialize(request[0]).ticket
    except (pa.ArrowException, ValueError):
        return None
    authorization = next((v for k, v in context.invocation_metadata() if k == "authorization"), "")
    try:
        return results.open_result(ticket, authorization, context.is_active)
    except flight.FlightError as e:
        context.abort(_status_of(e), _message_of(e))
    raise AssertionError("unreachable: abort raises")


def _status_of(error: flight.FlightError) -> grpc.StatusCode:
    return next(
        (code for kind, code in _STATUS if isinstance(error, kind)), grpc.StatusCode.UNKNOWN
    )


def _message_of(error: flight.FlightError) -> str:
    return str(error).split(". Detail:", 1)[0]


class _Bounded:
    """A call's request messages, checked as they arrive: past the bounds the forwarded call
    is cancelled and ``refusal`` says why."""

    def __init__(self, requests: Iterator[bytes], max_requests: int, max_bytes: int) -> None:
        self.requests, self.max_requests, self.max_bytes = requests, max_requests, max_bytes
        self.refusal: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        size = 0
        for count, message in enumerate(self.requests, start=1):
            size += len(message)
            if count > self.max_requests:
                self.refusal = f"at most {self.max_requests} request messages in this call"
            elif size > self.max_bytes:
                self.refusal = f"at most {self.max_bytes} request bytes in this call"
            if self.refusal is not None:
                log.warning("flight_sql.request_refused", reason=self.refusal)
                raise _TooMuch(self.refusal)  # gRPC cancels the forwarded call
            yield message


def _read_ahead(call: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
    """``call``'s messages, a thread reading up to ``READ_AHEAD`` of them while the client is
    sent the last one (a relay's two hops, or a result file's reads and gRPC's sends, then
    overlap); its failure is raised here. ``call`` is closed in that thread when it ends or the
    client goes."""
    ahead: queue.Queue[bytes | BaseException | None] = queue.Queue(READ_AHEAD)

    def offer(item: bytes | BaseException | None) -> bool:
        while context.is_active():
            try:
                ahead.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for message in call:
                if not offer(message):
                    return
            offer(None)
        except Exception as e:  # raised in the serving thread instead
            offer(e)
        finally:
            close = getattr(call, "close", None)
            if close is not None:
                close()

    threading.Thread(target=read, name="odf-fsql-read", daemon=True).start()
    while context.is_active():
        try:
            item = ahead.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def _refuse(name: str) -> Any:
    def behaviour(requests: Iterator[bytes], context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} is not served (read-only)")

    return behaviour


def _passed(metadata: Any) -> tuple[tuple[str, str | bytes], ...]:
    """Headers or trailers to pass on: all but HTTP/2's and gRPC's own."""
    return tuple((str(k), v) for k, v in metadata or () if not str(k).startswith(_HOP))


class Backend(Protocol):
    def close(self, grace: float) -> None: ...


@dataclass
class Fronted:
    """A Flight server on its private socket and the front that serves it on ``address``."""

    front: FlightFront
    backend: Backend
    socket_dir: Path
    address: str

    def close(self, grace: float) -> None:
        """The front stops taking calls, then the server behind it stops."""
        try:
            self.front.stop(grace)
            self.backend.close(grace)
        finally:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


def private_socket_dir() -> Path:
    """A new directory only this user may enter (``mkdtemp``: mode 0700), for the Flight
    server's Unix socket; short, as a socket's path is at most 107 bytes."""
    return Path(tempfile.mkdtemp(prefix="odf-fsql-"))
