"""Engines for the coordinator: provisioning (embedded, container, remote) and the gRPC client.

Public API: ``EngineProvider`` (and ``provider_from_config``), ``EngineSession`` (the engines
of one command), ``EnginePool`` (warm engines of the daemon), ``EngineClient``
(``execute_transform``, ``execute_raw_query``, ``validate_query``, ``migrate_query``,
``execute_query``), ``EngineMounts`` and the errors in ``coordinator.engine.errors``.
"""

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
