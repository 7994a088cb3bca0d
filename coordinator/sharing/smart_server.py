"""The server side of the Smart Transfer Protocol's pull flow, one session per WebSocket.

``DatasetPullRequest`` (``beginAfter``/``stopAt``: the range, default the whole chain to the
head) is answered with ``DatasetPullResponse`` (a size estimation); then
``DatasetPullMetadataRequest`` with the blocks of the range as one ``ObjectsBatch``; then any
number of ``DatasetPullObjectsTransferRequest`` with, for each data file and checkpoint, an
``HttpDownload`` URL of the server itself (the Simple Transfer Protocol paths,
``sharing.serving``). Anything out of order or unknown ends the session with a
``DatasetError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.odf.errors import DecodeError, OdfError
from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.sharing import smart_messages as msg

ObjectUrl = Callable[[str, Multihash], str]
"""``(kind, physical hash) -> URL``, ``kind`` being ``data`` or ``checkpoints``."""

_KINDS = {"DataSlice": "data", "Checkpoint": "checkpoints"}


class PullSession:
    def __init__(self, dataset: Dataset, object_url: ObjectUrl) -> None:
        self.dataset = dataset
        self.object_url = object_url
        self.blocks: list[tuple[Multihash, bytes]] | None = None
        self.sent_metadata = False

    def handle(self, text: str | bytes) -> tuple[dict[str, Any], bool]:
        """The reply to one client message, and whether the session is over."""
        try:
            message = msg.decode(text, "message")
            if self.blocks is None:
                return self._request(message), False
            if not self.sent_metadata:
                self.sent_metadata = True
                return {"blocks": msg.blocks_batch(self.blocks)}, False
            return self._transfers(message), False
        except (OdfError, ValueError, KeyError, TypeError) as e:
            return msg.error("BadRequest", " ".join(str(e).split())[:500]), True

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        begin_after = _hash(message.get("beginAfter"), "beginAfter")
        stop_at = _hash(message.get("stopAt"), "stopAt")
        wanted = message.get("datasetId")
        if wanted is not None and wanted != self.dataset.id.to_did():
            raise ValueError(f"datasetId {wanted} is not this dataset ({self.dataset.id.to_did()})")
        blocks = []
        start = stop_at if stop_at is not None else self.dataset.head()
        for h, _ in self.dataset.iter_blocks(start):
            if h == begin_after:
                break
            blocks.append((h, self.dataset.get_block_bytes(h)))
        else:
            if begin_after is not None:
                raise ValueError(f"beginAfter {begin_after} is not in the chain before {start}")
        blocks.reverse()
        self.blocks = blocks
        objects = [o for h, _ in blocks for o in _objects(self.dataset, h)]
        return {
            "sizeEstimation": {
                "numBlocks": len(blocks),
                "numObjects": len(objects),
                "bytesInRawBlocks": sum(len(b) for _, b in blocks),
                "bytesInRawObjects": sum(size for _, _, size in objects),
            }
        }

    def _transfers(self, message: dict[str, Any]) -> dict[str, Any]:
        files = message["objectFiles"]
        if not isinstance(files, list):
            raise ValueError("objectFiles is not a list")
        strategies = []
        for f in files:
            kind = _KINDS.get(f["objectType"])
            if kind is None:
                raise ValueError(f"objectType {f['objectType']!r} cannot be downloaded")
            h = _hash(f["physicalHash"], "physicalHash")
            assert h is not None
            strategies.append(
                {
                    "objectFile": {"objectType": f["objectType"], "physicalHash": str(h)},
                    "pullStrategy": "HttpDownload",
                    "downloadFrom": {"url": self.object_url(kind, h)},
                }
            )
        return {"objectTransferStrategies": strategies}


def _hash(value: object, field: str) -> Multihash | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} is not a multihash")
    try:
        return Multihash.from_multibase(value)
    except DecodeError:
        raise ValueError(f"{field} {value!r} is not a multihash") from None


def _objects(dataset: Dataset, h: Multihash) -> list[tuple[str, Multihash, int]]:
    event = dataset.get_block(h).event
    found = []
    if isinstance(event, AddData | ExecuteTransform):
        if event.new_data is not None:
            found.append(("data", event.new_data.physical_hash, event.new_data.size))
        if event.new_checkpoint is not None:
            c = event.new_checkpoint
            found.append(("checkpoints", c.physical_hash, c.size))
    return found
