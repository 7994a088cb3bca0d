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

Scenario = Callable[[ServerConnection, str, str], None]
"""Plays the server's side after the pull request (``base``: the server's http:// URL; then
the dialect, ``spec`` or ``reference``)."""

ESTIMATION = {"sizeEstimation": {"numBlocks": 1, "bytesInRawBlocks": 1, "numObjects": 0}}
PLAN = {"num_blocks": 1, "num_objects": 0, "num_records": 0}
PLAN_ANSWER = {
    "Ok": {"transfer_plan": {**PLAN, "bytes_in_raw_blocks": 1, "bytes_in_raw_objects": 0}}
}


@contextmanager
def hostile_smart_server(scenario: Scenario, dialect: str = "spec") -> Iterator[str]:
    """Serve ``scenario`` on loopback, in ``dialect`` after a well-formed opening; yields the
    ``odf+http://`` URL of a dataset there."""
    holder: dict[str, Any] = {}

    def handler(ws: ServerConnection) -> None:
        try:
            ws.recv(timeout=10)  # DatasetPullRequest
            ws.send(msg.encode(ESTIMATION if dialect == "spec" else PLAN_ANSWER))
            ws.recv(timeout=10)  # DatasetPullMetadataRequest
            scenario(ws, holder["base"], dialect)
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
