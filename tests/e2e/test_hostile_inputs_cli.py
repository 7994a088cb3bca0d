"""Hostile or broken inputs through ``odf`` processes: refused with one line, nothing changed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from common.serde.yaml_codec import load_snapshots
from coordinator.workspace import Workspace
from tests.support.cli import odf, on_a_terminal
from tests.support.datasets import root

pytestmark = pytest.mark.e2e


def events(name: str = "events") -> str:
    return root(name, ["t TIMESTAMP", "s STRING"], read="NdJson", event_time="t")


EVENTS = events()


def one_line_error(result: subprocess.CompletedProcess[str], start: str) -> None:
    assert result.returncode == 1, result
    assert result.stderr.startswith(f"error: {start}"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = Workspace.init(tmp_path / "ws")
    for snapshot in load_snapshots(EVENTS):
        ws.create_dataset(snapshot)
    return tmp_path / "ws"


def head(ws: Path, name: str = "events") -> str:
    return str(Workspace(ws).open_dataset(name).head())


def test_invalid_utf8_is_refused_with_file_and_line(workspace: Path) -> None:
    before = head(workspace)
    good = b'{"t": "2020-01-01T00:00:00Z", "s": "ok"}\n'
    (workspace / "bad.ndjson").write_bytes(good + b'{"t": "2020-01-01T00:00:00Z", "s": "\xff"}\n')
    one_line_error(odf(workspace, "ingest", "events", "bad.ndjson"), "bad.ndjson:2: invalid UTF-8")
    assert head(workspace) == before
    (workspace / "good.ndjson").write_bytes(good)
    assert odf(workspace, "ingest", "events", "good.ndjson").returncode == 0
    tail = odf(workspace, "tail", "events", "-o", "csv")
    assert tail.returncode == 0 and tail.stdout.endswith(",ok\n"), tail


@pytest.mark.parametrize("linked", [".coordinator/staging", ".coordinator"])
def test_a_symlinked_staging_area_is_refused(workspace: Path, tmp_path: Path, linked: str) -> None:
    target = tmp_path / "victim"
    (target / "old").mkdir(parents=True)
    (target / "old" / "precious").write_text("keep")
    os.utime(target / "old", (0, 0))
    root = Workspace(workspace).open_dataset("events").layout.root
    (root / ".coordinator" / "staging").mkdir(parents=True, exist_ok=True)
    if linked == ".coordinator":
        (root / ".coordinator").rename(tmp_path / "moved")
    else:
        (root / linked).rmdir()
    (root / linked).symlink_to(target)
    before = head(workspace)
    (workspace / "a.ndjson").write_text('{"t": "2020-01-01T00:00:00Z", "s": "a"}\n')
    result = odf(workspace, "ingest", "events", "a.ndjson")
    one_line_error(result, f"{root / linked}: is a symbolic link; refusing")
    assert (target / "old" / "precious").read_text() == "keep"
    assert sorted(p.name for p in target.iterdir()) == ["old"]
    assert head(workspace) == before


def test_an_empty_snapshot_file_is_an_error_naming_it(workspace: Path) -> None:
    (workspace / "good.yaml").write_text(events("other"))
    (workspace / "empty.yaml").write_text("")
    (workspace / "comment.yaml").write_text("# nothing here\n")
    listed = odf(workspace, "list", "-o", "csv").stdout
    for name in ("empty.yaml", "comment.yaml"):
        result = odf(workspace, "add", "good.yaml", name)
        one_line_error(result, f"{name}: no DatasetSnapshot in the file (it is empty)")
    (workspace / "binary.yaml").write_bytes(b"\xff\xfe")
    one_line_error(odf(workspace, "add", "binary.yaml"), "binary.yaml: not UTF-8 text")
    assert odf(workspace, "list", "-o", "csv").stdout == listed  # nothing added


def test_timestamps_of_years_1_to_9999_through_the_cli(workspace: Path) -> None:
    (workspace / "years.ndjson").write_text(
        '{"t": "0001-01-01T00:00:00Z", "s": "1"}\n'
        '{"t": "1500-01-01T00:00:00Z", "s": "1500"}\n'
        '{"t": "3000-01-01T00:00:00Z", "s": "3000"}\n'
        '{"t": "9999-12-31T23:59:59.999Z", "s": "9999"}\n'
    )
    assert odf(workspace, "ingest", "events", "years.ndjson").returncode == 0
    tail = odf(workspace, "tail", "events", "-o", "csv")
    assert tail.returncode == 0, tail.stderr
    assert [line.split(",")[3:] for line in tail.stdout.splitlines()[1:]] == [
        ["0001-01-01T00:00:00Z", "1"],
        ["1500-01-01T00:00:00Z", "1500"],
        ["3000-01-01T00:00:00Z", "3000"],
        ["9999-12-31T23:59:59.999000Z", "9999"],
    ]
    log = odf(workspace, "log", "events")
    assert log.returncode == 0 and "watermark=9999-12-31T23:59:59.999Z" in log.stdout
    before = head(workspace)
    result = odf(
        workspace, "ingest", "events", "years.ndjson", "--event-time", "0001-01-01T00:00+01:00"
    )
    one_line_error(result, "--event-time: '0001-01-01T00:00+01:00' is not an RFC 3339 time")
    assert head(workspace) == before


def test_json_nested_past_the_limit_is_refused_with_its_line(workspace: Path) -> None:
    before = head(workspace)
    deep = "[" * 100_000 + "]" * 100_000
    (workspace / "deep.ndjson").write_text(
        '{"t": "2020-01-01T00:00:00Z", "s": "ok"}\n{"t": "2020-01-01T00:00:00Z", "s": '
        + deep
        + "}\n"
    )
    one_line_error(
        odf(workspace, "ingest", "events", "deep.ndjson"),
        "deep.ndjson:2: JSON nested deeper than 512 arrays and objects (column 547)",
    )
    assert head(workspace) == before


def test_a_document_nested_past_the_limit_across_its_lines_is_refused(workspace: Path) -> None:
    """Pretty-printed Json and GeoJson nest across lines; a snapshot's YAML nests too."""
    before = head(workspace)
    (workspace / "deep.json").write_text("[\n" * 100_000 + "]\n" * 100_000)
    (workspace / "deep.geojson").write_text('{"features": [\n' + "[\n" * 100_000)
    for name, fmt, line in (("deep.json", "json", 513), ("deep.geojson", "geojson", 512)):
        one_line_error(
            odf(workspace, "ingest", "events", name, "--input-format", fmt),
            f"{name}:{line}: JSON nested deeper than 512 arrays and objects (column 1)",
        )
    assert head(workspace) == before
    listed = odf(workspace, "list", "-o", "csv").stdout
    (workspace / "deep.yaml").write_text(events("deep") + "  - " + "- " * 100_000 + "x\n")
    one_line_error(
        odf(workspace, "add", "deep.yaml"),
        "deep.yaml:18:127: invalid YAML: nested deeper than 64 sequences and mappings",
    )
    assert odf(workspace, "list", "-o", "csv").stdout == listed  # nothing added


def test_text_from_elsewhere_reaches_the_terminal_escaped(workspace: Path) -> None:
    hostile = "a\x1b]0;pwned\x07b\x1b[2Jc\u202ed\x9b1m"
    record = {"t": "2020-01-01T00:00:00Z", "s": hostile}
    import json

    (workspace / "h.ndjson").write_text(json.dumps(record) + "\n")
    assert odf(workspace, "ingest", "events", "h.ndjson").returncode == 0
    shown = "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\u202ed\\x9b1m"
    for args in (("tail", "events"), ("tail", "events", "-o", "table")):
        screen = on_a_terminal(workspace, *args)
        for raw in ("\x1b]0;", "\x07", "\x1b[2J", "\u202e", "\x9b"):
            assert raw not in screen, (args, screen)
        assert shown in screen, screen
        piped = odf(workspace, *args)
        assert "\x1b" not in piped.stdout and shown in piped.stdout
    exact = odf(workspace, "tail", "events", "-o", "json")
    assert json.loads(exact.stdout)[0]["s"] == hostile
    exact_csv = odf(workspace, "tail", "events", "-o", "csv")
    assert exact_csv.stdout.splitlines()[1].endswith(f",{hostile}")


def test_a_foreign_description_and_keywords_in_the_log_are_escaped(tmp_path: Path) -> None:
    snapshot = events("described") + (
        "  - kind: SetInfo\n"
        '    description: "evil \\e]0;pwned\\a description"\n'
        '    keywords: ["k\\e[2J", "ok"]\n'
    )
    ws = Workspace.init(tmp_path / "ws")
    for s in load_snapshots(snapshot):
        ws.create_dataset(s)
    screen = on_a_terminal(tmp_path / "ws", "log", "described")
    for raw in ("\x1b]0;", "\x07", "\x1b[2J"):
        assert raw not in screen, screen
    assert "evil \\x1b]0;pwned\\x07 description" in screen and "k\\x1b[2J" in screen
