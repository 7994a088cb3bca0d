"""``odf+http(s)://``: the Smart Transfer Protocol's pull flow as a ``DatasetSource``.

``read_head`` runs the WebSocket conversation once: the pull request (the whole chain), the
metadata batch (blocks by name, kept in memory; their hashes are checked by the walk like any
other source's), and one objects-transfer request for every data file and checkpoint the
blocks name, which yields their download URLs. The head is the batch's block that no other
block links to. ``fetch_object`` then downloads from those URLs over plain HTTP(S), in
parallel, through the same size- and hash-checking sink as every transport.

Either dialect (``smart_codec``): ``auto`` opens with the reference's (kamu's servers answer
no other; ours answer both) and carries on in the spec's when the server answers in it; the
dialect spoken is logged (``-v``).
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import connect

from common.logs import get_logger
from common.odf.errors import DecodeError
from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import decode_block
from coordinator.sharing import smart_messages as msg
from coordinator.sharing.errors import RejectedContentError, RemoteError
from coordinator.sharing.limits import Limits, origin
from coordinator.sharing.objects import Destination, ObjectKind, ObjectRef
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.smart_codec import (
    AUTO,
    Codec,
    Dialect,
    ObjectFile,
    Phase,
    PullRequest,
    Strategy,
    TransferUrl,
    codec,
    first_dialect,
)
from coordinator.sharing.transport_http import TIMEOUT, HttpSource

log = get_logger(__name__)


class SmartSource:
    def __init__(self, location: RemoteLocation, http: HttpSource, dialect: str = AUTO) -> None:
        """``http``: the plain ``http(s)://`` twin of ``location`` (downloads, its trust);
        ``dialect``: ``auto`` (the reference's, or the spec's when the server answers in it),
        ``reference`` or ``spec``."""
        self.location = location
        self.http = http
        self.trust = http.trust
        self.limits = http.limits
        self.dialect = dialect
        self.blocks: dict[Multihash, bytes] = {}
        self.urls: dict[tuple[str, Multihash], TransferUrl] = {}
        self.ws_url = "ws" + http.location.url[4:] + "/pull"

    def read_head(self) -> Multihash | None:
        where = str(self.location)
        speaking = codec(first_dialect(self.dialect))
        try:
            with connect(
                self.ws_url,
                additional_headers={
                    msg.VERSION_HEADER: msg.VERSION,
                    **self.trust.headers(self.ws_url, self.location.url),
                },
                ssl=self.trust.ssl_context(self.ws_url),
                open_timeout=TIMEOUT[0],
                close_timeout=TIMEOUT[0],
                max_size=self.limits.max_message_bytes,
                proxy=None,
            ) as ws:
                self._send(ws, speaking.pull_request(PullRequest()))  # the whole chain
                reply = self._recv(ws, where, speaking, Phase.PULL_REQUEST)
                if self.dialect == AUTO and "sizeEstimation" in reply:
                    speaking = codec(Dialect.SPEC)  # a server that answers only the spec's
                log.info("smart.dialect", remote=where, dialect=speaking.dialect.value)
                body = speaking.answer(reply, Phase.PULL_REQUEST, where)
                speaking.read_pull_response(body, where)
                self._send(ws, {})  # DatasetPullMetadataRequest
                phase = Phase.PULL_METADATA
                body = speaking.answer(self._recv(ws, where, speaking, phase), phase, where)
                self.blocks = speaking.read_metadata(body, phase, where, self.limits)
                if not self.blocks:
                    return None
                files = self._objects()
                if files:
                    self._send(ws, speaking.object_files(files, Phase.PULL_OBJECTS))
                    phase = Phase.PULL_OBJECTS
                    body = speaking.answer(self._recv(ws, where, speaking, phase), phase, where)
                    self._read_urls(
                        speaking.read_strategies(body, Phase.PULL_OBJECTS, where), where
                    )
        except InvalidStatus as e:
            if e.response.status_code == HTTPStatus.NOT_FOUND:
                return None
            body_text = e.response.body.decode("utf-8", "replace").strip()[:300]
            raise RemoteError(f"{self.ws_url}: HTTP {e.response.status_code} {body_text}") from None
        except (OSError, WebSocketException) as e:
            raise remote_error(self.ws_url, e, self.limits) from None
        return msg.batch_head(self.blocks, where)

    def read_block(self, block_hash: Multihash) -> bytes:
        data = self.blocks.get(block_hash)
        if data is None:
            raise RemoteError(f"{self.location}: block {block_hash} is not in the metadata batch")
        return data

    def fetch_object(
        self, ref: ObjectRef, into: Destination, on_bytes: Callable[[int], None]
    ) -> None:
        target = self.urls.get((ref.kind.value, ref.physical_hash))
        if target is None:
            raise RejectedContentError(f"{self.location}: no download URL for {ref.key}")
        headers = transfer_headers(target, self.http.location.url)
        self.http.fetch_url(
            target.url, ref, into, on_bytes, allowed=self._allowed_origin, headers=headers
        )

    def close(self) -> None:
        self.http.close()

    # --- helpers ---------------------------------------------------------------------------

    def _send(self, ws: Any, message: dict[str, Any]) -> None:
        ws.send(msg.encode(message))

    def _recv(self, ws: Any, where: str, speaking: Codec, phase: Phase) -> dict[str, Any]:
        try:
            text = ws.recv(timeout=TIMEOUT[1])
        except ConnectionClosed as e:
            raise closed_refusal(e, speaking, phase, where) from None
        return msg.decode(text, where)

    def _objects(self) -> list[ObjectFile]:
        found: dict[tuple[ObjectKind, Multihash], int] = {}
        for data in self.blocks.values():
            try:
                event = decode_block(data).event
            except (DecodeError, ValueError):
                continue  # the walk refuses it with its name
            if isinstance(event, AddData | ExecuteTransform):
                if event.new_data is not None:
                    found[(ObjectKind.DATA, event.new_data.physical_hash)] = event.new_data.size
                if event.new_checkpoint is not None:
                    c = event.new_checkpoint
                    found[(ObjectKind.CHECKPOINT, c.physical_hash)] = c.size
        return [ObjectFile(kind, h, size) for (kind, h), size in found.items()]

    def _read_urls(self, strategies: list[Strategy], where: str) -> None:
        for s in strategies:
            assert s.target is not None  # a pull's strategies are downloads
            if not self._allowed_origin(s.target.url):
                raise RejectedContentError(self._origin_refusal(where, s.target.url))
            self.urls[(s.file.kind.value, s.file.physical_hash)] = s.target

    def _allowed_origin(self, url: str) -> bool:
        """A download URL on the server's own origin, or on one the user allowed."""
        found = origin(url)
        return found == origin(self.http.location.url) or found in self.limits.download_origins

    def _origin_refusal(self, where: str, url: str) -> str:
        return (
            f"{where}: download URL {url!r} leaves the server's origin"
            f" {origin(self.http.location.url)} (allow it with --allow-origin {origin(url)})"
        )


def closed_refusal(
    closed: ConnectionClosed, speaking: Codec, phase: Phase, where: str
) -> Exception:
    """The server closed instead of answering: its refusal when the close frame carries one
    (the reference's internal errors: code 1011, the ``Err`` as JSON), else the closing."""
    frame = closed.rcvd
    if frame is not None and frame.code == 1011 and frame.reason:
        try:
            speaking.answer(msg.decode(frame.reason, where), phase, where)
        except RejectedContentError as e:
            return e
        return RejectedContentError(f"{where}: the server closed: {frame.reason[:200]!r}")
    return closed


def transfer_headers(target: TransferUrl, server: str) -> dict[str, str]:
    """The headers a server asked to be sent with a transfer; a credential only to the
    server's own origin."""
    same = origin(target.url) == origin(server)
    return {n: v for n, v in target.headers if same or n.lower() != "authorization"}


def remote_error(url: str, error: Exception, limits: Limits) -> RemoteError:
    """A WebSocket failure in one line; a message over the size limit says so."""
    if isinstance(error, ConnectionClosed) and error.sent is not None and error.sent.code == 1009:
        return RemoteError(
            f"{url}: the server sent a message larger than {limits.max_message_bytes} bytes"
            " (refused from its header)"
        )
    return RemoteError(f"{url}: {' '.join(str(error).split())[:300]}")
