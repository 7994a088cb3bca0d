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

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from common.odf.multihash import Multihash
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
    """Where in a session a message or an error belongs (the reference names it in errors)."""

    PULL_REQUEST = "pull-request"
    PULL_METADATA = "pull-metadata"
    PULL_OBJECTS = "pull-objects"
    PUSH_REQUEST = "push-request"
    PUSH_METADATA = "push-metadata"
    PUSH_OBJECTS = "push-objects"
    PUSH_PROGRESS = "push-progress"
    PUSH_COMPLETE = "push-complete"


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
    size: int | None = None
    """The reference sends it; the spec does not."""


@dataclass(frozen=True, slots=True)
class TransferUrl:
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

    def refusal(self, refusal: Refusal) -> tuple[dict[str, Any] | None, str]:
        """A refusal as a text message (``None``: none can be told safely in that phase)
        and a short close reason."""
        ...

    def answer(self, message: dict[str, Any], phase: Phase, where: str) -> dict[str, Any]:
        """A server's answer read by a client: its refusal raised, else its body."""
        ...

    # --- pull ------------------------------------------------------------------------------
    def pull_request(self, request: PullRequest) -> dict[str, Any]: ...
    def read_pull_request(self, message: dict[str, Any], where: str) -> PullRequest: ...
    def pull_response(self, size: SizeEstimation) -> dict[str, Any]: ...
    def read_pull_response(self, body: dict[str, Any], where: str) -> SizeEstimation: ...
    def metadata(self, blocks: list[tuple[Multihash, bytes]]) -> dict[str, Any]:
        """The pull's metadata answer (``DatasetMetadataPullResponse``)."""
        ...

    def read_metadata(
        self, body: dict[str, Any], where: str, limits: Limits
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
    def push_metadata(self, blocks: list[tuple[Multihash, bytes]]) -> dict[str, Any]: ...
    def read_push_metadata(
        self, message: dict[str, Any], where: str, limits: Limits
    ) -> dict[Multihash, bytes]: ...
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

    reply: dict[str, Any] | None
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
