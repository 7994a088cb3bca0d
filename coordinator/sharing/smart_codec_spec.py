"""The spec's dialect of the Smart Transfer Protocol (the AsyncAPI file's messages: camelCase
fields, flat objects, ``DatasetError`` for refusals, the batch base64 tar+gzip) as a
``smart_codec.Codec`` (pure). The messages themselves: ``smart_messages`` (pull, batch) and
``smart_push_messages`` (push)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from common.odf.multihash import Multihash
from coordinator.sharing import smart_messages as msg
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.smart_codec import (
    Dialect,
    ObjectFile,
    Phase,
    PullRequest,
    PushStep,
    Refusal,
    Strategy,
    TransferUrl,
)
from coordinator.sharing.smart_push_messages import PushRequest, SizeEstimation

_SIZE_FIELDS = ("numBlocks", "numObjects", "bytesInRawBlocks", "bytesInRawObjects")
_PUSH_PHASES = (Phase.PUSH_OBJECTS,)


class SpecCodec:
    dialect = Dialect.SPEC

    def reply(self, phase: Phase, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def refusal(self, refusal: Refusal) -> tuple[dict[str, Any] | None, str]:
        code = "Conflict" if refusal.code in ("Conflict", "InvalidHead") else "BadRequest"
        return msg.error(code, refusal.description), "refused"

    def answer(self, message: dict[str, Any], phase: Phase, where: str) -> dict[str, Any]:
        return message  # msg.decode raised its DatasetError

    def pull_request(self, request: PullRequest) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if request.begin_after is not None:
            found["beginAfter"] = str(request.begin_after)
        if request.stop_at is not None:
            found["stopAt"] = str(request.stop_at)
        if request.dataset_id is not None:
            found["datasetId"] = request.dataset_id
        return found

    def read_pull_request(self, message: dict[str, Any], where: str) -> PullRequest:
        wanted = message.get("datasetId")
        if wanted is not None and not isinstance(wanted, str):
            raise RejectedContentError(f"{where}: datasetId is not a did:odf")
        return PullRequest(
            _hash(message.get("beginAfter"), "beginAfter", where),
            _hash(message.get("stopAt"), "stopAt", where),
            dataset_id=wanted,
        )

    def pull_response(self, size: SizeEstimation) -> dict[str, Any]:
        return {"sizeEstimation": size.to_json()}

    def read_pull_response(self, body: dict[str, Any], where: str) -> SizeEstimation:
        value = body.get("sizeEstimation")
        if not isinstance(value, dict):
            raise RejectedContentError(f"{where}: expected a DatasetPullResponse")
        counts = [value.get(name, 0) for name in _SIZE_FIELDS]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
            raise RejectedContentError(f"{where}: sizeEstimation has a count that is not one")
        return SizeEstimation(*counts)

    def metadata(self, blocks: list[tuple[Multihash, bytes]]) -> dict[str, Any]:
        return {"blocks": msg.blocks_batch(blocks)}

    def read_metadata(
        self, body: dict[str, Any], where: str, limits: Limits
    ) -> dict[Multihash, bytes]:
        return msg.read_blocks_batch(body.get("blocks"), where, limits)

    def object_files(self, files: list[ObjectFile], phase: Phase) -> dict[str, Any]:
        return {"objectFiles": [push_msg.object_file(f.kind, f.physical_hash) for f in files]}

    def read_object_files(
        self, message: dict[str, Any], where: str, limit: int
    ) -> list[ObjectFile]:
        return [ObjectFile(k, h) for k, h in push_msg.parse_object_files(message, where, limit)]

    def strategies(self, strategies: list[Strategy], phase: Phase) -> dict[str, Any]:
        entries = []
        for s in strategies:
            entry: dict[str, Any] = {
                "objectFile": push_msg.object_file(s.file.kind, s.file.physical_hash)
            }
            if phase in _PUSH_PHASES:
                entry["pushStrategy"] = "SkipUpload" if s.target is None else "HttpUpload"
                if s.target is not None:
                    entry["uploadTo"] = {"url": s.target.url}
            else:
                assert s.target is not None
                entry["pullStrategy"] = "HttpDownload"
                entry["downloadFrom"] = {"url": s.target.url}
            entries.append(entry)
        return {"objectTransferStrategies": entries}

    def read_strategies(self, body: dict[str, Any], phase: Phase, where: str) -> list[Strategy]:
        entries = body.get("objectTransferStrategies")
        if not isinstance(entries, list):
            raise RejectedContentError(f"{where}: expected an objects transfer response")
        push = phase in _PUSH_PHASES
        found = []
        for s in entries:
            if not isinstance(s, dict):
                raise RejectedContentError(f"{where}: a malformed transfer strategy")
            (kind, h), *_ = push_msg.parse_object_files(
                {"objectFiles": [s.get("objectFile")]}, where, 1
            )
            strategy = s.get("pushStrategy" if push else "pullStrategy")
            if push and strategy == "SkipUpload":
                found.append(Strategy(ObjectFile(kind, h), None))
                continue
            holder = s.get("uploadTo" if push else "downloadFrom")
            url = holder.get("url") if isinstance(holder, dict) else None
            if strategy != ("HttpUpload" if push else "HttpDownload") or not isinstance(url, str):
                raise RejectedContentError(f"{where}: unsupported transfer strategy {strategy!r}")
            found.append(Strategy(ObjectFile(kind, h), TransferUrl(check_url(url, where))))
        return found

    def push_request(self, request: PushRequest) -> dict[str, Any]:
        return request.to_json()

    def read_push_request(self, message: dict[str, Any], where: str, limits: Limits) -> PushRequest:
        return push_msg.parse_push_request(message, where, limits)

    def push_metadata(self, blocks: list[tuple[Multihash, bytes]]) -> dict[str, Any]:
        return {"newBlocks": msg.blocks_batch(blocks)}

    def read_push_metadata(
        self, message: dict[str, Any], where: str, limits: Limits
    ) -> dict[Multihash, bytes]:
        return msg.read_blocks_batch(message.get("newBlocks"), where, limits)

    def read_push_step(self, message: dict[str, Any], where: str, limit: int) -> PushStep:
        if "objectFiles" in message:
            return PushStep(objects=self.read_object_files(message, where, limit))
        if not message:
            return PushStep(complete=True)
        raise RejectedContentError(f"{where}: unexpected message {sorted(message)[:5]}")

    def uploads_done(self) -> dict[str, Any] | None:
        return None

    def progress_report(self, uploaded: int) -> dict[str, Any] | None:
        return None


def check_url(url: str, where: str) -> str:
    """A transfer URL: http(s) only."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise RejectedContentError(f"{where}: transfer URL {url[:200]!r} is not http(s)")
    return url


def _hash(value: object, field: str, where: str) -> Multihash | None:
    return None if value is None else push_msg.parse_hash(value, field, where)
