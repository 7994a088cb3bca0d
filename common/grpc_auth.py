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
    RpcHandler = grpc.RpcMethodHandler[Any, Any]
    ServerInterceptor = grpc.ServerInterceptor[Any, Any]
else:
    RpcHandler = grpc.RpcMethodHandler
    ServerInterceptor = grpc.ServerInterceptor
"""A method handler and the interceptor base, generic for the type checker only (grpc's stubs
are generic, the runtime classes are not): every interceptor of the project uses these."""


Refusal = tuple[grpc.StatusCode, str]
"""Why a call is refused: its status code and message."""


class GateInterceptor(ServerInterceptor):
    """Lets a call through or refuses it, by its method and its ``authorization`` metadata
    (``refusal``); every interceptor that checks credentials is one."""

    def refusal(self, method: str, authorization: str | bytes) -> Refusal | None:
        """Why a call of ``method`` with this ``authorization`` is refused (its status code
        and message), logged; None lets it through."""
        raise NotImplementedError

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], RpcHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> RpcHandler | None:
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        refused = self.refusal(details.method, given)
        if refused is None:
            return continuation(details)
        return refuse(continuation(details), *refused)


class TokenInterceptor(GateInterceptor):
    """Refuse (UNAUTHENTICATED) any call but a health check without the bearer token."""

    def __init__(self, token: str, *, what: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self._message = f"a valid {what} token is required"

    def refusal(self, method: str, authorization: str | bytes) -> Refusal | None:
        if method.startswith(OPEN_METHODS):
            return None
        given = authorization.encode() if isinstance(authorization, str) else bytes(authorization)
        if hmac.compare_digest(given, self._expected):
            return None
        log.warning("request.unauthenticated", method=method)
        return grpc.StatusCode.UNAUTHENTICATED, self._message


def refuse(handler: RpcHandler | None, code: grpc.StatusCode, message: str) -> RpcHandler:
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
