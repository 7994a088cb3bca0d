"""A real local HTTP server for fetch tests: resources with ETag and/or Last-Modified,
honouring conditional requests (304), and recording the requests it got."""

from __future__ import annotations

import email.utils
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler

from tests.support.http_serving import serving


@dataclass
class Resource:
    body: bytes
    etag: str | None = None
    last_modified: datetime | None = None
    status: int = 200


@dataclass
class Server:
    port: int
    resources: dict[str, Resource] = field(default_factory=dict)
    requests: list[dict[str, str]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            server.requests.append({"path": self.path, **dict(self.headers.items())})
            resource = server.resources.get(self.path)
            if resource is None:
                self._reply(404, b"not found")
                return
            if resource.status != 200:
                self._reply(resource.status, b"server trouble")
                return
            if self._not_modified(resource):
                self._reply(304, b"", resource)
                return
            self._reply(200, resource.body, resource)

        def _not_modified(self, resource: Resource) -> bool:
            etag = self.headers.get("If-None-Match")
            if etag is not None:
                return resource.etag is not None and etag == resource.etag
            since = self.headers.get("If-Modified-Since")
            if since is not None and resource.last_modified is not None:
                return email.utils.parsedate_to_datetime(since) >= resource.last_modified
            return False

        def _reply(self, status: int, body: bytes, resource: Resource | None = None) -> None:
            self.send_response(status)
            if resource is not None and resource.etag is not None:
                self.send_header("ETag", resource.etag)
            if resource is not None and resource.last_modified is not None:
                date = email.utils.format_datetime(resource.last_modified, usegmt=True)
                self.send_header("Last-Modified", date)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def http_server() -> Iterator[Server]:
    state = Server(port=0)
    with serving(_handler(state)) as port:
        state.port = port
        yield state
