"""``http(s)://``: the Simple Transfer Protocol over any static web server (read-only).

One ``requests`` session with a connection pool as large as the parallel downloads; every
response is streamed and cut off at its limit; redirects stay on http(s).

An object's body is asked for unencoded (``Accept-Encoding: identity``: its bytes are what is
hashed) and read by the socket's ``readinto`` into one reused buffer of the receiving thread,
hashed and written from there: one copy from the kernel, no chunk objects. (``urllib3``'s own
``readinto`` reads a new ``bytes`` and copies it: two more copies of every byte.)

``https://`` is checked against ``Trust.ca_file`` (else the system's certificates); the
``Trust``'s token goes with every request to the remote's own origin.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from common.odf.multihash import Multihash
from coordinator.sharing.errors import RejectedContentError, RemoteError
from coordinator.sharing.limits import MAX_HEAD_BYTES, Limits
from coordinator.sharing.objects import Destination, ObjectRef
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.transport import CHUNK_BYTES, check_block_size, parse_head, sink_for
from coordinator.sharing.trust import NO_TRUST, Trust

TIMEOUT = (10.0, 60.0)
"""Seconds to connect, and between two reads."""
IDENTITY = {"Accept-Encoding": "identity"}


class HttpSource:
    def __init__(
        self,
        location: RemoteLocation,
        limits: Limits,
        *,
        connections: int = 8,
        trust: Trust = NO_TRUST,
    ) -> None:
        self.location = location
        self.limits = limits
        self.trust = trust.for_url(location.url)
        self.session = requests.Session()
        self.session.max_redirects = 5
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=connections, max_retries=2)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def read_head(self) -> Multihash | None:
        with self._get("refs/head", missing_ok=True) as response:
            if response is None:
                return None
            return parse_head(self._read(response, MAX_HEAD_BYTES + 1), self.location)

    def read_block(self, block_hash: Multihash) -> bytes:
        key = f"blocks/{block_hash.to_multibase()}"
        with self._get(key) as response:
            assert response is not None
            data = self._read(response, self.limits.max_block_bytes + 1)
        check_block_size(len(data), block_hash, self.location, self.limits)
        return data

    def fetch_object(
        self, ref: ObjectRef, into: Destination, on_bytes: Callable[[int], None]
    ) -> None:
        self.fetch_url(f"{self.location.url}/{ref.key}", ref, into, on_bytes)

    def fetch_url(
        self,
        url: str,
        ref: ObjectRef,
        into: Destination,
        on_bytes: Callable[[int], None],
        *,
        allowed: Callable[[str], bool] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Receive ``ref`` from ``url`` (also a smart server's download URL: ``allowed`` then
        says which URLs a redirect may end at, ``headers`` what the server asked to send)."""
        sent = {**(headers or {}), **IDENTITY}
        with self._get_url(url, missing_ok=True, headers=sent, allowed=allowed) as response:
            if response is None:
                raise RejectedContentError(
                    f"{self.location}: {ref.key} (named by block {ref.block}) is missing"
                )
            buffer = bytearray(CHUNK_BYTES)
            view = memoryview(buffer)
            read_into, done = _body_reader(response)
            try:
                with (
                    Pace(response, self.limits) as pace,
                    sink_for(ref, into, self.location) as sink,
                ):
                    # the bytes hashed and written straight from the buffer (both release
                    # the GIL)
                    while n := read_into(buffer):
                        pace.advance(n)
                        sink.write(view[:n])
                        on_bytes(n)
                done()
            except (
                requests.RequestException,
                urllib3.exceptions.HTTPError,
                http.client.HTTPException,
                OSError,
            ) as e:
                raise RemoteError(f"{response.url}: {' '.join(str(e).split())[:300]}") from None

    def close(self) -> None:
        self.session.close()

    def _get(self, key: str, *, missing_ok: bool = False) -> _Response:
        return self._get_url(f"{self.location.url}/{key}", missing_ok=missing_ok)

    def _get_url(
        self,
        url: str,
        *,
        missing_ok: bool = False,
        headers: dict[str, str] | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> _Response:
        headers = {**(headers or {}), **self.trust.headers(url, self.location.url)}
        try:
            # verify per request: requests lets $REQUESTS_CA_BUNDLE override a session's
            response = self.session.get(
                url, stream=True, timeout=TIMEOUT, headers=headers, verify=self.trust.verify
            )
        except requests.RequestException as e:
            raise RemoteError(f"{url}: {_reason(e)}") from None
        if response.url.split("://", 1)[0] not in ("http", "https"):
            response.close()
            raise RemoteError(f"{url}: redirected away from http(s)")
        if allowed is not None and not allowed(response.url):
            response.close()
            raise RemoteError(f"{url}: redirected to another origin ({response.url})")
        if response.status_code == 404 and missing_ok:
            response.close()
            return _Response(None)
        if response.status_code != 200:
            response.close()
            raise RemoteError(f"{url}: HTTP {response.status_code} {response.reason}")
        return _Response(response)

    def _read(self, response: requests.Response, limit: int) -> bytes:
        data = bytearray()
        try:
            with Pace(response, self.limits) as pace:
                for chunk in response.iter_content(64 << 10):
                    pace.advance(len(chunk))
                    data += chunk
                    if len(data) >= limit:
                        break
        except requests.RequestException as e:
            raise RemoteError(f"{response.url}: {_reason(e)}") from None
        return bytes(data)


def _body_reader(
    response: requests.Response,
) -> tuple[Callable[[bytearray], int], Callable[[], None]]:
    """``readinto`` for the body of ``response``, and what to call once it was read to its end.

    Unencoded (what we ask for), the body is read by ``http.client``'s response beneath
    ``urllib3``'s, straight from the socket into the buffer; the connection then goes back to
    the pool as ``urllib3`` would return it. Encoded anyway, ``urllib3`` decodes it.
    """
    raw = response.raw
    fp = getattr(raw, "_fp", None)
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if isinstance(fp, http.client.HTTPResponse) and encoding == "identity":

        def release() -> None:
            if fp.isclosed():  # read to its end: the connection can serve another request
                raw.release_conn()

        return fp.readinto, release
    raw.decode_content = True
    return raw.readinto, lambda: None


class Pace:
    """A floor on a download's speed, kept by a watchdog: when a window of ``stall_seconds``
    moved fewer than ``stall_bytes``, the connection is shut down (which ends a read blocked
    on a dripping server) and the download fails with ``RemoteError`` saying so."""

    def __init__(self, response: requests.Response, limits: Limits) -> None:
        self.url, self.limits = response.url, limits
        self.sock = _socket_of(response)
        self.moved = 0
        self.stalled = False
        self.timer: threading.Timer | None = None

    def __enter__(self) -> Pace:
        self._arm()
        return self

    def advance(self, n: int) -> None:
        self.moved += n

    def _arm(self) -> None:
        self.timer = threading.Timer(self.limits.stall_seconds, self._check)
        self.timer.daemon = True
        self.timer.start()

    def _check(self) -> None:
        if self.moved >= self.limits.stall_bytes:
            self.moved = 0
            self._arm()
            return
        self.stalled = True
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.stalled:
            raise RemoteError(
                f"{self.url}: fewer than {self.limits.stall_bytes} bytes in"
                f" {self.limits.stall_seconds:g} s: a stalled or dripping server, cut off"
            ) from None


def _socket_of(response: requests.Response) -> socket.socket | None:
    """The socket a streamed response reads from: its connection's, or (once ``http.client``
    handed it over to a response that closes the connection) the response's own."""
    sock = getattr(getattr(response.raw, "connection", None), "sock", None)
    if sock is None:  # _fp: http.client's response; .fp: its reader; .raw: socket.SocketIO
        reader = getattr(getattr(response.raw, "_fp", None), "fp", None)
        sock = getattr(getattr(reader, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


class _Response:
    """A streamed response (or ``None`` for a 404) closed at the end of a ``with``."""

    def __init__(self, response: requests.Response | None) -> None:
        self.response = response

    def __enter__(self) -> requests.Response | None:
        return self.response

    def __exit__(self, *exc: object) -> None:
        if self.response is not None:
            self.response.close()


def _reason(e: requests.RequestException) -> str:
    """What went wrong, in words (not the exception's repr nested three libraries deep)."""
    host = urlsplit(e.request.url).netloc if e.request is not None and e.request.url else ""
    text = " ".join(str(e).split())
    cause = _ERRNO.search(text)
    if isinstance(e, requests.exceptions.SSLError):
        return f"TLS with {host} failed: {_ssl_reason(text)}"
    if isinstance(e, requests.exceptions.ConnectTimeout):
        return f"cannot connect to {host}: no answer in time"
    if isinstance(e, requests.exceptions.Timeout):
        return f"{host} sent nothing in time"
    if isinstance(e, requests.exceptions.ConnectionError):
        if "NameResolutionError" in text or "Name or service not known" in text:
            return f"cannot connect to {host}: unknown host"
        if cause is not None:
            return f"cannot connect to {host}: {cause.group(1).strip().lower()}"
        if "RemoteDisconnected" in text or "Connection aborted" in text:
            return f"{host} closed the connection"
    return text[:300]


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")


def _ssl_reason(text: str) -> str:
    found = re.search(r"\[SSL: [A-Z_]+\] ([^(')\]]+)", text)
    return found.group(1).strip() if found else text[:200]
