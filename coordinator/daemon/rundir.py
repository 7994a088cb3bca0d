"""``.odf/run/``: what tells the world that a daemon serves the workspace, and how to reach it.

- ``daemon.lock``: held (``flock``) by the daemon for its whole life, so a second daemon on the
  same workspace is refused, and a ``daemon.json`` left by a killed daemon is known to be stale;
- ``daemon.json``: pid, gRPC and HTTP addresses, start time; written once the servers listen,
  removed on shutdown;
- ``token``: the start-up bearer token (scope admin, mode 0600), new for every start;
- ``daemon.log``: the daemon's log, one JSON entry a line (``odf daemon logs``), bounded.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from common.odf.errors import OdfError
from common.odf.record import record
from coordinator.tempdirs import lock_held

RUN_DIR = "run"
INFO_FILE = "daemon.json"
LOCK_FILE = "daemon.lock"
TOKEN_FILE = "token"
LOG_FILE = "daemon.log"


class DaemonRunningError(OdfError):
    """A daemon already serves the workspace."""


@record
class DaemonInfo:
    pid: int
    address: str
    """gRPC, ``host:port``."""
    http_address: str
    started: datetime
    tls_cert: str | None = None
    """The certificate both addresses serve (clients trust it), when over TLS."""
    flight_sql_address: str | None = None
    """Arrow Flight SQL, ``host:port``; ``None`` when not served."""

    def http_reach(self) -> tuple[str, int]:
        """Where a client on this machine reaches the HTTP address: its host (without an IPv6
        address's brackets; a wildcard address, ``0.0.0.0`` or ``[::]``, on loopback) and port."""
        host, _, port = self.http_address.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return host, int(port)

    def to_json(self) -> str:
        import json  # here: every command imports this module, few read or write the info

        return json.dumps(
            {
                "pid": self.pid,
                "address": self.address,
                "httpAddress": self.http_address,
                "started": self.started.isoformat(),
                "tlsCert": self.tls_cert,
                "flightSqlAddress": self.flight_sql_address,
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> DaemonInfo:
        import json

        value = json.loads(text)
        return cls(
            pid=int(value["pid"]),
            address=str(value["address"]),
            http_address=str(value["httpAddress"]),
            started=datetime.fromisoformat(value["started"]),
            tls_cert=value.get("tlsCert"),
            flight_sql_address=value.get("flightSqlAddress"),
        )


class RunDir:
    """The ``run`` directory of one workspace's ``.odf``."""

    def __init__(self, odf_dir: Path) -> None:
        self.path = odf_dir / RUN_DIR
        self.log_path = self.path / LOG_FILE
        """The daemon's log, one JSON entry per line (``odf daemon logs``)."""
        self.info_path = self.path / INFO_FILE
        self.lock_path = self.path / LOCK_FILE
        self.token_path = self.path / TOKEN_FILE

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Be the workspace's daemon until the block ends; ``daemon.json`` is removed then."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise DaemonRunningError(self._running_message()) from None
            try:
                yield
            finally:
                self.info_path.unlink(missing_ok=True)
                self.token_path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def _running_message(self) -> str:
        info = self.read_info()
        where = f" (pid {info.pid}, gRPC {info.address})" if info else ""
        return (
            f"a daemon already serves this workspace{where}: use it, or stop it with"
            " `odf daemon stop`"
        )

    def write_info(self, info: DaemonInfo) -> None:
        """Written whole (rename), so a reader never sees half of it."""
        partial = self.path / f".{INFO_FILE}.partial"
        partial.write_text(info.to_json() + "\n", encoding="utf-8")
        partial.replace(self.info_path)

    def read_info(self) -> DaemonInfo | None:
        """The running daemon's info; ``None`` when none runs (a stale file is ignored)."""
        if not lock_held(self.lock_path):
            return None
        try:
            return DaemonInfo.from_json(self.info_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError, KeyError):
            return None  # starting up, or shutting down

    def serving(self) -> tuple[DaemonInfo, str] | None:
        """The running daemon's info and token; ``None`` when none serves the workspace."""
        info = self.read_info()
        token = self.read_token() if info is not None else None
        return (info, token) if info is not None and token is not None else None

    def new_token(self) -> str:
        """A fresh token, written readable by this user only."""
        import secrets  # here: only a starting daemon needs it, every command reads this module

        token = secrets.token_urlsafe(32)
        self.token_path.unlink(missing_ok=True)
        fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(token + "\n")
        return token

    def read_token(self) -> str | None:
        try:
            return self.token_path.read_text(encoding="ascii").strip() or None
        except FileNotFoundError:
            return None
