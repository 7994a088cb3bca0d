"""Daemon tokens and scopes: which scope each method needs, what a bearer header grants."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from common.odf.errors import NotFoundError, ValidationError
from coordinator.daemon.access import Authority, Scope, TokenStore, needed_scope

SERVICE = "/odf.coordinator.v1.Coordinator/"


@pytest.mark.parametrize(
    ("method", "scope"),
    [
        ("ListDatasets", Scope.READ),
        ("Query", Scope.READ),
        ("Verify", Scope.READ),
        ("Ingest", Scope.PUSH),
        ("Pull", Scope.ADMIN),
        ("Delete", Scope.ADMIN),
        ("Status", Scope.ADMIN),
        ("SomethingNew", Scope.ADMIN),  # a method not listed needs admin
    ],
)
def test_each_method_needs_a_scope(method: str, scope: Scope) -> None:
    assert needed_scope(SERVICE + method) is scope


def test_health_is_open() -> None:
    assert needed_scope("/grpc.health.v1.Health/Check") is None


def test_the_startup_token_is_admin_and_issued_tokens_their_scope(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    authority = Authority("startup-secret", store)
    assert authority.scope_of("Bearer startup-secret") is Scope.ADMIN
    issued, token = store.create(Scope.READ, "dashboards")
    assert authority.scope_of(f"Bearer {token}") is Scope.READ
    assert authority.allows(f"Bearer {token}", Scope.READ)
    assert not authority.allows(f"Bearer {token}", Scope.PUSH)
    wrong_secret = token[:-4] + ("aaaa" if not token.endswith("aaaa") else "bbbb")
    assert authority.scope_of(f"Bearer {wrong_secret}") is None
    assert authority.scope_of("Bearer startup-secreT") is None
    assert authority.scope_of("") is None
    assert authority.scope_of(b"Bearer \xff\xfe") is None
    store.revoke(issued.id)
    assert authority.scope_of(f"Bearer {token}") is None  # seen without a restart


def test_the_store_keeps_hashes_only_readable_by_the_owner(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    issued, token = store.create(Scope.PUSH, "publisher")
    text = store.path.read_text()
    assert token not in text and issued.digest in text
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert [t.id for t in store.load()] == [issued.id]
    assert json.loads(text)["tokens"][0]["scope"] == "push"


def test_bad_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="unknown scope 'root'"):
        Scope.parse("root")
    with pytest.raises(NotFoundError, match="no token 'abc'"):
        TokenStore(tmp_path).revoke("abc")
    (tmp_path / "tokens.json").write_text("{not json")
    with pytest.raises(ValidationError, match="unreadable token file"):
        TokenStore(tmp_path).load()
    # the daemon keeps its admin token working when the file is broken
    assert Authority("s", TokenStore(tmp_path)).scope_of("Bearer s") is Scope.ADMIN
