"""``GET /NAME/push`` upgraded to a WebSocket and ``PUT /NAME/push/<key>/<kind>/<hash>``: the
Smart Transfer Protocol's push flow on the daemon's HTTP address (``sharing.smart_push_server``
holds the conversation).

Authentication: the handshake must carry ``Authorization: Bearer <token>`` (the OpenAPI file's
``odf_access_token``) of scope ``push`` or ``admin`` (``access``: the start-up token of
``.odf/run/token``, or one from ``odf daemon token create --scope push``), or it is refused with
401 (403 for a read-only token) before anything else is looked at. The upload URLs a session
hands out are its own pre-signed URLs: they name the session by a random 256-bit key, valid
while the session lives, for the objects it asked for, each once. Uploads are streamed into the
session's staging directory (``.odf/run/push/<key>``, outside every dataset), checked as they
arrive; the body must have a ``Content-Length`` (no chunked uploads) and arrive within the
listener's body deadline. A session's WebSocket idle for the listener's idle timeout ends.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from http import HTTPStatus
from pathlib import Path
from typing import Any

from common.logs import get_logger
from common.odf.dataset_refs import DatasetName
from common.odf.errors import OdfError, ValidationError
from coordinator.daemon.access import Authority, Scope
from coordinator.daemon.http_listener import BoundedHandler
from coordinator.daemon.smart_pull import (
    check_version,
    open_protocol,
    run_session,
    send_response,
)
from coordinator.sharing.limits import MAX_MESSAGE_BYTES, Limits
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_push_messages import parse_hash
from coordinator.sharing.smart_push_server import (
    PushContext,
    PushSession,
    UploadRefusedError,
)
from coordinator.tempdirs import remove_tree
from coordinator.workspace import Workspace

log = get_logger(__name__)

_PUSH_PATH = re.compile(r"/([^/]+)/push")
_UPLOAD_PATH = re.compile(r"/([^/]+)/push/([A-Za-z0-9_-]{43})/(data|checkpoints)/([^/]+)")
STAGE_DIR = "push"
MAX_PUSH_MESSAGE_BYTES = MAX_MESSAGE_BYTES
"""A pushed message: the metadata batch of a long chain is one (base64 of tar+gzip); only a
client holding the token gets to send one."""


class PushServer:
    """The daemon's push endpoint: the token, the live sessions by key."""

    def __init__(
        self,
        workspace: Workspace,
        authority: Authority,
        run_dir: Path,
        hold: Callable[[str], AbstractContextManager[Any]],
        on_commit: Callable[[str], None],
    ) -> None:
        self.workspace = workspace
        self.authority = authority
        self.stage_root = run_dir / STAGE_DIR
        remove_tree(self.stage_root)  # sessions of a killed daemon
        self.hold = hold
        self.on_commit = on_commit
        self.sessions: dict[str, PushSession] = {}
        self.guard = threading.Lock()

    @staticmethod
    def is_push(handler: BoundedHandler) -> bool:
        return (
            _PUSH_PATH.fullmatch(handler.path) is not None
            and handler.headers.get("Upgrade", "").lower() == "websocket"
        )

    def authorized(self, handler: BoundedHandler, scope: Scope = Scope.PUSH) -> bool:
        """Whether the request's bearer token has ``scope``."""
        return self.authority.allows(handler.headers.get("Authorization", ""), scope)

    def serve(self, handler: BoundedHandler) -> None:
        """One push session over the WebSocket of this handshake."""
        opened = open_protocol(handler, _PUSH_PATH, MAX_PUSH_MESSAGE_BYTES)
        if opened is None:
            return
        segment, protocol, request = opened
        name = None
        scope = self.authority.scope_of(handler.headers.get("Authorization", ""))
        if scope is None or scope < Scope.PUSH:
            log.info("push.unauthorized", path=handler.path)
            response = protocol.reject(
                HTTPStatus.UNAUTHORIZED if scope is None else HTTPStatus.FORBIDDEN,
                "a push needs a daemon token with scope push (Bearer)\n",
            )
            response.headers["WWW-Authenticate"] = "Bearer"
        else:
            try:
                name = str(DatasetName.parse(segment))
            except ValidationError:
                response = protocol.reject(
                    HTTPStatus.BAD_REQUEST, f"{segment[:100]!r} is not a dataset name\n"
                )
            else:
                response = check_version(handler, protocol) or protocol.accept(request)
        if not send_response(handler, protocol, response) or name is None:
            return
        key = secrets.token_urlsafe(32)
        host = handler.headers.get("Host", "")
        stage = self.stage_root / key
        stage.mkdir(parents=True, mode=0o700)
        context = PushContext(
            workspace=self.workspace,
            name=name,
            stage=stage,
            upload_url=lambda kind, h: (
                f"{handler.scheme}://{host}/{name}/push/{key}/{kind.value}/{h}"
            ),
            hold=self.hold,
            on_commit=self.on_commit,
            limits=Limits(),
            on_upload=lambda: handler.deadline.set(handler.bounds.idle_timeout, "idle"),
        )
        session = PushSession(context)
        with self.guard:
            self.sessions[key] = session
        try:
            run_session(handler, protocol, session.handle)
        except OSError as e:  # the client went away or stayed silent
            log.info("push.connection_lost", dataset=name, error=str(e))
        finally:
            with self.guard:
                del self.sessions[key]
            session.close()

    @staticmethod
    def is_upload(path: str) -> bool:
        return _UPLOAD_PATH.fullmatch(path) is not None

    def upload(self, handler: BoundedHandler) -> None:
        """``PUT`` of one object to a session's upload URL."""
        match = _UPLOAD_PATH.fullmatch(handler.path)
        assert match is not None
        name, key, kind, text = match.groups()
        with self.guard:
            session = self.sessions.get(key)
        if session is None or session.ctx.name.lower() != name.lower():
            _answer(handler, HTTPStatus.NOT_FOUND, "no such push session (it ended?)")
            return
        length_text = handler.headers.get("Content-Length")
        if handler.headers.get("Transfer-Encoding") or length_text is None:
            _answer(handler, HTTPStatus.LENGTH_REQUIRED, "an upload needs a Content-Length")
            return
        length = int(length_text) if length_text.isascii() and length_text.isdigit() else -1
        if length < 0:
            _answer(handler, HTTPStatus.BAD_REQUEST, "Content-Length is not a size")
            return
        handler.read_body_within(length)
        try:
            physical_hash = parse_hash(text, "the object's name", handler.path)
            session.receive(ObjectKind(kind), physical_hash, length, handler.rfile.read)
        except UploadRefusedError as e:
            _answer(handler, HTTPStatus.CONFLICT, str(e))
        except OdfError as e:
            _answer(handler, HTTPStatus.BAD_REQUEST, str(e))
        except OSError as e:
            log.info("push.upload_lost", dataset=name, error=str(e))
            handler.close_connection = True
        else:
            _answer(handler, HTTPStatus.CREATED, "stored")


def _answer(handler: BoundedHandler, status: HTTPStatus, text: str) -> None:
    body = (" ".join(text.split())[:1000] + "\n").encode()
    if status >= 400:
        handler.close_connection = True  # the body may not have been read
    handler.send_response(status)
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
