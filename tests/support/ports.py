"""Loopback TCP ports for tests and benches: a free one, and waiting until one listens."""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Any

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port that is free on loopback right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_listening(
    port: int, what: str, *, process: subprocess.Popen[Any] | None = None, timeout: float = 20
) -> None:
    """Return once ``port`` accepts connections on loopback; fail naming ``what`` when
    ``process`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            if process is not None and process.poll() is not None:
                raise AssertionError(f"{what} exited (status {process.returncode})") from None
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what} did not listen on port {port}") from None
            time.sleep(0.05)
