"""Derivatives pulled through a Spark Connect server (``engine.master: sc://...``) give what
local mode gives; what cannot run over Connect is refused saying why.

One Connect server from pip pyspark's ``start-connect-server.sh`` (tests/support/
spark_connect.py). The embedded engine vets each query in its local JVM over empty inputs,
then the server reads the inputs' Parquet files (this machine's disk) and runs the same SQL.
A derivative chain of two row-wise transforms over a two-file input is pulled in local mode
and over Connect: records, offsets and logical hashes are equal, and the server's log shows
it listed the input's two files. Raw queries (row-wise, aggregated, ORDER BY) in this
process give the same output files locally and over Connect. A hostile query is refused by
the local sandbox before reaching the server, a stateful one with "not supported over Spark
Connect" (the same pull); neither dataset moves. A Connect server and two engine starts:
~90 s for the module on this machine (~200 s when other Spark jobs share it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from engine_spark.connect import ConnectServer
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from engine_spark.session import SessionSettings, build_session
from tests.integration.engine.datasets import sql
from tests.integration.transform.pipeline import ROUNDS, SNAPSHOTS, execute_transforms, records
from tests.support.cli import odf, ok
from tests.support.datasets import derivative
from tests.support.spark_connect import ConnectServerProcess, connect_server
from tests.support.workspace import add, dataset, ingest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

SYSTEM_TIME = "2030-01-01T00:00:00Z"
CHAIN = ("big-cities", "big-cities-x10")
STATEFUL = derivative(
    "city-count",
    "SELECT max(event_time) AS event_time, city, count(*) AS n FROM cities GROUP BY city",
    ["cities"],
)
HOSTILE = derivative(
    "city-env",
    "SELECT event_time, reflect('java.lang.System', 'getenv', 'HOME') AS home FROM cities",
    ["cities"],
)


def _workspace(directory: Path, config: str | None = None) -> Path:
    """``cities`` with two ingested files, its derivatives added before any data (so their
    queries are first checked by the pull)."""
    ws = directory / "ws"
    ws.mkdir(parents=True)
    ok(ws, "init")
    if config is not None:
        (ws / ".odf" / "config.yaml").write_text(config)
    add(ws, SNAPSHOTS["cities"], *(SNAPSHOTS[n] for n in CHAIN), STATEFUL, HOSTILE)
    for index in (0, 1):
        ingest(ws, "cities", ROUNDS[index]["cities"], file=f"cities-{index}.csv")
    return ws


def _slices(ws: Path, name: str) -> list[tuple[object, object]]:
    return [
        (e.new_data.offset_interval, e.new_data.logical_hash) if e.new_data else (None, None)
        for _, e in execute_transforms(dataset(ws, name))
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServerProcess]:
    with connect_server(tmp_path_factory.mktemp("connect")) as process:
        yield process


def test_stateless_chain_over_spark_connect_matches_local_mode(
    server: ConnectServerProcess, tmp_path: Path
) -> None:
    local = _workspace(tmp_path / "local")
    ok(local, "pull", CHAIN[-1], "--recursive", "--system-time", SYSTEM_TIME)
    ws = _workspace(tmp_path / "over-connect", f"engine:\n  master: {server.url}\n")
    # One pull of everything: the chain commits, the other two fail and are reported.
    pulled = odf(ws, "pull", "--all", "--system-time", SYSTEM_TIME)
    server_log = "".join(p.read_text(errors="replace") for p in server.log_dir.glob("*.out"))
    # The server itself listed big-cities' input: cities' two data files.
    assert "to list leaf files for 2 paths" in server_log, "the server read no input"
    for name in CHAIN:
        assert records(dataset(ws, name)).equals(records(dataset(local, name))), name
        assert _slices(ws, name) == _slices(local, name), name
        assert _slices(ws, name)[0][0] is not None, name
    assert pulled.returncode == 1, pulled
    report = pulled.stdout + pulled.stderr
    stateful = next(
        line for line in report.splitlines() if "city-count" in line and "error" in line.lower()
    )
    hostile = next(
        line for line in report.splitlines() if "city-env" in line and "error" in line.lower()
    )
    assert "not supported over Spark Connect: a stateful query" in stateful, report
    assert "reflect" in hostile, report
    for name in ("city-count", "city-env"):
        assert execute_transforms(dataset(ws, name)) == [], name


RAW_QUERIES = (
    "SELECT upper(city) AS city, population * 2 AS p2 FROM input WHERE population > 10",
    "SELECT city, sum(population) AS total, count(*) AS n FROM input GROUP BY city",
    "SELECT city, population FROM input ORDER BY population DESC, city",
)
"""Row-wise (input order over two files), aggregated (sorted by value), ORDER BY (Spark's)."""


@pytest.mark.spark
def test_raw_queries_over_spark_connect_match_local_mode(
    server: ConnectServerProcess, tmp_path: Path
) -> None:
    """ExecuteRawQuery in this process: one local session, an engine on it and one that
    executes on the server; every query's output file holds the same table."""
    files = []
    for index, rows in enumerate(
        [
            {"city": ["b", "a", "c"], "population": [5, 500, 5000]},
            {"city": ["a"], "population": [7]},
        ]
    ):
        files.append(str(tmp_path / f"input-{index}"))  # kamu's paths: no extension
        pq.write_table(pa.table(rows), files[-1])
    session = build_session(SessionSettings(master="local[1]"))
    try:
        local = SparkEngine(session)
        remote = SparkEngine(session, connect=ConnectServer(server.url))
        for index, query in enumerate(RAW_QUERIES):
            outputs = []
            for engine in (local, remote):
                path = str(tmp_path / f"out-{index}-{len(outputs)}")
                request = ep.RawQueryRequest(
                    input_data_paths=tuple(files), transform=sql(query), output_data_path=path
                )
                engine.execute_raw_query(request)
                outputs.append(pq.read_table(path))
            assert outputs[1].equals(outputs[0]), query
        hostile = ep.RawQueryRequest(
            input_data_paths=tuple(files),
            transform=sql("SELECT java_method('java.lang.System', 'getenv', 'HOME') FROM input"),
            output_data_path=str(tmp_path / "hostile"),
        )
        with pytest.raises(InvalidQueryError, match="java_method"):
            remote.execute_raw_query(hostile)
        assert not (tmp_path / "hostile").exists()
    finally:
        session.stop()
