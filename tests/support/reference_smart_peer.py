"""A scripted peer that speaks the Smart Transfer Protocol as the reference does (kamu-cli's
client, kamu-node's server), message for message, for tests of our side in that dialect.

Written from the wire facts of kamu-cli's ``src/adapter/http/src/smart_protocol/`` (BSL 1.1:
read for the facts, nothing copied; see ``coordinator/sharing/smart_codec_reference.py``):
serde's compact JSON (no spaces, fields in struct order), so a message here is the very text
the reference sends; ``serde`` builds it. Both sides keep a transcript of every text message,
sent and received, for the tests to compare byte for byte.

- ``ReferenceNode``: a node serving one dataset directory (the ODF layout) as pull source and
  push target: the handshake's version header (``{"message":"Incompatible client version"}``
  otherwise) and bearer token, ``Ok``/``Err`` answers, the metadata batch as a JSON array of
  bytes, object URLs with ``headers``, uploads ``PUT`` to a second port (with those headers),
  a progress request during the uploads, refusals (``InvalidHead``, ``InvalidInterval``, an
  internal error in a close frame with code 1011).
- ``reference_pull`` / ``reference_push``: kamu-cli's client flows against a server.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests
from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.sync.client import ClientConnection, connect
from websockets.sync.server import Server, ServerConnection, serve

from common.hashing.physical import physical_hash_bytes
from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import decode_block

VERSION_HEADER = "x-odf-smtp-version"
INCOMPATIBLE = '{"message":"Incompatible client version"}'
"""The body of the reference's 400 for another protocol version (its tests expect it)."""
TAR_GZIP = "application/tar+gzip"
Transcript = list[tuple[str, str]]
"""``("sent" | "received", text)`` in order."""


def serde(value: Any) -> str:
    """``serde_json::to_string``: compact, UTF-8, fields in the order given."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def say(transcript: Transcript, ws: ServerConnection | ClientConnection, value: Any) -> None:
    text = serde(value)
    transcript.append(("sent", text))
    ws.send(text)


def hear(transcript: Transcript, ws: ServerConnection | ClientConnection) -> str:
    text = ws.recv(timeout=30)
    assert isinstance(text, str)
    transcript.append(("received", text))
    return text


# --- the reference's messages (struct field order) ---------------------------------------


def transfer_plan(
    num_blocks: int, num_objects: int, num_records: int, raw_blocks: int, raw_objects: int
) -> dict[str, int]:
    return {
        "num_blocks": num_blocks,
        "num_objects": num_objects,
        "num_records": num_records,
        "bytes_in_raw_blocks": raw_blocks,
        "bytes_in_raw_objects": raw_objects,
    }


def object_file(kind: str, physical_hash: str, size: int) -> dict[str, Any]:
    """``kind``: ``data`` or ``checkpoints``."""
    return {
        "object_type": "DataSlice" if kind == "data" else "Checkpoint",
        "physical_hash": physical_hash,
        "size": size,
    }


def transfer_url(url: str, headers: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "url": url,
        "headers": [{"name": n, "value": v} for n, v in headers],
        "expires_at": None,
    }


def batch(blocks: list[tuple[str, bytes]]) -> dict[str, Any]:
    """``MetadataBlocksBatch``: a GNU tar (the tar crate's ``Header::new_gnu``: mode 0, time
    0), gzip'd, as a JSON array of bytes, encoding ``raw``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in blocks:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0, 0
            tar.addfile(info, io.BytesIO(data))
    payload = gzip.compress(buffer.getvalue(), compresslevel=6, mtime=0)
    return {
        "num_blocks": len(blocks),
        "media_type": TAR_GZIP,
        "encoding": "raw",
        "payload": list(payload),
    }


def unbatch(value: dict[str, Any]) -> dict[str, bytes]:
    assert value["media_type"] == TAR_GZIP and value["encoding"] == "raw", value
    raw = gzip.decompress(bytes(value["payload"]))
    found = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for member in tar:
            file = tar.extractfile(member)
            assert file is not None
            found[member.name] = file.read()
    assert len(found) == value["num_blocks"]
    return found


def internal_error(phase: dict[str, str], message: str) -> dict[str, Any]:
    return {"Err": {"Internal": {"phase": phase, "error_message": message}}}


# --- a dataset directory in the ODF layout -----------------------------------------------


@dataclass
class Layout:
    root: Path

    def head(self) -> str | None:
        path = self.root / "refs/head"
        return path.read_text().strip() if path.is_file() else None

    def chain(self, stop: str | None = None) -> list[tuple[str, bytes]]:
        """Blocks from the head (or ``stop``) back to the Seed, newest first."""
        found = []
        h = stop or self.head()
        while h is not None:
            data = (self.root / "blocks" / h).read_bytes()
            found.append((h, data))
            prev = decode_block(data).prev_block_hash
            h = None if prev is None else prev.to_multibase()
        return found

    def has(self, kind: str, h: str) -> bool:
        return (self.root / kind / h).is_file()


def objects_of(blocks: list[tuple[str, bytes]]) -> list[tuple[str, str, int, int]]:
    """``(kind, hash, size, records)`` of each data file and checkpoint the blocks name."""
    found = []
    for _, data in blocks:
        event = decode_block(data).event
        if isinstance(event, AddData | ExecuteTransform):
            if event.new_data is not None:
                d = event.new_data
                records = d.offset_interval.end - d.offset_interval.start + 1
                found.append(("data", d.physical_hash.to_multibase(), d.size, records))
            if event.new_checkpoint is not None:
                c = event.new_checkpoint
                found.append(("checkpoints", c.physical_hash.to_multibase(), c.size, 0))
    return found


def plan_of(blocks: list[tuple[str, bytes]]) -> dict[str, int]:
    objects = objects_of(blocks)
    return transfer_plan(
        len(blocks),
        len(objects),
        sum(r for *_, r in objects),
        sum(len(b) for _, b in blocks),
        sum(s for _, _, s, _ in objects),
    )


# --- the node ----------------------------------------------------------------------------


@dataclass
class ReferenceNode:
    """kamu-node's side, replayed: ``root`` is the served dataset's directory (created by a
    push). ``fail``: a phase (``pull-metadata``, ``push-metadata``) answered with an internal
    error in a close frame, as the reference does; ``push-moved``: a head other than the one
    its ``refs/head`` said."""

    root: Path
    name: str = "cities"
    token: str | None = None
    fail: str | None = None
    transcript: Transcript = field(default_factory=list)
    object_requests: list[dict[str, str]] = field(default_factory=list)
    """The headers of each object ``GET`` and ``PUT``."""
    base: str = ""
    upload_base: str = ""
    uploads: dict[str, bytes] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"odf+{self.base}/{self.name}"

    @property
    def layout(self) -> Layout:
        return Layout(self.root)

    def _headers(self) -> list[tuple[str, str]]:
        found = [(VERSION_HEADER, "1")]
        if self.token is not None:
            found.append(("authorization", f"Bearer {self.token}"))
        return found

    # --- the WebSocket flows ---------------------------------------------------------------

    def _send(self, ws: ServerConnection, value: Any) -> None:
        say(self.transcript, ws, value)

    def _recv(self, ws: ServerConnection) -> Any:
        return json.loads(hear(self.transcript, ws))

    def _close_with(self, ws: ServerConnection, value: Any) -> None:
        ws.close(1011, serde(value))

    def serve_pull(self, ws: ServerConnection) -> None:
        request = self._recv(ws)
        assert list(request) == ["begin_after", "stop_at", "force_update_if_diverged"], request
        chain = self.layout.chain(request["stop_at"])
        names = [h for h, _ in chain]
        begin = request["begin_after"]
        if begin is not None and begin not in names and not request["force_update_if_diverged"]:
            self._send(ws, {"Err": {"InvalidInterval": {"head": names[0], "tail": begin}}})
            return
        blocks = list(reversed(chain[: names.index(begin)] if begin in names else chain))
        self._send(ws, {"Ok": {"transfer_plan": plan_of(blocks)}})
        if self._recv(ws) != {}:
            return
        if self.fail == "pull-metadata":
            self._close_with(ws, internal_error({"Pull": "MetadataRequest"}, "Internal error"))
            return
        self._send(ws, {"blocks": batch(blocks)})
        while True:
            try:
                asked = self._recv(ws)
            except Exception:  # the client closed: the flow is over
                return
            strategies = [
                {
                    "object_file": f,
                    "pull_strategy": "HttpDownload",
                    "download_from": transfer_url(
                        f"{self.base}/{self.name}/{_kind(f)}/{f['physical_hash']}",
                        self._headers(),
                    ),
                }
                for f in asked["object_files"]
            ]
            self._send(ws, {"object_transfer_strategies": strategies})

    def serve_push(self, ws: ServerConnection) -> None:
        request = self._recv(ws)
        assert list(request) == [
            "current_head",
            "transfer_plan",
            "force_update_if_diverged",
            "visibility_for_created_dataset",
        ], request
        actual = self.layout.head()
        if self.fail == "push-moved":  # its head moved since the client read it
            actual = "f1620" + "cd" * 32
        if request["current_head"] != actual:
            invalid = {"actual_head": request["current_head"], "expected_head": actual}
            self._send(ws, {"Err": {"InvalidHead": invalid}})
            return
        self._send(ws, {"Ok": {}})
        blocks = unbatch(self._recv(ws)["new_blocks"])
        assert len(blocks) == request["transfer_plan"]["num_blocks"]
        if self.fail == "push-metadata":
            self._close_with(ws, internal_error({"Push": "MetadataRequest"}, "Internal error"))
            return
        self._send(ws, {"Ok": {}})
        wanted: set[str] = set()
        while True:
            asked = self._recv(ws)
            strategies = []
            for f in asked["object_files"]:
                key = f"{_kind(f)}/{f['physical_hash']}"
                if self.layout.has(_kind(f), f["physical_hash"]):
                    strategies.append(
                        {"object_file": f, "push_strategy": "SkipUpload", "upload_to": None}
                    )
                    continue
                wanted.add(key)
                target = transfer_url(f"{self.upload_base}/{self.name}/{key}", self._headers())
                strategies.append(
                    {"object_file": f, "push_strategy": "HttpUpload", "upload_to": target}
                )
            self._send(ws, {"Ok": {"object_transfer_strategies": strategies}})
            self._send(ws, {})  # DatasetPushObjectsUploadProgressRequest (every 10 s there)
            while (details := self._recv(ws)["details"]) != "Complete":
                assert list(details) == ["Running"], details
            if not asked["is_truncated"]:
                break
        assert self._recv(ws) == {}  # DatasetPushComplete
        assert wanted <= set(self.uploads), (wanted, set(self.uploads))
        for key in wanted:
            path = self.root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(self.uploads[key])
        (self.root / "blocks").mkdir(parents=True, exist_ok=True)
        for h, data in blocks.items():
            (self.root / "blocks" / h).write_bytes(data)
        parents = {decode_block(d).prev_block_hash for d in blocks.values()}
        (head,) = [h for h in blocks if Multihash.from_multibase(h) not in parents]
        (self.root / "refs").mkdir(exist_ok=True)
        (self.root / "refs/head").write_text(head)
        self._send(ws, {})  # DatasetPushCompleteConfirmed

    # --- HTTP --------------------------------------------------------------------------------

    def handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path
        if path in (f"/{self.name}/pull", f"/{self.name}/push"):
            if request.headers.get(VERSION_HEADER) != "1":
                return _response(400, INCOMPATIBLE.encode(), "application/json")
            if self.token is not None and (
                request.headers.get("Authorization") != f"Bearer {self.token}"
            ):
                return _response(401, b'{"message":"Unauthorized"}', "application/json")
            return None
        prefix = f"/{self.name}/"
        if not path.startswith(prefix):
            return _response(404, b"", "text/plain")
        key = path[len(prefix) :]
        if key.startswith(("data/", "checkpoints/")):
            self.object_requests.append(dict(request.headers.raw_items()))
        file = self.root / key
        if ".." in key or not file.is_file():
            return _response(404, b"", "text/plain")
        return _response(200, file.read_bytes(), "application/octet-stream")

    def receive_upload(self, key: str, headers: dict[str, str], body: bytes) -> int:
        self.object_requests.append(headers)
        _, h = key.split("/")
        if physical_hash_bytes(body).to_multibase() != h:
            return 400
        self.uploads[key] = body
        return 200


def _kind(f: dict[str, Any]) -> str:
    return "data" if f["object_type"] == "DataSlice" else "checkpoints"


def _response(status: int, body: bytes, content_type: str) -> Response:
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}[status]
    headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return Response(status, reason, headers, body)


@contextmanager
def reference_node(node: ReferenceNode) -> Iterator[ReferenceNode]:
    """Serve ``node`` on loopback: the WebSocket flows and reads on one port, uploads on
    another (as a node whose object store is elsewhere)."""

    def handler(ws: ServerConnection) -> None:
        path = ws.request.path if ws.request is not None else ""
        try:
            if path.endswith("/pull"):
                node.serve_pull(ws)
            else:
                node.serve_push(ws)
        except Exception as e:  # the peer's own checks: kept for the test to see
            node.transcript.append(("error", f"{type(e).__name__}: {e}"))

    class Uploads(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length", "-1"))
            body = self.rfile.read(length) if length >= 0 else b""
            key = self.path.split("/", 2)[2]
            status = node.receive_upload(key, dict(self.headers.items()), body)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server: Server = serve(
        handler,
        "127.0.0.1",
        0,
        process_request=node.handshake,
        max_size=None,
        compression=None,
    )
    uploads = ThreadingHTTPServer(("127.0.0.1", 0), Uploads)
    node.base = f"http://127.0.0.1:{server.socket.getsockname()[1]}"
    node.upload_base = f"http://127.0.0.1:{uploads.server_address[1]}"
    threads = [
        threading.Thread(target=server.serve_forever, daemon=True),
        threading.Thread(target=uploads.serve_forever, daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        yield node
    finally:
        server.shutdown()
        uploads.shutdown()
        uploads.server_close()
        for t in threads:
            t.join(timeout=10)


# --- kamu-cli's client flows ---------------------------------------------------------------


@dataclass
class ReferenceClient:
    """kamu-cli's side, replayed against a server at ``base`` (``http://host:port``)."""

    base: str
    name: str = "cities"
    token: str | None = None
    transcript: Transcript = field(default_factory=list)

    def _connect(self, flow: str) -> ClientConnection:
        headers = {VERSION_HEADER: "1"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        url = "ws" + self.base[4:] + f"/{self.name}/{flow}"
        return connect(url, additional_headers=headers, proxy=None, max_size=None)

    def send(self, ws: ClientConnection, value: Any) -> None:
        say(self.transcript, ws, value)

    def recv(self, ws: ClientConnection) -> str:
        return hear(self.transcript, ws)

    def pull(
        self, begin_after: str | None = None, force: bool = False
    ) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """The blocks and objects a pull brings (``DatasetPullRequest`` first)."""
        with self._connect("pull") as ws:
            request = {"begin_after": begin_after, "stop_at": None}
            self.send(ws, {**request, "force_update_if_diverged": force})
            answer = json.loads(self.recv(ws))
            if "Ok" not in answer or answer["Ok"]["transfer_plan"]["num_blocks"] == 0:
                return {}, {}
            self.send(ws, {})
            blocks = unbatch(json.loads(self.recv(ws))["blocks"])
            files = [
                object_file(kind, h, size) for kind, h, size, _ in objects_of(list(blocks.items()))
            ]
            objects = {}
            if files:
                self.send(ws, {"object_files": files})
                for s in json.loads(self.recv(ws))["object_transfer_strategies"]:
                    target = s["download_from"]
                    headers = {row["name"]: row["value"] for row in target["headers"]}
                    response = requests.get(target["url"], headers=headers, timeout=30)
                    response.raise_for_status()
                    objects[f"{_kind(s['object_file'])}/{s['object_file']['physical_hash']}"] = (
                        response.content
                    )
            ws.close(1000, "Client pull flow succeeded")
        return blocks, objects

    def push(self, source: Layout, current_head: str | None, force: bool = False) -> dict[str, Any]:
        """Push ``source``'s blocks after ``current_head`` (forced onto a head not in the
        chain: the whole chain, as the reference does); the server's last answer."""
        chain = source.chain()
        names = [h for h, _ in chain]
        after = chain[: names.index(current_head)] if current_head in names else chain
        blocks = list(reversed(after))
        with self._connect("push") as ws:
            self.send(
                ws,
                {
                    "current_head": current_head,
                    "transfer_plan": plan_of(blocks),
                    "force_update_if_diverged": force,
                    "visibility_for_created_dataset": "Private",
                },
            )
            answer = json.loads(self.recv(ws))
            if "Ok" not in answer:
                return dict(answer)
            self.send(ws, {"new_blocks": batch(blocks)})
            answer = json.loads(self.recv(ws))
            if "Ok" not in answer:
                return dict(answer)
            files = [object_file(kind, h, size) for kind, h, size, _ in objects_of(blocks)]
            self.send(ws, {"object_files": files, "is_truncated": False})
            answer = json.loads(self.recv(ws))
            if "Ok" not in answer:
                return dict(answer)
            for s in answer["Ok"]["object_transfer_strategies"]:
                if s["push_strategy"] == "SkipUpload":
                    continue
                f, target = s["object_file"], s["upload_to"]
                headers = {row["name"]: row["value"] for row in target["headers"]}
                headers["Content-Type"] = "application/octet-stream"
                body = (source.root / _kind(f) / f["physical_hash"]).read_bytes()
                response = requests.put(target["url"], data=body, headers=headers, timeout=30)
                response.raise_for_status()
            self.send(ws, {"details": "Complete"})
            self.send(ws, {})  # DatasetPushComplete
            try:
                return dict(json.loads(self.recv(ws)))
            except Exception as e:  # a refusal in a close frame
                return {"closed": str(e)}
