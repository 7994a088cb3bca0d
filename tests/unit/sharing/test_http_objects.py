"""Objects received over http:// from a real local server: read from the socket into one
buffer when unencoded, decoded when a server encodes them anyway, refused when short or long,
and one connection serving object after object."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from common.hashing import physical_hash_bytes
from coordinator.dataset import Dataset
from coordinator.sharing.errors import RejectedContentError, RemoteError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import Destination, ObjectKind, ObjectRef
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.transport_http import HttpSource
from tests.support.http_serving import serving

BODY = bytes(range(256)) * 40_000  # 10 MB: several buffers, a writeback (WRITEBACK_BYTES)


@dataclass
class Reply:
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    send: int | None = None
    """Bytes actually sent (the connection is then closed), when not all of ``body``."""


@dataclass
class Served:
    url: str
    replies: dict[str, Reply] = field(default_factory=dict)
    asked: list[tuple[str, str, int]] = field(default_factory=list)
    """(path, Accept-Encoding, client port) of each request."""


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    state = Served(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: connections can be reused

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            encoding = self.headers.get("Accept-Encoding", "")
            state.asked.append((self.path, encoding, self.client_address[1]))
            reply = state.replies.get(self.path.removeprefix("/ds/"))
            if reply is None:
                self.send_error(404)
                return
            self.send_response(200)
            for name, value in {"Content-Length": str(len(reply.body)), **reply.headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body[: reply.send])
            if reply.send is not None:
                self.close_connection = True

    with serving(Handler) as port:
        state.url = f"http://127.0.0.1:{port}/ds"
        yield state


def ref_of(body: bytes, size: int | None = None) -> ObjectRef:
    h = physical_hash_bytes(body)
    return ObjectRef(ObjectKind.DATA, h, len(body) if size is None else size, h)


def receive(served: Served, tmp_path: Path, *refs: ObjectRef) -> Dataset:
    ds = Dataset(tmp_path / "ds")
    ds.layout.root.mkdir(exist_ok=True)
    source = HttpSource(RemoteLocation(served.url), Limits(), connections=1)
    try:
        with ds.staging_dir() as staging:
            for ref in refs:
                source.fetch_object(ref, Destination(ds.layout, staging), lambda _: None)
    finally:
        source.close()
    return ds


def test_objects_arrive_unencoded_over_one_connection(served: Served, tmp_path: Path) -> None:
    bodies = [BODY, BODY[::-1], b"small"]
    refs = [ref_of(b) for b in bodies]
    served.replies.update({r.key: Reply(b) for r, b in zip(refs, bodies, strict=True)})
    served.asked.clear()
    ds = receive(served, tmp_path, *refs)
    for ref, body in zip(refs, bodies, strict=True):
        assert ref.path_in(ds.layout).read_bytes() == body
    assert [a[1] for a in served.asked] == ["identity"] * 3
    assert len({a[2] for a in served.asked}) == 1  # the same client port: one connection


def test_an_object_encoded_anyway_is_decoded(served: Served, tmp_path: Path) -> None:
    ref = ref_of(BODY[:100_000])
    served.replies[ref.key] = Reply(gzip.compress(BODY[:100_000]), {"Content-Encoding": "gzip"})
    ds = receive(served, tmp_path, ref)
    assert ref.path_in(ds.layout).read_bytes() == BODY[:100_000]


def test_short_and_long_bodies_are_refused(served: Served, tmp_path: Path) -> None:
    short = ref_of(BODY)
    served.replies[short.key] = Reply(BODY, send=len(BODY) // 2)
    with pytest.raises((RejectedContentError, RemoteError), match=short.key):
        receive(served, tmp_path, short)
    long = ref_of(BODY, size=len(BODY) - 1)
    served.replies[long.key] = Reply(BODY)
    with pytest.raises(RejectedContentError, match=f"larger than the {len(BODY) - 1} bytes"):
        receive(served, tmp_path, long)
    ds = Dataset(tmp_path / "ds")
    assert not short.path_in(ds.layout).exists() and not long.path_in(ds.layout).exists()
