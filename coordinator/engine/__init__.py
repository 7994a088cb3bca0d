"""Engines for the coordinator: provisioning (embedded, container, remote) and the gRPC client.

Public API: ``EngineProvider`` (and ``provider_from_config``), ``EngineSession`` (the engines
of one command), ``EnginePool`` (warm engines of the daemon), ``EngineClient``
(``execute_transform``, ``execute_raw_query``, ``validate_query``, ``migrate_query``,
``execute_query``), ``EngineMounts`` and the errors in ``coordinator.engine.errors``.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator.engine.client import EngineClient
    from coordinator.engine.errors import (
        EngineContractError,
        EngineError,
        EngineInternalError,
        EngineInvalidQueryError,
        EngineUnavailableError,
        EngineVersionError,
    )
    from coordinator.engine.factory import provider_from_config
    from coordinator.engine.pool import EnginePool
    from coordinator.engine.provider import EngineMounts, EngineProvider, EngineSession

_HOMES = {
    "EngineClient": "client",
    "EngineContractError": "errors",
    "EngineError": "errors",
    "EngineInternalError": "errors",
    "EngineInvalidQueryError": "errors",
    "EngineUnavailableError": "errors",
    "EngineVersionError": "errors",
    "provider_from_config": "factory",
    "EnginePool": "pool",
    "EngineMounts": "provider",
    "EngineProvider": "provider",
    "EngineSession": "provider",
}
"""Where each public name lives: imported on first use (gRPC and the engine client load only
for commands that run an engine; ``odf --version`` reads ``coordinator.engine.version``)."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)


__all__ = [
    "EngineClient",
    "EngineContractError",
    "EngineError",
    "EngineInternalError",
    "EngineInvalidQueryError",
    "EngineMounts",
    "EnginePool",
    "EngineProvider",
    "EngineSession",
    "EngineUnavailableError",
    "EngineVersionError",
    "provider_from_config",
]
