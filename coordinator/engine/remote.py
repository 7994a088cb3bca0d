"""A remote engine: one already running at an address (for example next to a Spark cluster).

The coordinator neither starts nor stops it. Requests name files by the coordinator's paths,
so the engine must see the workspace at the same paths (a shared file system) and have them
under its data roots. What version it runs cannot be verified from here: new transforms are
not pinned, and pinned ones run with a warning. An exposed engine is reached over TLS
(``tls_ca``: the CA certificates to trust) with a token (``token_file``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.logs import get_logger
from coordinator.engine.errors import EngineUnavailableError
from coordinator.engine.provider import EngineMounts

if TYPE_CHECKING:
    from coordinator.engine.client import EngineClient, EngineCredentials

log = get_logger(__name__)


def grpc_target(address: str) -> str:
    """A gRPC target: ``host:port`` and ``unix:/path`` as they are, a bare path as a socket."""
    if address.startswith(("unix:", "dns:", "ipv4:", "ipv6:")) or not address.startswith("/"):
        return address
    return f"unix:{address}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteEngineProvider:
    address: str
    start_timeout: float = 300.0
    token_file: Path | None = None
    tls_ca: Path | None = None

    @property
    def kind(self) -> str:
        return "remote"

    def resolve_version(self) -> None:
        return None

    def check_version(self, version: str | None) -> None:
        if version is not None:
            log.warning("engine.version_unverified", pinned=version, address=self.address)

    @contextmanager
    def engine(self, version: str | None, mounts: EngineMounts) -> Iterator[EngineClient]:
        target = grpc_target(self.address)
        from coordinator.engine.client import EngineClient  # gRPC: only to connect

        with EngineClient(
            target, description=f"remote engine at {self.address}", credentials=self.credentials()
        ) as client:
            client.wait_until_ready(self.start_timeout)
            yield client

    def credentials(self) -> EngineCredentials:
        """The token and CA certificates from their files; a clear error if unreadable."""
        token = (
            _read(self.token_file, "engine.tokenFile").decode().strip() if self.token_file else None
        )
        if token is not None and (not token or any(c.isspace() for c in token)):
            raise EngineUnavailableError(
                f"engine.tokenFile {self.token_file}: the token must be one word, not empty"
            )
        ca = _read(self.tls_ca, "engine.tlsCa") if self.tls_ca else None
        from coordinator.engine.client import EngineCredentials

        return EngineCredentials(token=token, tls_ca=ca)


def _read(path: Path, key: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise EngineUnavailableError(f"{key} {path}: cannot read it: {e.strerror}") from None
