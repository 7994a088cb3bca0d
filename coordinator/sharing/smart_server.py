"""The server side of the Smart Transfer Protocol's pull flow, one session per WebSocket, in
either dialect (``smart_codec``: the session's first message says which).

The pull request (``beginAfter``/``stopAt``: the range, default the whole chain to the head)
is answered with a size estimation; then the metadata request with the blocks of the range as
one batch; then any number of objects-transfer requests with, for each data file and
checkpoint, a download URL of the server itself (the Simple Transfer Protocol paths,
``sharing.serving``). Anything out of order or unknown ends the session with a refusal.
"""

from __future__ import annotations

from collections.abc import Callable

from common.odf.errors import OdfError
from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.sharing import smart_codec as sc
from coordinator.sharing import smart_messages as msg
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_codec import Codec, Phase, Turn
from coordinator.sharing.smart_push_messages import SizeEstimation

ObjectUrl = Callable[[str, Multihash], str]
"""``(kind, physical hash) -> URL``, ``kind`` being ``data`` or ``checkpoints``."""

WHERE = "message"


class IntervalError(OdfError):
    """``beginAfter`` is not in the chain below the head (the client's chain diverged)."""


class PullSession:
    def __init__(
        self,
        dataset: Dataset,
        object_url: ObjectUrl,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """``headers``: what the download URLs ask to be sent with them (the reference's)."""
        self.dataset = dataset
        self.object_url = object_url
        self.headers = headers
        self.codec: Codec | None = None
        self.blocks: list[tuple[Multihash, bytes]] | None = None
        self.sizes: dict[tuple[ObjectKind, Multihash], int] = {}
        self.sent_metadata = False

    def handle(self, text: str | bytes) -> Turn:
        """The answer to one client message."""
        phase = Phase.PULL_REQUEST
        try:
            message = msg.decode(text, WHERE)
            if self.codec is None:
                self.codec = sc.codec(sc.detect_pull(message))
            if self.blocks is None:
                reply = self._request(self.codec, message)
            elif not self.sent_metadata:
                phase = Phase.PULL_METADATA
                self.sent_metadata = True
                reply = self.codec.metadata(self.blocks, phase)
            else:
                phase = Phase.PULL_OBJECTS
                reply = self._transfers(self.codec, message)
            return Turn(self.codec.reply(phase, reply))
        except IntervalError as e:
            head, tail = e.args[1:]
            details = {"head": str(head), "tail": str(tail)}
            return sc.refused(self.codec, sc.Refusal(phase, "InvalidInterval", e.args[0], details))
        except (OdfError, ValueError, KeyError, TypeError) as e:
            text = " ".join(str(e).split())[:500]
            return sc.refused(self.codec, sc.Refusal(phase, "BadRequest", text))

    def _request(self, speaking: Codec, message: dict[str, object]) -> dict[str, object]:
        request = speaking.read_pull_request(message, WHERE)
        wanted = request.dataset_id
        if wanted is not None and wanted != self.dataset.id.to_did():
            raise ValueError(f"datasetId {wanted} is not this dataset ({self.dataset.id.to_did()})")
        blocks = []
        start = request.stop_at if request.stop_at is not None else self.dataset.head()
        for h, _ in self.dataset.iter_blocks(start):
            if h == request.begin_after:
                break
            blocks.append((h, self.dataset.get_block_bytes(h)))
        else:
            if request.begin_after is not None and not request.force:
                raise IntervalError(
                    f"beginAfter {request.begin_after} is not in the chain before {start}",
                    start,
                    request.begin_after,
                )
        blocks.reverse()
        self.blocks = blocks
        records = 0
        for h, _ in blocks:
            event = self.dataset.get_block(h).event
            if isinstance(event, AddData | ExecuteTransform):
                if event.new_data is not None:
                    self.sizes[(ObjectKind.DATA, event.new_data.physical_hash)] = (
                        event.new_data.size
                    )
                    interval = event.new_data.offset_interval
                    records += interval.end - interval.start + 1
                if event.new_checkpoint is not None:
                    c = event.new_checkpoint
                    self.sizes[(ObjectKind.CHECKPOINT, c.physical_hash)] = c.size
        size = SizeEstimation(
            len(blocks),
            len(self.sizes),
            sum(len(b) for _, b in blocks),
            sum(self.sizes.values()),
            records,
        )
        return speaking.pull_response(size)

    def _transfers(self, speaking: Codec, message: dict[str, object]) -> dict[str, object]:
        files = speaking.read_object_files(message, WHERE, max(len(self.sizes), 1))
        strategies = []
        for f in files:
            size = self.sizes.get((f.kind, f.physical_hash), f.size)
            url = sc.TransferUrl(self.object_url(f.kind.value, f.physical_hash), self.headers)
            strategies.append(sc.Strategy(sc.ObjectFile(f.kind, f.physical_hash, size), url))
        return speaking.strategies(strategies, Phase.PULL_OBJECTS)
