"""What a daemon remembers of its queries for the next start's warm-up (``query_warm_up``)."""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.daemon.query_warm_up import (
    KEEP,
    MAX_QUERY_SECONDS,
    MAX_SQL_BYTES,
    RECENT_FILE,
    RecentQueries,
    RecentQuery,
)


def test_the_last_distinct_quick_queries_are_kept_most_recent_last(tmp_path: Path) -> None:
    recent = RecentQueries(tmp_path)
    assert recent.load() == []
    for i in range(KEEP + 3):
        recent.record(f"SELECT {i}", 1000, 0.1)
    recent.record("SELECT 5", 1000, 0.1)  # again: moved to the end, not repeated
    recent.record("SELECT 5", None, 0.1)  # another limit: another query
    loaded = recent.load()
    assert len(loaded) == KEEP
    assert loaded[-2:] == [RecentQuery("SELECT 5", 1000), RecentQuery("SELECT 5", None)]
    assert [q.sql for q in loaded].count("SELECT 5") == 2
    assert RecentQuery("SELECT 0", 1000) not in loaded
    assert (tmp_path / RECENT_FILE).stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [RECENT_FILE]  # no temporary file left


def test_slow_and_long_queries_are_not_kept(tmp_path: Path) -> None:
    recent = RecentQueries(tmp_path)
    recent.record("SELECT slow", None, MAX_QUERY_SECONDS + 0.1)
    recent.record("SELECT '" + "x" * MAX_SQL_BYTES + "'", None, 0.1)
    assert recent.load() == []
    recent.record("SELECT started", None, None)  # an engine started meanwhile: time unknown
    assert recent.load() == [RecentQuery("SELECT started", None)]


def test_a_file_not_written_by_a_daemon_gives_nothing_or_its_valid_entries(tmp_path: Path) -> None:
    path = tmp_path / RECENT_FILE
    recent = RecentQueries(tmp_path)
    for text in ("not json", '{"sql": "SELECT 1"}', "[1, 2]"):
        path.write_text(text)
        assert recent.load() == [], text
    entries = [
        {"sql": "SELECT 1", "limit": 10},
        {"sql": 1},
        {"sql": "SELECT 2", "limit": True},
        {"sql": "SELECT 3", "limit": "10"},
        {"sql": "SELECT 4", "limit": None},
    ]
    path.write_text(json.dumps(entries))
    assert recent.load() == [RecentQuery("SELECT 1", 10), RecentQuery("SELECT 4", None)]
    path.write_text(" " * (300 << 10))  # too large to be one
    assert recent.load() == []
