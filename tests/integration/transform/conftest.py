"""One embedded engine (``python -m engine_spark`` on a Unix socket) for every test here.

Started by the coordinator's own ``EmbeddedEngineProvider``, exactly as ``odf pull`` starts it,
and kept warm for the whole session: Spark takes many seconds to start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.engine import EngineSession
from coordinator.engine.embedded import EmbeddedEngineProvider


@pytest.fixture(scope="session")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineSession]:
    """Serves files anywhere in this run's temporary directory (its data root)."""
    root = Path(tmp_path_factory.getbasetemp())
    provider = EmbeddedEngineProvider(master="local[2]", start_timeout=300, data_roots=(root,))
    with EngineSession(provider) as session:
        yield session
