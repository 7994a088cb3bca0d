"""The daemon's HTTP query endpoint (``daemon.query_http``) on real sockets.

``serve_query`` runs in a real ``BoundedHTTPServer`` with a ``run`` of the test's (tables and
the application's errors), read by the real client (``HttpQueries``, ``query_over_http``) and
by plain ``http.client`` requests for what the client never sends. The client also meets a
hostile server answering crafted responses (each refused whole, as a one-line
``DaemonCallError`` naming the daemon), and a daemon that does not answer at all.
"""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler
from typing import Any

import pyarrow as pa
import pytest

from common.humanize import human_cell
from common.odf.errors import NotFoundError, OdfError, ValidationError
from coordinator.app.use_cases import QueryOptions
from coordinator.daemon import query_http
from coordinator.daemon.errors import DaemonCallError, DaemonInvalidError, DaemonNotFoundError
from coordinator.daemon.http_listener import BoundedHandler, BoundedHTTPServer, HttpBounds
from coordinator.daemon.query_http import (
    ARROW_STREAM,
    MAX_REQUEST_BYTES,
    MAX_SHOWN_ROWS,
    NUM_RECORDS_HEADER,
    QUERY_PATH,
    ROWS_HEADER,
    HttpQueries,
    QueryRequest,
    query_over_http,
    serve_query,
)
from coordinator.daemon.rundir import DaemonInfo
from coordinator.engine.errors import EngineInvalidQueryError, EngineUnavailableError
from coordinator.query import QueryResult
from coordinator.query.display import Cells, shown_result
from tests.support.http_serving import running, serving

TOKEN = "the-daemon-token"
PID = 4242


def utc(second: int, micro: int = 0) -> datetime:
    return datetime(2026, 11, 28, 9, 41, second, micro, tzinfo=UTC)


FLIGHTS = pa.Table.from_arrays(
    [
        pa.array([1, 2, 3, 4, 5], pa.int64()),
        pa.array(["JFK", "LAX", None, "SFO", "BOS"], pa.string()),
        pa.array([utc(s) for s in range(5)], pa.timestamp("us", tz="UTC")),
        pa.array([Decimal(f"{n}.25") for n in range(5)], pa.decimal128(9, 2)),
    ],
    schema=pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("origin", pa.string(), metadata={"doc": "an airport"}),
            pa.field("departed", pa.timestamp("us", tz="UTC")),
            pa.field("fare", pa.decimal128(9, 2)),
        ],
        metadata={"dataset": "nyc.flights"},
    ),
)
SHOWN = pa.Table.from_arrays(
    [
        pa.array([1, 2, 3], pa.int64()),
        pa.array([10, 20, 30], pa.int64()),
        pa.array([utc(13, 250_000), utc(14), None], pa.timestamp("us", tz="UTC")),
        pa.array([True, None, False], pa.bool_()),
        pa.array([Decimal("12.50"), None, Decimal("0.05")], pa.decimal128(9, 2)),
        pa.array([["a", "b"], [], None], pa.list_(pa.string())),
        pa.array(["naïve", None, ""], pa.string()),
    ],
    names=["id", "id", "at", "ok", "fare", "tags", "note"],  # "id" twice
)
SHOWN_COLUMNS = ["id", "id_2", "at", "ok", "fare", "tags", "note"]
SHOWN_TEXT = [
    ["1", "10", "2026-11-28T09:41:13.250Z", "true", "12.50", '["a", "b"]', "naïve"],
    ["2", "20", "2026-11-28T09:41:14Z", "", "", "[]", ""],
]
SHOWN_VALUES = [
    [1, 10, "2026-11-28T09:41:13.250000Z", True, "12.50", ["a", "b"], "naïve"],
    [2, 20, "2026-11-28T09:41:14Z", None, None, [], None],
]

REFUSED: list[tuple[str, Exception, int, str, type[DaemonCallError], str]] = [
    # the query, the error ``run`` raises, the status and kind answered, the client's error
    (
        "SELECT * FROM missing",
        NotFoundError("dataset not found: nyc.missing"),
        *(404, "not_found"),
        DaemonNotFoundError,
        "dataset not found: nyc.missing",
    ),
    (
        "SELECT * FROM f",
        ValidationError("no dataset nyc.nowhere", path="--input f"),
        *(400, "invalid"),
        DaemonInvalidError,
        "--input f: no dataset nyc.nowhere",
    ),
    (
        "SELECT nope FROM flights",
        EngineInvalidQueryError("column 'nope' not found"),
        *(400, "invalid"),
        DaemonInvalidError,
        "invalid query: column 'nope' not found",
    ),
    (
        "SELECT * FROM unavailable",
        EngineUnavailableError("no engine can be started"),
        *(503, "unavailable"),
        DaemonCallError,
        "no engine can be started",
    ),
    (
        "SELECT * FROM locked",
        OdfError("the dataset is being written"),
        *(409, "failed"),
        DaemonCallError,
        "the dataset is being written",
    ),
    (
        "SELECT * FROM crash",
        RuntimeError("boom:\n    deep inside"),
        *(500, "internal"),
        DaemonCallError,
        "boom: deep inside",  # one line
    ),
]
ANSWERS: dict[str, pa.Table | Exception] = {
    "SELECT * FROM flights": FLIGHTS,
    "SELECT * FROM shown": SHOWN,
    "SELECT * FROM nothing": FLIGHTS.slice(0, 0),
    **{sql: error for sql, error, *_ in REFUSED},
}


class Runner:
    """The daemon's ``run``: a table (cut to the limit) or an error, by the query's text; it
    remembers each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, QueryOptions]] = []

    def __call__(self, sql: str, options: QueryOptions) -> QueryResult:
        self.calls.append((sql, options))
        answer = ANSWERS[sql]
        if isinstance(answer, Exception):
            raise answer
        rows = answer if options.limit is None else answer.slice(0, options.limit)
        return QueryResult(rows, answer.num_rows)


def daemon_info(http_address: str) -> DaemonInfo:
    return DaemonInfo(
        pid=PID, address="127.0.0.1:1", http_address=http_address, started=datetime.now(UTC)
    )


def has_token(handler: BoundedHandler) -> bool:
    return handler.headers.get("Authorization") == f"Bearer {TOKEN}"


@dataclass
class Daemon:
    info: DaemonInfo
    port: int
    runner: Runner

    def queries(self, token: str = TOKEN) -> HttpQueries:
        return HttpQueries(self.info, token)


@pytest.fixture(scope="module")
def serving_daemon() -> Iterator[Daemon]:
    runner = Runner()

    class Handler(BoundedHandler):
        def do_POST(self) -> None:  # as the daemon's (``server.Daemon._http_server``)
            if self.path == QUERY_PATH:
                serve_query(self, has_token, runner)
            else:
                self.send_error(404, "not found")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = BoundedHTTPServer(("127.0.0.1", 0), Handler, HttpBounds(), None, lambda _: None)
    with running(server) as port:
        yield Daemon(daemon_info(f"127.0.0.1:{port}"), port, runner)


@pytest.fixture
def daemon(serving_daemon: Daemon) -> Daemon:
    serving_daemon.runner.calls.clear()
    return serving_daemon


def post(
    port: int, body: bytes | None, headers: dict[str, str] | None = None
) -> tuple[int, http.client.HTTPMessage, Any]:
    """``POST /api/query`` as written (``headers``: with the token and the body's length when
    not given); the status, headers and body (read as JSON unless an Arrow stream)."""
    if headers is None:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        if body is not None:
            headers["Content-Length"] = str(len(body))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("POST", QUERY_PATH)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        response = conn.getresponse()
        data = response.read()
        if response.getheader("Content-Type") != ARROW_STREAM:
            return response.status, response.headers, json.loads(data)
        return response.status, response.headers, data
    finally:
        conn.close()


def post_json(
    port: int, value: dict[str, Any], token: str = TOKEN
) -> tuple[int, http.client.HTTPMessage, Any]:
    body = json.dumps(value).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Length": str(len(body))}
    return post(port, body, headers)


# --- the Arrow answer ----------------------------------------------------------------------------


def test_the_whole_result_arrives_as_it_was_with_its_schema(daemon: Daemon) -> None:
    result = daemon.queries().query("SELECT * FROM flights")
    assert result.table.equals(FLIGHTS, check_metadata=True)
    assert result.table.schema.field("origin").metadata == {b"doc": b"an airport"}
    assert (result.num_records, result.cut) == (5, 0)
    assert daemon.runner.calls == [
        ("SELECT * FROM flights", QueryOptions(aliases={}, limit=None, as_of={}))
    ]


def test_the_limit_reaches_run_and_the_result_counts_the_rows_left_out(daemon: Daemon) -> None:
    result = daemon.queries().query("SELECT * FROM flights", QueryOptions(limit=2))
    assert result.table.equals(FLIGHTS.slice(0, 2), check_metadata=True)
    assert (result.num_records, result.cut) == (5, 3)
    [(_, options)] = daemon.runner.calls
    assert options.limit == 2


def test_aliases_and_as_of_reach_run(daemon: Daemon) -> None:
    aliases = {"f": "nyc.flights", "g": "nyc.gates"}
    as_of = {"nyc.flights": "f16206f8e3f0", "nyc.gates": "2026-11-28T00:00:00Z"}
    options = QueryOptions(aliases=aliases, limit=3, as_of=as_of)
    result = daemon.queries().query("SELECT * FROM flights", options)
    assert result.table.num_rows == 3
    assert daemon.runner.calls == [("SELECT * FROM flights", options)]


def test_an_empty_result_keeps_its_schema(daemon: Daemon) -> None:
    result = daemon.queries().query("SELECT * FROM nothing")
    assert result.table.num_rows == 0 and result.num_records == 0
    assert result.table.schema.equals(FLIGHTS.schema, check_metadata=True)


def test_any_http_client_reads_the_arrow_stream_and_its_headers(daemon: Daemon) -> None:
    status, headers, body = post_json(daemon.port, {"sql": "SELECT * FROM flights", "limit": 4})
    assert status == 200
    assert headers["Content-Type"] == ARROW_STREAM
    assert headers["Cache-Control"] == "no-store"
    assert (headers[ROWS_HEADER], headers[NUM_RECORDS_HEADER]) == ("4", "5")
    assert pa.ipc.open_stream(body).read_all().equals(FLIGHTS.slice(0, 4), check_metadata=True)


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]"])
def test_a_daemon_listening_on_a_wildcard_address_is_reached_on_loopback(
    daemon: Daemon, host: str
) -> None:
    info = daemon_info(f"{host}:{daemon.port}")
    result = HttpQueries(info, TOKEN).query("SELECT * FROM flights", QueryOptions(limit=1))
    assert result.table.equals(FLIGHTS.slice(0, 1))


def test_a_limit_of_0_gives_no_rows_as_in_process(daemon: Daemon) -> None:
    result = daemon.queries().query("SELECT * FROM flights", QueryOptions(limit=0))
    assert result.table.num_rows == 0 and result.num_records == 5


def test_a_request_reads_back_as_it_was_written() -> None:
    request = QueryRequest("SELECT 1", 10, {"f": "nyc.flights"}, {"nyc.flights": "f1"}, Cells.TEXT)
    assert QueryRequest.parse(request.to_json()) == request
    assert QueryRequest.parse(QueryRequest("SELECT 1").to_json()) == QueryRequest("SELECT 1")


# --- the shown answer ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cells", "expected"), [(Cells.TEXT, SHOWN_TEXT), (Cells.VALUES, SHOWN_VALUES)]
)
def test_the_shown_rows_are_as_the_cli_shows_them_in_process(
    daemon: Daemon, cells: Cells, expected: list[list[Any]]
) -> None:
    shown = daemon.queries().shown("SELECT * FROM shown", QueryOptions(limit=2), cells)
    assert shown.columns == SHOWN_COLUMNS  # made unique
    assert shown.rows == expected
    assert (shown.num_records, shown.cut) == (3, 1)
    assert shown == shown_result(QueryResult(SHOWN.slice(0, 2), 3), cells)  # byte for byte
    [(_, options)] = daemon.runner.calls
    assert options.limit == 2


def test_text_cells_are_the_human_cells_of_the_values(daemon: Daemon) -> None:
    shown = daemon.queries().shown("SELECT * FROM shown", QueryOptions(limit=3), Cells.TEXT)
    columns = [SHOWN.column(i).to_pylist() for i in range(SHOWN.num_columns)]  # "id" twice
    assert len(shown.rows) == 3
    assert shown.rows == [[human_cell(c[i]) for c in columns] for i in range(3)]
    assert shown.cut == 0


def test_shown_cells_need_a_limit(daemon: Daemon) -> None:
    with pytest.raises(DaemonInvalidError, match=f"limit: .*a limit of 1 to {MAX_SHOWN_ROWS}"):
        daemon.queries().shown("SELECT * FROM shown", QueryOptions(), Cells.TEXT)
    assert daemon.runner.calls == []


# --- refusals by the daemon ----------------------------------------------------------------------


@pytest.mark.parametrize("token", ["", "not-the-token"])
def test_a_query_without_the_token_is_refused(daemon: Daemon, token: str) -> None:
    with pytest.raises(DaemonCallError) as raised:
        daemon.queries(token).query("SELECT * FROM flights")
    assert type(raised.value) is DaemonCallError
    assert str(raised.value) == (
        f"the daemon at {daemon.info.http_address} refused the token:"
        " a query needs the daemon's token (Bearer)"
    )
    status, headers, answer = post_json(daemon.port, {"sql": "SELECT 1"}, token=token)
    assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")
    assert answer == {"error": "a query needs the daemon's token (Bearer)"}
    assert daemon.runner.calls == []


@pytest.mark.parametrize(
    ("sql", "error", "status", "kind", "client_error", "message"),
    REFUSED,
    ids=["not found", "invalid input", "invalid query", "unavailable", "failed", "internal"],
)
def test_the_applications_errors_reach_the_client_by_kind(
    daemon: Daemon,
    sql: str,
    error: Exception,
    status: int,
    kind: str,
    client_error: type[DaemonCallError],
    message: str,
) -> None:
    with pytest.raises(DaemonCallError) as raised:
        daemon.queries().query(sql)
    assert type(raised.value) is client_error
    assert str(raised.value) == message
    if isinstance(error, NotFoundError):
        assert isinstance(raised.value, NotFoundError)  # as the in-process command raises
    answered, _, answer = post_json(daemon.port, {"sql": sql})
    assert (answered, answer) == (status, {"error": message, "kind": kind})
    assert [sql for sql, _ in daemon.runner.calls] == [sql, sql]


BAD_REQUESTS = [
    pytest.param(b"SELECT 1", "body: the body is not JSON", id="not JSON"),
    pytest.param(b'["SELECT 1"]', "body: the body is not a JSON object", id="not an object"),
    pytest.param(
        b'{"sql": "SELECT 1", "where": "x"}', "body: unknown fields ['where']", id="unknown"
    ),
    pytest.param(b'{"limit": 1}', "sql: a query (text) is required", id="no sql"),
    pytest.param(b'{"sql": " "}', "sql: a query (text) is required", id="blank sql"),
    pytest.param(b'{"sql": 1}', "sql: a query (text) is required", id="sql not text"),
    pytest.param(b'{"sql": "x", "limit": -1}', "limit: expected a number of rows, got -1", id="-1"),
    pytest.param(b'{"sql": "x", "limit": 1.5}', "limit: expected a number of rows", id="1.5"),
    pytest.param(b'{"sql": "x", "limit": true}', "limit: expected a number of rows", id="true"),
    pytest.param(b'{"sql": "x", "limit": "10"}', "limit: expected a number of rows", id="'10'"),
    pytest.param(
        b'{"sql": "x", "cells": "html", "limit": 1}', "cells: expected text or values", id="html"
    ),
    pytest.param(
        b'{"sql": "x", "cells": "text"}', "limit: rows as cells need a limit", id="cells, no limit"
    ),
    pytest.param(
        b'{"sql": "x", "cells": "values", "limit": 0}',
        "limit: rows as cells need a limit",
        id="cells, limit 0",
    ),
    pytest.param(
        json.dumps({"sql": "x", "cells": "text", "limit": MAX_SHOWN_ROWS + 1}).encode(),
        f"limit: rows as cells need a limit of 1 to {MAX_SHOWN_ROWS}",
        id="cells, over MAX_SHOWN_ROWS",
    ),
    pytest.param(
        b'{"sql": "x", "aliases": {"f": 1}}', "aliases: expected an object of names", id="aliases"
    ),
    pytest.param(b'{"sql": "x", "asOf": ["f1"]}', "asOf: expected an object of names", id="asOf"),
]


@pytest.mark.parametrize(("body", "error"), BAD_REQUESTS)
def test_a_bad_request_is_refused_naming_what_is_wrong(
    daemon: Daemon, body: bytes, error: str
) -> None:
    status, headers, answer = post(daemon.port, body)
    assert (status, headers["Content-Type"]) == (400, "application/json")
    assert answer["kind"] == "invalid"
    assert answer["error"].startswith(error) and "\n" not in answer["error"]
    assert daemon.runner.calls == []


@pytest.mark.parametrize(
    ("length", "status", "error"),
    [
        pytest.param(None, 411, "a Content-Length is required", id="no length"),
        pytest.param("ten", 411, "a Content-Length is required", id="not a number"),
        pytest.param("0", 413, f"a query request of 1 to {MAX_REQUEST_BYTES} bytes", id="0"),
        pytest.param(
            str(MAX_REQUEST_BYTES + 1),
            413,
            f"a query request of 1 to {MAX_REQUEST_BYTES} bytes",
            id="over MAX_REQUEST_BYTES",
        ),
    ],
)
def test_a_body_of_no_or_too_large_a_length_is_refused_unread(
    daemon: Daemon, length: str | None, status: int, error: str
) -> None:
    # Nothing of the body is sent: the answer comes without waiting for it.
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    if length is not None:
        headers["Content-Length"] = length
    answered, _, answer = post(daemon.port, None, headers)
    assert (answered, answer) == (status, {"error": error})
    assert daemon.runner.calls == []


# --- a hostile or broken server ------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What the hostile server answers: a status, headers and a body, or bytes of its own."""

    body: bytes = b""
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    raw: bytes | None = None
    """Written instead of an HTTP response (``b""``: the connection closed unanswered)."""
    stall: bool = False
    """The body is never sent (until the test ends)."""


def stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def arrow_reply(
    body: bytes, rows: str | None, total: str | None, content_type: str | None = ARROW_STREAM
) -> Reply:
    headers = [("Content-Type", content_type)] if content_type is not None else []
    headers += [(ROWS_HEADER, rows)] if rows is not None else []
    headers += [(NUM_RECORDS_HEADER, total)] if total is not None else []
    return Reply(body, headers=tuple(headers))


def rows_reply(value: Any, content_type: str = "application/json") -> Reply:
    body = value if isinstance(value, bytes) else json.dumps(value).encode()
    return Reply(body, headers=(("Content-Type", content_type),))


def error_reply(status: int, body: Any) -> Reply:
    return Reply(body if isinstance(body, bytes) else json.dumps(body).encode(), status)


THREE = pa.table({"n": pa.array([1, 2, 3], pa.int64())})
TWO = THREE.slice(0, 2)

HOSTILE_ARROW = {
    # the reply, the limit asked, what the error says
    "more rows than announced": (
        arrow_reply(stream(THREE), "2", "3"),
        None,
        "sent 3 rows of the 2",
    ),
    "fewer rows than announced": (arrow_reply(stream(TWO), "3", "3"), None, "sent 2 rows of the 3"),
    "a stream cut short": (
        arrow_reply(stream(THREE)[: len(stream(THREE)) // 2], "3", "3"),
        None,
        "sent a broken result",
    ),
    "no stream at all": (arrow_reply(b"", "3", "3"), None, "sent a broken result"),
    "not an Arrow stream": (
        arrow_reply(b"<html>hi</html>", "3", "3"),
        None,
        "sent a broken result",
    ),
    "more rows than the limit": (arrow_reply(stream(THREE), "3", "3"), 2, "announced 3 rows of 3"),
    "more rows than the limit, announced fewer": (
        arrow_reply(stream(THREE), "2", "3"),
        2,
        "sent 3 rows of the 2",
    ),
    "more rows than the result": (
        arrow_reply(stream(THREE), "3", "2"),
        None,
        "announced 3 rows of 2",
    ),
    "no rows header": (
        arrow_reply(stream(THREE), None, "3"),
        None,
        f"no valid {ROWS_HEADER} header",
    ),
    "a negative rows header": (
        arrow_reply(stream(THREE), "-3", "3"),
        None,
        f"no valid {ROWS_HEADER} header",
    ),
    "no num records header": (
        arrow_reply(stream(THREE), "3", None),
        None,
        f"no valid {NUM_RECORDS_HEADER} header",
    ),
    "a num records header not a count": (
        arrow_reply(stream(THREE), "3", "3.0"),
        None,
        f"no valid {NUM_RECORDS_HEADER} header",
    ),
    "the wrong content type": (
        arrow_reply(stream(THREE), "3", "3", "application/octet-stream"),
        None,
        "answered a query with no Arrow stream",
    ),
    "no content type": (
        arrow_reply(stream(THREE), "3", "3", None),
        None,
        "answered a query with no Arrow stream",
    ),
}
TWO_TEXT_ROWS = {"columns": ["a", "b"], "rows": [["1", "x"], ["2", "y"]], "numRecords": 2}
HOSTILE_SHOWN = {
    # the reply, the cells asked (always with a limit of 2), what the error says
    "a row of the wrong length": (
        rows_reply({**TWO_TEXT_ROWS, "rows": [["1", "x"], ["2"]]}),
        Cells.TEXT,
        "sent rows that are not 2 of at most 2 rows of 2 columns",
    ),
    "a row of the wrong length, values": (
        rows_reply({**TWO_TEXT_ROWS, "rows": [[1, "x", None]]}),
        Cells.VALUES,
        "sent rows that are not",
    ),
    "a row not a list": (
        rows_reply({**TWO_TEXT_ROWS, "rows": [{"a": 1, "b": 2}]}),
        Cells.VALUES,
        "sent rows that are not",
    ),
    "a text cell not text": (
        rows_reply({**TWO_TEXT_ROWS, "rows": [["1", "x"], [2, "y"]]}),
        Cells.TEXT,
        "sent rows that are not",
    ),
    "fewer records than rows": (
        rows_reply({**TWO_TEXT_ROWS, "numRecords": 1}),
        Cells.TEXT,
        "sent rows that are not",
    ),
    "more shown rows than the limit": (
        rows_reply({**TWO_TEXT_ROWS, "rows": [["1", "x"]] * 3, "numRecords": 3}),
        Cells.TEXT,
        "sent rows that are not 3 of at most 2",
    ),
    "a column name not text": (
        rows_reply({**TWO_TEXT_ROWS, "columns": ["a", 2]}),
        Cells.TEXT,
        "sent rows that are not",
    ),
    "num records not a count": (
        rows_reply({**TWO_TEXT_ROWS, "numRecords": "2"}),
        Cells.TEXT,
        "sent rows that are not",
    ),
    "num records a boolean": (
        rows_reply({**TWO_TEXT_ROWS, "rows": [["1", "x"]], "numRecords": True}),
        Cells.TEXT,
        "sent rows that are not",
    ),
    "no rows": (
        rows_reply({"columns": ["a"], "numRecords": 0}),
        Cells.TEXT,
        "sent broken rows",
    ),
    "not JSON": (rows_reply(b"<html>rows</html>"), Cells.TEXT, "sent broken rows"),
    "not a JSON object": (rows_reply(b"[]"), Cells.VALUES, "sent broken rows"),
    "JSON cut short": (
        rows_reply(json.dumps(TWO_TEXT_ROWS).encode()[:20]),
        Cells.TEXT,
        "sent broken rows",
    ),
    "rows of the wrong content type": (
        rows_reply(TWO_TEXT_ROWS, "text/html"),
        Cells.TEXT,
        "answered a query with no JSON rows",
    ),
}
HOSTILE_ERRORS = {
    # the reply, what the error says
    "500, not JSON": (
        error_reply(500, b"Traceback (most recent call last):\n"),
        "answered 500 Internal Server Error",
    ),
    "502, no body": (error_reply(502, b""), "answered 502 Bad Gateway"),
    "400, no error": (error_reply(400, {"message": "bad"}), "answered 400 Bad Request"),
    "400, an unknown kind": (error_reply(400, {"error": "bad", "kind": "odd"}), "answered 400"),
    "404, an error not text": (
        error_reply(404, {"error": ["x"], "kind": "not_found"}),
        "answered 404",
    ),
    "401, not JSON": (error_reply(401, b"go away"), "answered 401 Unauthorized"),
    "401": (error_reply(401, {"error": "go away"}), "refused the token: go away"),
}
HOSTILE_BUGS = {
    # replies the client should refuse as a DaemonCallError, and does not (see each test)
    "not HTTP": Reply(raw=b"SSH-2.0-OpenSSH_9.6\r\n"),
    "a rows header in superscript digits": arrow_reply(stream(THREE), "\u00b3", "3"),
    "chunked stream cut short": Reply(
        b"40\r\n" + stream(THREE)[:16],
        headers=(
            ("Content-Type", ARROW_STREAM),
            ("Transfer-Encoding", "chunked"),
            (ROWS_HEADER, "3"),
            (NUM_RECORDS_HEADER, "3"),
        ),
    ),
    "chunked error cut short": Reply(
        b"40\r\n" + b'{"error": "',
        500,
        (("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")),
    ),
    "chunked rows cut short": Reply(
        b"40\r\n" + json.dumps(TWO_TEXT_ROWS).encode()[:16],
        headers=(("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")),
    ),
}
HOSTILE_OTHER = {
    "closed unanswered": Reply(raw=b""),
    "arrow, stalled": Reply(
        headers=(("Content-Type", ARROW_STREAM), (ROWS_HEADER, "3"), (NUM_RECORDS_HEADER, "3")),
        stall=True,
    ),
    "rows, stalled": Reply(headers=(("Content-Type", "application/json"),), stall=True),
}


def replies(*cases: Mapping[str, Reply | tuple[Any, ...]]) -> dict[str, Reply]:
    """The hostile server's replies by name (the first of each case), each name once."""
    by_name: dict[str, Reply] = {}
    for name, case in itertools.chain.from_iterable(c.items() for c in cases):
        assert name not in by_name, f"two replies named {name!r}"
        by_name[name] = case if isinstance(case, Reply) else case[0]
    return by_name


REPLIES = replies(HOSTILE_ARROW, HOSTILE_SHOWN, HOSTILE_ERRORS, HOSTILE_BUGS, HOSTILE_OTHER)
RELEASE = threading.Event()
"""Lets a stalled reply end (set by the test that stalled it, once done)."""


@pytest.fixture(scope="module")
def hostile() -> Iterator[DaemonInfo]:
    """A server answering each query (its text names the reply) with one of ``REPLIES``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            reply = REPLIES[json.loads(body)["sql"]]
            if reply.raw is not None:
                self.wfile.write(reply.raw)
                return
            self.send_response(reply.status)
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
            if reply.stall:
                RELEASE.wait(timeout=10)
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as port:
        yield daemon_info(f"127.0.0.1:{port}")


def refused_by_client(info: DaemonInfo, request: QueryRequest) -> str:
    """The one-line message of the ``DaemonCallError`` ``request`` raises, naming the daemon."""
    with pytest.raises(DaemonCallError) as raised:
        query_over_http(info, TOKEN, request)
    message = str(raised.value)
    assert info.http_address in message and "\n" not in message
    return message


@pytest.mark.parametrize("name", HOSTILE_ARROW)
def test_an_arrow_answer_not_whole_is_refused(hostile: DaemonInfo, name: str) -> None:
    _, limit, error = HOSTILE_ARROW[name]
    assert error in refused_by_client(hostile, QueryRequest(name, limit))


@pytest.mark.parametrize("name", HOSTILE_SHOWN)
def test_shown_rows_not_whole_are_refused(hostile: DaemonInfo, name: str) -> None:
    _, cells, error = HOSTILE_SHOWN[name]
    assert error in refused_by_client(hostile, QueryRequest(name, 2, cells=cells))


@pytest.mark.parametrize("name", HOSTILE_ERRORS)
@pytest.mark.parametrize("cells", [None, Cells.TEXT])
def test_an_error_answer_not_the_daemons_is_refused(
    hostile: DaemonInfo, name: str, cells: Cells | None
) -> None:
    _, error = HOSTILE_ERRORS[name]
    request = QueryRequest(name, 2, cells=cells)
    with pytest.raises(DaemonCallError) as raised:
        query_over_http(hostile, TOKEN, request)
    assert type(raised.value) is DaemonCallError  # not DaemonNotFoundError, DaemonInvalidError
    message = str(raised.value)
    assert error in message and hostile.http_address in message and "\n" not in message


def test_a_connection_closed_unanswered_is_a_daemon_not_answering(hostile: DaemonInfo) -> None:
    with pytest.raises(EngineUnavailableError, match="--no-daemon"):
        query_over_http(hostile, TOKEN, QueryRequest("closed unanswered"))


@pytest.fixture
def stalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stalled replies stay so until the test ends; the client waits 0.2 s for a read."""
    monkeypatch.setattr(query_http, "READ_TIMEOUT_S", 0.2)
    RELEASE.clear()
    yield
    RELEASE.set()


def test_an_arrow_answer_stalled_after_its_headers_is_refused_in_time(
    hostile: DaemonInfo, stalled: None
) -> None:
    message = refused_by_client(hostile, QueryRequest("arrow, stalled"))
    assert "sent a broken result: timed out" in message


def test_shown_rows_stalled_after_their_headers_are_refused_in_time(
    hostile: DaemonInfo, stalled: None
) -> None:
    message = refused_by_client(hostile, QueryRequest("rows, stalled", 2, cells=Cells.TEXT))
    assert "sent a broken answer" in message and "timed out" in message


def test_a_reply_not_http_is_a_daemon_not_answering(hostile: DaemonInfo) -> None:
    """Something else on the daemon's port: not the daemon, which then does not answer."""
    with pytest.raises(EngineUnavailableError, match=r"BadStatusLine.*--no-daemon"):
        query_over_http(hostile, TOKEN, QueryRequest("not HTTP"))


def test_a_rows_header_of_other_digits_is_refused(hostile: DaemonInfo) -> None:
    message = refused_by_client(hostile, QueryRequest("a rows header in superscript digits"))
    assert "no valid Odf-Rows header" in message


@pytest.mark.parametrize(
    ("name", "cells"),
    [
        ("chunked stream cut short", None),
        ("chunked rows cut short", Cells.TEXT),
        ("chunked error cut short", None),
    ],
)
def test_a_chunked_answer_cut_short_is_refused(
    hostile: DaemonInfo, name: str, cells: Cells | None
) -> None:
    message = refused_by_client(hostile, QueryRequest(name, 3 if cells else None, cells=cells))
    assert "sent a broken" in message


# --- a daemon that does not answer ---------------------------------------------------------------


@pytest.mark.parametrize("cells", [None, Cells.TEXT])
def test_a_daemon_that_does_not_answer_is_unavailable_and_the_message_says_so(
    cells: Cells | None,
) -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, not listening: a connection is refused
        address = f"127.0.0.1:{bound.getsockname()[1]}"
        with pytest.raises(EngineUnavailableError) as raised:
            query_over_http(daemon_info(address), TOKEN, QueryRequest("SELECT 1", 2, cells=cells))
    message = str(raised.value)
    assert message.startswith(f"the daemon at {address} (pid {PID}) does not answer: ")
    assert message.endswith("; run the command with --no-daemon, or restart the daemon")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("address", "reach"),
    [
        ("127.0.0.1:4885", ("127.0.0.1", 4885)),
        ("0.0.0.0:4885", ("127.0.0.1", 4885)),
        ("[::]:4885", ("127.0.0.1", 4885)),
        ("[::1]:4885", ("::1", 4885)),
        ("example.org:443", ("example.org", 443)),
    ],
)
def test_the_http_address_is_reached_on_loopback_when_it_is_a_wildcard(
    address: str, reach: tuple[str, int]
) -> None:
    assert daemon_info(address).http_reach() == reach
