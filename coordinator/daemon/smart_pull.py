"""``GET /NAME/pull`` upgraded to a WebSocket: the Smart Transfer Protocol's pull flow on the
daemon's HTTP address (``sharing.smart_server`` holds the conversation).

The stdlib HTTP server has already read the request; ``websockets``' sans-I/O server protocol
answers the handshake and frames every message on the handler's own streams. Version
negotiation: a client's ``X-Odf-Smtp-Version`` other than 1 is refused (the OpenAPI file's
subprotocol name is not a valid RFC 6455 token, see ``smart_messages.SUBPROTOCOL``).
A WebSocket silent for the listener's idle timeout (no complete frame, and less than
``http_listener.WS_PROGRESS_BYTES`` of one) is cut; the download URLs a session hands out
have the listener's scheme (``https`` under TLS).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from http import HTTPStatus

from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol

from common.odf.dataset_refs import DatasetName
from common.odf.errors import OdfError, ValidationError
from coordinator.daemon.http_listener import WS_PROGRESS_BYTES, BoundedHandler
from coordinator.sharing import smart_messages as msg
from coordinator.sharing.smart_codec import Turn
from coordinator.sharing.smart_server import PullSession
from coordinator.workspace import Workspace

_PULL_PATH = re.compile(r"/([^/]+)/pull")
MAX_MESSAGE_BYTES = 1 << 20


def is_pull(handler: BoundedHandler) -> bool:
    return (
        _PULL_PATH.fullmatch(handler.path) is not None
        and handler.headers.get("Upgrade", "").lower() == "websocket"
    )


def serve_pull(handler: BoundedHandler, workspace: Workspace, authorized: bool) -> None:
    """One pull session; refused (401) unless ``authorized`` (the daemon's token, when reads
    need it)."""
    opened = open_protocol(handler, _PULL_PATH)
    if opened is None:
        return
    segment, protocol, request = opened
    if not authorized:
        response = protocol.reject(HTTPStatus.UNAUTHORIZED, "reading needs the token (Bearer)\n")
        response.headers["WWW-Authenticate"] = "Bearer"
        send_response(handler, protocol, response)
        return
    try:
        dataset = workspace.open_dataset(str(DatasetName.parse(segment)))
    except (OdfError, ValidationError):
        response = protocol.reject(HTTPStatus.NOT_FOUND, f"no dataset {segment!r}\n")
    else:
        response = check_version(handler, protocol) or protocol.accept(request)
    if not send_response(handler, protocol, response):
        return
    host = handler.headers.get("Host", "")
    name = dataset.alias
    session = PullSession(
        dataset,
        lambda kind, h: f"{handler.scheme}://{host}/{name}/{kind}/{h}",
        transfer_headers(handler),
    )
    run_session(handler, protocol, session.handle)


def transfer_headers(handler: BoundedHandler) -> tuple[tuple[str, str], ...]:
    """The headers the reference's transfer URLs ask for: the protocol version, and the
    client's own token when it sent one (the reads of a daemon that requires it)."""
    found = [(msg.VERSION_HEADER.lower(), msg.VERSION)]
    bearer = handler.headers.get("Authorization")
    if bearer is not None and bearer.isascii() and bearer.isprintable() and len(bearer) < 4096:
        found.append(("authorization", bearer))
    return tuple(found)


def open_protocol(
    handler: BoundedHandler, path: re.Pattern[str], max_size: int = MAX_MESSAGE_BYTES
) -> tuple[str, ServerProtocol, Request] | None:
    """The dataset segment of the request path (``path`` matched it), and the WebSocket
    protocol of the handshake the stdlib server has read (messages up to ``max_size``
    bytes); ``None`` (answered 400) when it is not one."""
    match = path.fullmatch(handler.path)
    assert match is not None
    handler.close_connection = True
    protocol = ServerProtocol(max_size=max_size)
    # the request as received, for the protocol's own parser (it then expects frames)
    lines = [handler.requestline, *(f"{k}: {v}" for k, v in handler.headers.items()), "", ""]
    protocol.receive_data("\r\n".join(lines).encode("latin-1"))
    requests = [e for e in protocol.events_received() if isinstance(e, Request)]
    if len(requests) != 1:
        handler.send_error(400, "not a WebSocket handshake")
        return None
    return match.group(1), protocol, requests[0]


def check_version(handler: BoundedHandler, protocol: ServerProtocol) -> Response | None:
    """The refusal of a protocol version other than ours, if the client asked for one."""
    version = handler.headers.get(msg.VERSION_HEADER)
    if version is not None and version != msg.VERSION:
        response = protocol.reject(HTTPStatus.BAD_REQUEST, INCOMPATIBLE)
        del response.headers["Content-Type"]
        response.headers["Content-Type"] = "application/json"
        return response
    return None


INCOMPATIBLE = '{"message":"Incompatible client version"}'
"""The body of a refused version: the reference's (its clients show it), in both dialects."""


def send_response(handler: BoundedHandler, protocol: ServerProtocol, response: Response) -> bool:
    """Send the handshake's answer; whether the connection is now a WebSocket."""
    protocol.send_response(response)
    _flush(handler, protocol)
    return response.status_code == HTTPStatus.SWITCHING_PROTOCOLS


def run_session(
    handler: BoundedHandler,
    protocol: ServerProtocol,
    handle: Callable[[bytes], Turn],
) -> None:
    """Answer each text message with ``handle``'s reply until it says the session is over,
    the client closes, the protocol fails (a bad frame, a message over the size limit), the
    connection ends or stays idle (see the module doc)."""
    idle = handler.bounds.idle_timeout
    handler.deadline.set(idle, "idle")
    progress = 0
    while True:
        data = handler.rfile.read1(1 << 16)
        if not data:
            protocol.receive_eof()
            _flush(handler, protocol)
            return
        protocol.receive_data(data)
        progress += len(data)
        frames = [e for e in protocol.events_received() if isinstance(e, Frame)]
        active = bool(frames) or progress >= WS_PROGRESS_BYTES
        if active:  # the time to answer is the server's, not the client's
            handler.deadline.clear()
            progress = 0
        for frame in frames:
            if frame.opcode is Opcode.CLOSE:
                _flush(handler, protocol)
                return
            if frame.opcode not in (Opcode.TEXT, Opcode.BINARY):
                continue
            if not frame.fin:
                protocol.send_text(msg.encode(msg.error("BadRequest", "fragmented")).encode())
                protocol.send_close()
                _flush(handler, protocol)
                return
            turn = handle(bytes(frame.data))
            if turn.reply is not None:
                protocol.send_text(msg.encode(turn.reply).encode())
            if turn.done:
                protocol.send_close(turn.close_code, turn.close_reason)
        if not _flush(handler, protocol):
            return
        if active:
            handler.deadline.set(idle, "idle")


def _flush(handler: BoundedHandler, protocol: ServerProtocol) -> bool:
    """Send what the protocol has to; ``False`` once it wants the connection closed."""
    open_ = True
    for chunk in protocol.data_to_send():
        if chunk:
            handler.wfile.write(chunk)
        else:
            open_ = False
    handler.wfile.flush()
    return open_
