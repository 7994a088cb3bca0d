"""A real local HTTP server for tests, served by a thread."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """Serve ``handler`` on 127.0.0.1 in a thread; yields the port; shut down on exit."""
    with running(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as port:
        yield port


@contextmanager
def running(server: socketserver.TCPServer) -> Iterator[int]:
    """Run ``server`` (bound already) in a thread; yields its port; shut down and closed on
    exit."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
