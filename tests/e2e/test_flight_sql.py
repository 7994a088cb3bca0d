"""``odf serve``'s Arrow Flight SQL server, through clients written elsewhere: the ADBC Flight
SQL driver (its DBAPI cursor, pandas and polars on top of it), pyarrow's Flight client and
kamu's Python client (``kamu.connect``). One daemon serves the module's workspace (its engine
warms up on the first query); a second one, with TLS, serves the TLS checks (no query runs
there, so it starts no engine).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import grpc
import kamu
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from coordinator.daemon.flight_sql_generated import flight_sql_pb2 as fsql
from coordinator.workspace import Workspace
from tests.support.cli import ok
from tests.support.daemon import Served, serving, wait_until
from tests.support.datasets import root
from tests.support.engine_server import make_certificate
from tests.support.hostile_client import HostileClient
from tests.support.workspace import add, ingest, new_workspace

pytestmark = pytest.mark.e2e

FLIGHTS = root(
    "nyc.flights",
    ["dep TIMESTAMP NOT NULL", "carrier STRING", "delay BIGINT"],
    event_time="dep",
)
LATER = root("nyc.later", ["carrier STRING", "name STRING"])
FIRST = "dep,carrier,delay\n2024-01-01T10:00:00Z,AA,5\n2024-01-01T11:00:00Z,UA,10\n"
SECOND = "dep,carrier,delay\n2024-01-02T10:00:00Z,AA,20\n"
BY_CARRIER = (
    "SELECT carrier, SUM(delay) AS delay FROM `nyc.flights` GROUP BY carrier ORDER BY carrier"
)
NEEDED = "a valid daemon token is required"
HANDSHAKE_S = 2
"""The test daemon's ``daemon.flightSqlHandshakeTimeout``."""


class Daemon:
    def __init__(self, served: Served, first_head: str, between: str) -> None:
        self.served = served
        self.first_head = first_head
        """The head of nyc.flights after its first ingest."""
        self.between = between
        """An RFC 3339 time between the two ingests."""
        self.url = f"grpc://{served.info['flightSqlAddress']}"

    def adbc(self, **db_kwargs: str) -> Any:
        kwargs = db_kwargs or {
            adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: (
                f"Bearer {self.served.token}"
            )
        }
        return flight_sql.connect(self.url, db_kwargs=kwargs, autocommit=True)

    def client(self) -> flight.FlightClient:
        return flight.connect(self.url)

    @property
    def options(self) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(
            headers=[(b"authorization", f"Bearer {self.served.token}".encode())], timeout=120
        )


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    ws = new_workspace(tmp_path_factory.mktemp("flight") / "ws")
    add(ws, FLIGHTS, LATER)
    ingest(ws, "nyc.flights", FIRST, file="first.csv")
    head = (ws / ".odf" / "datasets" / "nyc.flights" / "refs" / "head").read_text().strip()
    time.sleep(0.01)
    between = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    time.sleep(0.01)
    ingest(ws, "nyc.flights", SECOND, file="second.csv")
    config = ws / ".odf" / "config.yaml"
    config.write_text(
        (config.read_text() if config.exists() else "")
        + f"daemon:\n  flightSqlHandshakeTimeout: {HANDSHAKE_S}\n"
    )
    with serving(ws) as served:
        yield Daemon(served, head, between)


def pack(message: Any) -> bytes:
    wrapped = any_pb2.Any()
    wrapped.Pack(message)
    return wrapped.SerializeToString()


def command(message: Any) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(pack(message))


# --- ADBC (DBAPI, pandas, polars) -----------------------------------------------------------------


def test_adbc_cursor_pandas_and_polars(daemon: Daemon) -> None:
    with daemon.adbc() as conn, conn.cursor() as cur:
        cur.execute(BY_CARRIER)
        table = cur.fetch_arrow_table()
        assert table.to_pydict() == {"carrier": ["AA", "UA"], "delay": [25, 10]}
        cur.execute("SELECT carrier, delay FROM `nyc.flights` WHERE delay > 6 ORDER BY delay")
        assert cur.fetchall() == [("UA", 10), ("AA", 20)]
        cur.execute("SELECT COUNT(*) AS n FROM `nyc.flights`")
        assert cur.fetch_df()["n"].tolist() == [3]
        frame = pd.read_sql(BY_CARRIER, conn)
        assert frame.to_dict("list") == {"carrier": ["AA", "UA"], "delay": [25, 10]}
        polars = pl.read_database(BY_CARRIER, connection=conn)
        assert polars.to_dict(as_series=False) == {"carrier": ["AA", "UA"], "delay": [25, 10]}


def test_adbc_binds_parameters(daemon: Daemon) -> None:
    """``?`` markers with ADBC's bound values (DoPut), typed literals on the engine; hostile
    strings stay one value; a wrong count of values is refused in one line."""
    with daemon.adbc() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT carrier, delay FROM `nyc.flights` WHERE carrier = ? AND delay > ?"
            " ORDER BY delay",
            ("AA", 6),
        )
        assert cur.fetchall() == [("AA", 20)]
        cur.execute("SELECT count(*) AS n FROM `nyc.flights` WHERE carrier = ?", ("UA",))
        assert cur.fetchall() == [(1,)]
        for hostile in ("AA' OR '1'='1", "AA\\' OR 1=1 --", "`; */ ?"):
            cur.execute(
                "SELECT count(*) AS n, ? AS s FROM `nyc.flights` WHERE carrier = ?",
                (hostile, hostile),
            )
            assert cur.fetchall() == [(0, hostile)]
        cur.execute("SELECT ? AS d, ? AS x, ? AS b", (2.5, None, b"\x00'"))
        assert cur.fetchall() == [(2.5, None, b"\x00'")]
        with pytest.raises(adbc_driver_manager.Error, match="2 '\\?' markers, 1 values"):
            cur.execute("SELECT ?, ?", (1,))


SESSION = "adbc.flight.sql.session.option"


def test_session_option_as_of(daemon: Daemon) -> None:
    """ADBC's session options (SetSessionOptions, cookie kept by the driver): ``as_of`` reads
    the session's datasets as they were then; a table-name suffix still wins; a bad value is
    refused, erasing the option reads the head again."""
    auth = adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value
    with (
        daemon.adbc(
            **{
                auth: f"Bearer {daemon.served.token}",
                "adbc.flight.sql.rpc.with_cookie_middleware": "true",
            }
        ) as conn,
        conn.cursor() as cur,
    ):
        count = "SELECT count(*) AS n FROM `nyc.flights`"
        conn.adbc_connection.set_options(**{f"{SESSION}.as_of": daemon.between})
        cur.execute(count)
        assert cur.fetchall() == [(2,)]
        options = json.loads(conn.adbc_connection.get_option(f"{SESSION}s"))
        assert options == {"as_of": daemon.between}, options
        cur.execute(f"SELECT count(*) AS n FROM `nyc.flights@{daemon.first_head}`")
        assert cur.fetchall() == [(2,)]
        with pytest.raises(adbc_driver_manager.Error, match="'as_of' \\(invalid value\\)"):
            conn.adbc_connection.set_options(**{f"{SESSION}.as_of": "yesterday!"})
        conn.adbc_connection.set_options(**{f"{SESSION}erase.as_of": ""})
        cur.execute(count)
        assert cur.fetchall() == [(3,)]


def test_adbc_sees_datasets_as_tables(daemon: Daemon) -> None:
    with daemon.adbc() as conn:
        info = conn.adbc_get_info()
        assert info["vendor_name"] == "odf-py", info
        assert conn.adbc_get_table_types() == ["TABLE"]
        objects = conn.adbc_get_objects().read_all().to_pylist()
        [catalog] = objects
        assert catalog["catalog_name"] == "odf"
        [schema] = catalog["catalog_db_schemas"]
        tables = {t["table_name"]: t for t in schema["db_schema_tables"]}
        assert sorted(tables) == ["nyc.flights", "nyc.later"]
        columns = [c["column_name"] for c in tables["nyc.flights"]["table_columns"]]
        assert columns[-3:] == ["dep", "carrier", "delay"], columns
        assert conn.adbc_get_table_schema("nyc.flights").field("delay").type == pa.int64()


def test_query_errors_are_one_line(daemon: Daemon) -> None:
    with daemon.adbc() as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.execute("SELECT * FROM nowhere")
        text = str(e.value)
        assert "TABLE_OR_VIEW_NOT_FOUND" in text and "Traceback" not in text, text
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.execute("DROP TABLE `nyc.flights`")
        assert "Traceback" not in str(e.value), e.value


def test_as_of_a_block_or_a_time_through_the_table_name(daemon: Daemon) -> None:
    prefix = daemon.first_head[:16]
    with daemon.adbc() as conn, conn.cursor() as cur:
        for when in (prefix, daemon.between):
            cur.execute(f"SELECT COUNT(*) AS n FROM `nyc.flights@{when}`")
            assert cur.fetchall() == [(2,)], when
        cur.execute(
            f"SELECT (SELECT COUNT(*) FROM `nyc.flights@{prefix}`) AS before,"
            " (SELECT COUNT(*) FROM `nyc.flights`) AS now"
        )
        assert cur.fetchall() == [(2, 3)]
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.execute("SELECT * FROM `nyc.flights@1999-01-01T00:00:00Z`")
        assert "nyc.flights@1999-01-01T00:00:00Z: dataset 'nyc.flights' has no block" in str(
            e.value
        )


# --- pyarrow's Flight client: the protocol message by message -------------------------------------


def test_pyarrow_flight_statement_metadata_and_prepared(daemon: Daemon) -> None:
    client, options = daemon.client(), daemon.options
    info = client.get_flight_info(command(fsql.CommandStatementQuery(query=BY_CARRIER)), options)
    assert info.total_records == 2 and info.schema.names == ["carrier", "delay"]
    table = client.do_get(info.endpoints[0].ticket, options).read_all()
    assert table.to_pydict() == {"carrier": ["AA", "UA"], "delay": [25, 10]}
    with pytest.raises(flight.FlightError, match="no such result"):
        client.do_get(info.endpoints[0].ticket, options).read_all()  # streamed once only

    sql_info = fetch(client, options, fsql.CommandGetSqlInfo(info=[0, 3, 504]))
    values = dict(
        zip(sql_info["info_name"].to_pylist(), sql_info["value"].to_pylist(), strict=True)
    )
    assert values == {0: "odf-py", 3: True, 504: "`"}
    assert fetch(client, options, fsql.CommandGetCatalogs()).to_pylist() == [
        {"catalog_name": "odf"}
    ]
    tables = fetch(
        client,
        options,
        fsql.CommandGetTables(table_name_filter_pattern="nyc.f%", include_schema=True),
    )
    assert tables["table_name"].to_pylist() == ["nyc.flights"]
    schema = pa.ipc.read_schema(pa.py_buffer(tables["table_schema"][0].as_py()))
    assert schema.names[-3:] == ["dep", "carrier", "delay"]
    assert fetch(client, options, fsql.CommandGetPrimaryKeys(table="nyc.flights")).num_rows == 0

    [created] = client.do_action(
        flight.Action(
            "CreatePreparedStatement",
            pack(
                fsql.ActionCreatePreparedStatementRequest(query="SELECT carrier FROM `nyc.flights`")
            ),
        ),
        options,
    )
    result = fsql.ActionCreatePreparedStatementResult()
    any_pb2.Any.FromString(created.body.to_pybytes()).Unpack(result)
    assert pa.ipc.read_schema(pa.py_buffer(result.dataset_schema)).names == ["carrier"]
    prepared = command(
        fsql.CommandPreparedStatementQuery(
            prepared_statement_handle=result.prepared_statement_handle
        )
    )
    for _ in range(2):  # the result computed when prepared, then a new run
        info = client.get_flight_info(prepared, options)
        assert client.do_get(info.endpoints[0].ticket, options).read_all().num_rows == 3
    assert client.get_schema(prepared, options).schema.names == ["carrier"]
    close = fsql.ActionClosePreparedStatementRequest(
        prepared_statement_handle=result.prepared_statement_handle
    )
    list(client.do_action(flight.Action("ClosePreparedStatement", pack(close)), options))
    with pytest.raises(flight.FlightError, match="no such prepared statement"):
        client.get_flight_info(prepared, options)


def fetch(client: flight.FlightClient, options: flight.FlightCallOptions, message: Any) -> pa.Table:
    info = client.get_flight_info(command(message), options)
    return client.do_get(info.endpoints[0].ticket, options).read_all()


def test_cancelling_a_result(daemon: Daemon) -> None:
    client, options = daemon.client(), daemon.options
    query = command(fsql.CommandStatementQuery(query="SELECT * FROM `nyc.flights`"))
    info = client.get_flight_info(query, options)
    request = fsql.CancelFlightInfoRequest(info=info.serialize())
    [answer] = client.do_action(
        flight.Action("CancelFlightInfo", request.SerializeToString()), options
    )
    status = fsql.CancelFlightInfoResult.FromString(answer.body.to_pybytes()).status
    assert status == fsql.CANCEL_STATUS_CANCELLED
    with pytest.raises(flight.FlightError, match="no such result"):
        client.do_get(info.endpoints[0].ticket, options).read_all()
    [again] = client.do_action(
        flight.Action("CancelFlightInfo", request.SerializeToString()), options
    )
    assert fsql.CancelFlightInfoResult.FromString(again.body.to_pybytes()).status == (
        fsql.CANCEL_STATUS_NOT_CANCELLABLE
    )
    info = client.get_flight_info(query, options)  # the legacy action
    legacy = fsql.ActionCancelQueryRequest(info=info.serialize())
    [answer] = client.do_action(flight.Action("CancelQuery", pack(legacy)), options)
    result = fsql.ActionCancelQueryResult()
    any_pb2.Any.FromString(answer.body.to_pybytes()).Unpack(result)
    assert result.result == fsql.ActionCancelQueryResult.CANCEL_RESULT_CANCELLED


ENDLESS = "SELECT count(*) AS n FROM range(0, 1000000000000000)"
"""A query that runs for hours on the engine: only a cancellation ends it."""
STOPPED_BOUND_S = 30.0
"""Liveness bound, not a speed target: without cancellation the engine would run for hours."""


def test_a_client_giving_up_stops_the_query_on_the_engine(daemon: Daemon) -> None:
    """A client whose deadline passes while the engine runs its query: the engine is told to
    stop (its call ends within seconds, not hours), and the next query runs."""
    client = daemon.client()
    one = fsql.CommandStatementQuery(query="SELECT 1 AS one")
    assert fetch(client, daemon.options, one).num_rows == 1  # the engine is up
    ended = 'odf_calls_total{call="flight_sql_query",outcome="error"}'
    before = daemon.served.metric(ended)
    short = flight.FlightCallOptions(headers=daemon.options.headers, timeout=3)
    with pytest.raises(flight.FlightTimedOutError):
        client.get_flight_info(command(fsql.CommandStatementQuery(query=ENDLESS)), short)
    gave_up = time.monotonic()
    wait_until(
        lambda: daemon.served.metric(ended) > before,
        what="the engine stopped the cancelled query",
        timeout=STOPPED_BOUND_S,
    )
    stopped = time.monotonic() - gave_up
    table = fetch(client, daemon.options, one)
    next_done = time.monotonic() - gave_up
    assert table.to_pydict() == {"one": [1]}
    print(
        f"engine call ended {stopped:.2f} s after the client gave up; next query {next_done:.2f} s"
    )
    assert "flight_sql.query_cancelled" in daemon.served.log.read_text()


# --- kamu's client --------------------------------------------------------------------------------


def test_kamu_client_queries_and_lists(daemon: Daemon) -> None:
    with kamu.connect(daemon.url, token=daemon.served.token) as con:
        frame = con.query(BY_CARRIER)
        assert frame.to_dict("list") == {"carrier": ["AA", "UA"], "delay": [25, 10]}
        objects = con.as_adbc().adbc_get_objects(depth="tables").read_all().to_pylist()
        names = [t["table_name"] for t in objects[0]["catalog_db_schemas"][0]["db_schema_tables"]]
        assert names == ["nyc.flights", "nyc.later"]
    # Without a token, kamu's client logs in as "anonymous" with an empty password: refused.
    with pytest.raises(adbc_driver_manager.Error, match=NEEDED):
        kamu.connect(daemon.url)


# --- tokens ---------------------------------------------------------------------------------------


def test_tokens_bearer_basic_scoped_and_refused(daemon: Daemon) -> None:
    client = daemon.client()
    describe = command(fsql.CommandGetTableTypes())
    for headers in ([], [(b"authorization", b"Bearer wrong")]):
        with pytest.raises(flight.FlightUnauthenticatedError, match=NEEDED):
            client.get_flight_info(describe, flight.FlightCallOptions(headers=headers))
    with pytest.raises(flight.FlightUnauthenticatedError, match=NEEDED):
        client.authenticate_basic_token("someone", "wrong")
    header = client.authenticate_basic_token("someone", daemon.served.token)
    assert header == (b"authorization", f"Bearer {daemon.served.token}".encode())
    assert client.get_flight_info(describe, flight.FlightCallOptions(headers=[header]))

    token = ok(daemon.served.ws, "daemon", "token", "create", "--scope", "read").strip()
    assert token.startswith("odf_"), token
    with daemon.adbc(
        **{adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {token}"}
    ) as conn:
        assert conn.adbc_get_table_types() == ["TABLE"]
    with pytest.raises(adbc_driver_manager.Error, match=NEEDED):
        daemon.adbc(
            **{
                adbc_driver_manager.DatabaseOptions.USERNAME.value: "me",
                adbc_driver_manager.DatabaseOptions.PASSWORD.value: "not-the-token",
            }
        )


# --- a large result streams through flat memory ---------------------------------------------------


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


def test_a_large_result_streams_with_flat_daemon_memory(daemon: Daemon) -> None:
    pid = daemon.served.process.pid
    client, options = daemon.client(), daemon.options
    query = "SELECT id, repeat('x', 120) AS pad FROM range(1500000)"
    info = client.get_flight_info(command(fsql.CommandStatementQuery(query=query)), options)
    result_mib = info.total_bytes / 2**20
    assert result_mib > 150, result_mib
    before = rss_mib(pid)
    peak, done = before, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    rows = 0
    try:
        for chunk in client.do_get(info.endpoints[0].ticket, options):
            rows += chunk.data.num_rows
    finally:
        done.set()
        sampler.join()
    assert rows == 1_500_000
    growth = peak - before
    print(f"result {result_mib:.0f} MiB streamed; daemon RSS {before:.0f} MiB, +{growth:.0f} MiB")
    # Measured: +63-70 MiB whether the result is 189 or 378 MiB (the front's and the server's
    # flow-control windows and message copies, not the result).
    assert growth < min(96, result_mib / 2), (result_mib, before, peak)


# --- every request is bounded before anything reads it -------------------------------------------

FLIGHT = "/arrow.flight.protocol.FlightService/"


def test_requests_past_the_bounds_are_refused_unread(daemon: Daemon) -> None:
    """An unauthenticated 64 MiB ``DoAction`` is refused for its size (the front's bound, 4 MiB
    by default) while the daemon's memory stays flat; ``DoExchange`` is refused without being
    forwarded; the listener serves on."""
    pid = daemon.served.process.pid
    channel = grpc.insecure_channel(
        daemon.url.removeprefix("grpc://"), options=[("grpc.max_send_message_length", -1)]
    )
    with channel:
        before = rss_mib(pid, "VmHWM")
        do_action = channel.unary_stream(f"{FLIGHT}DoAction", None, None)
        with pytest.raises(grpc.RpcError) as refused:
            list(do_action(b"\x0a\x01x\x12" + b"\xff" * (64 * 2**20), timeout=60))
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
        growth = rss_mib(pid, "VmHWM") - before
        print(f"64 MiB DoAction refused; daemon peak RSS {before:.0f} MiB, +{growth:.0f} MiB")
        assert growth < 16, (before, growth)

        metadata = [("authorization", f"Bearer {daemon.served.token}")]
        exchange = channel.stream_stream(f"{FLIGHT}DoExchange", None, None)
        with pytest.raises(grpc.RpcError) as unserved:
            list(exchange(iter([b""]), metadata=metadata, timeout=30))
        assert unserved.value.code() is grpc.StatusCode.UNIMPLEMENTED
        list_actions = channel.unary_stream(f"{FLIGHT}ListActions", None, None)
        assert list(list_actions(b"", metadata=metadata, timeout=30))


def test_silent_and_slow_peers_are_disconnected(daemon: Daemon) -> None:
    host, port = daemon.served.info["flightSqlAddress"].rsplit(":", 1)
    peer = HostileClient(host, int(port))
    silent, slow = peer.idle(), peer.slow_http2_preface()
    print(f"silent peer closed after {silent.seconds:.1f} s, slow preface {slow.seconds:.1f} s")
    assert silent.closed and silent.seconds < HANDSHAKE_S + 2, silent
    assert slow.closed and slow.seconds < HANDSHAKE_S + 2, slow


def test_a_cancelled_result_stream_stops_in_the_daemon(daemon: Daemon) -> None:
    client, options = daemon.client(), daemon.options
    query = "SELECT id, repeat('x', 120) AS pad FROM range(1500000)"
    info = client.get_flight_info(command(fsql.CommandStatementQuery(query=query)), options)
    files = [
        p
        for p in daemon.served.ws.rglob("*")
        if p.is_file() and p.stat().st_size == info.total_bytes
    ]
    assert len(files) == 1, files  # the result, read from as it streams
    reader = client.do_get(info.endpoints[0].ticket, options)
    assert reader.read_chunk().data.num_rows > 0
    reader.cancel()
    wait_until(lambda: not files[0].exists(), what="the daemon stopped the stream", timeout=20)


# --- TLS ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    base = tmp_path_factory.mktemp("flight-tls")
    cert, key = make_certificate(base)
    ws = Workspace.init(base / "ws")
    with serving(ws.root, serve_args=("--tls-cert", str(cert), "--tls-key", str(key))) as s:
        yield s, cert


def test_tls_is_served_and_plain_text_refused(tls_daemon: tuple[Served, Path]) -> None:
    served, cert = tls_daemon
    address = served.info["flightSqlAddress"]
    info = json.loads((served.ws / ".odf" / "run" / "daemon.json").read_text())
    assert info["flightSqlAddress"] == address
    with flight_sql.connect(
        f"grpc+tls://{address}",
        db_kwargs={
            adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: (
                f"Bearer {served.token}"
            ),
            adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: cert.read_text(),
        },
        autocommit=True,
    ) as conn:
        assert conn.adbc_get_table_types() == ["TABLE"]
    headers = [(b"authorization", f"Bearer {served.token}".encode())]
    describe = command(fsql.CommandGetTableTypes())
    plain = flight.connect(f"grpc://{address}")
    with pytest.raises(flight.FlightError):
        plain.get_flight_info(describe, flight.FlightCallOptions(headers=headers, timeout=10))
    untrusted = flight.connect(f"grpc+tls://{address}")  # the system's CAs only
    with pytest.raises(flight.FlightError):
        untrusted.get_flight_info(describe, flight.FlightCallOptions(headers=headers, timeout=10))
    trusted = flight.connect(f"grpc+tls://{address}", tls_root_certs=cert.read_bytes())
    with pytest.raises(flight.FlightUnauthenticatedError, match=NEEDED):
        trusted.get_flight_info(describe, flight.FlightCallOptions(timeout=10))
    assert trusted.get_flight_info(describe, flight.FlightCallOptions(headers=headers))
