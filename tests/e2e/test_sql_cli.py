"""``odf sql`` as a real process on a real workspace, through each kind of engine provider.

One workspace (two dotted-name root datasets ingested from CSV, one never ingested) is queried
with the default embedded engine once; the other cases run against one engine server
(``provider: remote``) so they cost a process start each, not a Spark start; the container
case runs the engine image.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from tests.support.cli import odf, ok
from tests.support.datasets import root
from tests.support.engine_server import engine_server_process, make_certificate
from tests.support.images import BuiltImage
from tests.support.workspace import add, ingest, new_workspace

pytestmark = pytest.mark.e2e

TOKEN = "e2e-engine-token"

FLIGHTS = root(
    "nyc.flights",
    ["dep TIMESTAMP NOT NULL", "carrier STRING", "delay BIGINT"],
    event_time="dep",
)
AIRLINES = root(
    "nyc.airlines", ["carrier STRING", "name STRING"], merge="Snapshot", primary_key=["carrier"]
)
NOTHING_YET = AIRLINES.replace("nyc.airlines", "nyc.later")

BY_CARRIER = (
    "SELECT a.name, COUNT(*) AS flights, SUM(f.delay) AS delay "
    "FROM `nyc.flights` f JOIN `nyc.airlines` a ON a.carrier = f.carrier GROUP BY a.name"
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = new_workspace(tmp_path_factory.mktemp("sql") / "ws")
    add(ws, FLIGHTS, AIRLINES, NOTHING_YET)
    slices = [
        "dep,carrier,delay\n2024-01-01T10:00:00Z,AA,5\n2024-01-01T11:00:00Z,UA,10\n",
        "dep,carrier,delay\n2024-01-02T10:00:00.123456789Z,AA,20\n2024-01-02T11:00:00Z,DL,1\n",
    ]
    for i, text in enumerate(slices):
        ingest(ws, "nyc.flights", text, file=f"flights-{i}.csv")
    ingest(ws, "nyc.airlines", "carrier,name\nAA,American\nDL,Delta\nUA,United\n")
    return ws


@dataclass(frozen=True)
class Remote:
    workspace: Path
    target: str


@pytest.fixture(scope="module")
def remote(workspace: Path) -> Iterator[Remote]:
    """One running engine server, exposed as it should be: TLS and a token."""
    base = workspace.parent
    cert, key = make_certificate(base)
    (base / "engine.token").write_text(TOKEN)
    args = [
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--token-file",
        str(base / "engine.token"),
    ]
    tls = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    copy = base / "remote"
    shutil.copytree(workspace, copy)
    with engine_server_process(data_roots=[base], credentials=tls, extra_args=args) as server:
        (copy / ".odf" / "engine.token").write_text(TOKEN + "\n")
        shutil.copy(cert, copy / ".odf" / "engine-ca.pem")
        (copy / ".odf" / "config.yaml").write_text(remote_config(server.target))
        yield Remote(workspace=copy, target=server.target)


def remote_config(target: str, token_file: str = "engine.token") -> str:
    return (
        f"engine:\n  provider: remote\n  address: {target}\n"
        f"  tokenFile: {token_file}\n  tlsCa: engine-ca.pem\n"
    )


@pytest.fixture(scope="module")
def remote_workspace(remote: Remote) -> Path:
    """A copy of the workspace whose engine is the running engine server."""
    return remote.workspace


def test_a_wrong_token_is_a_one_line_error(remote: Remote, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(remote.workspace, ws)
    (ws / ".odf" / "wrong.token").write_text("not-the-token")
    (ws / ".odf" / "config.yaml").write_text(remote_config(remote.target, "wrong.token"))
    result = odf(ws, "sql", "-c", "SELECT 1 AS x")
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "UNAUTHENTICATED: a valid engine token is required" in line
    assert "check engine.tokenFile" in line


def test_a_workspace_outside_the_engine_roots_is_refused(
    remote: Remote, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ws = tmp_path_factory.mktemp("elsewhere") / "ws"
    shutil.copytree(remote.workspace, ws)
    result = odf(ws, "sql", "-c", "SELECT count(*) AS n FROM `nyc.airlines`")
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert "outside the engine's data roots" in line
    assert not list((ws / ".odf").glob("**/.query-*"))


def test_embedded_engine_join_and_aggregate_as_json(workspace: Path) -> None:
    rows = json.loads(ok(workspace, "sql", "--command", BY_CARRIER, "-o", "json"))
    assert rows == [
        {"name": "American", "flights": 2, "delay": 25},
        {"name": "Delta", "flights": 1, "delay": 1},
        {"name": "United", "flights": 1, "delay": 10},
    ]
    assert not list((workspace / ".odf").glob("**/.query-*"))


def test_script_alias_table_and_limit(remote_workspace: Path) -> None:
    script = remote_workspace / "late.sql"
    script.write_text(
        "-- flights with their airline, latest first\n"
        "SELECT f.dep, f.carrier, a.name FROM `NYC.Flights` f\n"
        "JOIN air a USING (carrier) ORDER BY f.dep DESC;\n"
    )
    result = odf(remote_workspace, "sql", "--script", str(script), "-i", "air=nyc.airlines")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["dep", "carrier", "name"]
    # Nanosecond CSV timestamps reach the engine and come back at millisecond precision.
    assert lines[1].split() == ["2024-01-02T11:00:00Z", "DL", "Delta"]
    assert lines[2].split() == ["2024-01-02T10:00:00.123Z", "AA", "American"]
    assert len(lines) == 5 and result.stderr == ""

    result = odf(
        remote_workspace,
        "sql",
        *("-f", "-", "--input", "air=nyc.airlines", "--limit", "1", "-o", "csv"),
        stdin=script.read_text(),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "dep,carrier,name\n2024-01-02T11:00:00Z,DL,Delta\n"
    assert "1 of 4 rows shown, 3 left out" in result.stderr


def test_all_records_of_a_dataset_and_repeated_columns_as_yaml(remote_workspace: Path) -> None:
    out = ok(
        remote_workspace,
        "sql",
        "-c",
        "SELECT f.offset, f.carrier, a.carrier FROM `nyc.flights` f "
        "LEFT JOIN `nyc.airlines` a ON a.carrier = f.carrier AND a.name <> 'Delta' "
        "ORDER BY f.offset",
        "-o",
        "yaml",
    )
    assert out == (
        "- offset: 0\n  carrier: AA\n  carrier_2: AA\n"
        "- offset: 1\n  carrier: UA\n  carrier_2: UA\n"
        "- offset: 2\n  carrier: AA\n  carrier_2: AA\n"
        "- offset: 3\n  carrier: DL\n  carrier_2: null\n"
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "SELECT * FROM nyc.flights",
            "table nyc.flights is not allowed: a query may only read its inputs (its inputs,"
            " earlier steps and CTEs, by single-part names; quote a dataset name that contains"
            " dots with backticks: `nyc.flights`)",
        ),
        ("SELECT * FROM `nyc.later`", "(no data yet, so no view: 'nyc.later')"),
        ("SELECT nope FROM `nyc.flights`", "UNRESOLVED_COLUMN"),
        ("SELECT 1; SELECT 2", "--command: one query expected, found 2 statements"),
        ("SELECT 'open", "unterminated 'string' starting at line 1, column 8"),
    ],
)
def test_errors_are_one_line_and_exit_1(remote_workspace: Path, query: str, message: str) -> None:
    result = odf(remote_workspace, "sql", "-c", query)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert message in result.stderr.splitlines()[0]


@pytest.mark.containerized
def test_container_engine(workspace: Path, engine_image: BuiltImage) -> None:
    copy = workspace.parent / "container"
    shutil.copytree(workspace, copy)
    (copy / ".odf" / "config.yaml").write_text(engine_image.engine_config)
    out = ok(copy, "sql", "-c", BY_CARRIER + " ORDER BY delay DESC", "-o", "csv")
    assert out == "name,flights,delay\nAmerican,2,25\nUnited,1,10\nDelta,1,1\n"
    assert not list((copy / ".odf").glob("**/.query-*"))
