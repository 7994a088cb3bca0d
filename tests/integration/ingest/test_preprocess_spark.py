"""The preprocess step through the real Spark engine (the workspace's engine session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.odf.events import AddPushSource
from common.odf.fragments import (
    MergeStrategySnapshot,
    ReadStepCsv,
    SqlQueryStep,
    TransformSql,
)
from coordinator.app import Application, IngestFile, IngestOptions
from coordinator.engine import EngineMounts, EnginePool
from coordinator.ingest.errors import PreprocessError
from coordinator.workspace import Workspace
from tests.unit.ingest.helpers import add_data_events, all_data, new_dataset, rows

pytestmark = pytest.mark.spark


def source(name: str, *queries: SqlQueryStep) -> AddPushSource:
    return AddPushSource(
        source_name=name,
        read=ReadStepCsv(schema=("city STRING", "population BIGINT")),
        preprocess=TransformSql(engine="spark", queries=queries),
        merge=MergeStrategySnapshot(primary_key=("city",)),
    )


def test_preprocess_queries_shape_the_data(tmp_path: Path) -> None:
    """As the reference's polling snapshot test: ``population * 10`` as step1, then ``+ 1``."""
    good = source(
        "good",
        SqlQueryStep(alias="step1", query="SELECT city, population * 10 AS population FROM input"),
        SqlQueryStep(query="SELECT city, population + 1 AS population FROM step1"),
    )
    bad = source("bad", SqlQueryStep(query="SELECT no_such_column FROM input"))
    ds = new_dataset(tmp_path, good, bad)
    data = tmp_path / "a.csv"
    data.write_text("A,1000\nB,2000\nC,3000\n")
    ws = Workspace(tmp_path / "ws")
    app = Application(ws)
    # As `odf ingest` runs it: the application's session starts the engine at the first
    # preprocess query; a pool (as the daemon's) lets both ingests share one engine.
    app.pool = EnginePool(app.provider, EngineMounts.of([], [ws.datasets_dir]), idle_timeout=600)
    try:
        (result,) = app.ingest(ds.alias, [IngestFile(data, "a.csv")], IngestOptions("good"))
        assert result.num_records == 3
        assert rows(all_data(ds), "op", "city", "population") == [
            (0, "A", 10001),
            (0, "B", 20001),
            (0, "C", 30001),
        ]
        head = ds.head()
        with pytest.raises(PreprocessError, match="the preprocess query is invalid") as e:
            list(app.ingest(ds.alias, [IngestFile(data, "a.csv")], IngestOptions("bad")))
        assert "\n" not in str(e.value)
        assert ds.head() == head
    finally:
        app.pool.close()
    assert len(add_data_events(ds)) == 1
