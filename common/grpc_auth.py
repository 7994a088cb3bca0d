"""Token authentication of gRPC services (the engine's and the coordinator daemon's).

Clients send ``authorization: Bearer <token>`` as call metadata; ``TokenInterceptor`` refuses
every other call with UNAUTHENTICATED, except health checks (orchestrators probe health
without credentials). Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from common.logs import get_logger

log = get_logger(__name__)

OPEN_METHODS = ("/grpc.health.v1.Health/",)
"""Methods that need no token."""

if TYPE_CHECKING:
    _Handler = grpc.RpcMethodHandler[Any, Any]
    ServerInterceptor = grpc.ServerInterceptor[Any, Any]
else:
    _Handler = grpc.RpcMethodHandler
    ServerInterceptor = grpc.ServerInterceptor


class TokenInterceptor(ServerInterceptor):
    """Refuse (UNAUTHENTICATED) any call but a health check without the bearer token."""

    def __init__(self, token: str, *, what: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self._message = f"a valid {what} token is required"

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], _Handler | None],
        details: grpc.HandlerCallDetails,
    ) -> _Handler | None:
        method: str = details.method
        if method.startswith(OPEN_METHODS):
            return continuation(details)
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        given_bytes = given.encode() if isinstance(given, str) else bytes(given)
        if hmac.compare_digest(given_bytes, self._expected):
            return continuation(details)
        log.warning("request.unauthenticated", method=method)
        return refuse(continuation(details), grpc.StatusCode.UNAUTHENTICATED, self._message)


def refuse(handler: _Handler | None, code: grpc.StatusCode, message: str) -> _Handler:
    """A handler of the same shape as ``handler`` that aborts with ``code``."""

    def deny(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(code, message)

    if handler is not None and handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    if handler is not None and handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(deny)
    if handler is not None and handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(deny)
    return grpc.unary_unary_rpc_method_handler(deny)
