"""``odf+http(s)://``: the Smart Transfer Protocol's pull flow as a ``DatasetSource``.

``read_head`` runs the WebSocket conversation once: the pull request (the whole chain), the
metadata batch (blocks by name, kept in memory; their hashes are checked by the walk like any
other source's), and one objects-transfer request for every data file and checkpoint the
blocks name, which yields their download URLs. The head is the batch's block that no other
block links to. ``fetch_object`` then downloads from those URLs over plain HTTP(S), in
parallel, through the same size- and hash-checking sink as every transport.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import connect

from common.odf.errors import DecodeError
from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import decode_block
from coordinator.sharing import smart_messages as msg
from coordinator.sharing.errors import RejectedContentError, RemoteError
from coordinator.sharing.limits import Limits, origin
from coordinator.sharing.objects import Destination, ObjectRef
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.transport_http import TIMEOUT, HttpSource

_TYPES = {"data": "DataSlice", "checkpoints": "Checkpoint"}


class SmartSource:
    def __init__(self, location: RemoteLocation, http: HttpSource) -> None:
        """``http``: the plain ``http(s)://`` twin of ``location`` (downloads, its trust)."""
        self.location = location
        self.http = http
        self.trust = http.trust
        self.limits = http.limits
        self.blocks: dict[Multihash, bytes] = {}
        self.urls: dict[tuple[str, Multihash], str] = {}
        self.ws_url = "ws" + http.location.url[4:] + "/pull"

    def read_head(self) -> Multihash | None:
        where = str(self.location)
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
                self._send(ws, {})  # DatasetPullRequest: the whole chain to the head
                estimation = self._recv(ws, where)
                if "sizeEstimation" not in estimation:
                    raise RejectedContentError(f"{where}: expected a DatasetPullResponse")
                self._send(ws, {})  # DatasetPullMetadataRequest
                batch = self._recv(ws, where).get("blocks")
                self.blocks = msg.read_blocks_batch(batch, where, self.limits)
                if not self.blocks:
                    return None
                objects = self._objects(where)
                if objects:
                    self._send(ws, {"objectFiles": objects})
                    self._read_urls(self._recv(ws, where), where)
        except InvalidStatus as e:
            if e.response.status_code == HTTPStatus.NOT_FOUND:
                return None
            body = e.response.body.decode("utf-8", "replace").strip()[:300]
            raise RemoteError(f"{self.ws_url}: HTTP {e.response.status_code} {body}") from None
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
        url = self.urls.get((ref.kind.value, ref.physical_hash))
        if url is None:
            raise RejectedContentError(f"{self.location}: no download URL for {ref.key}")
        self.http.fetch_url(url, ref, into, on_bytes, allowed=self._allowed_origin)

    def close(self) -> None:
        self.http.close()

    # --- helpers ---------------------------------------------------------------------------

    def _send(self, ws: Any, message: dict[str, Any]) -> None:
        ws.send(msg.encode(message))

    def _recv(self, ws: Any, where: str) -> dict[str, Any]:
        return msg.decode(ws.recv(timeout=TIMEOUT[1]), where)

    def _objects(self, where: str) -> list[dict[str, str]]:
        found = []
        for name, data in self.blocks.items():
            try:
                event = decode_block(data).event
            except (DecodeError, ValueError):
                continue  # the walk refuses it with its name
            if isinstance(event, AddData | ExecuteTransform):
                if event.new_data is not None:
                    found.append(("data", event.new_data.physical_hash))
                if event.new_checkpoint is not None:
                    found.append(("checkpoints", event.new_checkpoint.physical_hash))
            del name
        return [
            {"objectType": _TYPES[kind], "physicalHash": h.to_multibase()}
            for kind, h in dict.fromkeys(found)
        ]

    def _read_urls(self, reply: dict[str, Any], where: str) -> None:
        strategies = reply.get("objectTransferStrategies")
        if not isinstance(strategies, list):
            raise RejectedContentError(f"{where}: expected a DatasetPullObjectsTransferResponse")
        kinds = {v: k for k, v in _TYPES.items()}
        for s in strategies:
            try:
                f = s["objectFile"]
                kind = kinds[f["objectType"]]
                h = Multihash.from_multibase(f["physicalHash"])
                url = s["downloadFrom"]["url"]
            except (KeyError, TypeError, DecodeError, ValueError):
                raise RejectedContentError(f"{where}: a malformed transfer strategy") from None
            if s.get("pullStrategy") != "HttpDownload" or not isinstance(url, str):
                raise RejectedContentError(f"{where}: unsupported transfer strategy")
            if urlsplit(url).scheme not in ("http", "https"):
                raise RejectedContentError(f"{where}: download URL {url!r} is not http(s)")
            if not self._allowed_origin(url):
                raise RejectedContentError(self._origin_refusal(where, url))
            self.urls[(kind, h)] = url

    def _allowed_origin(self, url: str) -> bool:
        """A download URL on the server's own origin, or on one the user allowed."""
        found = origin(url)
        return found == origin(self.http.location.url) or found in self.limits.download_origins

    def _origin_refusal(self, where: str, url: str) -> str:
        return (
            f"{where}: download URL {url!r} leaves the server's origin"
            f" {origin(self.http.location.url)} (allow it with --allow-origin {origin(url)})"
        )


def remote_error(url: str, error: Exception, limits: Limits) -> RemoteError:
    """A WebSocket failure in one line; a message over the size limit says so."""
    if isinstance(error, ConnectionClosed) and error.sent is not None and error.sent.code == 1009:
        return RemoteError(
            f"{url}: the server sent a message larger than {limits.max_message_bytes} bytes"
            " (refused from its header)"
        )
    return RemoteError(f"{url}: {' '.join(str(error).split())[:300]}")
