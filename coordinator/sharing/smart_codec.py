"""The two dialects of the Smart Transfer Protocol behind one interface (pure).

One flow (``smart_server``, ``smart_push_server``, ``transport_smart``, ``smart_push_client``)
speaks either dialect through a ``Codec``:

- ``spec``: the AsyncAPI file's messages (camelCase fields, flat objects, ``DatasetError``),
  ``smart_codec_spec``;
- ``reference``: what kamu-cli and kamu-node send (serde's snake_case fields, answers wrapped
  in ``{"Ok": ...}`` / ``{"Err": ...}``, the batch payload a JSON array of bytes, sizes on
  object references, upload headers, an upload-progress exchange),
  ``smart_codec_reference``.

Both carry the same ``X-Odf-Smtp-Version: 1`` header, so a server tells them apart by the
shape of a session's first message (``detect_pull``, ``detect_push``) and answers in kind. A
codec turns the flow's neutral values (below) into one dialect's JSON and back; reading is
hostile-input code in both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from common.odf.multihash import Multihash
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_push_messages import PushRequest, SizeEstimation


class Dialect(Enum):
    SPEC = "spec"
    REFERENCE = "reference"


AUTO = "auto"
DIALECTS = (AUTO, Dialect.REFERENCE.value, Dialect.SPEC.value)
"""What a client may be told to speak."""


def first_dialect(choice: str) -> Dialect:
    """The dialect a client opens with: ``auto`` tries the reference's (kamu's servers answer
    nothing else; ours answer both)."""
    return Dialect.REFERENCE if choice == AUTO else Dialect(choice)


class Phase(Enum):
    """Where in a session a message or an error belongs; its value is how the reference
    names it in its errors (``{"Pull": "InitialRequest"}``)."""

    PULL_REQUEST = ("Pull", "InitialRequest")
    PULL_METADATA = ("Pull", "MetadataRequest")
    PULL_OBJECTS = ("Pull", "ObjectsRequest")
    PUSH_REQUEST = ("Push", "InitialRequest")
    PUSH_METADATA = ("Push", "MetadataRequest")
    PUSH_OBJECTS = ("Push", "ObjectsRequest")
    PUSH_PROGRESS = ("Push", "ObjectsUploadProgress")
    PUSH_COMPLETE = ("Push", "CompleteRequest")


@dataclass(frozen=True, slots=True)
class PullRequest:
    begin_after: Multihash | None = None
    stop_at: Multihash | None = None
    force: bool = False
    dataset_id: str | None = None
    """The spec's optional ``datasetId`` (a ``did:odf``), checked by the server when given."""


@dataclass(frozen=True, slots=True)
class ObjectFile:
    kind: ObjectKind
    physical_hash: Multihash
    size: int = 0
    """The reference sends it; the spec does not (0)."""


@dataclass(frozen=True, slots=True)
class TransferUrl:
    """Where a server asks an object to be downloaded from or uploaded to."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    """Headers to send with the transfer (the reference's ``headers``)."""


@dataclass(frozen=True, slots=True)
class Strategy:
    """A server's answer for one object: where to download or upload it (``None``: skip)."""

    file: ObjectFile
    target: TransferUrl | None


@dataclass(frozen=True, slots=True)
class PushStep:
    """A client message after the metadata, as the push server's flow reads it."""

    objects: list[ObjectFile] | None = None
    truncated: bool = False
    """The reference's ``is_truncated``: more object requests follow the uploads."""
    uploads_done: bool = False
    progress: bool = False
    """A progress report (no answer)."""
    complete: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """A session's refusal, to be told to the peer in its dialect."""

    phase: Phase
    code: str
    """``BadRequest``, ``Conflict``, ``InvalidInterval``, ``InvalidHead``."""
    description: str
    details: dict[str, Any] = field(default_factory=dict)
    """Fields of the reference's typed errors (``head``/``tail``, ``actual_head``...)."""


class Codec(Protocol):
    dialect: Dialect

    # --- answers ---------------------------------------------------------------------------
    def reply(self, phase: Phase, body: dict[str, Any]) -> dict[str, Any]:
        """A successful answer of ``phase`` (the reference wraps some in ``Ok``)."""
        ...

    def refusal(self, refusal: Refusal) -> tuple[object, str]:
        """A refusal as a text message's JSON value and a short close reason."""
        ...

    def answer(self, message: dict[str, Any], phase: Phase, where: str) -> dict[str, Any]:
        """A server's answer read by a client: its refusal raised, else its body."""
        ...

    # --- pull ------------------------------------------------------------------------------
    def pull_request(self, request: PullRequest) -> dict[str, Any]: ...
    def read_pull_request(self, message: dict[str, Any], where: str) -> PullRequest: ...
    def pull_response(self, size: SizeEstimation) -> dict[str, Any]: ...
    def read_pull_response(self, body: dict[str, Any], where: str) -> SizeEstimation: ...
    def metadata(self, blocks: list[tuple[Multihash, bytes]], phase: Phase) -> dict[str, Any]:
        """The metadata batch of ``phase`` (the pull's answer, the push's request)."""
        ...

    def read_metadata(
        self, message: dict[str, Any], phase: Phase, where: str, limits: Limits
    ) -> dict[Multihash, bytes]: ...

    # --- both ------------------------------------------------------------------------------
    def object_files(self, files: list[ObjectFile], phase: Phase) -> dict[str, Any]:
        """An objects-transfer request of ``phase`` (pull or push)."""
        ...

    def read_object_files(
        self, message: dict[str, Any], where: str, limit: int
    ) -> list[ObjectFile]: ...
    def strategies(self, strategies: list[Strategy], phase: Phase) -> dict[str, Any]: ...
    def read_strategies(self, body: dict[str, Any], phase: Phase, where: str) -> list[Strategy]: ...

    # --- push ------------------------------------------------------------------------------
    def push_request(self, request: PushRequest) -> dict[str, Any]: ...
    def read_push_request(
        self, message: dict[str, Any], where: str, limits: Limits
    ) -> PushRequest: ...
    def read_push_step(self, message: dict[str, Any], where: str, limit: int) -> PushStep: ...
    def uploads_done(self) -> dict[str, Any] | None:
        """What a client says once its uploads are over (``None``: nothing)."""
        ...

    def progress_report(self, uploaded: int) -> dict[str, Any] | None:
        """A client's answer to a server's progress request (``None``: the dialect has
        none)."""
        ...


_REFERENCE_PULL = frozenset({"begin_after", "stop_at", "force_update_if_diverged"})
_REFERENCE_PUSH = frozenset({"current_head", "transfer_plan", "visibility_for_created_dataset"})


def detect_pull(message: dict[str, Any]) -> Dialect:
    """The dialect of a pull session, from its first message: the reference's request always
    carries its snake_case fields; the spec's has camelCase ones or none."""
    return Dialect.REFERENCE if _REFERENCE_PULL & message.keys() else Dialect.SPEC


def detect_push(message: dict[str, Any]) -> Dialect:
    return Dialect.REFERENCE if _REFERENCE_PUSH & message.keys() else Dialect.SPEC


def codec(dialect: Dialect) -> Codec:
    if dialect is Dialect.REFERENCE:
        from coordinator.sharing.smart_codec_reference import ReferenceCodec

        return ReferenceCodec()
    from coordinator.sharing.smart_codec_spec import SpecCodec

    return SpecCodec()


@dataclass(frozen=True, slots=True)
class Turn:
    """A server session's answer to one message: the reply (``None``: none), whether the
    session is over, and then the close frame's code and reason."""

    reply: object
    """A JSON value; ``None``: no reply."""
    done: bool = False
    close_code: int = 1000
    close_reason: str = ""


def refused(codec_: Codec | None, refusal: Refusal) -> Turn:
    """The turn that tells ``refusal`` in the session's dialect (the spec's before it is
    known) and ends the session; the reference reads a close code 1011 as an error."""
    speaking = codec_ or codec(Dialect.SPEC)
    text, reason = speaking.refusal(refusal)
    code = 1011 if speaking.dialect is Dialect.REFERENCE else 1000
    return Turn(text, True, code, reason)


@dataclass(frozen=True, slots=True)
class StrategyFields:
    """How a dialect names the parts of an objects transfer answer."""

    entries: str
    file: str
    push: str
    upload: str
    pull: str
    download: str
    skip_has_target: bool
    """Whether a skipped upload still names its (null) target."""


def write_strategies(
    strategies: list[Strategy],
    phase: Phase,
    fields: StrategyFields,
    file_json: Callable[[ObjectFile], dict[str, Any]],
    url_json: Callable[[TransferUrl], dict[str, Any]],
) -> dict[str, Any]:
    """An objects transfer answer (pull: downloads; push: uploads or skips)."""
    entries = []
    for s in strategies:
        entry: dict[str, Any] = {fields.file: file_json(s.file)}
        if phase is Phase.PUSH_OBJECTS:
            entry[fields.push] = "SkipUpload" if s.target is None else "HttpUpload"
            if s.target is not None:
                entry[fields.upload] = url_json(s.target)
            elif fields.skip_has_target:
                entry[fields.upload] = None
        else:
            assert s.target is not None
            entry[fields.pull] = "HttpDownload"
            entry[fields.download] = url_json(s.target)
        entries.append(entry)
    return {fields.entries: entries}


def read_strategies(
    body: dict[str, Any],
    phase: Phase,
    where: str,
    fields: StrategyFields,
    read_file: Callable[[object], ObjectFile],
    read_url: Callable[[object], TransferUrl],
) -> list[Strategy]:
    """The strategies of a server's objects transfer answer, read as hostile input."""
    entries = body.get(fields.entries)
    if not isinstance(entries, list):
        raise RejectedContentError(f"{where}: expected an objects transfer response")
    push = phase is Phase.PUSH_OBJECTS
    found = []
    for s in entries:
        if not isinstance(s, dict):
            raise RejectedContentError(f"{where}: a malformed transfer strategy")
        file = read_file(s.get(fields.file))
        strategy = s.get(fields.push if push else fields.pull)
        if push and strategy == "SkipUpload":
            found.append(Strategy(file, None))
            continue
        if strategy != ("HttpUpload" if push else "HttpDownload"):
            raise RejectedContentError(f"{where}: unsupported transfer strategy {strategy!r}")
        found.append(Strategy(file, read_url(s.get(fields.upload if push else fields.download))))
    return found
