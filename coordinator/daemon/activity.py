"""What the daemon is doing, for ``odf daemon status`` and its log: the gRPC calls running
now, each logged (info) when it ends with its method, dataset, duration and outcome."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from common.logs import get_logger

if TYPE_CHECKING:
    _Handler = grpc.RpcMethodHandler[Any, Any]
    ServerInterceptor = grpc.ServerInterceptor[Any, Any]
else:
    _Handler = grpc.RpcMethodHandler
    ServerInterceptor = grpc.ServerInterceptor

log = get_logger(__name__)

_QUIET = ("/grpc.health.v1.Health/", "/grpc.reflection.")
"""Calls neither tracked nor logged: probes would drown the log."""


@dataclass(frozen=True, slots=True)
class RunningCall:
    method: str
    dataset: str
    started: float
    """``time.monotonic()``."""


class Activity:
    """The calls running now (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._running: dict[int, RunningCall] = {}

    @contextmanager
    def call(
        self, method: str, dataset: str, context: grpc.ServicerContext | None = None
    ) -> Iterator[None]:
        call_id = next(self._ids)
        started = time.monotonic()
        with self._lock:
            self._running[call_id] = RunningCall(method, dataset, started)
        outcome = "ok"
        try:
            yield
        except BaseException as e:
            outcome = _outcome(e, context)
            raise
        finally:
            with self._lock:
                del self._running[call_id]
            log.info(
                "daemon.call",
                method=method,
                dataset=dataset or None,
                seconds=round(time.monotonic() - started, 3),
                outcome=outcome,
            )

    def running(self) -> list[RunningCall]:
        with self._lock:
            return sorted(self._running.values(), key=lambda c: c.started)


def _outcome(error: BaseException, context: grpc.ServicerContext | None) -> str:
    if isinstance(error, GeneratorExit):
        return "cancelled"
    code = getattr(context, "code", lambda: None)()  # grpc's _Context, not in its stubs
    if code is not None:  # aborted with a status: its code and message say it all
        details = getattr(context, "details", lambda: "")()
        text = details.decode("utf-8", "replace") if isinstance(details, bytes) else details
        return f"{getattr(code, 'name', code)}: {text}"[:300]
    text = " ".join(str(error).split())
    return f"failed: {text[:300]}" if text else f"failed: {type(error).__name__}"


def dataset_of(request: Any) -> str:
    """The dataset(s) a request names, for the log and the status ("" when none)."""
    fields = getattr(getattr(request, "DESCRIPTOR", None), "fields_by_name", {})
    for name in ("dataset", "name"):
        if name in fields:
            return str(getattr(request, name))
    if "names" in fields:
        return ",".join(str(n) for n in request.names)
    return ""


class ActivityInterceptor(ServerInterceptor):
    """Runs every call (but health probes) inside ``Activity.call``."""

    def __init__(self, activity: Activity) -> None:
        self.activity = activity

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], _Handler | None],
        details: grpc.HandlerCallDetails,
    ) -> _Handler | None:
        handler = continuation(details)
        method: str = details.method
        if handler is None or method.startswith(_QUIET):
            return handler
        short = method.rsplit("/", 1)[-1]
        activity = self.activity
        if handler.request_streaming and handler.response_streaming:
            inner_ss: Any = handler.stream_stream

            def stream_stream(requests: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                with activity.call(short, "", context):
                    yield from inner_ss(requests, context)

            return grpc.stream_stream_rpc_method_handler(
                stream_stream, handler.request_deserializer, handler.response_serializer
            )
        if handler.request_streaming:
            inner_su: Any = handler.stream_unary

            def stream_unary(requests: Any, context: grpc.ServicerContext) -> Any:
                with activity.call(short, "", context):
                    return inner_su(requests, context)

            return grpc.stream_unary_rpc_method_handler(
                stream_unary, handler.request_deserializer, handler.response_serializer
            )
        if handler.response_streaming:
            inner_us: Any = handler.unary_stream

            def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                with activity.call(short, dataset_of(request), context):
                    yield from inner_us(request, context)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream, handler.request_deserializer, handler.response_serializer
            )
        inner_uu: Any = handler.unary_unary

        def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
            with activity.call(short, dataset_of(request), context):
                return inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary_unary, handler.request_deserializer, handler.response_serializer
        )
