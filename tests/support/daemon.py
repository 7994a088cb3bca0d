"""``odf serve`` as a real process for end-to-end tests: started in a workspace, found through
``.odf/run/daemon.json``, stopped (SIGTERM, then SIGKILL) when the test is done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.cli import REPO

LOOPBACK_ANY_PORT = (
    "--address",
    "127.0.0.1:0",
    "--http-address",
    "127.0.0.1:0",
    "--flight-sql-address",
    "127.0.0.1:0",
)
START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Served:
    ws: Path
    process: subprocess.Popen[bytes]
    info: dict[str, object]
    log: Path

    @property
    def address(self) -> str:
        return str(self.info["address"])

    @property
    def token(self) -> str:
        return (self.ws / ".odf" / "run" / "token").read_text().strip()

    @property
    def metadata(self) -> tuple[tuple[str, str]]:
        return (("authorization", f"Bearer {self.token}"),)

    def metrics(self) -> str:
        url = f"http://{self.info['httpAddress']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return str(r.read().decode())

    def metric(self, name: str) -> float:
        """The value of one sample (``name`` with its labels, as Prometheus prints it)."""
        for line in self.metrics().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return 0.0


def start(
    ws: Path, *args: str, log: Path | None = None, serve_args: tuple[str, ...] = ()
) -> Served:
    """``odf serve`` on free loopback ports, once it serves (``args`` go before ``serve``,
    ``serve_args`` after it)."""
    log = log or ws / "serve.log"
    info_path = ws / ".odf" / "run" / "daemon.json"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coordinator",
                *args,
                "serve",
                *LOOPBACK_ANY_PORT,
                *serve_args,
            ],
            cwd=ws,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"the daemon wrote no daemon.json: {log.read_text()}"
        if info_path.is_file():
            info = json.loads(info_path.read_text())
            if info["pid"] == process.pid:  # not a stale file of a killed daemon
                return Served(ws, process, info, log)
        time.sleep(0.05)


def stop(served: Served) -> int:
    """SIGTERM, then SIGKILL after 60 s; the exit code."""
    if served.process.poll() is None:
        served.process.terminate()
        try:
            served.process.wait(60)
        except subprocess.TimeoutExpired:
            served.process.kill()
    return served.process.wait()


@contextmanager
def serving(ws: Path, *args: str, serve_args: tuple[str, ...] = ()) -> Iterator[Served]:
    served = start(ws, *args, serve_args=serve_args)
    try:
        yield served
    finally:
        stop(served)


def wait_until(check: Callable[[], bool], *, what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)
