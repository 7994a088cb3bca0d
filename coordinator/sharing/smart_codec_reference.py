"""The reference's dialect of the Smart Transfer Protocol, as kamu-cli and kamu-node speak it,
as a ``smart_codec.Codec`` (pure).

Wire facts, learned by reading kamu-cli's ``src/adapter/http/src/smart_protocol/`` (BSL 1.1:
facts only, nothing copied): every struct is serde's default JSON, so fields are snake_case;
the first answer of a pull and the push's request, metadata and objects answers are Rust
``Result`` values (``{"Ok": ...}`` / ``{"Err": {"Variant": ...}}``), the other answers bare;
a pull request always carries ``begin_after``, ``stop_at`` and ``force_update_if_diverged``;
the size estimation is a ``transfer_plan`` with ``num_records``; the metadata batch is
``{num_blocks, media_type: "application/tar+gzip", encoding: "raw", payload}`` with the
gzip'd tar as a JSON array of byte values; object references carry their ``size``; transfer
URLs are ``{url, headers: [{name, value}], expires_at}``; the push's objects request has
``is_truncated``; while the uploads run the server asks ``{}`` and the client answers
``{"details": {"Running": {"uploaded_objects_count": N}}}``, and says
``{"details": "Complete"}`` when they are done; the push request names the visibility of a
dataset it creates (``Private``/``Public``) and no dataset id. A server's internal errors
arrive as a close frame (code 1011) whose reason is the JSON of the phase's ``Err``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from common.odf.multihash import Multihash
from coordinator.sharing import smart_messages as msg
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_codec import (
    Dialect,
    ObjectFile,
    Phase,
    PullRequest,
    PushStep,
    Refusal,
    Strategy,
    StrategyFields,
    TransferUrl,
    read_strategies,
    write_strategies,
)
from coordinator.sharing.smart_codec_spec import check_url
from coordinator.sharing.smart_push_messages import PushRequest, SizeEstimation

RAW = "raw"
_PLAN_FIELDS = ("num_blocks", "num_objects", "bytes_in_raw_blocks", "bytes_in_raw_objects")
_PLAN_ORDER = (
    "num_blocks",
    "num_objects",
    "num_records",
    "bytes_in_raw_blocks",
    "bytes_in_raw_objects",
)
"""The fields of the reference's ``TransferPlan`` in its order (``SizeEstimation``'s names)."""
_FILE_FIELDS = ("object_files", "object_type", "physical_hash", "size")
_RESULT_PHASES = {Phase.PULL_REQUEST, Phase.PUSH_REQUEST, Phase.PUSH_METADATA, Phase.PUSH_OBJECTS}
"""Phases whose answer is a ``Result`` (``Ok``/``Err``)."""
_SILENT_PHASES = {Phase.PUSH_PROGRESS, Phase.PUSH_COMPLETE}
"""Phases whose answer is an empty struct, which serde parses from any object: a refusal
there is a JSON string (which the reference's client fails to parse, showing it), never an
object that would read as success."""
_BATCH_FIELD = {Phase.PULL_METADATA: "blocks", Phase.PUSH_METADATA: "new_blocks"}
_STRATEGY = StrategyFields(
    "object_transfer_strategies",
    "object_file",
    "push_strategy",
    "upload_to",
    "pull_strategy",
    "download_from",
    skip_has_target=True,
)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}")
_FORBIDDEN_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}
    | {"expect", "keep-alive", "proxy-authorization", "cookie"}
)
MAX_HEADERS = 16
_VISIBILITY = {"Private": False, "private": False, "Public": True, "public": True}
_TYPES = {ObjectKind.DATA: "DataSlice", ObjectKind.CHECKPOINT: "Checkpoint"}


class ReferenceCodec:
    dialect = Dialect.REFERENCE

    def reply(self, phase: Phase, body: dict[str, Any]) -> dict[str, Any]:
        return {"Ok": body} if phase in _RESULT_PHASES else body

    def refusal(self, refusal: Refusal) -> tuple[object, str]:
        reason = "refused: " + refusal.description.encode("ascii", "replace").decode()[:100]
        if refusal.phase in _SILENT_PHASES:
            return f"refused: {refusal.description}", reason
        if refusal.code == "InvalidInterval" and refusal.phase is Phase.PULL_REQUEST:
            return {"Err": {"InvalidInterval": refusal.details}}, reason
        if refusal.code == "InvalidHead" and refusal.phase is Phase.PUSH_REQUEST:
            return {"Err": {"InvalidHead": refusal.details}}, reason
        internal = {"phase": dict([refusal.phase.value]), "error_message": refusal.description}
        return {"Err": {"Internal": internal}}, reason

    def answer(self, message: dict[str, Any], phase: Phase, where: str) -> dict[str, Any]:
        if "Err" in message:
            raise RejectedContentError(f"{where}: the server refused: {_describe(message['Err'])}")
        if phase not in _RESULT_PHASES:
            return message
        body = message.get("Ok")
        if not isinstance(body, dict) or len(message) != 1:
            raise RejectedContentError(f"{where}: expected an Ok or Err answer")
        return body

    # --- pull ------------------------------------------------------------------------------

    def pull_request(self, request: PullRequest) -> dict[str, Any]:
        return {
            "begin_after": _text(request.begin_after),
            "stop_at": _text(request.stop_at),
            "force_update_if_diverged": request.force,
        }

    def read_pull_request(self, message: dict[str, Any], where: str) -> PullRequest:
        return PullRequest(
            _hash(message.get("begin_after"), "begin_after", where),
            _hash(message.get("stop_at"), "stop_at", where),
            _flag(message, "force_update_if_diverged", where),
        )

    def pull_response(self, size: SizeEstimation) -> dict[str, Any]:
        return {"transfer_plan": _plan(size)}

    def read_pull_response(self, body: dict[str, Any], where: str) -> SizeEstimation:
        return push_msg.read_counts(
            body.get("transfer_plan"), where, "transfer_plan", (*_PLAN_FIELDS, "num_records")
        )

    def metadata(self, blocks: list[tuple[Multihash, bytes]], phase: Phase) -> dict[str, Any]:
        return {_BATCH_FIELD[phase]: _batch(blocks)}

    def read_metadata(
        self, message: dict[str, Any], phase: Phase, where: str, limits: Limits
    ) -> dict[Multihash, bytes]:
        return _read_batch(message.get(_BATCH_FIELD[phase]), where, limits)

    # --- objects ---------------------------------------------------------------------------

    def object_files(self, files: list[ObjectFile], phase: Phase) -> dict[str, Any]:
        found: dict[str, Any] = {"object_files": [_file(f) for f in files]}
        if phase is Phase.PUSH_OBJECTS:
            found["is_truncated"] = False
        return found

    def read_object_files(
        self, message: dict[str, Any], where: str, limit: int
    ) -> list[ObjectFile]:
        found = push_msg.read_object_files(message.get("object_files"), where, limit, _FILE_FIELDS)
        return [ObjectFile(k, h, size or 0) for k, h, size in found]

    def strategies(self, strategies: list[Strategy], phase: Phase) -> dict[str, Any]:
        return write_strategies(strategies, phase, _STRATEGY, _file, _url)

    def read_strategies(self, body: dict[str, Any], phase: Phase, where: str) -> list[Strategy]:
        def read_file(value: object) -> ObjectFile:
            (kind, h, size), *_ = push_msg.read_object_files([value], where, 1, _FILE_FIELDS)
            return ObjectFile(kind, h, size or 0)

        return read_strategies(
            body, phase, where, _STRATEGY, read_file, lambda value: _read_url(value, where)
        )

    # --- push ------------------------------------------------------------------------------

    def push_request(self, request: PushRequest) -> dict[str, Any]:
        return {
            "current_head": _text(request.current_head),
            "transfer_plan": _plan(request.size),
            "force_update_if_diverged": request.force,
            "visibility_for_created_dataset": "Public" if request.public else "Private",
        }

    def read_push_request(self, message: dict[str, Any], where: str, limits: Limits) -> PushRequest:
        size = push_msg.read_size(
            message.get("transfer_plan"),
            where,
            limits,
            "transfer_plan",
            (*_PLAN_FIELDS, "num_records"),
        )
        visibility = message.get("visibility_for_created_dataset", "Private")
        public = _VISIBILITY.get(visibility) if isinstance(visibility, str) else None
        if public is None:
            raise RejectedContentError(f"{where}: visibility_for_created_dataset is not one")
        if size.num_blocks > limits.max_new_blocks:
            raise RejectedContentError(f"{where}: too many blocks announced")
        return PushRequest(
            None,
            _hash(message.get("current_head"), "current_head", where),
            size,
            _flag(message, "force_update_if_diverged", where),
            public,
        )

    def read_push_step(self, message: dict[str, Any], where: str, limit: int) -> PushStep:
        if "object_files" in message:
            truncated = message.get("is_truncated", False)
            if not isinstance(truncated, bool):
                raise RejectedContentError(f"{where}: is_truncated is not a boolean")
            return PushStep(self.read_object_files(message, where, limit), truncated)
        if "details" in message:
            details = message["details"]
            if details == "Complete":
                return PushStep(uploads_done=True)
            if isinstance(details, dict) and isinstance(details.get("Running"), dict):
                return PushStep(progress=True)
            raise RejectedContentError(f"{where}: an upload progress that is not one")
        if not message:
            return PushStep(complete=True)
        raise RejectedContentError(f"{where}: unexpected message {sorted(message)[:5]}")

    def uploads_done(self) -> dict[str, Any] | None:
        return {"details": "Complete"}

    def progress_report(self, uploaded: int) -> dict[str, Any] | None:
        return {"details": {"Running": {"uploaded_objects_count": uploaded}}}


def _plan(size: SizeEstimation) -> dict[str, int]:
    return {name: getattr(size, name) for name in _PLAN_ORDER}


def _batch(blocks: list[tuple[Multihash, bytes]]) -> dict[str, Any]:
    return {
        "num_blocks": len(blocks),
        "media_type": msg.TAR_GZIP,
        "encoding": RAW,
        "payload": list(msg.tar_gz(blocks)),
    }


def _read_batch(batch: object, where: str, limits: Limits) -> dict[Multihash, bytes]:
    if not isinstance(batch, dict):
        raise RejectedContentError(f"{where}: the metadata batch is not a MetadataBlocksBatch")
    if batch.get("media_type") != msg.TAR_GZIP or batch.get("encoding") != RAW:
        raise RejectedContentError(
            f"{where}: unsupported batch {str(batch.get('media_type'))[:50]!r}"
            f"/{str(batch.get('encoding'))[:50]!r}"
        )
    payload = batch.get("payload")
    if not isinstance(payload, list):
        raise RejectedContentError(f"{where}: the batch's payload is not an array of bytes")
    try:
        raw = bytes(payload)
    except (TypeError, ValueError):
        raise RejectedContentError(
            f"{where}: the batch's payload is not an array of bytes"
        ) from None
    return msg.read_tar_gz(raw, batch.get("num_blocks"), where, limits)


def _file(f: ObjectFile) -> dict[str, Any]:
    return {
        "object_type": _TYPES[f.kind],
        "physical_hash": str(f.physical_hash),
        "size": f.size,
    }


def _url(target: TransferUrl) -> dict[str, Any]:
    return {
        "url": target.url,
        "headers": [{"name": n, "value": v} for n, v in target.headers],
        "expires_at": None,
    }


def _read_url(value: object, where: str) -> TransferUrl:
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        raise RejectedContentError(f"{where}: a transfer URL that is not one")
    rows = value.get("headers", [])
    if not isinstance(rows, list) or len(rows) > MAX_HEADERS:
        raise RejectedContentError(f"{where}: transfer headers that are not a short list")
    headers = []
    for row in rows:
        name = row.get("name") if isinstance(row, dict) else None
        text = row.get("value") if isinstance(row, dict) else None
        if (
            not isinstance(name, str)
            or not isinstance(text, str)
            or not _TOKEN.fullmatch(name)
            or name.lower() in _FORBIDDEN_HEADERS
            or len(text) > 4096
            or not all(" " <= c <= "~" for c in text)
        ):
            raise RejectedContentError(
                f"{where}: transfer header {str(name)[:64]!r} is not one a client sends"
            )
        headers.append((name, text))
    return TransferUrl(check_url(value["url"], where), tuple(headers))


def _describe(error: object) -> str:
    """A reference ``Err`` in one line."""
    if isinstance(error, dict) and len(error) == 1:
        (variant, fields), *_ = error.items()
        if variant == "Internal" and isinstance(fields, dict):
            return str(fields.get("error_message"))[:1000]
        if variant == "InvalidInterval" and isinstance(fields, dict):
            return (
                f"the chains have diverged (its head {fields.get('head')} does not descend from"
                f" {fields.get('tail')})"
            )
        if variant == "InvalidHead" and isinstance(fields, dict):
            return (
                f"its head is {fields.get('expected_head')}, the push expected"
                f" {fields.get('actual_head')} (it moved since it was read): pull first, or"
                " push --force"
            )
        return f"{variant}: {json.dumps(fields)[:500]}"
    return json.dumps(error)[:500]


def _text(h: Multihash | None) -> str | None:
    return None if h is None else str(h)


def _hash(value: object, field: str, where: str) -> Multihash | None:
    return None if value is None else push_msg.parse_hash(value, field, where)


def _flag(message: dict[str, Any], field: str, where: str) -> bool:
    value = message.get(field, False)
    if not isinstance(value, bool):
        raise RejectedContentError(f"{where}: {field} is not a boolean")
    return value
