"""The daemon's JSON-lines log: written bounded (``common.logs.LogFile``), read back and
rendered one escaped line an entry (``odf daemon logs``)."""

from __future__ import annotations

import json
from pathlib import Path

from common.logs import LogFile
from coordinator.cli.daemon_logs import last_entries, render_entry


def test_entries_are_json_lines_and_the_file_rotates_when_full(tmp_path: Path) -> None:
    sink = LogFile(tmp_path / "daemon.log", max_bytes=300)
    for i in range(10):
        sink(None, "info", {"event": "e", "i": i, "timestamp": "2026-11-28T09:41:13.5Z"})
    current = (tmp_path / "daemon.log").read_text().splitlines()
    older = (tmp_path / "daemon.log.1").read_text().splitlines()
    assert (tmp_path / "daemon.log").stat().st_size <= 300
    assert [json.loads(x)["i"] for x in older + current] == list(range(10))[-len(older + current) :]
    assert [json.loads(x)["i"] for x in last_entries(tmp_path / "daemon.log", 3)] == [7, 8, 9]


def test_an_entry_renders_on_one_line_with_its_text_escaped() -> None:
    line = json.dumps(
        {
            "event": "daemon.call",
            "level": "info",
            "timestamp": "2026-11-28T09:41:13.123456Z",
            "method": "Tail",
            "dataset": "no\x1b[31mred",
            "outcome": "NOT_FOUND: no dataset\nhere",
        }
    )
    shown = render_entry(line)
    assert shown.startswith("2026-11-28T09:41:13Z info    daemon.call method=Tail")
    assert "\x1b" not in shown and "\n" not in shown
    assert "dataset=no\\x1b[31mred" in shown
    assert render_entry("not json\x07") == "not json\\x07"
