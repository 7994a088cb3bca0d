"""Who may use the Flight SQL server: the daemon's tokens (``access``), any scope (the server
only reads).

A call carries ``authorization: Bearer <token>``, or basic auth (``Basic base64(user:token)``,
any user, the token as the password) for clients that only do basic auth: Flight's
``Handshake`` with basic auth is answered with ``authorization: Bearer <token>`` in the
response headers, which such clients send from then on. Anything else is refused with
UNAUTHENTICATED and one line saying what is needed.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import pyarrow.flight as flight

from common.logs import get_logger
from coordinator.daemon.access import Authority

log = get_logger(__name__)

NEEDED = (
    "a valid daemon token is required: `authorization: Bearer <token>`, or basic auth with"
    " the token as the password"
)


class _Granted(flight.ServerMiddleware):  # type: ignore[misc]
    def __init__(self, answer: str | None) -> None:
        self.answer = answer

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": self.answer} if self.answer else {}


class TokenMiddleware(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Checks each call's token before it runs (see the module doc)."""

    def __init__(self, authority: Authority) -> None:
        self.authority = authority

    def start_call(self, info: Any, headers: dict[str, list[Any]]) -> _Granted:
        given = headers.get("authorization") or [""]
        return _Granted(grant(self.authority, given[0], str(info.method)))


def grant(authority: Authority, header: str | bytes, method: str) -> str | None:
    """Let a call with this ``authorization`` header through: the header to answer with
    (the bearer token, to a basic-auth call) or ``None``; refused: FlightUnauthenticatedError."""
    text = header.decode("latin-1") if isinstance(header, bytes) else str(header)
    answer = None
    if text[:6].lower() == "basic ":
        text = answer = f"Bearer {_basic_password(text[6:])}"
    if authority.scope_of(text) is None:
        log.warning("flight_sql.unauthenticated", method=method)
        raise flight.FlightUnauthenticatedError(NEEDED)
    return answer


def _basic_password(encoded: str) -> str:
    encoded = encoded.strip()
    encoded += "=" * (-len(encoded) % 4)  # Go's clients leave the padding out
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return text.partition(":")[2]


class OpenHandshake(flight.ServerAuthHandler):  # type: ignore[misc]
    """Lets Flight's ``Handshake`` through (the token is checked by ``TokenMiddleware``, from
    the headers, on every call including the handshake); ADBC's basic auth needs it."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        return None

    def is_valid(self, token: bytes) -> bytes:
        return b""
