"""The Flight SQL server's own parts, without an engine: the metadata tables, basic auth as
Go's clients send it, and a real server (pyarrow's Flight client, in process) refusing what it
must: no token, the calls over its cap, writes, commands it does not know."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from coordinator.app import Application
from coordinator.daemon.access import Authority, TokenStore
from coordinator.daemon.calls import DatasetLocks
from coordinator.daemon.flight_auth import _basic_password
from coordinator.daemon.flight_catalog import like, sql_info_table
from coordinator.daemon.flight_sql import FlightSqlServer, pack
from coordinator.daemon.flight_sql_generated import flight_sql_pb2 as fsql
from coordinator.daemon.metrics import Metrics
from coordinator.workspace import Workspace

TOKEN = "flight-test-token"


def test_like_patterns() -> None:
    assert like(None, "anything")
    assert like("nyc.%", "nyc.flights") and not like("nyc.%", "nycx")
    assert like("nyc_flights", "nyc.flights") and not like("nyc\\_flights", "nyc.flights")
    assert like("100\\%", "100%") and not like("100\\%", "1000")


def test_sql_info_answers_the_codes_asked_in_order() -> None:
    table = sql_info_table([504, 0, 99999, 3])
    assert table["info_name"].to_pylist() == [504, 0, 3]
    assert table["value"].to_pylist() == ["`", "odf-py", True]
    everything = sql_info_table([])
    assert everything.num_rows > 10 and everything["info_name"].to_pylist()[0] == 0


def test_basic_auth_without_padding() -> None:
    assert _basic_password(base64.b64encode(b"me:pw").decode().rstrip("=")) == "pw"
    assert _basic_password(base64.b64encode(b"me:a:b").decode()) == "a:b"
    assert _basic_password("%%%") == ""


@pytest.fixture
def server(tmp_path) -> Iterator[FlightSqlServer]:  # type: ignore[no-untyped-def]
    ws = Workspace.init(tmp_path / "ws")
    (ws.odf_dir / "config.yaml").write_text("daemon:\n  flightSqlMaxCalls: 1\n")
    app = Application(ws)
    authority = Authority(TOKEN, TokenStore(ws.odf_dir))
    s = FlightSqlServer(app, DatasetLocks(1), Metrics(), authority, "grpc://127.0.0.1:0", None)
    try:
        yield s
    finally:
        s.close(10)


def call(server: FlightSqlServer, message: object, token: str = TOKEN) -> flight.FlightInfo:
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    options = flight.FlightCallOptions(
        headers=[(b"authorization", f"Bearer {token}".encode())], timeout=10
    )
    return client.get_flight_info(flight.FlightDescriptor.for_command(pack(message)), options)


@pytest.mark.grpc
def test_refusals(server: FlightSqlServer) -> None:
    with pytest.raises(flight.FlightUnauthenticatedError, match="a valid daemon token"):
        call(server, fsql.CommandGetTables(), token="wrong")
    info = call(server, fsql.CommandGetTables())
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    assert client.do_get(info.endpoints[0].ticket, options).read_all().num_rows == 0

    busy = pytest.raises(flight.FlightUnavailableError, match="busy: 1 Flight SQL")
    with server._slot(), busy:  # the only slot taken: a query is refused at once, not queued
        call(server, fsql.CommandStatementQuery(query="SELECT 1"))
    for name, refusal in (
        ("arrow.flight.protocol.sql.CommandStatementUpdate", "read-only: no updates"),
        ("some.Other", r"some\.Other is not supported"),
    ):
        unknown = any_pb2.Any(type_url=f"type.googleapis.com/{name}", value=b"")
        with pytest.raises(flight.FlightError, match=refusal):
            client.get_flight_info(
                flight.FlightDescriptor.for_command(unknown.SerializeToString()), options
            )
    with pytest.raises(flight.FlightError, match="expected a command descriptor"):
        client.get_flight_info(flight.FlightDescriptor.for_path("x"), options)
    with pytest.raises(flight.FlightError, match="read-only: no uploads"):
        writer, _ = client.do_put(
            flight.FlightDescriptor.for_command(pack(fsql.CommandStatementQuery(query="x"))),
            pa.schema([("a", pa.int64())]),
            options,
        )
        writer.close()
    with pytest.raises(flight.FlightError, match="action 'Nope' is not supported"):
        list(client.do_action(flight.Action("Nope", b""), options))
