"""kamu-cli's engine readiness rule, against real local sockets."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from coordinator.engine.container_runtime import socket_ready


def _serve(on_accept: Callable[[socket.socket], None]) -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()

    def loop() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            on_accept(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts and holds the connection without sending, as an HTTP/2 server awaiting a preface."""
    held: list[socket.socket] = []
    yield from _serve(held.append)
    for conn in held:
        conn.close()


@pytest.fixture
def dropping_server() -> Iterator[int]:
    """Accepts and closes at once, like a port proxy with nothing listening behind it."""
    yield from _serve(lambda conn: conn.close())


def test_a_server_that_holds_the_connection_is_ready(silent_server: int) -> None:
    assert socket_ready("127.0.0.1", silent_server)


def test_a_proxy_that_drops_connections_is_not_ready(dropping_server: int) -> None:
    # The close comes from a thread of this process; on a busy machine it may take longer than
    # kamu's 1 s read timeout to be scheduled, which would read as "ready". A long read timeout
    # keeps the test about EOF meaning "not ready": the call returns as soon as the EOF arrives.
    assert not socket_ready("127.0.0.1", dropping_server, read_timeout=120)


def test_a_closed_port_is_not_ready() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # held, never listening: refused, and no one else can take it
        assert not socket_ready("127.0.0.1", s.getsockname()[1])
