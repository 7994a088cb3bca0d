"""The engine gRPC service: FlatBuffers in, one terminal FlatBuffers message out.

This module does not import pyspark. It binds its ports at once and answers health checks
while the backend (the SparkEngine) starts in the background; requests that arrive earlier
wait for it. Every call ends with exactly one terminal message: Success, InvalidQuery (the
query's fault) or InternalError (with the backtrace), whatever goes wrong, so a coordinator
never sees an empty stream and a failing request never takes the server down.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from common.engine_rpc import (
    REFERENCE_ENGINE_PORT,
    SPEC_ENGINE_PORT,
    engine_pb2,
    engine_pb2_grpc,
)
from common.odf import engine_protocol as ep
from common.odf.errors import OdfError
from common.serde import flatbuffers_codec as codec
from engine_spark.errors import InvalidQueryError

log = structlog.get_logger("engine_spark.server")

SERVICE_NAME: str = engine_pb2.DESCRIPTOR.services_by_name["Engine"].full_name


class EngineBackend(Protocol):
    """What the servicer needs from an engine (``engine_spark.engine.SparkEngine``)."""

    def execute_transform(self, request: ep.TransformRequest) -> ep.TransformResponseSuccess: ...

    def execute_raw_query(self, request: ep.RawQueryRequest) -> ep.RawQueryResponseSuccess: ...

    def validate_query(
        self, request: ep.ValidateQueryRequest
    ) -> ep.ValidateQueryResponseSuccess: ...

    def migrate_query(self, request: ep.MigrateQueryRequest) -> ep.MigrateQueryResponseSuccess: ...

    def execute_query(self, request: ep.QueryRequest) -> ep.QueryResponseSuccess: ...


class EngineUnavailableError(Exception):
    """The backend failed to start; every request is answered with this as InternalError."""


Req = TypeVar("Req")
Resp = TypeVar("Resp")


@dataclass(frozen=True, slots=True)
class _Rpc(Generic[Req, Resp]):
    """How one RPC decodes its request, calls the backend and reports errors."""

    request_name: str
    decode: Callable[[bytes], Req]
    call: Callable[[EngineBackend, Req], Resp]
    encode: Callable[[Any], bytes]
    invalid_query: Callable[..., Any]
    internal_error: Callable[..., Any]


_TRANSFORM = _Rpc(
    "TransformRequest",
    codec.decode_transform_request,
    lambda b, r: b.execute_transform(r),
    codec.encode_transform_response,
    ep.TransformResponseInvalidQuery,
    ep.TransformResponseInternalError,
)
_RAW_QUERY = _Rpc(
    "RawQueryRequest",
    codec.decode_raw_query_request,
    lambda b, r: b.execute_raw_query(r),
    codec.encode_raw_query_response,
    ep.RawQueryResponseInvalidQuery,
    ep.RawQueryResponseInternalError,
)
_VALIDATE = _Rpc(
    "ValidateQueryRequest",
    codec.decode_validate_query_request,
    lambda b, r: b.validate_query(r),
    codec.encode_validate_query_response,
    ep.ValidateQueryResponseInvalidQuery,
    ep.ValidateQueryResponseInternalError,
)
_MIGRATE = _Rpc(
    "MigrateQueryRequest",
    codec.decode_migrate_query_request,
    lambda b, r: b.migrate_query(r),
    codec.encode_migrate_query_response,
    ep.MigrateQueryResponseInvalidQuery,
    ep.MigrateQueryResponseInternalError,
)
_QUERY = _Rpc(
    "QueryRequest",
    codec.decode_query_request,
    lambda b, r: b.execute_query(r),
    codec.encode_query_response,
    ep.QueryResponseInvalidQuery,
    ep.QueryResponseInternalError,
)


def describe_error(exc: BaseException) -> str:
    """``Type: message`` for ``exc`` and each of its causes, joined by ``: caused by: ``."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 5:
        text = str(current).strip().splitlines()
        parts.append(f"{type(current).__name__}: {text[0]}" if text else type(current).__name__)
        current = current.__cause__ or current.__context__
    return ": caused by: ".join(parts)


class BackendSlot:
    """The backend once it is up; ``get`` waits for it (or raises if it failed to start)."""

    def __init__(self) -> None:
        self._future: Future[EngineBackend] = Future()

    def set(self, backend: EngineBackend) -> None:
        self._future.set_result(backend)

    def fail(self, exc: BaseException) -> None:
        self._future.set_exception(exc)

    def ready(self, timeout: float | None = None) -> bool:
        try:
            self._future.result(timeout)
        except TimeoutError:
            return False
        except Exception:
            return False
        return True

    def get(self) -> EngineBackend:
        try:
            return self._future.result()
        except Exception as e:
            raise EngineUnavailableError(f"the engine failed to start: {describe_error(e)}") from e


class EngineServicer(engine_pb2_grpc.EngineServicer):
    """The ``engine.Engine`` service over a backend."""

    def __init__(self, backend: Callable[[], EngineBackend]) -> None:
        self._backend = backend

    def ExecuteTransform(
        self, request: engine_pb2.TransformRequest, context: grpc.ServicerContext
    ) -> Iterator[engine_pb2.TransformResponse]:
        yield engine_pb2.TransformResponse(flatbuffer=self._handle(_TRANSFORM, request.flatbuffer))

    def ExecuteRawQuery(
        self, request: engine_pb2.RawQueryRequest, context: grpc.ServicerContext
    ) -> Iterator[engine_pb2.RawQueryResponse]:
        yield engine_pb2.RawQueryResponse(flatbuffer=self._handle(_RAW_QUERY, request.flatbuffer))

    def ValidateQuery(
        self, request: engine_pb2.ValidateQueryRequest, context: grpc.ServicerContext
    ) -> Iterator[engine_pb2.ValidateQueryResponse]:
        yield engine_pb2.ValidateQueryResponse(
            flatbuffer=self._handle(_VALIDATE, request.flatbuffer)
        )

    def MigrateQuery(
        self, request: engine_pb2.MigrateQueryRequest, context: grpc.ServicerContext
    ) -> Iterator[engine_pb2.MigrateQueryResponse]:
        yield engine_pb2.MigrateQueryResponse(flatbuffer=self._handle(_MIGRATE, request.flatbuffer))

    def ExecuteQuery(
        self, request: engine_pb2.QueryRequest, context: grpc.ServicerContext
    ) -> Iterator[engine_pb2.QueryResponse]:
        yield engine_pb2.QueryResponse(flatbuffer=self._handle(_QUERY, request.flatbuffer))

    def _handle(self, rpc: _Rpc[Any, Any], data: bytes) -> bytes:
        response = self._respond(rpc, data)
        try:
            return rpc.encode(response)
        except Exception as e:
            log.error("response.encode_failed", rpc=rpc.request_name, error=describe_error(e))
            return rpc.encode(
                rpc.internal_error(
                    message=f"cannot encode the response: {describe_error(e)}",
                    backtrace=traceback.format_exc(),
                )
            )

    def _respond(self, rpc: _Rpc[Any, Any], data: bytes) -> Any:
        try:
            request = rpc.decode(data)
        except Exception as e:
            return rpc.internal_error(
                message=f"cannot decode the {rpc.request_name}: {describe_error(e)}",
                backtrace=traceback.format_exc(),
            )
        try:
            return rpc.call(self._backend(), request)
        except InvalidQueryError as e:
            log.info("request.invalid_query", rpc=rpc.request_name, message=str(e))
            return rpc.invalid_query(message=str(e))
        except Exception as e:
            log.warning("request.internal_error", rpc=rpc.request_name, error=describe_error(e))
            return rpc.internal_error(message=describe_error(e), backtrace=traceback.format_exc())


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """Where the engine listens. Port 0 picks a free port (tests)."""

    host: str = "0.0.0.0"
    ports: tuple[int, ...] = (SPEC_ENGINE_PORT, REFERENCE_ENGINE_PORT)
    unix_socket: str | None = None
    max_workers: int = 8
    shutdown_grace_seconds: float = 4.0
    """Less than the 5 s the reference coordinator waits before SIGKILL."""


class ServerBindError(OdfError):
    """An address the server was told to listen on cannot be bound."""


def _bind(server: grpc.Server, address: str) -> int:
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as e:
        raise ServerBindError(f"cannot listen on {address}: {e}") from e
    if port == 0 and not address.startswith("unix:"):
        raise ServerBindError(f"cannot listen on {address} (address in use?)")
    return port


class EngineServer:
    """A gRPC server with the Engine, health and reflection services; backend built lazily."""

    def __init__(
        self,
        settings: ServerSettings,
        backend_factory: Callable[[], EngineBackend],
    ) -> None:
        self.settings = settings
        self._factory = backend_factory
        self._slot = BackendSlot()
        self._health = health.HealthServicer()
        self._server: grpc.Server | None = None
        self.bound_ports: tuple[int, ...] = ()

    def start(self) -> None:
        """Bind every address and start serving; then build the backend in the background."""
        server = grpc.server(ThreadPoolExecutor(max_workers=self.settings.max_workers))
        engine_pb2_grpc.add_EngineServicer_to_server(EngineServicer(self._slot.get), server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(
            (
                SERVICE_NAME,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            server,
        )
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.bound_ports = tuple(
            _bind(server, f"{self.settings.host}:{port}") for port in self.settings.ports
        )
        if self.settings.unix_socket:
            if os.path.exists(self.settings.unix_socket):
                os.unlink(self.settings.unix_socket)
            _bind(server, f"unix:{self.settings.unix_socket}")
        server.start()
        self._server = server
        log.info("server.listening", ports=self.bound_ports, unix_socket=self.settings.unix_socket)
        threading.Thread(target=self._build_backend, name="engine-start", daemon=True).start()

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        return self._slot.ready(timeout)

    def stop(self, grace: float | None = None) -> None:
        """Refuse new calls, let running ones finish within the grace period."""
        if self._server is None:
            return
        self._health.enter_graceful_shutdown()
        grace = self.settings.shutdown_grace_seconds if grace is None else grace
        self._server.stop(grace).wait()
        self._server = None
        log.info("server.stopped")

    def _build_backend(self) -> None:
        try:
            backend = self._factory()
        except BaseException as e:
            log.error("engine.start_failed", error=describe_error(e))
            self._slot.fail(e)
            return
        self._slot.set(backend)
        self._set_health(health_pb2.HealthCheckResponse.SERVING)
        log.info("engine.ready")

    def _set_health(self, status: int) -> None:
        for name in ("", SERVICE_NAME):
            self._health.set(name, status)
