"""A hostile HTTP and WebSocket client on real sockets: slow (headers dripped a byte at a time,
a body that never comes), idle, oversized (huge headers, a huge WebSocket message), malformed
(a garbage request line, bad WebSocket frames). Each attack returns what the server answered
and how long it took to close the connection, so a test can check the server's bounds."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass

GIVE_UP_S = 60.0
"""An attack whose connection the server has not closed by then is reported as held."""


@dataclass(frozen=True, slots=True)
class Outcome:
    answer: bytes
    """What the server sent before it closed (the first 64 KiB)."""
    seconds: float
    """From the connection to the server's close."""
    closed: bool
    """False: still open after ``GIVE_UP_S``."""

    @property
    def status(self) -> int | None:
        if not self.answer.startswith(b"HTTP/1."):
            return None
        return int(self.answer.split(b" ", 2)[1])


class HostileClient:
    """Attacks against ``host:port``; ``source`` is the local address to connect from (another
    loopback address is another client to the server's per-client cap)."""

    def __init__(
        self, host: str, port: int, *, source: str = "127.0.0.1", tls: ssl.SSLContext | None = None
    ) -> None:
        self.host, self.port, self.source, self.tls = host, port, source, tls

    def connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), 10, (self.source, 0))
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        return sock

    # --- the attacks -------------------------------------------------------------------------

    def idle(self) -> Outcome:
        """Connect and send nothing."""
        return self._until_closed(self.connect(), time.monotonic())

    def slowloris(self, interval: float = 1.0) -> Outcome:
        """A request's headers, one byte every ``interval`` seconds, never ending."""
        sock, started = self.connect(), time.monotonic()
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 100_000
        return self._drip(sock, request, interval, started)

    def slow_http2_preface(self, interval: float = 0.3) -> Outcome:
        """An HTTP/2 client's connection preface, one byte every ``interval`` seconds, then
        nothing (no SETTINGS frame)."""
        sock, started = self.connect(), time.monotonic()
        return self._drip(sock, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", interval, started)

    def slow_body(self, path: str, announced: int, headers: str = "") -> Outcome:
        """A ``PUT`` announcing ``announced`` bytes that sends one and stops."""
        sock, started = self.connect(), time.monotonic()
        sock.sendall(
            f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {announced}\r\n".encode()
            + f"{headers}\r\nx".encode()
        )
        return self._until_closed(sock, started)

    def huge_headers(self, size: int = 200_000) -> Outcome:
        """One header line of ``size`` bytes."""
        sock, started = self.connect(), time.monotonic()
        self._send_all_or_cut(
            sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size + b"\r\n\r\n"
        )
        return self._until_closed(sock, started)

    def many_headers(self, count: int = 1000) -> Outcome:
        sock, started = self.connect(), time.monotonic()
        lines = b"".join(b"X-H%d: v\r\n" % i for i in range(count))
        self._send_all_or_cut(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n")
        return self._until_closed(sock, started)

    def garbage(self) -> Outcome:
        """A request line that is no request line."""
        sock, started = self.connect(), time.monotonic()
        sock.sendall(b"\x16\x03\x01\x00\xff GARBAGE \x00\xfe\r\n\r\n")
        return self._until_closed(sock, started)

    def plain_request(self, path: str, headers: str = "") -> Outcome:
        """An ordinary ``GET`` (on a TLS port: in clear text, headers and all)."""
        sock, started = self.connect(), time.monotonic()
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        return self._until_closed(sock, started)

    def websocket(self, path: str, headers: str = "") -> tuple[socket.socket, bytes]:
        """A completed WebSocket handshake on ``path``: the socket and the server's answer."""
        sock = self.connect()
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{headers}\r\n".encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        return sock, answer

    def ws_idle(self, path: str, headers: str = "") -> Outcome:
        """Open a WebSocket, then say nothing."""
        started = time.monotonic()
        sock, answer = self.websocket(path, headers)
        assert b" 101 " in answer.split(b"\r\n", 1)[0], answer
        return self._until_closed(sock, started)

    def ws_drip(self, path: str, interval: float = 0.5) -> Outcome:
        """Open a WebSocket, then drip a message's frame a byte at a time."""
        started = time.monotonic()
        sock, _ = self.websocket(path)
        return self._drip(sock, ws_frame(b"{" + b" " * 10_000 + b"}"), interval, started)

    def ws_send(self, path: str, frame: bytes, headers: str = "") -> Outcome:
        """Open a WebSocket and send ``frame`` (raw bytes: a bad or a huge one)."""
        started = time.monotonic()
        sock, answer = self.websocket(path, headers)
        assert b" 101 " in answer.split(b"\r\n", 1)[0], answer
        self._send_all_or_cut(sock, frame)
        return self._until_closed(sock, started)

    # --- helpers -----------------------------------------------------------------------------

    def _drip(self, sock: socket.socket, data: bytes, interval: float, started: float) -> Outcome:
        """Send ``data`` a byte every ``interval`` seconds until the server closes."""
        stop = threading.Event()

        def drip() -> None:
            for byte in data:
                if stop.wait(interval):
                    return
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    return

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        try:
            return self._until_closed(sock, started)
        finally:
            stop.set()
            dripper.join()

    def _send_all_or_cut(self, sock: socket.socket, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the server cut us off mid-way: the attack's point
            sock.sendall(data)

    def _until_closed(self, sock: socket.socket, started: float) -> Outcome:
        answer = b""
        sock.settimeout(1.0)
        try:
            while time.monotonic() - started < GIVE_UP_S:
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    continue
                except (OSError, ssl.SSLError):
                    return Outcome(answer, time.monotonic() - started, True)
                if not chunk:
                    return Outcome(answer, time.monotonic() - started, True)
                answer = (answer + chunk)[:65536]
            return Outcome(answer, time.monotonic() - started, False)
        finally:
            sock.close()


def ws_frame(payload: bytes, *, opcode: int = 1, masked: bool = True, length: int = -1) -> bytes:
    """A client's WebSocket frame; ``length`` overrides the announced payload length."""
    n = len(payload) if length < 0 else length
    head = bytes([0x80 | opcode])
    mask_bit = 0x80 if masked else 0
    if n < 126:
        head += bytes([mask_bit | n])
    elif n < 1 << 16:
        head += bytes([mask_bit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([mask_bit | 127]) + struct.pack(">Q", n)
    if not masked:
        return head + payload
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))
