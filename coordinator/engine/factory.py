"""The engine provider a workspace's configuration asks for, and a command's engine session."""

from __future__ import annotations

from pathlib import Path

from coordinator.config import EngineConfig, EngineProviderKind, load_config
from coordinator.engine.container import ContainerEngineProvider
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.engine.provider import EngineMounts, EngineProvider, EngineSession
from coordinator.engine.remote import RemoteEngineProvider


def provider_from_config(config: EngineConfig) -> EngineProvider:
    match config.provider:
        case EngineProviderKind.EMBEDDED:
            return EmbeddedEngineProvider(
                master=config.master,
                driver_memory=config.driver_memory,
                start_timeout=config.start_timeout,
            )
        case EngineProviderKind.CONTAINER:
            return ContainerEngineProvider(
                image=config.image,
                master=config.master,
                driver_memory=config.driver_memory,
                start_timeout=config.start_timeout,
            )
        case EngineProviderKind.REMOTE:
            assert config.address is not None  # checked when the configuration is read
            return RemoteEngineProvider(
                address=config.address,
                start_timeout=config.start_timeout,
                token_file=config.token_file,
                tls_ca=config.tls_ca,
            )


def workspace_engines(odf_dir: Path, mounts: EngineMounts | None = None) -> EngineSession:
    """The engine session of one command in the workspace whose ``.odf`` is ``odf_dir``."""
    provider = provider_from_config(load_config(odf_dir).engine)
    return EngineSession(provider, mounts)
