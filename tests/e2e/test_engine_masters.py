"""A Spark Connect master whose server cannot be reached fails the pull in one line, before
any JVM starts, and leaves the dataset where it was (about 6 s: no Spark; other refused masters
are unit tests, tests/unit/engine_spark/test_masters.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import fails, ok
from tests.support.datasets import derivative, root
from tests.support.workspace import dataset

pytestmark = pytest.mark.e2e


def test_an_unreachable_spark_connect_master_is_refused_in_one_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ok(ws, "init")
    (tmp_path / "a.yaml").write_text(root("a", ["event_time TIMESTAMP", "x BIGINT"]))
    (tmp_path / "b.yaml").write_text(derivative("b", "SELECT event_time, x FROM a", ["a"]))
    ok(ws, "add", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    (tmp_path / "a.csv").write_text("event_time,x\n2024-01-01T00:00:00Z,1\n")
    ok(ws, "ingest", "a", str(tmp_path / "a.csv"))
    head = dataset(ws, "b").state().head
    (ws / ".odf" / "config.yaml").write_text("engine:\n  master: sc://127.0.0.1:1\n")
    line = fails(ws, "pull", "b", only_line=True)
    assert "--master sc://127.0.0.1:1: cannot reach the Spark Connect server" in line, line
    assert dataset(ws, "b").state().head == head
