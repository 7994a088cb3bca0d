"""``odf serve --tls-cert/--tls-key`` serves HTTPS on its HTTP address too, with a self-signed
certificate made here: plain HTTP on that port gets no answer (a token sent in clear text is
never taken), ``daemon.requireTokenForReads`` guards ``/metrics`` and the transfer protocols
(``/healthz`` stays open), and ``odf pull odf+https://`` trusts the daemon through
``--ca-file`` or, in the daemon's own workspace, ``daemon.json``. A non-loopback HTTP address
without TLS is refused without ``--insecure``."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.workspace import Workspace
from tests.support.cli import fails, ok
from tests.support.daemon import Served, serving
from tests.support.engine_server import make_certificate
from tests.support.hostile_client import HostileClient
from tests.unit.sharing.test_transfer import source_dataset

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    root = tmp_path_factory.mktemp("tls")
    cert, key = make_certificate(root)
    ws = Workspace.init(root / "ws")
    source_dataset(ws.datasets_dir / "cities", 2)
    (ws.odf_dir / "config.yaml").write_text("daemon:\n  requireTokenForReads: true\n")
    with serving(ws.root, serve_args=("--tls-cert", str(cert), "--tls-key", str(key))) as s:
        yield s, cert


def get(url: str, cert: Path, token: str | None = None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(cert))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=10, context=context
        ) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_https_is_served_and_reads_need_the_token(served: tuple[Served, Path]) -> None:
    s, cert = served
    base = f"https://{s.info['httpAddress']}"
    assert get(f"{base}/healthz", cert) == (200, b"ok\n")
    for path in ("/metrics", "/cities/refs/head"):
        status, body = get(base + path, cert)
        assert status == 401 and b"token" in body, (path, status, body)
        assert get(base + path, cert, "wrong-token")[0] == 401
        assert get(base + path, cert, s.token)[0] == 200


def test_odf_sql_queries_the_daemon_over_https(served: tuple[Served, Path]) -> None:
    """The thin ``odf sql`` reaches the daemon's query endpoint over HTTPS, trusting the
    certificate ``daemon.json`` names: as shown rows, and (every row) as an Arrow stream."""
    s, cert = served
    shown = ok(s.ws, "sql", "-c", "SELECT count(*) AS n FROM cities")
    assert shown.split() == ["n", "20"], shown  # the cities' 2 blocks of 10 records
    assert ok(s.ws, "sql", "-c", "SELECT count(*) AS n FROM cities", "--limit", "0") == shown
    request = urllib.request.Request(
        f"https://{s.info['httpAddress']}/api/query",
        data=b'{"sql": "SELECT 1"}',
        headers={"Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cafile=str(cert))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10, context=context)
    assert refused.value.code == 401  # no token: refused before the query is read


def test_plain_http_on_the_tls_port_is_not_answered(served: tuple[Served, Path]) -> None:
    s, _ = served
    host, port = str(s.info["httpAddress"]).rsplit(":", 1)
    outcome = HostileClient(host, int(port)).plain_request(
        "/metrics", f"Authorization: Bearer {s.token}\r\n"
    )
    assert outcome.closed and outcome.status is None
    assert b"odf_" not in outcome.answer


def test_a_smart_pull_websocket_needs_the_token(served: tuple[Served, Path]) -> None:
    s, cert = served
    host, port = str(s.info["httpAddress"]).rsplit(":", 1)
    tls = ssl.create_default_context(cafile=str(cert))
    client = HostileClient(host, int(port), tls=tls)
    sock, answer = client.websocket("/cities/pull")
    sock.close()
    assert answer.startswith(b"HTTP/1.1 401"), answer[:100]
    sock, answer = client.websocket("/cities/pull", f"Authorization: Bearer {s.token}\r\n")
    sock.close()
    assert answer.startswith(b"HTTP/1.1 101"), answer[:100]


def test_odf_pull_over_https_trusts_the_ca_file_or_daemon_json(
    served: tuple[Served, Path], tmp_path: Path
) -> None:
    s, cert = served
    url = f"odf+https://{s.info['httpAddress']}/cities"
    token_file = s.ws / ".odf/run/token"
    other = Workspace.init(tmp_path / "other").root
    assert "certificate" in fails(other, "pull", url, "--token-file", str(token_file))
    assert "HTTP 401" in fails(other, "pull", url, "--ca-file", str(cert))
    out = ok(other, "pull", url, "--ca-file", str(cert), "--token-file", str(token_file))
    assert "cities: cloned from" in out, out
    # the simple protocol too
    again = Workspace.init(tmp_path / "again").root
    plain = f"https://{s.info['httpAddress']}/cities"
    out = ok(again, "pull", plain, "--ca-file", str(cert), "--token-file", str(token_file))
    assert "cities: cloned from" in out, out
    # in the daemon's own workspace, its certificate and token come from .odf/run: the pull
    # gets through TLS and the token to the chain, refused only as the dataset is there already
    error = fails(s.ws, "pull", url, "--as", "copy")
    assert "is already this dataset" in error and "nothing downloaded" in error


def test_a_non_loopback_http_address_needs_tls_or_insecure(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws").root
    line = fails(ws, "serve", "--address", "127.0.0.1:0", "--http-address", "0.0.0.0:0")
    assert line.startswith("error: --http-address: 0.0.0.0 is not a loopback address"), line


def test_the_web_ui_over_https_sets_a_secure_cookie(served: tuple[Served, Path]) -> None:
    s, cert = served
    base = f"https://{s.info['httpAddress']}"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    context = ssl.create_default_context(cafile=str(cert))
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), NoRedirect)

    def status_and_cookie(url: str, data: bytes | None = None) -> tuple[int, str]:
        request = urllib.request.Request(url, data=data, headers={"Origin": base})
        try:
            with opener.open(request, timeout=10) as r:
                return r.status, r.headers.get("Set-Cookie", "")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Set-Cookie", "")

    status, cookie = status_and_cookie(base + "/ui/login", f"token={s.token}".encode())
    assert status == 303
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # `odf ui` trusts the daemon through daemon.json's certificate
    link = ok(s.ws, "ui", "--no-browser").strip()
    assert link.startswith(base + "/ui/login/")
    status, cookie = status_and_cookie(link)
    assert status == 303 and "Secure" in cookie
