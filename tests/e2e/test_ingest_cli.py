"""``odf ingest`` and ``odf pull`` run as real processes on a real workspace."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from common.serde.yaml_codec import load_snapshots
from coordinator.ingest.context import data_files
from coordinator.workspace import Workspace
from tests.support.cli import odf, ok
from tests.support.datasets import DAY_FILE, polled, push_source, root

pytestmark = pytest.mark.e2e


CITY_COLUMNS = ["date TIMESTAMP NOT NULL", "city STRING", "population BIGINT"]
CITIES = root(
    "cities",
    CITY_COLUMNS,
    merge="Ledger",
    primary_key=["date", "city"],
    event_time="date",
    events=[
        push_source(
            "plus", CITY_COLUMNS, read="NdJson", merge="Ledger", primary_key=["date", "city"]
        )
    ],
)


def polled_cities(inbox: Path, *, header: bool = False) -> str:
    """``polled``: a snapshot of the cities in the inbox's ``day-YYYY-MM-DD.csv`` files."""
    return polled(
        "polled",
        f"{inbox}/day-*.csv",
        ["city STRING", "population BIGINT"],
        merge="Snapshot",
        primary_key=["city"],
        header=header,
        event_time_pattern=DAY_FILE,
    )


UNREACHABLE = """\
kind: DatasetSnapshot
version: 1
content:
  name: remote
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: http://127.0.0.1:{port}/data.csv
      read:
        kind: Csv
        schema: ["city STRING"]
      merge:
        kind: Append
"""


def records(ws: Path, name: str) -> list[dict[str, object]]:
    ds = Workspace(ws).open_dataset(name)
    return [r for f in data_files(ds, ds.head()) for r in pq.read_table(f).to_pylist()]


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    with socket.socket() as closed_port:  # bound, never listening: connections are refused
        closed_port.bind(("127.0.0.1", 0))
        port = closed_port.getsockname()[1]
        ws = Workspace.init(tmp_path)  # `odf init` and `odf add` are tested elsewhere
        for text in (CITIES, polled_cities(inbox), UNREACHABLE.format(port=port)):
            for snapshot in load_snapshots(text):
                ws.create_dataset(snapshot)
        yield tmp_path


def test_ingest_files_and_stdin(workspace: Path) -> None:
    (workspace / "a.csv").write_text("date,city,population\n2020-01-02,B,2\n2020-01-01,A,1\n")
    (workspace / "b.csv").write_text("date,city,population\n2020-01-01,A,1\n2020-01-03,C,3\n")
    result = odf(workspace, "ingest", "cities", "a.csv", "b.csv", "--source-name", "main")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cities: 2 records from a.csv (head f1620")
    assert lines[1].startswith("cities: 1 record from b.csv")

    ndjson = '{"date": "2020-01-04", "city": "D", "population": 4}\n'
    result = odf(workspace, "ingest", "cities", "-", "--source-name", "plus", stdin=ndjson)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("cities: 1 record from <stdin>")
    assert [(r["offset"], r["city"]) for r in records(workspace, "cities")] == [
        (0, "A"),
        (1, "B"),
        (2, "C"),
        (3, "D"),
    ]


def test_ingest_errors_are_one_line_and_change_nothing(workspace: Path) -> None:
    (workspace / "bad.csv").write_text("date,city,population\n2020-01-01,A,1\n2020-01-02,B,lots\n")
    cases = [
        (
            ("ingest", "cities", "bad.csv", "--source-name", "main"),
            "error: bad.csv:3: column 'population': invalid int64 value 'lots'",
        ),
        (
            ("ingest", "cities", "bad.csv"),
            "error: dataset 'cities' has several push sources (main, plus): choose one",
        ),
        (("ingest", "nope", "bad.csv"), "error: dataset 'nope' not found in the workspace"),
        (("ingest", "cities", "missing.csv"), "error: missing.csv: no such file"),
        (
            ("ingest", "cities", "bad.csv", "--event-time", "yesterday"),
            "error: --event-time: 'yesterday' is not an RFC 3339 time",
        ),
        (("pull", "remote"), "error: http://127.0.0.1:"),
    ]
    for args, message in cases:
        result = odf(workspace, *args)
        assert result.returncode == 1, args
        assert result.stderr.startswith(message), (args, result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
    assert records(workspace, "cities") == []


def test_pull_runs_the_polling_source_to_exhaustion(workspace: Path) -> None:
    (workspace / "inbox" / "day-2020-01-01.csv").write_text("A,1\nB,2\n")
    (workspace / "inbox" / "day-2020-01-02.csv").write_text("A,1\nB,3\n")
    result = odf(workspace, "pull", "polled", "--system-time", "2031-01-01T00:00:00Z")
    assert result.returncode == 0, result.stderr
    assert [line.split(" (")[0] for line in result.stdout.splitlines()] == [
        "polled: 2 records from the polling source",
        "polled: 2 records from the polling source",
    ]
    pulled = records(workspace, "polled")
    assert {r["system_time"] for r in pulled} == {datetime(2031, 1, 1, tzinfo=UTC)}
    assert [(r["op"], r["city"], r["population"]) for r in pulled][2:] == [
        (2, "B", 2),
        (3, "B", 3),
    ]
    again = odf(workspace, "pull", "polled")
    assert again.stdout == "polled: up to date\n"


def test_an_empty_push_into_a_declared_schema_records_the_schema(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert odf(ws, "init").returncode == 0
    (ws / "a.yaml").write_text(root("a", ["id BIGINT", "v STRING"]))
    assert odf(ws, "add", "a.yaml").returncode == 0
    (ws / "empty.csv").write_text("id,v\n")
    first = odf(ws, "ingest", "a", "empty.csv")
    assert first.returncode == 0 and first.stdout.startswith("a: 0 records from empty.csv (head")
    dataset = Workspace(ws).open_dataset("a")
    head = dataset.head()
    assert head is not None and type(dataset.get_block(head).event).__name__ == "SetDataSchema"
    schema = odf(ws, "inspect", "schema", "a", "-o", "csv").stdout.splitlines()
    assert schema[-2:] == ["id,int64,true", "v,string,true"]
    assert odf(ws, "ingest", "a", "empty.csv").stdout == "a: up to date\n"  # recorded once
    assert odf(ws, "verify", "a").returncode == 0


READINGS = root(
    "readings",
    ["ts TIMESTAMP", "sensor STRING", "temp DOUBLE", "humidity DOUBLE"],
    event_time="ts",
)


def test_csv_header_is_matched_by_name_unless_positions_are_asked_for(tmp_path: Path) -> None:
    ok(tmp_path, "init")
    (tmp_path / "readings.yaml").write_text(READINGS)
    ok(tmp_path, "add", "readings.yaml")
    # temp and humidity swapped in the header: read by name, not by position
    (tmp_path / "swapped.csv").write_text(
        "ts,sensor,humidity,temp\n2020-01-01T00:00:00Z,s1,80,21.5\n"
    )
    ok(tmp_path, "ingest", "readings", "swapped.csv")
    assert [(r["temp"], r["humidity"]) for r in records(tmp_path, "readings")] == [(21.5, 80.0)]
    # a header that is not a permutation of the schema's names: one located line, no commit
    (tmp_path / "other.csv").write_text("ts,sensor,hum,temp\n2020-01-02T00:00:00Z,s1,81,22.5\n")
    result = odf(tmp_path, "ingest", "readings", "other.csv")
    assert result.returncode == 1
    assert result.stderr == (
        "error: other.csv:1: the header's columns [ts, sensor, hum, temp] do not match the"
        " schema's [ts, sensor, temp, humidity] (missing: humidity; not in the schema: hum);"
        " columns are matched by name, in any order (`odf config set"
        " ingest.csvColumnsByPosition NAME` reads them by position, skipping the header)\n"
    )
    assert len(records(tmp_path, "readings")) == 1
    # asked for explicitly: by position, the header line only skipped
    ok(tmp_path, "config", "set", "ingest.csvColumnsByPosition", "[readings]")
    assert ok(tmp_path, "config", "get", "ingest.csvColumnsByPosition") == "readings\n"
    ok(tmp_path, "ingest", "readings", "other.csv")
    assert [(r["temp"], r["humidity"]) for r in records(tmp_path, "readings")][1] == (81.0, 22.5)
    # the same for a polling source, through `odf pull`
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    polled_yaml = polled_cities(inbox, header=True)
    (tmp_path / "polled.yaml").write_text(polled_yaml)
    ok(tmp_path, "add", "polled.yaml")
    (inbox / "day-2020-01-01.csv").write_text("population,city\n1,A\n")
    ok(tmp_path, "pull", "polled")
    assert [(r["city"], r["population"]) for r in records(tmp_path, "polled")] == [("A", 1)]
    ok(tmp_path, "config", "set", "ingest.csvColumnsByPosition", "[readings, polled]")
    (inbox / "day-2020-01-02.csv").write_text("town,people\nA,1\nB,2\n")
    ok(tmp_path, "pull", "polled")
    assert [(r["city"], r["population"]) for r in records(tmp_path, "polled")][-1] == ("B", 2)
    refused = odf(tmp_path, "config", "set", "ingest.csvColumnsByPosition", "[nope]")
    assert refused.stderr == (
        "error: ingest.csvColumnsByPosition: dataset 'nope' not found in the workspace\n"
    )
