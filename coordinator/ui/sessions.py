"""Who is logged in to the web UI, and the checks of every request.

- **Login**: with a daemon token (any scope; what it allows is the token's scope, looked up
  again at every request, so a revoked token ends its sessions), or with a one-time link
  (``/ui/login/<code>``) that a holder of a token asked the daemon for (``odf ui``): valid
  once, for ``LINK_TTL_S`` seconds, with the scope of the token that asked.
- **Sessions**: a random 256-bit id in a cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure``
  under TLS, path ``/ui/``), in memory only (a restart logs everyone out), ended after
  ``SESSION_IDLE_S`` without a request or ``SESSION_MAX_S`` in all.
- **Cross-site requests**: every state-changing request (POST) must come from the UI's own
  origin (``Origin``, else ``Referer``, naming this host) and, once logged in, carry the
  session's CSRF token in ``X-CSRF-Token`` (pages hold it in a ``<meta>``).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

COOKIE = "odf_ui"
LINK_TTL_S = 120.0
SESSION_IDLE_S = 8 * 3600.0
SESSION_MAX_S = 7 * 24 * 3600.0
MAX_SESSIONS = 1024

ScopeOf = Callable[[str], int | None]
"""The scope (an ``access.Scope`` value) a bearer header grants, ``None`` for none."""


@dataclass(slots=True)
class Session:
    id: str
    csrf: str
    bearer: str
    """The ``Authorization`` header of the token the session stands for."""
    created: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)


class Sessions:
    """The live sessions and one-time links (thread-safe)."""

    def __init__(self, scope_of: ScopeOf, *, secure: bool) -> None:
        self.scope_of = scope_of
        self.secure = secure
        self._sessions: dict[str, Session] = {}
        self._links: dict[str, tuple[str, float]] = {}
        self._guard = threading.Lock()

    def login(self, token: str) -> Session | None:
        """A new session for ``token``, or ``None`` when it is no valid token."""
        bearer = f"Bearer {token.strip()}"
        if self.scope_of(bearer) is None:
            return None
        return self._new(bearer)

    def issue_link(self, bearer: str) -> str | None:
        """A one-time login code for the holder of ``bearer``, ``None`` if it is no token."""
        if self.scope_of(bearer) is None:
            return None
        code = secrets.token_urlsafe(32)
        with self._guard:
            now = time.monotonic()
            self._links = {c: v for c, v in self._links.items() if v[1] > now}
            self._links[code] = (bearer, now + LINK_TTL_S)
        return code

    def redeem(self, code: str) -> Session | None:
        with self._guard:
            found = self._links.pop(code, None)
        if found is None or found[1] < time.monotonic() or self.scope_of(found[0]) is None:
            return None
        return self._new(found[0])

    def _new(self, bearer: str) -> Session:
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), bearer)
        with self._guard:
            if len(self._sessions) >= MAX_SESSIONS:  # the least recently seen goes
                oldest = min(self._sessions.values(), key=lambda s: s.seen)
                del self._sessions[oldest.id]
            self._sessions[session.id] = session
        return session

    def find(self, cookie_header: str | None) -> tuple[Session, int] | None:
        """The session of a request's ``Cookie`` header and its scope now, if still valid."""
        session_id = _cookie(cookie_header or "", COOKIE)
        if not session_id:
            return None
        now = time.monotonic()
        with self._guard:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.seen > SESSION_IDLE_S or now - session.created > SESSION_MAX_S:
                del self._sessions[session_id]
                return None
            session.seen = now
        scope = self.scope_of(session.bearer)
        if scope is None:  # the token was revoked
            self.end(session)
            return None
        return session, scope

    def end(self, session: Session) -> None:
        with self._guard:
            self._sessions.pop(session.id, None)

    def cookie(self, session: Session | None) -> str:
        """The ``Set-Cookie`` value carrying ``session`` (``None``: one that clears it)."""
        value, age = (session.id, int(SESSION_MAX_S)) if session else ("", 0)
        secure = "; Secure" if self.secure else ""
        return f"{COOKIE}={value}; Path=/ui/; Max-Age={age}; HttpOnly; SameSite=Strict{secure}"


def csrf_ok(session: Session, header: str | None) -> bool:
    return header is not None and hmac.compare_digest(header.encode(), session.csrf.encode())


def same_origin(origin: str | None, referer: str | None, host: str | None, scheme: str) -> bool:
    """Whether a request comes from a page of this server: its ``Origin`` (else its
    ``Referer``) is ``scheme://host``."""
    if not host:
        return False
    claimed = origin if origin and origin != "null" else referer
    if not claimed:
        return False
    parts = urlsplit(claimed)
    return parts.scheme == scheme and parts.netloc.lower() == host.lower()


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None
