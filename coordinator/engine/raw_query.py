"""The engines of ingest preprocess queries (``coordinator.ingest.preprocess``), from a session.

Ingestion asks for an engine by name and expects the final ``RawQueryResponse`` (errors as
responses, not exceptions). Preprocessing runs on the session's engine in its current
version: a root dataset's data is not derived from a pinned transform.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.odf import engine_protocol as ep
from coordinator.engine.errors import (
    EngineInternalError,
    EngineInvalidQueryError,
    EngineUnavailableError,
)
from coordinator.engine.names import ENGINE_NAMES
from coordinator.engine.provider import EngineSession


@dataclass(frozen=True, slots=True)
class SessionRawQueryEngine:
    """A ``RawQueryEngine`` whose engine is started by the session on first use."""

    session: EngineSession

    def execute_raw_query(self, request: ep.RawQueryRequest) -> ep.RawQueryResponse:
        try:
            return self.session.get(None).execute_raw_query(request)
        except EngineInvalidQueryError as e:
            return ep.RawQueryResponseInvalidQuery(message=e.detail)
        except EngineInternalError as e:
            return ep.RawQueryResponseInternalError(message=str(e), backtrace=e.backtrace)


@dataclass(frozen=True, slots=True)
class RawQueryEngines:
    """A ``RawQueryEngineProvider``: the engine for an engine name."""

    session: EngineSession

    def __call__(self, name: str) -> SessionRawQueryEngine:
        if name.lower() not in ENGINE_NAMES:
            raise EngineUnavailableError(
                f"no engine {name!r}: this coordinator runs {', '.join(ENGINE_NAMES)} queries"
            )
        return SessionRawQueryEngine(self.session)
