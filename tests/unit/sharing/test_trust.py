"""``sharing.trust``: the token goes to the remote's own origin only; the workspace's daemon
lends its certificate and token to its own address alone, and never over what was given."""

from __future__ import annotations

from pathlib import Path

from coordinator.sharing.trust import LocalDaemon, Trust

DAEMON = LocalDaemon("127.0.0.1:4885", Path("/run/cert.pem"), "daemon-token")


def test_the_token_goes_to_the_remote_origin_only() -> None:
    trust = Trust(token="t")
    origin = "odf+https://h:1/ds"
    auth = {"Authorization": "Bearer t"}
    assert trust.headers("https://h:1/ds/data/x", origin) == auth
    assert trust.headers("wss://h:1/ds/pull", origin) == auth
    assert trust.headers("https://elsewhere:1/ds/data/x", origin) == {}
    assert trust.headers("http://h:1/ds/data/x", origin) == {}  # not over another scheme
    assert Trust().headers("https://h:1/x", origin) == {}


def test_the_local_daemon_is_trusted_for_its_own_address() -> None:
    trust = Trust(local_daemon=DAEMON)
    mine = trust.for_url("odf+https://127.0.0.1:4885/cities")
    assert (mine.ca_file, mine.token) == (DAEMON.tls_cert, "daemon-token")
    assert mine.verify == "/run/cert.pem"
    other = trust.for_url("odf+https://127.0.0.1:9999/cities")
    assert (other.ca_file, other.token, other.verify) == (None, None, True)
    given = Trust(Path("/ca.pem"), "mine", DAEMON).for_url("https://127.0.0.1:4885/x")
    assert (given.ca_file, given.token) == (Path("/ca.pem"), "mine")


def test_plain_urls_get_no_tls_context() -> None:
    assert Trust().ssl_context("ws://h/x") is None
    assert Trust().ssl_context("wss://h/x") is not None
