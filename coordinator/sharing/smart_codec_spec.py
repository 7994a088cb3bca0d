"""The spec's dialect of the Smart Transfer Protocol (the AsyncAPI file's messages: camelCase
fields, flat objects, ``DatasetError`` for refusals, the batch base64 tar+gzip) as a
``smart_codec.Codec`` (pure). The messages themselves: ``smart_messages`` (pull, batch) and
``smart_push_messages`` (push)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from common.odf.multihash import Multihash
from coordinator.sharing import smart_codec as sc
from coordinator.sharing import smart_messages as msg
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.smart_codec import Dialect, ObjectFile, Phase, PullRequest, Strategy
from coordinator.sharing.smart_push_messages import PushRequest, SizeEstimation

_SIZE_FIELDS = ("numBlocks", "numObjects", "bytesInRawBlocks", "bytesInRawObjects")
_BATCH_FIELD = {Phase.PULL_METADATA: "blocks", Phase.PUSH_METADATA: "newBlocks"}
_STRATEGY = sc.StrategyFields(
    "objectTransferStrategies",
    "objectFile",
    "pushStrategy",
    "uploadTo",
    "pullStrategy",
    "downloadFrom",
    skip_has_target=False,
)


class SpecCodec:
    dialect = Dialect.SPEC

    def reply(self, phase: Phase, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def refusal(self, refusal: sc.Refusal) -> tuple[object, str]:
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

    def metadata(self, blocks: list[tuple[Multihash, bytes]], phase: Phase) -> dict[str, Any]:
        return {_BATCH_FIELD[phase]: msg.blocks_batch(blocks)}

    def read_metadata(
        self, message: dict[str, Any], phase: Phase, where: str, limits: Limits
    ) -> dict[Multihash, bytes]:
        return msg.read_blocks_batch(message.get(_BATCH_FIELD[phase]), where, limits)

    def object_files(self, files: list[ObjectFile], phase: Phase) -> dict[str, Any]:
        return {"objectFiles": [push_msg.object_file(f.kind, f.physical_hash) for f in files]}

    def read_object_files(
        self, message: dict[str, Any], where: str, limit: int
    ) -> list[ObjectFile]:
        return [ObjectFile(k, h) for k, h in push_msg.parse_object_files(message, where, limit)]

    def strategies(self, strategies: list[Strategy], phase: Phase) -> dict[str, Any]:
        return sc.write_strategies(strategies, phase, _STRATEGY, _file, lambda t: {"url": t.url})

    def read_strategies(self, body: dict[str, Any], phase: Phase, where: str) -> list[Strategy]:
        def read_file(value: object) -> ObjectFile:
            files = push_msg.parse_object_files({"objectFiles": [value]}, where, 1)
            return ObjectFile(*files[0])

        def read_url(value: object) -> sc.TransferUrl:
            url = value.get("url") if isinstance(value, dict) else None
            if not isinstance(url, str):
                raise RejectedContentError(f"{where}: a transfer URL that is not one")
            return sc.TransferUrl(check_url(url, where))

        return sc.read_strategies(body, phase, where, _STRATEGY, read_file, read_url)

    def push_request(self, request: PushRequest) -> dict[str, Any]:
        return request.to_json()

    def read_push_request(self, message: dict[str, Any], where: str, limits: Limits) -> PushRequest:
        return push_msg.parse_push_request(message, where, limits)

    def read_push_step(self, message: dict[str, Any], where: str, limit: int) -> sc.PushStep:
        if "objectFiles" in message:
            return sc.PushStep(objects=self.read_object_files(message, where, limit))
        if not message:
            return sc.PushStep(complete=True)
        raise RejectedContentError(f"{where}: unexpected message {sorted(message)[:5]}")

    def uploads_done(self) -> dict[str, Any] | None:
        return None

    def progress_report(self, uploaded: int) -> dict[str, Any] | None:
        return None


def _file(f: ObjectFile) -> dict[str, str]:
    return push_msg.object_file(f.kind, f.physical_hash)


def check_url(url: str, where: str) -> str:
    """A transfer URL: http(s) only."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise RejectedContentError(f"{where}: transfer URL {url[:200]!r} is not http(s)")
    return url


def _hash(value: object, field: str, where: str) -> Multihash | None:
    return None if value is None else push_msg.parse_hash(value, field, where)
