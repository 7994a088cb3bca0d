"""A hostile Smart Transfer Protocol server for tests: a real WebSocket server on loopback that
answers a pull with whatever a scenario says (oversized messages, compression bombs, download
URLs on other hosts, malformed JSON), after a well-formed start."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.server import Server, ServerConnection, serve

from coordinator.sharing import smart_messages as msg

Scenario = Callable[[ServerConnection, str], None]
"""Plays the server's side after the pull request (``base``: the server's http:// URL)."""

ESTIMATION = {"sizeEstimation": {"numBlocks": 1, "bytesInRawBlocks": 1, "numObjects": 0}}


@contextmanager
def hostile_smart_server(scenario: Scenario) -> Iterator[str]:
    """Serve ``scenario`` on loopback; yields the ``odf+http://`` URL of a dataset there."""
    holder: dict[str, Any] = {}

    def handler(ws: ServerConnection) -> None:
        try:
            ws.recv(timeout=10)  # DatasetPullRequest
            ws.send(msg.encode(ESTIMATION))
            ws.recv(timeout=10)  # DatasetPullMetadataRequest
            scenario(ws, holder["base"])
        except Exception:
            return

    server: Server = serve(handler, "127.0.0.1", 0, max_size=None, compression=None)
    port = server.socket.getsockname()[1]
    holder["base"] = f"http://127.0.0.1:{port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"odf+http://127.0.0.1:{port}/hostile"
    finally:
        server.shutdown()
        thread.join(timeout=10)
