"""The server side of the Smart Transfer Protocol's push flow, one session per WebSocket.

For the server a push is a pull whose source is the client: everything it sends is untrusted
and goes through the same checks as a pull (``transfer.plan``: block hashes, links, every
chain rule, the Seed's id, object sizes and limits; ``objects.ObjectSink``: each uploaded
object's size and physical hash as it arrives). In order:

1. ``DatasetPushRequest`` (``smart_push_messages``): the dataset id must be the server's
   dataset's, and ``currentHead`` its head (``null``: the server has no such dataset yet);
   otherwise refused as a conflict, unless forced. Answered ``{}`` (accepted).
2. ``DatasetPushMetadata``: the new blocks as an ``ObjectsBatch``, walked from their head to a
   block the server has and planned (divergence refused unless forced; another dataset's chain
   always). Answered ``{}``.
3. ``DatasetPushObjectsTransferRequest`` (any number): for each object the new blocks name,
   ``SkipUpload`` when the server has it, else ``HttpUpload`` to a URL of this session
   (``upload_url``); ``receive`` takes the uploads into the session's own staging directory,
   outside the dataset.
4. ``DatasetPushComplete``: every announced upload must have arrived; then, holding the
   daemon's lock of the dataset (``hold``), the head is checked to be the one planned from, the
   staged objects are moved in and the blocks appended with a compare-and-swap of the head
   (``dataset.append``); a new dataset is built in a hidden directory and adopted at once.
   Answered ``{}`` (confirmed); the session ends.

Anything out of order, malformed or refused ends the session with a ``DatasetError``; the
server's dataset is then exactly as it was (nothing was written to it) and ``close`` removes
the staging directory.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.logs import get_logger
from common.odf.errors import DecodeError, NotFoundError, OdfError
from common.odf.events import Seed
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import decode_block
from coordinator.dataset import AlreadyExistsError, ConflictError, Dataset, DatasetLayout
from coordinator.dataset.append import ReceivedBlock, append_blocks
from coordinator.dataset.durable import fsync_dir, remove_durably
from coordinator.sharing import smart_messages as msg
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import DivergedError, RejectedContentError, RemoteError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import Destination, ObjectKind, ObjectRef, ObjectSink
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.smart_codec import (
    Codec,
    ObjectFile,
    Phase,
    Refusal,
    Strategy,
    TransferUrl,
    Turn,
    codec,
    detect_push,
    refused,
)
from coordinator.sharing.transfer import Options, Plan, plan
from coordinator.sharing.validation import objects_of
from coordinator.tempdirs import remove_tree
from coordinator.workspace import Workspace

log = get_logger(__name__)

Key = tuple[ObjectKind, Multihash]
CHUNK_BYTES = 1 << 20
UPLOAD_TOUCH_S = 5.0


class PushConflictError(OdfError):
    """The server's dataset is not where the pusher expected it (``args[1:]``: the head the
    pusher expected and the server's, when that is the conflict)."""


class UploadRefusedError(OdfError):
    """An upload that this session did not ask for, or asked for once already."""


@dataclass(frozen=True, slots=True)
class PushContext:
    """What the daemon gives a session."""

    workspace: Workspace
    name: str
    """The dataset's name, from the request path (already parsed)."""
    stage: Path
    """A new private directory for this session, outside the dataset, on its filesystem."""
    upload_url: Callable[[ObjectKind, Multihash], str]
    hold: Callable[[str], AbstractContextManager[Any]]
    """The daemon's lock of a dataset: taken to commit, so a push never races its work."""
    on_commit: Callable[[str], None]
    limits: Limits
    on_upload: Callable[[], None] = lambda: None
    """Told while an upload of this session arrives (the session is not idle then: the
    reference's client says nothing on the WebSocket while it uploads)."""


class BatchSource:
    """The pushed blocks as a ``DatasetSource`` for the planning walk."""

    def __init__(self, location: RemoteLocation, blocks: dict[Multihash, bytes]) -> None:
        self.location = location
        self.blocks = blocks

    def read_head(self) -> Multihash | None:
        return msg.batch_head(self.blocks, str(self.location)) if self.blocks else None

    def read_block(self, block_hash: Multihash) -> bytes:
        data = self.blocks.get(block_hash)
        if data is None:
            raise RejectedContentError(
                f"{self.location}: block {block_hash} is neither pushed nor on the server"
            )
        return data

    def fetch_object(
        self, ref: ObjectRef, into: Destination, on_bytes: Callable[[int], None]
    ) -> None:
        raise RemoteError(f"{self.location}: objects are uploaded, not fetched")

    def close(self) -> None:
        pass


class PushSession:
    def __init__(self, ctx: PushContext) -> None:
        self.ctx = ctx
        self.where = f"push of {ctx.name}"
        self.step = "request"
        self.request: push_msg.PushRequest | None = None
        self.target: Dataset | None = None
        self.old_head: Multihash | None = None
        self.plan: Plan | None = None
        self.named: dict[Key, ObjectRef] = {}
        self.in_batch: dict[Key, ObjectRef] = {}
        """Objects named by any block of the batch, also those before the blocks the server
        lacks (the reference's forced push sends the whole chain and asks about all of its
        objects): answered ``SkipUpload``."""
        self.wanted: dict[Key, ObjectRef] = {}
        self.announced: set[Key] = set()
        self.receiving: set[Key] = set()
        self.staged: set[Key] = set()
        self.lock = threading.Lock()
        self.objects = DatasetLayout(ctx.stage / "objects")
        self.pending = ctx.stage / "pending"
        self.pending.mkdir(parents=True)
        self.codec: Codec | None = None

    # --- the conversation -----------------------------------------------------------------

    def handle(self, text: str | bytes) -> Turn:
        """The answer to one client message (the session is over after a refusal or the
        commit)."""
        phase = Phase.PUSH_REQUEST
        try:
            message = msg.decode(text, self.where)
            if self.codec is None:
                self.codec = codec(detect_push(message))
            speaking = self.codec
            with self.lock:
                step = self.step
            if step == "request":
                reply = self._request(speaking, message)
                self._to("metadata")
                return Turn(speaking.reply(phase, reply))
            phase = Phase.PUSH_METADATA
            if step == "metadata":
                reply = self._metadata(speaking, message)
                self._to("objects")
                return Turn(speaking.reply(phase, reply))
            phase = Phase.PUSH_OBJECTS
            if step != "objects":
                raise RejectedContentError(f"{self.where}: unexpected message in step {step}")
            move = speaking.read_push_step(message, self.where, len(self.in_batch))
            if move.objects is not None:
                return Turn(speaking.reply(phase, self._transfers(speaking, move.objects)))
            if move.progress or move.uploads_done:
                phase = Phase.PUSH_PROGRESS
                return Turn(None)
            phase = Phase.PUSH_COMPLETE
            self._to("committing")
            self._complete()
            self._to("done")
            return Turn(speaking.reply(phase, {}), True)
        except (OdfError, ValueError, KeyError, TypeError) as e:
            self._to("failed")
            log.info("push.refused", dataset=self.ctx.name, error=str(e))
            description = " ".join(str(e).split())[:1000]
            if isinstance(e, PushConflictError) and len(e.args) == 3:
                expected, actual = e.args[1:]
                details = {"actual_head": _text(expected), "expected_head": _text(actual)}
                refusal = Refusal(phase, "InvalidHead", description, details)
            else:
                code = "Conflict" if isinstance(e, PushConflictError) else "BadRequest"
                refusal = Refusal(phase, code, description)
            return refused(self.codec, refusal)

    def _to(self, step: str) -> None:
        with self.lock:
            self.step = step

    def _request(self, speaking: Codec, message: dict[str, Any]) -> dict[str, Any]:
        request = speaking.read_push_request(message, self.where, self.ctx.limits)
        self.request = request
        try:
            self.target = self.ctx.workspace.open_dataset(self.ctx.name)
        except NotFoundError:
            self.target = None
        if self.target is None:
            if request.current_head is not None and not request.force:
                raise PushConflictError(
                    f"{self.where}: there is no dataset {self.ctx.name!r} on the server, the"
                    f" push expected its head to be {request.current_head}",
                    request.current_head,
                    None,
                )
            return {}
        if request.dataset_id is not None and self.target.id != request.dataset_id:
            raise PushConflictError(
                f"{self.where}: dataset {self.target.alias!r} on the server is"
                f" {self.target.id.to_did()}, not {request.dataset_id.to_did()}"
            )
        self.old_head = self.target.head()
        if request.current_head != self.old_head and not request.force:
            raise PushConflictError(
                _moved(self.where, request.current_head, self.old_head),
                request.current_head,
                self.old_head,
            )
        return {}

    def _metadata(self, speaking: Codec, message: dict[str, Any]) -> dict[str, Any]:
        assert self.request is not None
        phase = Phase.PUSH_METADATA
        blocks = speaking.read_metadata(message, phase, self.where, self.ctx.limits)
        if not blocks:
            raise RejectedContentError(f"{self.where}: no blocks pushed")
        source = BatchSource(RemoteLocation(self.where), blocks)
        receiver = self.target or Dataset(self.ctx.stage / "empty", alias=self.ctx.name)
        options = Options(limits=self.ctx.limits, force=self.request.force)
        try:
            planned = plan(receiver, source, self.where, options)
        except DivergedError as e:
            raise PushConflictError(
                f"{self.where}: the chains have diverged: the server's head {e.local}, the"
                f" pushed head {e.remote}, last common block {e.common}: push --force to"
                " overwrite"
            ) from None
        if not isinstance(planned, Plan) or not planned.new_blocks:
            raise RejectedContentError(
                f"{self.where}: nothing to push, the server has every pushed block"
            )
        if planned.old_head != self.old_head:
            raise PushConflictError(_moved(self.where, self.old_head, planned.old_head))
        if planned.old_head is None:
            seed = planned.new_blocks[0].block.event
            assert isinstance(seed, Seed)  # the chain rules: the Seed comes first
            wanted = self.request.dataset_id
            if wanted is not None and seed.dataset_id != wanted:
                raise RejectedContentError(
                    f"{self.where}: the pushed Seed is {seed.dataset_id.to_did()}, the request"
                    f" says {wanted.to_did()}"
                )
        self.plan = planned
        kept = self._kept_objects(planned)
        self.named = {(o.kind, o.physical_hash): o for o in planned.objects}
        self.wanted = {k: o for k, o in self.named.items() if not kept(o)}
        self.in_batch = {**_objects_named(blocks), **self.named}
        return {}

    def _kept_objects(self, planned: Plan) -> Callable[[ObjectRef], bool]:
        """Whether the server keeps an object after the commit (no need to upload it)."""
        target = self.target
        if target is None:
            return lambda _: False
        if planned.reset_to is None:
            return lambda o: o.path_in(target.layout).is_file()
        named = set()
        for _, block in target.iter_blocks(planned.reset_to):
            event = block.event
            for slot in ("new_data", "new_checkpoint"):
                ref = getattr(event, slot, None)
                if ref is not None:
                    named.add(ref.physical_hash)
        return lambda o: o.physical_hash in named and o.path_in(target.layout).is_file()

    def _transfers(self, speaking: Codec, files: list[ObjectFile]) -> dict[str, Any]:
        strategies = []
        for f in files:
            key = (f.kind, f.physical_hash)
            if key not in self.in_batch:
                raise RejectedContentError(
                    f"{self.where}: {key[0].value}/{key[1]} is not named by the pushed blocks"
                )
            file = ObjectFile(f.kind, f.physical_hash, self.in_batch[key].size)
            if key in self.wanted:
                with self.lock:
                    self.announced.add(key)
                target = TransferUrl(self.ctx.upload_url(*key))
                strategies.append(Strategy(file, target))
            else:
                strategies.append(Strategy(file, None))
        return speaking.strategies(strategies, Phase.PUSH_OBJECTS)

    # --- uploads (other threads) ------------------------------------------------------------

    def receive(
        self, kind: ObjectKind, physical_hash: Multihash, length: int, read: Callable[[int], bytes]
    ) -> None:
        """One object's bytes (``length`` of them from ``read``), checked as they arrive and
        staged; ``UploadRefusedError`` for an object this session did not ask for."""
        key = (kind, physical_hash)
        where = f"{self.where}: {kind.value}/{physical_hash}"
        with self.lock:
            if self.step != "objects" or key not in self.announced:
                raise UploadRefusedError(f"{where}: not asked for by this session")
            if key in self.staged or key in self.receiving:
                raise UploadRefusedError(f"{where}: uploaded already")
            self.receiving.add(key)
        try:
            ref = self.wanted[key]
            if length != ref.size:
                raise RejectedContentError(
                    f"{where}: {length} bytes sent, its block {ref.block} names {ref.size}"
                )
            told = time.monotonic()
            self.ctx.on_upload()
            with ObjectSink(ref, Destination(self.objects, self.pending), self.where) as sink:
                remaining = length
                while remaining:
                    if time.monotonic() - told > UPLOAD_TOUCH_S:
                        told = time.monotonic()
                        self.ctx.on_upload()
                    chunk = read(min(CHUNK_BYTES, remaining))
                    if not chunk:
                        raise RejectedContentError(f"{where}: the upload ended early")
                    sink.write(chunk)
                    remaining -= len(chunk)
            with self.lock:
                self.staged.add(key)
        finally:
            with self.lock:
                self.receiving.discard(key)

    # --- the commit ---------------------------------------------------------------------------

    def _complete(self) -> dict[str, Any]:
        assert self.plan is not None
        with self.lock:
            missing = [k for k in self.wanted if k not in self.staged]
        if missing:
            names = ", ".join(f"{k.value}/{h}" for k, h in missing[:3])
            raise RejectedContentError(
                f"{self.where}: {len(missing)} objects were not uploaded ({names})"
            )
        with self.ctx.hold(self.ctx.name):
            if self.target is not None:
                self._commit_existing(self.target, self.plan)
            else:
                self._commit_new(self.plan)
        self.ctx.on_commit(self.ctx.name)
        log.info("push.committed", dataset=self.ctx.name, head=str(self.plan.remote_head))
        return {}

    def _commit_existing(self, target: Dataset, planned: Plan) -> None:
        head = target.head()
        if head != planned.old_head:
            raise PushConflictError(_moved(self.where, planned.old_head, head))
        if planned.reset_to is not None:
            log.info("push.replace", dataset=self.ctx.name, after=str(planned.reset_to))
        moved = self._move_objects(target.layout)
        try:
            append_blocks(
                target,
                planned.new_blocks,
                expected_head=planned.old_head,
                replacing_after=planned.reset_to,
            )
        except ConflictError as e:
            remove_durably(moved)
            raise PushConflictError(f"{self.where}: {e}") from None
        except BaseException:
            if target.head() != planned.remote_head:  # not past the commit point
                remove_durably(moved)
            raise

    def _commit_new(self, planned: Plan) -> None:
        workspace = self.ctx.workspace
        with workspace.preparing_dataset() as prepared:
            dataset = Dataset(prepared, alias=self.ctx.name)
            self._move_objects(dataset.layout)
            append_blocks(dataset, planned.new_blocks, expected_head=None)
            try:
                workspace.adopt_dataset(prepared, self.ctx.name)
            except AlreadyExistsError as e:
                raise PushConflictError(f"{self.where}: {e}") from None

    def _move_objects(self, layout: DatasetLayout) -> list[Path]:
        """The staged objects into ``layout`` (those it lacks); returns the files moved."""
        moved = []
        try:
            for key in self.staged:
                ref = self.wanted[key]
                final = ref.path_in(layout)
                if final.exists():
                    continue
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(ref.path_in(self.objects), final)
                moved.append(final)
        except BaseException:
            remove_durably(moved)
            raise
        for directory in {p.parent for p in moved}:
            fsync_dir(directory)
        return moved

    def close(self) -> None:
        """The session ended: its staging directory goes (a committed push moved its objects
        out of it already)."""
        with self.lock:
            if self.step != "done":
                self.step = "failed"
        remove_tree(self.ctx.stage)


def _objects_named(blocks: dict[Multihash, bytes]) -> dict[Key, ObjectRef]:
    """The objects the blocks of a batch name (blocks that do not decode name none: the plan
    refused any it needed)."""
    found = {}
    for name, data in blocks.items():
        try:
            received = ReceivedBlock(name, data, decode_block(data))
        except (DecodeError, ValueError):
            continue
        found.update({(o.kind, o.physical_hash): o for o in objects_of(received)})
    return found


def _text(h: Multihash | None) -> str | None:
    return None if h is None else str(h)


def _moved(where: str, expected: Multihash | None, actual: Multihash | None) -> str:
    return (
        f"{where}: the server's head is {actual or '(none)'}, the push expected"
        f" {expected or '(none)'} (it moved since the client read it): pull first, or push"
        " --force"
    )
