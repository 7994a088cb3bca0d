"""Who may do what with the daemon: tokens and their scopes.

Every gRPC call and every authenticated HTTP request carries ``Authorization: Bearer <token>``.
A token grants scopes, each including the ones before it:

- ``read``: list, describe, log, tail, query, verify; the HTTP reads when the daemon requires
  a token for them (``daemon.requireTokenForReads``);
- ``push``: ``read``, and writing data: ingest and set-watermark calls, Smart Transfer
  Protocol pushes;
- ``admin``: everything: pulls (which run sources and transforms), set-transform, add,
  delete, reset, compact, rename, the daemon's status.

The start-up token (``.odf/run/token``, new at every start, readable by the workspace's owner
only) is the admin token of the local CLI. Other tokens are issued with
``odf daemon token create --scope SCOPE`` and kept in ``.odf/tokens.json`` (mode 0600) as
SHA-256 hashes only: the token itself is shown once, when created. They survive restarts,
and the daemon sees a new or revoked token at its next request (the file is re-read when it
changes).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import Any

import grpc

from common.grpc_auth import OPEN_METHODS, GateInterceptor, Refusal
from common.logs import get_logger
from common.odf.errors import NotFoundError, ValidationError

log = get_logger(__name__)

TOKENS_FILE = "tokens.json"
_PREFIX = "odf_"


class Scope(IntEnum):
    """What a token may do; a scope includes every lower one."""

    READ = 1
    PUSH = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Scope:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValidationError(
                f"unknown scope {text!r}: one of read, push, admin", path="--scope"
            ) from None


_SERVICE = "/odf.coordinator.v1.Coordinator/"
METHOD_SCOPES: dict[str, Scope] = {
    **{
        _SERVICE + m: Scope.READ
        for m in ("ListDatasets", "DescribeDataset", "Log", "Tail", "Query", "Verify")
    },
    _SERVICE + "Ingest": Scope.PUSH,
    _SERVICE + "SetWatermark": Scope.PUSH,
    **{_SERVICE + m: Scope.ADMIN for m in ("Pull", "SetTransform", "Add", "Delete", "Status")},
}
"""The scope each gRPC method needs; a method not listed needs ``admin``."""


def needed_scope(method: str) -> Scope | None:
    """The scope a gRPC method needs, ``None`` for an open one."""
    if method.startswith(OPEN_METHODS):
        return None
    return METHOD_SCOPES.get(method, Scope.ADMIN)


@dataclass(frozen=True, slots=True)
class IssuedToken:
    id: str
    scope: Scope
    name: str
    created: datetime
    digest: str
    """SHA-256 of the whole token, hex."""

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "scope": self.scope.label,
            "name": self.name,
            "created": self.created.isoformat(),
            "sha256": self.digest,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> IssuedToken:
        return cls(
            id=str(value["id"]),
            scope=Scope.parse(str(value["scope"])),
            name=str(value.get("name", "")),
            created=datetime.fromisoformat(str(value["created"])),
            digest=str(value["sha256"]),
        )


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class TokenStore:
    """``.odf/tokens.json``: the issued tokens (hashes, never the tokens)."""

    def __init__(self, odf_dir: Path) -> None:
        self.path = odf_dir / TOKENS_FILE

    def load(self) -> list[IssuedToken]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            return [IssuedToken.from_json(v) for v in json.loads(text)["tokens"]]
        except (ValueError, KeyError, TypeError) as e:
            raise ValidationError(f"unreadable token file: {e}", path=str(self.path)) from None

    def _save(self, tokens: list[IssuedToken]) -> None:
        text = json.dumps({"tokens": [t.to_json() for t in tokens]}, indent=2) + "\n"
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        partial.replace(self.path)

    def create(self, scope: Scope, name: str) -> tuple[IssuedToken, str]:
        """A new token of ``scope``; returns its record and the token (shown once)."""
        tokens = self.load()
        token_id = secrets.token_hex(4)
        while any(t.id == token_id for t in tokens):
            token_id = secrets.token_hex(4)
        token = f"{_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        issued = IssuedToken(token_id, scope, name, datetime.now(UTC), _digest(token))
        self._save([*tokens, issued])
        return issued, token

    def revoke(self, token_id: str) -> IssuedToken:
        tokens = self.load()
        kept = [t for t in tokens if t.id != token_id]
        if len(kept) == len(tokens):
            raise NotFoundError(f"no token {token_id!r} (see `odf daemon token list`)")
        self._save(kept)
        return next(t for t in tokens if t.id == token_id)


class Authority:
    """Answers which scope a bearer header grants: the start-up token is ``admin``; issued
    tokens are looked up by their id and checked against their hash (in constant time)."""

    def __init__(self, startup_token: str, store: TokenStore) -> None:
        self._startup = f"Bearer {startup_token}".encode()
        self._store = store
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._issued: dict[str, IssuedToken] = {}

    def scope_of(self, header: str | bytes) -> Scope | None:
        given = header.encode("utf-8", "replace") if isinstance(header, str) else bytes(header)
        if hmac.compare_digest(given, self._startup):
            return Scope.ADMIN
        if not given.startswith(b"Bearer " + _PREFIX.encode()):
            return None
        token = given[len(b"Bearer ") :].decode("utf-8", "replace")
        token_id = token[len(_PREFIX) :].split("_", 1)[0]
        issued = self._current().get(token_id)
        if issued is None or not hmac.compare_digest(_digest(token), issued.digest):
            return None
        return issued.scope

    def allows(self, header: str | bytes, needed: Scope) -> bool:
        scope = self.scope_of(header)
        return scope is not None and scope >= needed

    def _current(self) -> dict[str, IssuedToken]:
        """The issued tokens, re-read when the file changed (created or revoked meanwhile)."""
        try:
            stat = self._store.path.stat()
            seen: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            seen = None
        with self._lock:
            if seen != self._seen:
                try:
                    self._issued = {t.id: t for t in self._store.load()} if seen else {}
                except ValidationError as e:  # refuse issued tokens, keep serving the admin
                    log.warning("daemon.tokens_unreadable", error=str(e))
                    self._issued = {}
                self._seen = seen
            return self._issued


class ScopedTokenInterceptor(GateInterceptor):
    """Refuses a call without a token (UNAUTHENTICATED) or whose token lacks the method's
    scope (PERMISSION_DENIED); health checks are open."""

    def __init__(self, authority: Authority) -> None:
        self.authority = authority

    def refusal(self, method: str, authorization: str | bytes) -> Refusal | None:
        needed = needed_scope(method)
        if needed is None:
            return None
        scope = self.authority.scope_of(authorization)
        if scope is None:
            log.warning("request.unauthenticated", method=method)
            return grpc.StatusCode.UNAUTHENTICATED, "a valid daemon token is required"
        if scope < needed:
            log.warning("request.forbidden", method=method, scope=scope.label)
            return (
                grpc.StatusCode.PERMISSION_DENIED,
                f"{method.rsplit('/', 1)[-1]} needs a token with scope {needed.label}"
                f" (this one has {scope.label})",
            )
        return None
