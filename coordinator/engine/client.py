"""``EngineClient``: the coordinator's side of the engine gRPC protocol.

Every RPC is server-streaming and carries one FlatBuffers buffer per message. The client sends
one request and reads the stream as the reference coordinator does: ``Progress`` messages are
skipped, the first terminal message ends the call (the rest of the stream is not drained),
``InvalidQuery`` and ``InternalError`` become ``EngineInvalidQueryError`` and
``EngineInternalError``, and a stream that ends without a terminal message, an undecodable
message or a gRPC error (the engine crashed, the connection broke) is an ``EngineError``.
Calls have no deadline: a transaction may legitimately run for a long time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from common.engine_rpc import rpcs
from common.engine_rpc.rpcs import EngineRpc
from common.logs import get_logger
from common.odf import engine_protocol as ep
from common.odf.errors import OdfError
from coordinator.engine import cancel as engine_cancel
from coordinator.engine.cancel import EngineCallCancelled
from coordinator.engine.errors import (
    EngineError,
    EngineInternalError,
    EngineInvalidQueryError,
    EngineUnavailableError,
    EngineUnimplementedError,
)

log = get_logger(__name__)

Req = TypeVar("Req")
Ok = TypeVar("Ok")

_HEALTH_POLL_S = 0.05
_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
"""A starting engine's socket appears ~0.5-2 s after its process: gRPC's default backoff after
the first refused connection (1 s, growing 1.6x) would see it, and so SERVING, up to seconds
late; these retry every 50 ms, backing off to 1 s."""
"""A health check on a local socket costs well under a millisecond; the engine's start is
seen at most this late."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCredentials:
    """How to reach an exposed engine: TLS trusting ``tls_ca`` (PEM), and a bearer token."""

    token: str | None = None
    tls_ca: bytes | None = None


_REFUSALS = {
    grpc.StatusCode.UNAUTHENTICATED: " (check engine.tokenFile in .odf/config.yaml)",
    grpc.StatusCode.RESOURCE_EXHAUSTED: " (its queue is full; try again later)",
}
"""Status codes with which a running engine turns a call away, and what to do about it."""


class EngineClient:
    """A connection to one engine (``target``: ``host:port`` or ``unix:/path``)."""

    def __init__(
        self,
        target: str,
        *,
        description: str | None = None,
        after_call: Callable[[], None] | None = None,
        credentials: EngineCredentials | None = None,
    ) -> None:
        self.target = target
        self.description = description or f"engine at {target}"
        self._after_call = after_call
        """Run after every call (a container engine hands its output files to the host user)."""
        credentials = credentials or EngineCredentials()
        if credentials.tls_ca is not None:
            tls = grpc.ssl_channel_credentials(root_certificates=credentials.tls_ca)
            self._channel = grpc.secure_channel(target, tls, options=_CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {credentials.token}"),) if credentials.token else ()
        )

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- operations ---------------------------------------------------------------------------

    def execute_transform(self, request: ep.TransformRequest) -> ep.TransformResponseSuccess:
        return self._call(rpcs.TRANSFORM, request)

    def execute_raw_query(self, request: ep.RawQueryRequest) -> ep.RawQueryResponseSuccess:
        return self._call(rpcs.RAW_QUERY, request)

    def validate_query(self, request: ep.ValidateQueryRequest) -> ep.ValidateQueryResponseSuccess:
        return self._call(rpcs.VALIDATE, request)

    def migrate_query(self, request: ep.MigrateQueryRequest) -> ep.MigrateQueryResponseSuccess:
        return self._call(rpcs.MIGRATE, request)

    def execute_split_transform(
        self, request: ep.SplitTransformRequest
    ) -> ep.SplitTransformResponseSuccess:
        """A split transaction (extension; ``coordinator/transform/split.py``); an engine
        without it raises ``EngineUnimplementedError``."""
        return self._call(rpcs.SPLIT_TRANSFORM, request)

    def hash_data_files(self, request: ep.HashDataFilesRequest) -> ep.HashDataFilesResponseSuccess:
        """Data files hashed in the engine's tasks (extension; ``odf verify`` on a cluster);
        an engine without it raises ``EngineUnimplementedError``."""
        return self._call(rpcs.HASH_DATA_FILES, request)

    def execute_query(self, request: ep.QueryRequest) -> ep.QueryResponseSuccess:
        """An ad-hoc query over whole datasets (extension; ``odf sql``)."""
        return self._call(rpcs.QUERY, request)

    # --- readiness ----------------------------------------------------------------------------

    def wait_until_ready(
        self, timeout: float, *, failed: Callable[[], str | None] = lambda: None
    ) -> float:
        """Wait until the engine serves (its SparkSession is up); returns the seconds waited.

        ``failed`` reports why the engine can no longer become ready (its process or
        container exited), which ends the wait at once. Uses the gRPC health service when
        the engine has one, else waits for the channel to connect.
        """
        started = time.monotonic()
        deadline = started + timeout
        check = _health_check(self._channel)
        while True:
            reason = failed()
            if reason is not None:
                raise EngineUnavailableError(f"{self.description} {reason}")
            if check():
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                raise EngineUnavailableError(
                    f"{self.description} did not become ready within {timeout:.0f} s"
                )
            time.sleep(_HEALTH_POLL_S)

    def is_serving(self) -> bool:
        """Whether the engine answers its health check now (a dead one does not)."""
        return _health_check(self._channel)()

    # --- plumbing -----------------------------------------------------------------------------

    def _call(self, rpc: EngineRpc[Req, Ok], request: Req) -> Ok:
        method = self._channel.unary_stream(
            rpc.path,
            request_serializer=rpc.request_envelope.SerializeToString,
            response_deserializer=rpc.response_envelope.FromString,
        )
        envelope = rpc.request_envelope(flatbuffer=rpc.encode_request(request))
        cancel = engine_cancel.current()
        if cancel is not None and cancel.cancelled:
            raise EngineCallCancelled(f"{rpc.name} cancelled before it was sent")
        stream: Any = method(envelope, metadata=self._metadata)
        if cancel is not None:
            cancel.attach(stream)
        try:
            return self._read_stream(rpc, stream)
        except grpc.RpcError as e:
            call: Any = e
            code = call.code() if hasattr(call, "code") else None
            if cancel is not None and cancel.cancelled and code is grpc.StatusCode.CANCELLED:
                raise EngineCallCancelled(
                    f"{rpc.name} cancelled: {self.description} was told to stop"
                ) from None
            if code is grpc.StatusCode.UNIMPLEMENTED:
                raise EngineUnimplementedError(
                    f"{self.description} does not implement {rpc.name} (an older engine?)"
                ) from None
            if code in _REFUSALS:
                raise EngineError(
                    f"{rpc.name} refused by {self.description}: {_status(e)}{_REFUSALS[code]}"
                ) from None
            raise EngineError(
                f"{rpc.name} failed: {self.description}: {_status(e)}"
                " (the engine crashed or the connection broke)"
            ) from None
        finally:
            if cancel is not None:
                cancel.detach(stream)
            stream.cancel()
            if self._after_call is not None:
                self._after_call()

    def _read_stream(self, rpc: EngineRpc[Req, Ok], stream: Iterator[Any]) -> Ok:
        for message in stream:
            try:
                response = rpc.decode_response(message.flatbuffer)
            except OdfError as e:
                raise EngineError(f"{rpc.name}: undecodable response from the engine: {e}") from e
            if rpc.progress is not None and isinstance(response, rpc.progress):
                continue
            if isinstance(response, rpc.success):
                return response
            if isinstance(response, rpc.invalid_query):
                raise EngineInvalidQueryError(_field(response, "message"))
            if isinstance(response, rpc.internal_error):
                backtrace = _field(response, "backtrace") or None
                log.debug("engine.backtrace", rpc=rpc.name, backtrace=backtrace)
                raise EngineInternalError(
                    f"{rpc.name}: engine error: {_field(response, 'message')}", backtrace=backtrace
                )
            raise EngineError(f"{rpc.name}: unexpected response {type(response).__name__}")
        raise EngineError(
            f"{rpc.name}: {self.description} did not transmit Success or Error in the response"
            " stream"
        )


def _field(response: object, name: str) -> str:
    return str(getattr(response, name, None) or "")


def _status(e: grpc.RpcError) -> str:
    """``CODE: details`` of a failed call (gRPC errors raised by calls are also ``grpc.Call``)."""
    call: Any = e
    code = call.code() if hasattr(call, "code") else None
    details = call.details() if hasattr(call, "details") else str(e)
    name = code.name if code is not None else "error"
    return f"{name}: {' '.join(str(details).split())}"


def _health_check(channel: grpc.Channel) -> Callable[[], bool]:
    """A function telling whether the engine serves: health SERVING, or a connected channel."""
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except ImportError:  # the coordinator does not need the health package: connect only
        return lambda: _channel_connects(channel)
    stub = health_pb2_grpc.HealthStub(channel)
    serving = health_pb2.HealthCheckResponse.SERVING

    def check() -> bool:
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=rpcs.SERVICE), timeout=2.0)
        except grpc.RpcError as e:
            # An engine without the health service is ready once it answers at all.
            call: Any = e
            return hasattr(call, "code") and call.code() is grpc.StatusCode.UNIMPLEMENTED
        return bool(reply.status == serving)

    return check


def _channel_connects(channel: grpc.Channel) -> bool:
    try:
        grpc.channel_ready_future(channel).result(timeout=1.0)
    except grpc.FutureTimeoutError:
        return False
    return True
