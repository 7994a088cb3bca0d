"""The daemon's Smart Transfer Protocol endpoints (pull, push, uploads, the Simple Transfer
Protocol's reads) on a real HTTP server in process, dispatched as the daemon does, without its
gRPC side: for tests of either side of a transfer against our server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from coordinator.daemon import smart_pull
from coordinator.daemon.access import Authority, TokenStore
from coordinator.daemon.http_listener import BoundedHandler, BoundedHTTPServer, HttpBounds
from coordinator.daemon.smart_push import PushServer
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.serving import open_object, parse_request_path
from coordinator.workspace import Workspace
from tests.support.http_serving import running

TOKEN = "the-daemon-token"


@dataclass
class Server:
    ws: Workspace
    address: str
    pushes: PushServer
    commits: list[str]

    @property
    def location(self) -> RemoteLocation:
        return RemoteLocation(f"odf+http://{self.address}/cities")

    def staging(self) -> list[Path]:
        root = self.pushes.stage_root
        return list(root.iterdir()) if root.is_dir() else []


@contextmanager
def smart_listener(ws: Workspace) -> Iterator[Server]:
    """Serve ``ws``'s datasets (push with ``TOKEN``) on loopback."""
    commits: list[str] = []
    authority = Authority(TOKEN, TokenStore(ws.odf_dir))
    pushes = PushServer(
        ws, authority, ws.odf_dir / "run", lambda name: nullcontext(), commits.append
    )

    class Handler(BoundedHandler):  # the daemon's dispatch, without its gRPC side
        def do_GET(self) -> None:
            request = parse_request_path(self.path)
            found = open_object(ws, request) if request is not None else None
            if pushes.is_push(self):
                pushes.serve(self)
            elif smart_pull.is_pull(self):
                smart_pull.serve_pull(self, ws, True)
            elif found is not None:  # the Simple Transfer Protocol's reads
                fd, size = found
                with os.fdopen(fd, "rb") as file:
                    self.send_response(200)
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    self.wfile.write(file.read())
            else:
                self.send_error(404)

        def do_PUT(self) -> None:
            if pushes.is_upload(self.path):
                pushes.upload(self)
            else:
                self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    http = BoundedHTTPServer(("127.0.0.1", 0), Handler, HttpBounds(), None, lambda why: None)
    with running(http) as port:
        yield Server(ws, f"127.0.0.1:{port}", pushes, commits)
