"""What a client of an HTTP(S) remote trusts, and what it shows it.

- ``ca_file``: the certificates ``https://`` and ``wss://`` are checked with (a daemon's own
  self-signed certificate); the system's store when ``None``;
- ``token``: sent as ``Authorization: Bearer`` on reads (a daemon with
  ``daemon.requireTokenForReads``), to the remote's own origin only (a download URL elsewhere
  never sees it);
- ``local_daemon``: the daemon serving this workspace, whose certificate and token are used for
  its own HTTP address when neither ``ca_file`` nor ``token`` is given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import ssl


@dataclass(frozen=True, slots=True)
class LocalDaemon:
    http_address: str
    """``host:port`` as ``daemon.json`` has it."""
    tls_cert: Path | None
    token: str | None


@dataclass(frozen=True, slots=True)
class Trust:
    ca_file: Path | None = None
    token: str | None = None
    local_daemon: LocalDaemon | None = None

    def for_url(self, url: str) -> Trust:
        """This trust for a remote at ``url`` (``odf+`` schemes too): the local daemon's
        certificate and token when it is at that address and none were given."""
        daemon = self.local_daemon
        if daemon is None or urlsplit(_plain(url)).netloc != daemon.http_address:
            return self
        return replace(
            self,
            ca_file=self.ca_file or daemon.tls_cert,
            token=self.token or daemon.token,
        )

    @property
    def verify(self) -> str | bool:
        """``requests``' ``verify``."""
        return str(self.ca_file) if self.ca_file is not None else True

    def ssl_context(self, url: str) -> ssl.SSLContext | None:
        """The TLS context for a ``wss://`` (or ``https://``) ``url``, ``None`` for plain."""
        if not url.startswith(("wss:", "https:")):
            return None
        import ssl  # here: only for TLS

        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)

    def headers(self, url: str, origin: str) -> dict[str, str]:
        """The token's header for ``url`` when it is on the remote's ``origin``."""
        if self.token is None or _origin(url) != _origin(origin):
            return {}
        return {"Authorization": f"Bearer {self.token}"}


def _plain(url: str) -> str:
    return url.split("+", 1)[1] if url.startswith("odf+") else url


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(_plain(url))
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return scheme, parts.netloc.lower()


NO_TRUST = Trust()
"""The system's certificates, no token."""
