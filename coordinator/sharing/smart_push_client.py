"""``odf push NAME --to odf+http(s)://HOST:PORT/NAME``: the client side of the Smart Transfer
Protocol's push flow, authenticated with the server's token.

1. Read the server's head (``GET refs/head``, the Simple Transfer Protocol's, unauthenticated)
   and decide what to send, as a push to ``file://`` does: the local blocks after the server's
   head; when that head is not in the local chain, the server's chain is walked back (its
   blocks checked like any pulled block) to the last common block: the server is ahead
   (refused: pull first), or the chains diverged (refused naming both heads and that block,
   unless ``--force``: then the blocks after it), or it is another dataset (refused).
2. Over the WebSocket ``/NAME/push`` (``Authorization: Bearer TOKEN``): ``DatasetPushRequest``
   with the server's head read in 1 as ``currentHead`` (the server refuses the push if its head
   moved since: the compare-and-swap), the new blocks as an ``ObjectsBatch``, one
   ``DatasetPushObjectsTransferRequest`` for every object they name; the objects the server
   answers ``HttpUpload`` for (those it lacks) are uploaded in parallel (``PUT``, streamed from
   the local file with its size), then ``DatasetPushComplete``; the server's confirmation
   means its head moved.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from http import HTTPStatus
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import connect

from common.logs import get_logger
from common.odf.errors import OdfError
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.dataset.append import ReceivedBlock
from coordinator.sharing import smart_messages as msg
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import DivergedError, RejectedContentError, RemoteError
from coordinator.sharing.objects import ObjectKind, ObjectRef
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.smart_codec import (
    AUTO,
    Codec,
    Dialect,
    ObjectFile,
    Phase,
    TransferUrl,
    codec,
    first_dialect,
)
from coordinator.sharing.smart_push_messages import TOKEN_HINT
from coordinator.sharing.transfer import Options, Outcome, SyncResult, walk
from coordinator.sharing.transport_http import TIMEOUT, HttpSource
from coordinator.sharing.transport_smart import closed_refusal, remote_error, transfer_headers
from coordinator.sharing.trust import Trust
from coordinator.sharing.validation import objects_of

log = get_logger(__name__)
Key = tuple[ObjectKind, Multihash]
COMMIT_TIMEOUT_S = 3600.0
"""How long the server may take to confirm the commit (it waits for its own work on the
dataset to finish first)."""


def push_smart(
    dataset: Dataset, location: RemoteLocation, token: str, options: Options
) -> SyncResult:
    """Push ``dataset`` to the smart server at ``location``; see the module docstring."""
    trust = options.trust.for_url(location.url)
    plain = location.url.split("+", 1)[1]  # http(s)://host:port/NAME
    http = HttpSource(
        RemoteLocation(plain), options.limits, connections=options.parallel, trust=trust
    )
    try:
        server_head = http.read_head()
        local_head = dataset.head()
        if server_head == local_head:
            return SyncResult(Outcome.UP_TO_DATE, server_head, local_head)
        blocks = _blocks_to_push(dataset, http, server_head, str(location), options)
    finally:
        http.close()
    objects = {(o.kind, o.physical_hash): o for b in blocks for o in objects_of(b)}
    request = push_msg.PushRequest(
        dataset.id,
        server_head,
        push_msg.SizeEstimation(
            len(blocks),
            len(objects),
            sum(len(b.data) for b in blocks),
            sum(o.size for o in objects.values()),
            sum(_records(b) for b in blocks),
        ),
        options.force,
    )
    session = _Session(dataset, location, trust, token, options, blocks, objects)
    try:
        uploaded = session.run(request, first_dialect(options.dialect))
    except SpecAnswerError:
        if options.dialect != AUTO:
            raise
        uploaded = session.run(request, Dialect.SPEC)  # a server that speaks only the spec's
    return SyncResult(
        Outcome.UPDATED,
        server_head,
        local_head,
        blocks=len(blocks),
        objects=len(uploaded),
        bytes=sum(o.size for o in uploaded),
    )


class _Session:
    """One push over the WebSocket, in one dialect."""

    def __init__(
        self,
        dataset: Dataset,
        location: RemoteLocation,
        trust: Trust,
        token: str,
        options: Options,
        blocks: list[ReceivedBlock],
        objects: dict[Key, ObjectRef],
    ) -> None:
        self.dataset = dataset
        self.where = str(location)
        self.plain = location.url.split("+", 1)[1]
        self.ws_url = ("ws" + self.plain[4:]) + "/push"
        self.trust = trust
        self.token = token
        self.options = options
        self.blocks = blocks
        self.objects = objects

    def run(self, request: push_msg.PushRequest, dialect: Dialect) -> list[ObjectRef]:
        """The objects uploaded; ``SpecAnswerError`` when the reference's request was answered
        in the spec's dialect."""
        speaking = codec(dialect)
        log.info("smart.dialect", remote=self.where, dialect=dialect.value)
        where, ws_url, options = self.where, self.ws_url, self.options
        uploaded: list[ObjectRef] = []
        try:
            with connect(
                ws_url,
                additional_headers={
                    msg.VERSION_HEADER: msg.VERSION,
                    "Authorization": f"Bearer {self.token}",
                },
                ssl=self.trust.ssl_context(ws_url),
                open_timeout=TIMEOUT[0],
                max_size=options.limits.max_message_bytes,
                proxy=None,
                # pings keep the server's idle timeout away while the uploads run; their
                # pongs wait while the server plans or commits, which may take longer than a
                # ping's timeout: the replies' own timeouts bound the wait instead
                ping_timeout=None,
            ) as ws:
                talk = _Conversation(ws, where, speaking)
                try:
                    talk.ask(speaking.push_request(request), Phase.PUSH_REQUEST)
                except RejectedContentError as e:
                    if dialect is Dialect.REFERENCE and isinstance(e, msg.SpecRefusalError):
                        raise SpecAnswerError(str(e)) from None
                    raise
                batch = [(b.name, b.data) for b in self.blocks]
                talk.ask(speaking.metadata(batch, Phase.PUSH_METADATA), Phase.PUSH_METADATA)
                if self.objects or speaking.uploads_done() is not None:
                    files = [ObjectFile(k, h, o.size) for (k, h), o in self.objects.items()]
                    reply = talk.ask(
                        speaking.object_files(files, Phase.PUSH_OBJECTS), Phase.PUSH_OBJECTS
                    )
                    targets = _upload_targets(speaking, reply, set(self.objects), where)
                    uploaded = [self.objects[k] for k in targets]
                    _upload_all(self.dataset, uploaded, targets, options, self.plain, talk.keep_up)
                    done = speaking.uploads_done()
                    if done is not None:
                        talk.keep_up(len(uploaded))
                        ws.send(msg.encode(done))
                # DatasetPushComplete -> DatasetPushCompleteConfirmed: the server commits once
                # the daemon's work on the dataset (a transform, an ingest) is done
                talk.ask({}, Phase.PUSH_COMPLETE, timeout=COMMIT_TIMEOUT_S)
        except InvalidStatus as e:
            status = e.response.status_code
            body = e.response.body.decode("utf-8", "replace").strip()[:300]
            if status == HTTPStatus.UNAUTHORIZED:
                raise RemoteError(
                    f"{where}: the server refused the token (HTTP 401): {TOKEN_HINT}"
                ) from None
            raise RemoteError(f"{ws_url}: HTTP {status} {body}") from None
        except (OSError, WebSocketException) as e:
            raise remote_error(ws_url, e, options.limits) from None
        return uploaded


def _blocks_to_push(
    dataset: Dataset,
    server: HttpSource,
    server_head: Multihash | None,
    where: str,
    options: Options,
) -> list[ReceivedBlock]:
    """The local blocks the server lacks, oldest first (see the module docstring)."""
    local = [h for h, _ in dataset.iter_blocks()]
    base = server_head
    if server_head is not None and server_head not in set(local):
        _, meet = walk(server, server_head, set(local), where, options.limits.max_new_blocks)
        if meet is None:
            raise RejectedContentError(
                f"{where}: its head {server_head} is the head of another dataset's chain (no"
                f" block in common with {dataset.alias!r})"
            )
        if meet == local[0]:
            raise OdfError(
                f"{where}: its head {server_head} is ahead of dataset {dataset.alias!r} (head"
                f" {local[0]}): pull first (a forced push cannot drop the server's blocks over"
                " the smart protocol)"
            )
        if not options.force:
            raise DivergedError(where, local=local[0], remote=server_head, common=meet)
        base = meet
    new = []
    for h in local:
        if h == base:
            break
        new.append(h)
    new.reverse()
    return [ReceivedBlock(h, dataset.get_block_bytes(h), dataset.get_block(h)) for h in new]


class SpecAnswerError(RejectedContentError):
    """The server answered the reference's push request in the spec's dialect."""


class _Conversation:
    def __init__(self, ws: Any, where: str, speaking: Codec) -> None:
        self.ws = ws
        self.where = where
        self.speaking = speaking

    def ask(
        self, message: dict[str, Any], phase: Phase, timeout: float = TIMEOUT[1]
    ) -> dict[str, Any]:
        """Send one message; the server's answer (its refusal raised)."""
        self.ws.send(msg.encode(message))
        try:
            text = self.ws.recv(timeout=timeout)
        except ConnectionClosed as e:
            raise closed_refusal(e, self.speaking, phase, self.where) from None
        return self.speaking.answer(msg.decode(text, self.where), phase, self.where)

    def keep_up(self, uploaded: int) -> None:
        """While uploads run: answer the server's progress requests (the reference's; any
        other message is a refusal, raised)."""
        while True:
            try:
                text = self.ws.recv(timeout=0)
            except TimeoutError:
                return
            message = msg.decode(text, self.where)
            report = self.speaking.progress_report(uploaded)
            if message or report is None:
                self.speaking.answer(message, Phase.PUSH_OBJECTS, self.where)
                raise RejectedContentError(f"{self.where}: unexpected message during uploads")
            self.ws.send(msg.encode(report))


def _records(block: ReceivedBlock) -> int:
    event = block.block.event
    data = getattr(event, "new_data", None)
    if data is None:
        return 0
    return int(data.offset_interval.end - data.offset_interval.start + 1)


def _upload_targets(
    speaking: Codec, reply: dict[str, Any], asked: set[Key], where: str
) -> dict[Key, TransferUrl]:
    """The objects to upload and where, from the objects transfer answer."""
    strategies = speaking.read_strategies(reply, Phase.PUSH_OBJECTS, where)
    if len(strategies) != len(asked):
        raise RejectedContentError(f"{where}: expected a strategy for each object asked for")
    targets: dict[Key, TransferUrl] = {}
    answered = set()
    for s in strategies:
        key = (s.file.kind, s.file.physical_hash)
        if key not in asked or key in answered:
            raise RejectedContentError(f"{where}: a transfer strategy for an object not asked for")
        answered.add(key)
        if s.target is not None:
            targets[key] = s.target
    return targets


class _Reading:
    """A local object file read for an upload, counting the bytes sent."""

    def __init__(self, path: str, size: int, on_bytes: Callable[[int], None]) -> None:
        self.file = open(path, "rb")  # noqa: SIM115 (closed by _upload)
        self.size = size
        self.on_bytes = on_bytes

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        data = self.file.read(max(n, 1 << 16) if n > 0 else -1)
        self.on_bytes(len(data))
        return data


def _upload_all(
    dataset: Dataset,
    objects: list[ObjectRef],
    targets: dict[Key, TransferUrl],
    options: Options,
    server: str,
    keep_up: Callable[[int], None],
) -> None:
    """``PUT`` each object to its URL, in parallel, calling ``keep_up`` with the count done
    while they run; the first failure is raised."""
    if not objects:
        return
    progress = options.progress
    count = progress.task(f"{dataset.alias}: objects", total=len(objects), unit="objects")
    volume = progress.task(f"{dataset.alias}: bytes", total=sum(o.size for o in objects), unit="B")
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=options.parallel, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)

    def one(ref: ObjectRef) -> None:
        target = targets[(ref.kind, ref.physical_hash)]
        url = target.url
        body = _Reading(str(ref.path_in(dataset.layout)), ref.size, volume.advance)
        headers = transfer_headers(target, server)
        headers["Content-Type"] = "application/octet-stream"
        try:
            response = session.put(
                url, data=body, headers=headers, timeout=TIMEOUT, allow_redirects=False
            )
        except requests.RequestException as e:
            raise RemoteError(f"{url}: {' '.join(str(e).split())[:300]}") from None
        finally:
            body.file.close()
        if not 200 <= response.status_code < 300:
            reason = " ".join(response.text.split())[:500]
            raise RemoteError(
                f"upload of {ref.key} refused (HTTP {response.status_code}): {reason}"
            )
        count.advance(1)

    try:
        with ThreadPoolExecutor(max(1, options.parallel), thread_name_prefix="upload") as pool:
            futures = [pool.submit(one, o) for o in objects]
            pending = set(futures)
            while pending:
                _, pending = wait(pending, timeout=1.0, return_when=FIRST_EXCEPTION)
                keep_up(len(futures) - len(pending))
                for future in futures:
                    if future.done() and future.exception() is not None:
                        for other in pending:
                            other.cancel()
                        future.result()
    finally:
        session.close()
        count.close()
        volume.close()
