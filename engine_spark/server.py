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
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from common.engine_rpc import REFERENCE_ENGINE_PORT, SPEC_ENGINE_PORT, rpcs
from common.engine_rpc.rpcs import EngineRpc
from common.grpc_auth import ServerInterceptor, TokenInterceptor
from common.odf import engine_protocol as ep
from common.odf.errors import OdfError
from engine_spark.calls import Admission, CallControl, EngineBusyError, bound
from engine_spark.data_roots import NO_DATA_ROOTS, DataRoots, PathOutsideRootsError
from engine_spark.errors import InvalidQueryError

log = structlog.get_logger("engine_spark.server")

SERVICE_NAME: str = rpcs.SERVICE


class EngineBackend(Protocol):
    """What the servicer needs from an engine (``engine_spark.engine.SparkEngine``)."""

    def execute_transform(self, request: ep.TransformRequest) -> ep.TransformResponseSuccess: ...

    def execute_raw_query(self, request: ep.RawQueryRequest) -> ep.RawQueryResponseSuccess: ...

    def validate_query(
        self, request: ep.ValidateQueryRequest
    ) -> ep.ValidateQueryResponseSuccess: ...

    def migrate_query(self, request: ep.MigrateQueryRequest) -> ep.MigrateQueryResponseSuccess: ...

    def execute_query(self, request: ep.QueryRequest) -> ep.QueryResponseSuccess: ...

    def execute_split_transform(
        self, request: ep.SplitTransformRequest
    ) -> ep.SplitTransformResponseSuccess: ...

    def hash_data_files(
        self, request: ep.HashDataFilesRequest
    ) -> ep.HashDataFilesResponseSuccess: ...

    def alive(self) -> bool:
        """False once the backend can serve nothing more (its JVM died)."""
        ...


class EngineUnavailableError(Exception):
    """The backend failed to start; every request is answered with this as InternalError."""


_BACKEND_CALLS: dict[str, Callable[[EngineBackend, Any], Any]] = {
    rpcs.TRANSFORM.name: lambda b, r: b.execute_transform(r),
    rpcs.RAW_QUERY.name: lambda b, r: b.execute_raw_query(r),
    rpcs.VALIDATE.name: lambda b, r: b.validate_query(r),
    rpcs.MIGRATE.name: lambda b, r: b.migrate_query(r),
    rpcs.QUERY.name: lambda b, r: b.execute_query(r),
    rpcs.SPLIT_TRANSFORM.name: lambda b, r: b.execute_split_transform(r),
    rpcs.HASH_DATA_FILES.name: lambda b, r: b.hash_data_files(r),
}
"""Which backend method serves each RPC of ``common.engine_rpc.rpcs``."""


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


class EngineServicer:
    """The ``engine.Engine`` service over a backend, one handler per RPC of the shared table.

    Each call is admitted to the bounded queue (else RESOURCE_EXHAUSTED), has its paths checked
    against the data roots, and runs under a ``CallControl`` that the client's cancellation or
    deadline and the per-request timeout cancel.
    """

    def __init__(
        self,
        backend: Callable[[], EngineBackend],
        *,
        data_roots: DataRoots,
        admission: Admission,
        request_timeout: float | None = None,
    ) -> None:
        self._backend = backend
        self._roots = data_roots
        self._admission = admission
        self._timeout = request_timeout

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The gRPC handler of every RPC of the service."""
        return grpc.method_handlers_generic_handler(
            rpcs.SERVICE,
            {
                rpc.name: grpc.unary_stream_rpc_method_handler(
                    partial(self.stream, rpc),
                    request_deserializer=rpc.request_envelope.FromString,
                    response_serializer=rpc.response_envelope.SerializeToString,
                )
                for rpc in rpcs.RPCS
            },
        )

    def stream(
        self, rpc: EngineRpc[Any, Any], request: Any, context: grpc.ServicerContext
    ) -> Iterator[Any]:
        """The response stream of one call: exactly one terminal message."""
        yield rpc.response_envelope(flatbuffer=self._handle(rpc, request.flatbuffer, context))

    def _handle(
        self, rpc: EngineRpc[Any, Any], data: bytes, context: grpc.ServicerContext
    ) -> bytes:
        control = CallControl(rpc.request_name)
        try:
            with self._admission.admit(control):
                if not context.add_callback(
                    lambda: control.cancel("the client cancelled the call or its deadline passed")
                ):  # the call ended before the callback was added: it will never run
                    control.cancel("the client cancelled the call before it started")
                with self._timer(control), bound(control):
                    response = self._respond(rpc, data, control)
                control.finish()
        except EngineBusyError as e:
            log.warning("request.refused_busy", rpc=rpc.request_name)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        try:
            return rpc.encode_response(response)
        except Exception as e:
            log.error("response.encode_failed", rpc=rpc.request_name, error=describe_error(e))
            return rpc.encode_response(
                rpc.internal_error(
                    message=f"cannot encode the response: {describe_error(e)}",
                    backtrace=traceback.format_exc(),
                )
            )

    @contextmanager
    def _timer(self, control: CallControl) -> Iterator[None]:
        """Cancel ``control`` after the per-request timeout, if there is one."""
        if self._timeout is None:
            yield
            return
        timer = threading.Timer(
            self._timeout,
            control.cancel,
            (f"it ran longer than the engine's request timeout of {self._timeout:g} s",),
        )
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _respond(self, rpc: EngineRpc[Any, Any], data: bytes, control: CallControl) -> Any:
        try:
            request = rpc.decode_request(data)
        except Exception as e:
            return rpc.internal_error(
                message=f"cannot decode the {rpc.request_name}: {describe_error(e)}",
                backtrace=traceback.format_exc(),
            )
        try:
            self._roots.check_request(request)
        except PathOutsideRootsError as e:
            log.warning("request.path_refused", rpc=rpc.request_name, message=str(e))
            return rpc.internal_error(message=str(e))
        try:
            return _BACKEND_CALLS[rpc.name](self._backend(), request)
        except InvalidQueryError as e:
            if control.cancelled:
                return self._cancelled(rpc, control)
            log.info("request.invalid_query", rpc=rpc.request_name, message=str(e))
            return rpc.invalid_query(message=str(e))
        except Exception as e:
            if control.cancelled:
                return self._cancelled(rpc, control)
            log.warning("request.internal_error", rpc=rpc.request_name, error=describe_error(e))
            return rpc.internal_error(message=describe_error(e), backtrace=traceback.format_exc())

    @staticmethod
    def _cancelled(rpc: EngineRpc[Any, Any], control: CallControl) -> Any:
        log.warning("request.cancelled", rpc=rpc.request_name, reason=control.reason)
        return rpc.internal_error(message=f"the {rpc.request_name} was cancelled: {control.reason}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsFiles:
    """The server's certificate chain and private key (PEM files)."""

    cert: str
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """Where the engine listens and what it lets callers do. Port 0 picks a free port (tests)."""

    host: str = "127.0.0.1"
    ports: tuple[int, ...] = (SPEC_ENGINE_PORT, REFERENCE_ENGINE_PORT)
    unix_socket: str | None = None
    data_roots: DataRoots = NO_DATA_ROOTS
    """Every path a request names must lie under one of these (``data_roots.py``)."""
    max_queue: int = 16
    """Engine calls that may wait while one runs; more are refused with RESOURCE_EXHAUSTED."""
    request_timeout: float | None = None
    """Seconds after which a call is cancelled (its Spark jobs too); ``None``: no limit."""
    token: str | None = None
    """When set, every call but health checks must carry ``authorization: Bearer <token>``."""
    tls: TlsFiles | None = None
    reflection: bool = False
    liveness_interval: float = 1.0
    """How often the backend's JVM is checked."""
    shutdown_grace_seconds: float = 4.0
    """Less than the 5 s the reference coordinator waits before SIGKILL."""

    @property
    def max_workers(self) -> int:
        """Threads for every admitted engine call, plus some for health checks and reflection,
        so the health service answers while the engine is busy."""
        return self.max_queue + 1 + _SPARE_WORKERS


_SPARE_WORKERS = 4


class ServerBindError(OdfError):
    """An address the server was told to listen on cannot be bound."""


def _bind(server: grpc.Server, address: str, tls: TlsFiles | None) -> int:
    try:
        if tls is None or address.startswith("unix:"):
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, _server_credentials(tls))
    except RuntimeError as e:
        raise ServerBindError(f"cannot listen on {address}: {e}") from e
    if port == 0 and not address.startswith("unix:"):
        raise ServerBindError(f"cannot listen on {address} (address in use?)")
    return port


def _server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    try:
        with open(tls.key, "rb") as key, open(tls.cert, "rb") as cert:
            return grpc.ssl_server_credentials([(key.read(), cert.read())])
    except OSError as e:
        raise ServerBindError(f"cannot read the TLS key or certificate: {e}") from e


class EngineServer:
    """A gRPC server with the Engine and health services (reflection when asked); the backend
    is built lazily and watched: when its JVM dies the server reports NOT_SERVING and
    ``failed`` is set, for the process to exit."""

    def __init__(
        self,
        settings: ServerSettings,
        backend_factory: Callable[[], EngineBackend],
    ) -> None:
        self.settings = settings
        self._factory = backend_factory
        self._slot = BackendSlot()
        self._health = health.HealthServicer()
        self._admission = Admission(settings.max_queue)
        self._server: grpc.Server | None = None
        self._stopping = threading.Event()
        self.failed = threading.Event()
        """Set when the backend died; ``failure`` says why."""
        self.failure: str | None = None
        self.bound_ports: tuple[int, ...] = ()

    def start(self) -> None:
        """Bind every address and start serving; then build the backend in the background."""
        settings = self.settings
        interceptors: list[ServerInterceptor] = (
            [TokenInterceptor(settings.token, what="engine")] if settings.token else []
        )
        server = grpc.server(
            ThreadPoolExecutor(max_workers=settings.max_workers, thread_name_prefix="grpc"),
            interceptors=interceptors,
        )
        servicer = EngineServicer(
            self._backend,
            data_roots=settings.data_roots,
            admission=self._admission,
            request_timeout=settings.request_timeout,
        )
        server.add_generic_rpc_handlers((servicer.handler(),))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        if settings.reflection:
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
            _bind(server, f"{settings.host}:{port}", settings.tls) for port in settings.ports
        )
        if settings.unix_socket:
            if os.path.exists(settings.unix_socket):
                os.unlink(settings.unix_socket)
            _bind(server, f"unix:{settings.unix_socket}", None)
        server.start()
        self._server = server
        log.info(
            "server.listening",
            host=settings.host,
            ports=self.bound_ports,
            unix_socket=settings.unix_socket,
            tls=settings.tls is not None,
            token=settings.token is not None,
            reflection=settings.reflection,
            data_roots=settings.data_roots.roots,
        )
        if not settings.data_roots.roots:
            log.warning("server.no_data_roots", hint="every request that names a file is refused")
        threading.Thread(target=self._build_backend, name="engine-start", daemon=True).start()

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        return self._slot.ready(timeout)

    def stop(self, grace: float | None = None) -> None:
        """Refuse new calls, let running ones finish within the grace period, cancel the rest."""
        if self._server is None:
            return
        self._stopping.set()
        self._health.enter_graceful_shutdown()
        grace = self.settings.shutdown_grace_seconds if grace is None else grace
        stopped = self._server.stop(grace)
        if not stopped.wait(grace):
            self._admission.cancel_all("the engine server is stopping")
        stopped.wait()
        self._server = None
        log.info("server.stopped")

    def _backend(self) -> EngineBackend:
        if self.failed.is_set():
            raise EngineUnavailableError(f"the engine cannot serve: {self.failure}")
        return self._slot.get()

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
        self._watch(backend)

    def _watch(self, backend: EngineBackend) -> None:
        """Check the backend until the server stops; report and flag its death."""
        while not self._stopping.wait(self.settings.liveness_interval):
            if not backend.alive():
                self.failure = "its JVM died (out of memory, or killed)"
                log.error("engine.jvm_died", hint="the server stops; restart it")
                self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
                self._admission.cancel_all("the engine's JVM died")
                self.failed.set()
                return

    def _set_health(self, status: int) -> None:
        for name in ("", SERVICE_NAME):
            self._health.set(name, status)
