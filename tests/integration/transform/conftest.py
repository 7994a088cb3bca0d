"""One embedded engine (``python -m engine_spark`` on a Unix socket) for every test here.

Started by the coordinator's own ``EmbeddedEngineProvider``, exactly as ``odf pull`` starts it,
and kept warm for the whole session: Spark takes many seconds to start.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordinator.engine import EngineSession
from coordinator.engine.embedded import EmbeddedEngineProvider


@pytest.fixture(scope="session")
def engines() -> Iterator[EngineSession]:
    with EngineSession(EmbeddedEngineProvider(master="local[2]", start_timeout=300)) as session:
        yield session
