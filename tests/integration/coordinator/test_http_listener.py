"""The daemon's HTTP listener (``daemon.http_listener``) in process, on real sockets, against
the hostile client: a body slower than its deadline is cut, an over-cap client gets a 503
without a thread, a TLS client that never finishes its handshake is cut at the header deadline
while the accepting thread goes on serving others."""

from __future__ import annotations

import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.daemon.http_listener import (
    BoundedHandler,
    BoundedHTTPServer,
    HttpBounds,
    tls_context,
)
from tests.support.engine_server import make_certificate
from tests.support.hostile_client import HostileClient
from tests.support.http_serving import running

BOUNDS = HttpBounds(
    header_timeout=1.0, body_timeout=1.0, idle_timeout=5.0, max_connections=6, max_per_client=2
)
MARGIN_S = 5.0


class Handler(BoundedHandler):
    def do_GET(self) -> None:
        self._answer(b"ok\n")

    def do_PUT(self) -> None:
        length = int(self.headers["Content-Length"])
        self.read_body_within(length)
        received = len(self.rfile.read(length))
        self._answer(f"{received}\n".encode())

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(tls: ssl.SSLContext | None) -> Iterator[tuple[BoundedHTTPServer, list[str]]]:
    refused: list[str] = []
    server = BoundedHTTPServer(("127.0.0.1", 0), Handler, BOUNDS, tls, refused.append)
    with running(server):
        yield server, refused


@pytest.fixture
def plain() -> Iterator[tuple[BoundedHTTPServer, list[str]]]:
    yield from serve(None)


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[BoundedHTTPServer, list[str], Path]]:
    cert, key = make_certificate(tmp_path)
    for server, refused in serve(tls_context(str(cert), str(key))):
        yield server, refused, cert


def client(server: BoundedHTTPServer, source: str = "127.0.0.1") -> HostileClient:
    return HostileClient("127.0.0.1", server.server_address[1], source=source)


def test_a_body_slower_than_its_deadline_is_cut(
    plain: tuple[BoundedHTTPServer, list[str]],
) -> None:
    server, refused = plain
    outcome = client(server).slow_body("/upload", 1000)
    assert outcome.closed and outcome.seconds < BOUNDS.body_deadline(1000) + MARGIN_S
    assert outcome.answer == b"" and refused == ["body"]
    # a body that comes is taken
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.server_address[1]}/up", data=b"x" * 5000, method="PUT"
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.read() == b"5000\n"


def test_an_over_cap_client_gets_503_at_once_and_others_are_served(
    plain: tuple[BoundedHTTPServer, list[str]],
) -> None:
    server, refused = plain
    attacker = client(server, "127.0.0.2")
    held = [attacker.connect() for _ in range(BOUNDS.max_per_client)]
    try:
        time.sleep(0.3)
        outcome = attacker.idle()
        assert outcome.closed and outcome.seconds < BOUNDS.header_timeout
        assert outcome.status in (503, None) and "cap" in refused
        assert client(server).plain_request("/").status == 200
    finally:
        for sock in held:
            sock.close()


@pytest.mark.process  # openssl makes the certificate
def test_a_stalled_tls_handshake_is_cut_and_does_not_block_others(
    tls: tuple[BoundedHTTPServer, list[str], Path],
) -> None:
    server, refused, cert = tls
    stalled = client(server)  # plain TCP to the TLS port, saying nothing
    results = []
    worker = threading.Thread(target=lambda: results.append(stalled.idle()))
    worker.start()
    time.sleep(0.2)
    context = ssl.create_default_context(cafile=str(cert))
    served = HostileClient("127.0.0.1", server.server_address[1], tls=context)
    assert served.plain_request("/").status == 200
    worker.join()
    assert results[0].closed and results[0].seconds < BOUNDS.header_timeout + MARGIN_S
    assert refused == ["header"]
