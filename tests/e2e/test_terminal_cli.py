"""What a person sees on a terminal, 80 and 160 columns wide (a pseudo-terminal each time).

Tables fit the width, hashes are their shortest unique prefix (whole with ``--wide`` and in
machine formats), times are RFC 3339 with ``Z`` everywhere a person reads them (exact in
machine formats), booleans are ``true``/``false``, counts are singular or plural as they
should be; the pull's progress line counts the records it ingests and says what it waits
for (an engine starting), and the line printed at the end is whole.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from common.serde.yaml_codec import load_snapshots
from coordinator.workspace import Workspace
from tests.support.cli import ok, on_a_terminal
from tests.support.datasets import derivative, polled, root

pytestmark = pytest.mark.e2e

NAME = "com.example.weather-readings"
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
HUMAN_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z"


def screen(cwd: Path, *args: str, columns: int) -> list[str]:
    """The lines ``odf ARGS`` leaves on a terminal of ``columns`` (colours left out)."""
    text = ANSI.sub("", on_a_terminal(cwd, *args, columns=columns))
    return [line.rstrip() for line in text.replace("\r\n", "\n").split("\n") if line.strip()]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ok(tmp_path, "init")
    schema = ["event_time TIMESTAMP", "sensor STRING", "temp DOUBLE", "calibrated BOOLEAN"]
    (tmp_path / "r.yaml").write_text(root(NAME, schema))
    ok(tmp_path, "add", "r.yaml")
    (tmp_path / "one.csv").write_text(
        "event_time,sensor,temp,calibrated\n2026-11-28T09:41:13Z,a,1.5,true\n"
    )
    assert ok(tmp_path, "ingest", NAME, "one.csv").startswith(f"{NAME}: 1 record from one.csv")
    (tmp_path / "two.csv").write_text(
        "event_time,sensor,temp,calibrated\n"
        "2026-11-28T09:41:14.250Z,b,2.5,false\n2026-11-28T09:41:15Z,c,3.5,true\n"
    )
    assert ok(tmp_path, "ingest", NAME, "two.csv").startswith(f"{NAME}: 2 records from two.csv")
    return tmp_path


@pytest.mark.parametrize("columns", [80, 160])
def test_tables_fit_the_terminal_with_short_hashes_and_one_time_format(
    workspace: Path, columns: int
) -> None:
    listed = json.loads(ok(workspace, "list", "-o", "json"))[0]
    head = listed["head"]
    assert len(head) == 69  # machine formats: whole
    log = json.loads(ok(workspace, "log", NAME, "-o", "json"))
    hashes = [b["hash"] for b in log]
    for args in (("list",), ("log", NAME), ("tail", NAME), ("inspect", "schema", NAME)):
        lines = screen(workspace, *args, columns=columns)
        assert all(len(line) <= columns for line in lines), (args, lines)
        text = "\n".join(lines)
        assert not any(h in text for h in hashes), (args, text)  # never a whole hash
        assert "+00:00" not in text and "True" not in text and "False" not in text, text
        header = lines[0].split()
        assert header[0] in ("name", "seq", "offset"), lines  # headers whole, on one line
    listing = screen(workspace, "list", columns=columns)
    assert listing[0].split()[:3] == ["name", "kind", "head"]
    assert listing[2].split()[:3] == [NAME, "Root", head[:13]]  # the name whole, the hash short
    if columns == 160:
        assert listing[0].split()[-2:] == ["updated", "watermark"]
        assert listing[2].endswith("2026-11-28T09:41:15Z")  # the watermark
    else:
        assert listing[-1] == "(updated, watermark: left out at 80 columns, --wide shows them)"
    logged = screen(workspace, "log", NAME, columns=columns)
    shown = [line.split()[1] for line in logged[2:] if line.split()[0].isdigit()]
    assert shown == [h[:13] for h in hashes]  # one per block, the unique prefixes
    assert "(2 records)" in "\n".join(logged) and "(1 record)" in "\n".join(logged)
    assert "watermark=2026-11-28T09:41:15Z" in "".join(logged)
    tail = screen(workspace, "tail", NAME, columns=columns)
    assert re.search(r"\b2026-11-28T09:41:14\.250Z\s+b\s+2\.5\s+false\b", "\n".join(tail))
    assert all(re.fullmatch(HUMAN_TIME, t) for t in re.findall(r"\d{4}-\S+Z", "\n".join(tail)))
    schema = screen(workspace, "inspect", "schema", NAME, columns=columns)
    assert schema[-1].split() == ["calibrated", "bool", "true"]
    assert [line.split()[-1] for line in schema[2:4]] == ["true", "false"]  # offset, op
    wide = "\n".join(screen(workspace, "log", NAME, "--wide", columns=columns))
    assert all(h in wide for h in hashes)


def test_machine_formats_keep_exact_values(workspace: Path) -> None:
    rows = json.loads(ok(workspace, "tail", NAME, "-o", "json"))
    assert [r["event_time"] for r in rows] == [
        "2026-11-28T09:41:13Z",
        "2026-11-28T09:41:14.250000Z",
        "2026-11-28T09:41:15Z",
    ]
    assert [r["calibrated"] for r in rows] == [True, False, True]
    csv_lines = ok(workspace, "log", NAME, "-o", "json")
    assert all(len(b["hash"]) == 69 for b in json.loads(csv_lines))
    piped = ok(workspace, "list")  # a table to a pipe is still for people
    assert re.search(rf"{NAME}\s+Root\s+f1620[0-9a-f]{{8}}\s", piped)


@pytest.mark.parametrize("columns", [80, 160])
def test_pull_progress_counts_the_records_being_ingested(tmp_path: Path, columns: int) -> None:
    name = "com.example.a-rather-long-polled-dataset-name"
    ok(tmp_path, "init")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    rows = 1_200_000  # long enough (seconds) for the display to refresh while it reads
    with open(inbox / "day-2026-11-28.csv", "w") as f:
        f.write("city,population\n")
        f.writelines(f"c{i},{i}\n" for i in range(rows))
    glob = f"{inbox}/day-*.csv"
    (tmp_path / "p.yaml").write_text(polled(name, glob, ["city STRING", "population BIGINT"]))
    ok(tmp_path, "add", "p.yaml")
    raw = ANSI.sub("", on_a_terminal(tmp_path, "pull", name, columns=columns))
    frames = [f for f in re.split(r"[\r\n]+", raw) if f.strip()]
    progress = [f for f in frames if f"pull {name}"[:20] in f]
    assert progress, frames
    assert all(len(f.rstrip()) <= columns for f in progress), progress  # one line each
    counts = [int(m.group(1).replace(",", "")) for f in progress if (m := _count(f))]
    assert counts and counts[-1] == rows and 0 < counts[0] <= rows, progress
    assert counts == sorted(counts)
    assert not any(re.search(r"\b0 records", f) for f in progress), progress
    assert any("reading day-2026-11-28.csv"[: columns // 8] in f for f in progress), progress
    final = f"{name}: {rows} records from the polling source (head f1620"
    assert final in raw.replace("\r", "")  # on one line, however narrow the terminal


def _count(frame: str) -> re.Match[str] | None:
    return re.search(r"([\d,]+) records?\b", frame)


def test_the_wait_for_an_engine_has_a_spinner_and_a_phase(tmp_path: Path) -> None:
    """An engine that never answers (a remote one at a closed port) stands for a slow start:
    the pull's line says so until the start times out."""
    _unreachable_engine(tmp_path)
    raw = ANSI.sub("", on_a_terminal(tmp_path, "pull", "big", columns=80))
    frames = [f for f in re.split(r"[\r\n]+", raw) if "pull big" in f]
    waiting = [f for f in frames if "starting engine ..." in f]
    spinners = {f.split()[0] for f in waiting}
    assert len(waiting) >= 5 and len(spinners) >= 3, frames  # it turns while it waits
    assert "error: " in raw


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["sql", "-c", "SELECT count(*) FROM cities"], id="sql"),
        pytest.param(["add", "d.yaml"], id="add-a-derivative"),
    ],
)
def test_every_command_waiting_for_an_engine_says_so(tmp_path: Path, command: list[str]) -> None:
    """Not only pull: a query and a derivative's validation wait for an engine too (a replay
    shares ``Application.engines`` with them),
    and show it while it starts (here, until a remote engine at a closed port times out)."""
    _unreachable_engine(tmp_path)
    (tmp_path / "d.yaml").write_text(derivative("d", CITIES_QUERY, ["cities"]))
    raw = ANSI.sub("", on_a_terminal(tmp_path, *command, columns=80))
    waiting = [f for f in re.split(r"[\r\n]+", raw) if "starting engine ..." in f]
    assert len(waiting) >= 3, raw


CITIES_QUERY = "SELECT event_time, city FROM cities"


def _unreachable_engine(tmp_path: Path) -> None:
    """A workspace with a root ``cities`` (one record) and its derivative ``big`` (created
    directly: ``odf add`` starts an engine), whose engine is a remote one at a closed port:
    it stands for a slow start until it times out (3 s)."""
    ok(tmp_path, "init")
    (tmp_path / "r.yaml").write_text(root("cities", ["city STRING", "population BIGINT"]))
    ok(tmp_path, "add", "r.yaml")
    (tmp_path / "c.csv").write_text("city,population\nA,1\n")
    ok(tmp_path, "ingest", "cities", "c.csv")
    ws = Workspace.find(tmp_path)
    for snapshot in load_snapshots(derivative("big", CITIES_QUERY, ["cities"])):
        ws.create_dataset(snapshot)
    (ws.odf_dir / "config.yaml").write_text(
        "engine:\n  provider: remote\n  address: 127.0.0.1:9\n  startTimeout: 3\n"
    )
