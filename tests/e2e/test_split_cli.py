"""Split transactions through the CLI on the embedded engine: a row-local derivative pulled
over a backlog of three input blocks with ``transform.split`` set low becomes three ordinary
ExecuteTransform blocks holding the unsplit records, and ``odf verify --recursive`` passes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf.events import ExecuteTransform
from coordinator.workspace import Workspace
from tests.e2e.test_verify_cli import BIG_CITIES, CITIES
from tests.support.cli import ok
from tests.support.workspace import add, ingest, new_workspace

pytestmark = pytest.mark.e2e

BATCHES = (
    "2024-01-01T00:00:00Z,A,500\n2024-01-02T00:00:00Z,B,5000\n2024-01-03T00:00:00Z,C,7000\n",
    "2024-01-04T00:00:00Z,D,9000\n2024-01-05T00:00:00Z,E,50\n",
    "2024-01-06T00:00:00Z,F,9100\n2024-01-07T00:00:00Z,G,9200\n",
)


def test_a_row_local_pull_over_three_blocks_commits_three_verified_blocks(tmp_path: Path) -> None:
    ws = new_workspace(tmp_path / "ws")
    (ws / ".odf" / "config.yaml").write_text(
        "transform:\n  split:\n    minRecords: 2\n    slices: 3\n"
    )
    add(ws, CITIES, BIG_CITIES)
    for i, batch in enumerate(BATCHES):
        ingest(ws, "cities", "event_time,city,population\n" + batch, file=f"batch{i}.csv")
    ok(ws, "pull", "big-cities")
    derived = Workspace(ws).open_dataset("big-cities")
    events = [b.event for _, b in derived.iter_blocks() if isinstance(b.event, ExecuteTransform)]
    events.reverse()
    assert len(events) == 3
    files = [derived.data_path(e.new_data.physical_hash) for e in events if e.new_data]
    table = pa.concat_tables([pq.read_table(f) for f in files])
    assert table.column("offset").to_pylist() == list(range(5))
    assert table.column("city").to_pylist() == ["B", "C", "D", "F", "G"]
    assert "big-cities: ok" in ok(ws, "verify", "--recursive", "big-cities")
