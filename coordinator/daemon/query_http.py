"""The daemon's HTTP query endpoint: ``POST /api/query``, one ad-hoc query (``odf sql``) answered
with its result as an Arrow IPC stream.

It is the quickest way to a small result: a client needs the standard library's HTTP client and
pyarrow, not gRPC, so ``odf sql --command`` through a daemon sends its query ~0.1 s sooner
than over gRPC (whose import is the largest of a thin client), and anything that speaks HTTP
(``curl``, a browser's ``fetch``, a script with ``requests`` and pyarrow) can read results.
The query runs as the gRPC ``Query`` does (``CoordinatorService.query``: the daemon's warm
engine, a slot of its parallel work, remembered for the next start's warm-up).

The request, ``Content-Type: application/json``, at most ``MAX_REQUEST_BYTES``::

    {"sql": "SELECT ...", "limit": 1000, "aliases": {"f": "nyc.flights"},
     "asOf": {"nyc.flights": "f1620..."}}

(``limit``: at most this many rows back, ``null`` or absent for all; ``aliases`` and ``asOf`` as
``odf sql --input`` and ``--as-of``; no other field.) It needs the daemon's token (``Authorization:
Bearer``, any scope: reading). The answer:

- ``200``, ``Content-Type: application/vnd.apache.arrow.stream``: the rows, with the headers
  ``Odf-Rows`` (rows in the stream) and ``Odf-Num-Records`` (rows of the whole result, more when
  ``limit`` cut it);
- else a JSON object ``{"error": "one line", "kind": "invalid"}`` (``kind``: ``not_found`` 404,
  ``invalid`` 400 (bad request, SQL the engine refuses), ``unavailable`` 503, ``failed`` 409,
  ``internal`` 500; ``401`` without a good token).

The answer comes once the query has run (as a gRPC ``Query`` sends its first rows then), so
the client waits as long as the query takes; once the answer has started, each read must
come within ``READ_TIMEOUT_S``. The client accepts a result only whole: the rows it announced,
a valid Arrow stream, no more rows than asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from common.logs import get_logger
from common.odf.errors import ValidationError
from coordinator.app.use_cases import QueryOptions
from coordinator.daemon.errors import (
    DaemonCallError,
    ErrorKind,
    client_error,
    kind_of,
    message_of,
)
from coordinator.engine.errors import EngineUnavailableError
from coordinator.query.display import Cells, ShownResult, shown_result

if TYPE_CHECKING:
    from coordinator.daemon.http_listener import BoundedHandler
    from coordinator.daemon.rundir import DaemonInfo
    from coordinator.query import QueryResult

log = get_logger(__name__)

QUERY_PATH = "/api/query"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
ROWS_HEADER = "Odf-Rows"
NUM_RECORDS_HEADER = "Odf-Num-Records"
MAX_REQUEST_BYTES = 1 << 20
MAX_SHOWN_ROWS = 100_000
"""At most this many rows are answered as shown cells (JSON); more only as Arrow."""
MAX_SHOWN_BYTES = 512 << 20
"""The largest JSON answer a client reads."""
MAX_ERROR_BYTES = 64 << 10
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
"""Once the answer has started: the longest wait for any read of it."""

_STATUS = {
    ErrorKind.NOT_FOUND: HTTPStatus.NOT_FOUND,
    ErrorKind.INVALID: HTTPStatus.BAD_REQUEST,
    ErrorKind.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    ErrorKind.FAILED: HTTPStatus.CONFLICT,
    ErrorKind.INTERNAL: HTTPStatus.INTERNAL_SERVER_ERROR,
}
_FIELDS = ("sql", "limit", "aliases", "asOf", "cells")


@dataclass(frozen=True, slots=True)
class QueryRequest:
    sql: str
    limit: int | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    as_of: Mapping[str, str] = field(default_factory=dict)
    cells: Cells | None = None
    """Rows as shown (JSON, at most ``MAX_SHOWN_ROWS``), else an Arrow stream."""

    def to_json(self) -> bytes:
        body: dict[str, Any] = {"sql": self.sql, "limit": self.limit}
        if self.aliases:
            body["aliases"] = dict(self.aliases)
        if self.as_of:
            body["asOf"] = dict(self.as_of)
        if self.cells is not None:
            body["cells"] = self.cells.value
        return json.dumps(body).encode()

    @classmethod
    def parse(cls, body: bytes) -> QueryRequest:
        """The request in ``body``; a ``ValidationError`` naming the field that is wrong."""
        try:
            value = json.loads(body)
        except ValueError as e:
            raise ValidationError(f"the body is not JSON: {e}", path="body") from None
        if not isinstance(value, dict):
            raise ValidationError("the body is not a JSON object", path="body")
        unknown = sorted(set(value) - set(_FIELDS))
        if unknown:
            raise ValidationError(f"unknown fields {unknown} (known: {list(_FIELDS)})", path="body")
        sql = value.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise ValidationError("a query (text) is required", path="sql")
        limit = value.get("limit")
        if limit is not None and (type(limit) is not int or limit < 0):
            raise ValidationError(f"expected a number of rows, got {limit!r}", path="limit")
        cells = value.get("cells")
        if cells is not None:
            if cells not in ("text", "values"):
                raise ValidationError(f"expected text or values, got {cells!r}", path="cells")
            if not limit or limit > MAX_SHOWN_ROWS:
                raise ValidationError(
                    f"rows as cells need a limit of 1 to {MAX_SHOWN_ROWS}", path="limit"
                )
        return cls(
            sql,
            limit,
            _names(value.get("aliases"), "aliases"),
            _names(value.get("asOf"), "asOf"),
            Cells(cells) if cells is not None else None,
        )

    def options(self) -> QueryOptions:
        return QueryOptions(aliases=self.aliases, limit=self.limit, as_of=self.as_of)


def _names(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError("expected an object of names to names", path=path)
    return value


# --- the daemon's side ---------------------------------------------------------------------------


def serve_query(
    handler: BoundedHandler,
    authorized: Callable[[BoundedHandler], bool],
    run: Callable[[str, QueryOptions], QueryResult],
) -> None:
    """Answer one ``POST /api/query`` on ``handler`` (its connection closes after)."""
    handler.close_connection = True
    if not authorized(handler):
        _refuse(handler, HTTPStatus.UNAUTHORIZED, "a query needs the daemon's token (Bearer)")
        return
    try:
        length = int(handler.headers.get("Content-Length", ""))
    except ValueError:
        _refuse(handler, HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
        return
    if not 0 < length <= MAX_REQUEST_BYTES:
        _refuse(
            handler,
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"a query request of 1 to {MAX_REQUEST_BYTES} bytes",
        )
        return
    handler.read_body_within(length)
    body = handler.rfile.read(length)
    handler.deadline.clear()  # the query takes what it takes; writes have the socket's timeout
    try:
        request = QueryRequest.parse(body)
        result = run(request.sql, request.options())
        shown = shown_result(result, request.cells) if request.cells is not None else None
    except Exception as e:  # the application's errors, each as the status of its kind
        kind = kind_of(e)
        if kind is ErrorKind.INTERNAL:
            log.error("daemon.query_failed", error=repr(e), exc_info=e)
        _refuse(handler, _STATUS[kind], message_of(e), kind)
        return
    if shown is not None:
        _send_shown(handler, shown)
    else:
        _send_result(handler, result)


def _send_shown(handler: BoundedHandler, shown: ShownResult) -> None:
    body = json.dumps(
        {"columns": shown.columns, "rows": shown.rows, "numRecords": shown.num_records},
        ensure_ascii=False,
    ).encode()
    handler.send_response(HTTPStatus.OK)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Cache-Control", "no-store")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    try:
        handler.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError, TimeoutError):
        log.info("daemon.query_client_gone")


def _send_result(handler: BoundedHandler, result: QueryResult) -> None:
    import pyarrow as pa

    table = result.table
    handler.send_response(HTTPStatus.OK)
    handler.send_header("Content-Type", ARROW_STREAM)
    handler.send_header("Cache-Control", "no-store")
    handler.send_header(ROWS_HEADER, str(table.num_rows))
    handler.send_header(NUM_RECORDS_HEADER, str(result.num_records))
    handler.end_headers()
    try:
        with pa.ipc.new_stream(handler.wfile, table.schema) as writer:
            writer.write_table(table)
    except (BrokenPipeError, ConnectionResetError, TimeoutError):
        log.info("daemon.query_client_gone")


def _refuse(
    handler: BoundedHandler, status: HTTPStatus, message: str, kind: ErrorKind | None = None
) -> None:
    body: dict[str, str] = {"error": message}
    if kind is not None:
        body["kind"] = kind.value
    data = json.dumps(body).encode()
    handler.send_response(status)
    if status is HTTPStatus.UNAUTHORIZED:
        handler.send_header("WWW-Authenticate", "Bearer")
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


# --- a client's side -----------------------------------------------------------------------------


class HttpQueries:
    """Ad-hoc queries (``Queries``) run by the daemon of ``info`` over its HTTP query endpoint."""

    def __init__(self, info: DaemonInfo, token: str) -> None:
        self.info, self.token = info, token

    def query(self, query: str, options: QueryOptions = QueryOptions()) -> QueryResult:
        result = query_over_http(self.info, self.token, _request(query, options))
        assert not isinstance(result, ShownResult)
        return result

    def shown(self, query: str, options: QueryOptions, cells: Cells) -> ShownResult:
        """The result as shown, its cells as ``cells`` says (``options.limit``: 1 to
        ``MAX_SHOWN_ROWS``); pyarrow is not loaded."""
        result = query_over_http(self.info, self.token, _request(query, options, cells))
        assert isinstance(result, ShownResult)
        return result


def _request(query: str, options: QueryOptions, cells: Cells | None = None) -> QueryRequest:
    aliases, as_of = dict(options.aliases or {}), dict(options.as_of or {})
    return QueryRequest(query, options.limit, aliases, as_of, cells)


def query_over_http(
    info: DaemonInfo, token: str, request: QueryRequest
) -> QueryResult | ShownResult:
    """``request`` run by the daemon of ``info`` over its HTTP listener: the result, checked
    whole, or the error the daemon's answer stands for (``DaemonCallError``, or
    ``EngineUnavailableError`` when the daemon does not answer)."""
    import http.client

    host, port = info.http_reach()
    if info.tls_cert is not None:
        import ssl

        context = ssl.create_default_context(cafile=info.tls_cert)
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=CONNECT_TIMEOUT_S, context=context
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT_S)
    try:
        try:
            conn.request(
                "POST",
                QUERY_PATH,
                request.to_json(),
                {
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                    "Accept": ARROW_STREAM if request.cells is None else "application/json",
                },
            )
            sock = conn.sock  # the response keeps it (the connection lets go of it)
            assert sock is not None
            sock.settimeout(None)  # the query's own time (Ctrl-C stops the wait)
            if request.cells is None:
                _load_pyarrow_meanwhile()
            response = conn.getresponse()
            sock.settimeout(READ_TIMEOUT_S)
        except (OSError, http.client.HTTPException) as e:
            pid = f" (pid {info.pid})" if info.pid else ""
            raise EngineUnavailableError(
                f"the daemon at {info.http_address}{pid} does not answer: {e!r}; run the"
                " command with --no-daemon, or restart the daemon"
            ) from None
        try:
            return _read_answer(response, request, info.http_address)
        except (OSError, http.client.HTTPException) as e:  # cut short, stalled, not HTTP
            raise DaemonCallError(
                f"the daemon at {info.http_address} sent a broken answer: {e!r}"
            ) from None
    finally:
        conn.close()


def _load_pyarrow_meanwhile() -> None:
    """pyarrow (the client's largest import) loads while the daemon runs the query."""
    import pyarrow  # noqa: F401


def _read_answer(response: Any, request: QueryRequest, where: str) -> QueryResult | ShownResult:
    from coordinator.query import QueryResult

    if response.status != HTTPStatus.OK:
        raise _answered_error(response, where)
    if request.cells is not None:
        return _read_shown(response, request, where)
    if response.getheader("Content-Type") != ARROW_STREAM:
        raise DaemonCallError(f"the daemon at {where} answered a query with no Arrow stream")
    rows = _count(response.getheader(ROWS_HEADER), ROWS_HEADER, where)
    total = _count(response.getheader(NUM_RECORDS_HEADER), NUM_RECORDS_HEADER, where)
    if rows > total or (request.limit is not None and rows > request.limit):
        raise DaemonCallError(
            f"the daemon at {where} announced {rows} rows of {total} for a limit of {request.limit}"
        )
    import pyarrow as pa

    try:
        table = pa.ipc.open_stream(response).read_all()
        table.validate(full=True)
    except (pa.ArrowException, OSError) as e:
        raise DaemonCallError(f"the daemon at {where} sent a broken result: {e}") from None
    if table.num_rows != rows:
        raise DaemonCallError(
            f"the daemon at {where} sent {table.num_rows} rows of the {rows} it announced"
        )
    return QueryResult(table, total)


def _read_shown(response: Any, request: QueryRequest, where: str) -> ShownResult:
    """The JSON answer of a request for shown cells, checked before anything is shown."""
    if response.getheader("Content-Type") != "application/json":
        raise DaemonCallError(f"the daemon at {where} answered a query with no JSON rows")
    raw = response.read(MAX_SHOWN_BYTES + 1)
    if len(raw) > MAX_SHOWN_BYTES:
        raise DaemonCallError(f"the daemon at {where} sent more than {MAX_SHOWN_BYTES} bytes")
    try:
        answer = json.loads(raw)
        columns, rows, total = answer["columns"], answer["rows"], answer["numRecords"]
    except (ValueError, KeyError, TypeError) as e:
        raise DaemonCallError(f"the daemon at {where} sent broken rows: {e}") from None
    text = request.cells is Cells.TEXT
    if not (
        isinstance(columns, list)
        and all(isinstance(c, str) for c in columns)
        and isinstance(rows, list)
        and all(
            isinstance(row, list)
            and len(row) == len(columns)
            and (not text or all(isinstance(cell, str) for cell in row))
            for row in rows
        )
        and type(total) is int
        and len(rows) <= total
        and (request.limit is None or len(rows) <= request.limit)
    ):
        raise DaemonCallError(
            f"the daemon at {where} sent rows that are not {len(rows)} of at most"
            f" {request.limit} rows of {len(columns)} columns"
        )
    return ShownResult(columns, rows, total)


def _answered_error(response: Any, where: str) -> Exception:
    raw = response.read(MAX_ERROR_BYTES)
    try:
        answer = json.loads(raw)
        message, kind_text = answer["error"], answer.get("kind")
        kind = ErrorKind(kind_text) if kind_text is not None else None
    except (ValueError, KeyError, TypeError):
        message, kind = None, None
    if not isinstance(message, str):
        return DaemonCallError(
            f"the daemon at {where} answered {response.status} {response.reason}"
        )
    if response.status == HTTPStatus.UNAUTHORIZED:
        return DaemonCallError(f"the daemon at {where} refused the token: {message}")
    return client_error(kind, message)


def _count(text: str | None, header: str, where: str) -> int:
    if text is None or not (text.isascii() and text.isdigit()):
        raise DaemonCallError(f"the daemon at {where} sent no valid {header} header")
    return int(text)
