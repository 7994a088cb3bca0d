"""Flight SQL sessions: options a client sets once for the queries it runs next (Flight's
``SetSessionOptions``, ``GetSessionOptions`` and ``CloseSession`` actions, which newer ADBC
and JDBC drivers send).

A session is the cookie ``arrow_flight_session_id``: a call without one is offered a new id
(random, 128 bits) in its response headers (pyarrow sends them before the call's handler
runs, so every such call is offered one), which the first ``SetSessionOptions`` sent back
with it starts using; clients with cookies send it on each call. One option is
understood: ``as_of``, a block hash (or a unique prefix of 8 characters or more) or an RFC
3339 time, which reads the datasets of the session's queries as they were then (what the
table-name suffix ``name@when`` does for one table; a suffix wins over the session's option).
At most ``MAX_SESSIONS`` sessions are kept (the least recently used dropped beyond).
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from typing import Any

import pyarrow.flight as flight

from coordinator.daemon.flight_sql_generated import flight_sql_pb2 as fsql
from coordinator.ingest.source_state import parse_rfc3339

COOKIE = "arrow_flight_session_id"
MAX_SESSIONS = 1024
AS_OF = "as_of"
_BLOCK = re.compile(r"[0-9A-Za-z]{8,128}")
_Errors = fsql.SetSessionOptionsResult


def as_of_error(value: fsql.SessionOptionValue) -> str | None:
    """Why ``value`` is no ``as_of`` (None if it is one)."""
    if value.WhichOneof("option_value") != "string_value":
        return "as_of: expected a string (a block hash or an RFC 3339 time)"
    text = value.string_value.strip()
    try:
        parse_rfc3339(text)
    except ValueError:
        if not _BLOCK.fullmatch(text):
            return f"as_of: {text[:80]!r} is neither a block hash nor an RFC 3339 time"
    return None


class Sessions:
    """The sessions' options, by session id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: OrderedDict[str, dict[str, fsql.SessionOptionValue]] = OrderedDict()

    def options(self, session: str | None) -> dict[str, fsql.SessionOptionValue]:
        with self._lock:
            found = self._by_id.get(session or "")
            if found is None:
                return {}
            self._by_id.move_to_end(session or "")
            return dict(found)

    def as_of(self, session: str | None) -> str | None:
        value = self.options(session).get(AS_OF)
        return value.string_value.strip() if value is not None else None

    def set(
        self, session: str, request: fsql.SetSessionOptionsRequest
    ) -> fsql.SetSessionOptionsResult:
        """Set the options of ``request`` in ``session`` (started if new; options given no
        value are unset): the errors of the options refused."""
        result = fsql.SetSessionOptionsResult()
        with self._lock:
            if session not in self._by_id:
                self._by_id[session] = {}
                while len(self._by_id) > MAX_SESSIONS:
                    self._by_id.popitem(last=False)
            options = self._by_id[session]
            self._by_id.move_to_end(session)
            for name, value in request.session_options.items():
                if name != AS_OF:
                    result.errors[name].value = _Errors.INVALID_NAME
                elif value.WhichOneof("option_value") is None:
                    options.pop(name, None)
                elif as_of_error(value) is not None:
                    result.errors[name].value = _Errors.INVALID_VALUE
                else:
                    options[name] = value
        return result

    def close(self, session: str | None) -> bool:
        with self._lock:
            return self._by_id.pop(session or "", None) is not None


class _Call(flight.ServerMiddleware):  # type: ignore[misc]
    def __init__(self, session: str | None) -> None:
        self.session = session
        """The session the client named (its cookie), if any."""
        self.offered = secrets.token_hex(16) if session is None else None
        """A new session's id, sent as a cookie, when the client named none."""

    def sending_headers(self) -> dict[str, str]:
        if self.offered is None:
            return {}
        return {"set-cookie": f"{COOKIE}={self.offered}; HttpOnly"}


class SessionMiddleware(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Each call's session id, from its cookie (``session_of``)."""

    def start_call(self, info: Any, headers: dict[str, list[Any]]) -> _Call:
        for header in headers.get("cookie", []):
            text = header.decode("latin-1") if isinstance(header, bytes) else str(header)
            for part in text.split(";"):
                name, _, value = part.strip().partition("=")
                if name == COOKIE and value:
                    return _Call(value[:64])
        return _Call(None)


def call_of(context: Any) -> _Call | None:
    call = context.get_middleware("session")
    return call if isinstance(call, _Call) else None
