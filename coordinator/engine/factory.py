"""The engine provider a workspace's configuration asks for."""

from __future__ import annotations

from coordinator.config import EngineConfig, EngineProviderKind
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.engine.provider import EngineProvider
from coordinator.engine.remote import RemoteEngineProvider


def provider_from_config(config: EngineConfig) -> EngineProvider:
    match config.provider:
        case EngineProviderKind.EMBEDDED:
            return EmbeddedEngineProvider(
                master=config.master,
                driver_memory=config.driver_memory,
                start_timeout=config.start_timeout,
                shared_staging=config.staging_dir,
            )
        case EngineProviderKind.CONTAINER:
            from coordinator.engine.container import ContainerEngineProvider  # the docker SDK

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
