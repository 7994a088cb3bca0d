"""Arrow Flight SQL served by the daemon (``--flight-sql-address``): the workspace's datasets
as tables for ADBC, JDBC and BI clients, read-only.

A statement (``CommandStatementQuery``, or a prepared statement's
``CommandPreparedStatementQuery``) runs when the client asks for its ``FlightInfo``: the query
is run as ``odf sql`` runs it (a view per dataset it names, ``name@when`` for a dataset as of a
block or a time: ``runner.AS_OF_MARK``) on the daemon's warm engines, whose sandbox vets it,
and the engine writes the whole result to an Arrow IPC file in the workspace's scratch
directory. The ``FlightInfo`` carries the result's schema, its number of rows and a ticket
(``TicketStatementQuery``); ``DoGet`` with the ticket streams the file's record batches one at
a time (the front answers it itself: ``open_result``, ``flight_data``), so a result much
larger than the daemon's memory passes through it without growing it. The file is removed
once streamed, cancelled (``CancelFlightInfo``, or the legacy ``CancelQuery`` action), or left
unread for ``flightSqlCallTimeout`` seconds.

Metadata commands (``CommandGetSqlInfo``, catalogs, schemas, tables with their Arrow schemas,
table types, keys) are answered from the workspace (``flight_catalog``): their ticket is the
command itself.

Bounds: loopback unless TLS (or ``--insecure``), as the daemon's other listeners; every call
needs a token (``flight_auth``); a statement's SQL is at most ``MAX_QUERY_BYTES``; at most
``flightSqlMaxCalls`` queries and result streams at once (more are refused, UNAVAILABLE); a
stream longer than ``flightSqlCallTimeout`` seconds is stopped (DEADLINE_EXCEEDED), a result
left unread as long is removed; a query whose client gives up while the engine runs it is
stopped on the engine (``coordinator.engine.cancel``);
writes (updates, transactions, any ``DoPut`` but parameters) are refused (read-only).

A prepared statement's ``?`` markers take the values a client binds with ``DoPut`` (one Arrow
row, at most ``flight_params.MAX_BIND_BYTES``), put into the query as typed literals
(``flight_params``) when it is executed.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.ipc as ipc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from common.logs import get_logger
from common.odf.errors import NotFoundError, OdfError
from coordinator.app import Application
from coordinator.daemon import flight_catalog as catalog
from coordinator.daemon import flight_data
from coordinator.daemon import flight_params as params
from coordinator.daemon import flight_session as session
from coordinator.daemon.access import Authority
from coordinator.daemon.calls import DatasetLocks, status_of
from coordinator.daemon.errors import message_of
from coordinator.daemon.flight_auth import OpenHandshake, TokenMiddleware, grant
from coordinator.daemon.flight_front import ResultStream
from coordinator.daemon.flight_sql_generated import flight_sql_pb2 as fsql
from coordinator.daemon.metrics import Metrics
from coordinator.engine import cancel as engine_cancel

log = get_logger(__name__)

MAX_QUERY_BYTES = 1 << 20
"""The longest SQL text a statement may have."""
MAX_PREPARED = 1024
"""Prepared statements kept at once; the oldest is dropped beyond."""
_TYPE_PREFIX = "type.googleapis.com/"
MAX_BATCH_BYTES = 4 << 20
"""The largest record batch body sent: bigger ones of the engine's file go out in slices
(clients refuse messages over 16 MiB by default: ADBC, gRPC's Go and Java)."""
RELEASE_BYTES = 32 << 20
"""A result's memory goes back to the system after each this many bytes sent (after every
message costs the stream a third of its speed; the daemon's memory stays flat either way)."""
REUSE_S = 30.0
"""A prepared statement executed within this many seconds of being prepared returns the
result computed then (ADBC and JDBC prepare every statement, then execute it at once)."""
_WATCH_S = 0.1
"""How often a running query checks whether its client is still there."""
_SCHEMA_PROBE = "SELECT * FROM (\n{query}\n) LIMIT 0"
"""The query that gives a prepared statement's result schema without computing it."""

ACTIONS = {
    "CreatePreparedStatement": "a prepared statement (ActionCreatePreparedStatementRequest)",
    "ClosePreparedStatement": "close a prepared statement (ActionClosePreparedStatementRequest)",
    "CancelFlightInfo": "cancel a query's result (CancelFlightInfoRequest)",
    "CancelQuery": "cancel a query's result (ActionCancelQueryRequest; deprecated)",
    "SetSessionOptions": "set session options: as_of (SetSessionOptionsRequest)",
    "GetSessionOptions": "the session's options (GetSessionOptionsRequest)",
    "CloseSession": "forget the session and its options (CloseSessionRequest)",
}


@dataclass
class _Result:
    """One statement's result, in the engine's output file until streamed."""

    path: Path
    schema: pa.Schema
    num_records: int
    files: ExitStack
    """Removes the file (and its directory) when closed."""
    created: float = field(default_factory=time.monotonic)
    cancelled: threading.Event = field(default_factory=threading.Event)
    streaming: bool = False


class _Results:
    """The results not yet streamed (or being streamed), by handle."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._by_handle: dict[bytes, _Result] = {}

    def add(self, result: _Result) -> bytes:
        handle = secrets.token_bytes(16)
        with self._lock:
            self._by_handle[handle] = result
        self.expire()
        return handle

    def peek(self, handle: bytes) -> _Result | None:
        """The result of ``handle`` if it is still there and not being streamed."""
        with self._lock:
            result = self._by_handle.get(handle)
        return None if result is None or result.streaming else result

    def start(self, handle: bytes) -> _Result:
        with self._lock:
            result = self._by_handle.get(handle)
            if result is None or result.streaming:
                raise flight.FlightServerError(
                    "no such result (already read, cancelled or expired): run the query again"
                )
            result.streaming = True
            return result

    def finish(self, handle: bytes) -> None:
        with self._lock:
            result = self._by_handle.pop(handle, None)
        if result is not None:
            result.files.close()

    def cancel(self, handle: bytes) -> bool:
        with self._lock:
            result = self._by_handle.get(handle)
        if result is None:
            return False
        result.cancelled.set()
        if not result.streaming:
            self.finish(handle)
        return True

    def expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            old = [h for h, r in self._by_handle.items() if now - r.created > self.ttl]
        for handle in old:
            log.info("flight_sql.result_expired")
            self.cancel(handle)

    def close(self) -> None:
        with self._lock:
            handles = list(self._by_handle)
        for handle in handles:
            with self._lock:
                result = self._by_handle.pop(handle, None)
            if result is not None:
                result.cancelled.set()
                result.files.close()


@dataclass(slots=True)
class _Prepared:
    query: str
    schema: pa.Schema | None
    """The result's schema (unknown before parameters are bound to a query with markers)."""
    first: bytes | None
    """The handle of the result computed when the statement was prepared, for its first
    execution (within ``REUSE_S``)."""
    markers: int = 0
    """The query's ``?`` parameter markers."""
    values: pa.Table | None = None
    """The parameters last bound (``DoPut``): one row, a column per marker."""
    prepared: float = field(default_factory=time.monotonic)

    def bound_query(self) -> str:
        """The query to run: with the bound parameters in place of its markers."""
        if not self.markers:
            return self.query
        if self.values is None:
            raise flight.FlightServerError(
                f"the statement has {self.markers} parameters ('?'): bind them first"
            )
        try:
            return params.bind(self.query, self.values)
        except params.ParameterError as e:
            raise flight.FlightServerError(str(e)) from None


def pack(message: Message) -> bytes:
    """``message`` in a ``google.protobuf.Any``, serialized (how Flight SQL sends commands)."""
    wrapped = any_pb2.Any()
    wrapped.Pack(message)
    return wrapped.SerializeToString()


_COMMANDS: dict[str, type[Message]] = {
    m.DESCRIPTOR.full_name: m
    for m in (
        fsql.CommandStatementQuery,
        fsql.CommandPreparedStatementQuery,
        fsql.TicketStatementQuery,
        fsql.CommandGetSqlInfo,
        fsql.CommandGetCatalogs,
        fsql.CommandGetDbSchemas,
        fsql.CommandGetTables,
        fsql.CommandGetTableTypes,
        fsql.CommandGetPrimaryKeys,
    )
}


def unpack(data: bytes, where: str) -> Message:
    """The Flight SQL command in ``data`` (an ``Any``); a clear refusal otherwise."""
    wrapped = any_pb2.Any()
    try:
        wrapped.ParseFromString(data)
    except DecodeError:
        raise flight.FlightServerError(
            f"{where}: not a Flight SQL command (google.protobuf.Any)"
        ) from None
    name = wrapped.type_url.removeprefix(_TYPE_PREFIX)
    kind = _COMMANDS.get(name)
    if kind is None and name.endswith("Update"):
        raise flight.FlightServerError("this server is read-only: no updates")
    if kind is None:
        raise flight.FlightServerError(f"{where}: {name or 'no command'} is not supported")
    message = kind()
    if not wrapped.Unpack(message):
        raise flight.FlightServerError(f"{where}: unreadable {name}")
    return message


_ERRORS: dict[str, Callable[[str], Exception]] = {
    "UNAVAILABLE": flight.FlightUnavailableError,
    "CANCELLED": flight.FlightCancelledError,
    "INTERNAL": flight.FlightInternalError,
}
"""The Flight error of a gRPC status code an application error has (``calls.status_of``);
any other is a ``FlightServerError``. Only Flight's own errors reach the client as their
message alone (pyarrow adds the Python traceback to any other exception)."""


def _flight_error(error: BaseException) -> Exception:
    """An application error as the Flight error a client shows (one line)."""
    code = status_of(error).name
    if code == "INTERNAL":
        log.error("flight_sql.failed", error=repr(error), exc_info=error)
    make: Callable[[str], Exception] = _ERRORS.get(code, flight.FlightServerError)
    return make(message_of(error))


class FlightSqlServer(flight.FlightServerBase):  # type: ignore[misc]
    """The Flight SQL service of one daemon (see the module doc)."""

    address = ""
    """Where it listens, ``host:port`` (set by the daemon once bound)."""

    def __init__(
        self,
        app: Application,
        locks: DatasetLocks,
        metrics: Metrics,
        authority: Authority,
        location: str,
        tls: tuple[bytes, bytes] | None,
    ) -> None:
        """Listen on ``location`` (``grpc://host:port``, ``grpc+tls://`` with ``tls``: the
        certificate and key, PEM)."""
        config = app.config.daemon
        self.app, self.locks, self.metrics, self.authority = app, locks, metrics, authority
        self.timeout = config.flight_sql_call_timeout
        self.calls = threading.BoundedSemaphore(config.flight_sql_max_calls)
        self.max_calls = config.flight_sql_max_calls
        self.results = _Results(self.timeout)
        self._prepared: dict[bytes, _Prepared] = {}
        self._prepared_lock = threading.Lock()
        self.sessions = session.Sessions()
        certificates = [flight.CertKeyPair(cert=tls[0], key=tls[1])] if tls else []
        super().__init__(  # listens from here on
            location,
            auth_handler=OpenHandshake(),
            tls_certificates=certificates,
            middleware={
                "token": TokenMiddleware(authority),
                "session": session.SessionMiddleware(),
            },
        )

    # --- FlightInfo and schemas ----------------------------------------------------------------

    def get_flight_info(
        self, context: Any, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        command = self._command(descriptor)
        if isinstance(command, fsql.CommandStatementQuery):
            return self._info(descriptor, *self._run(_query_text(command.query), context))
        if isinstance(command, fsql.CommandPreparedStatementQuery):
            prepared = self._prepared_statement(command.prepared_statement_handle)
            first, prepared.first = prepared.first, None
            if first is not None and time.monotonic() - prepared.prepared < REUSE_S:
                result = self.results.peek(first)
                if result is not None:
                    return self._info(descriptor, first, result)
            if first is not None:
                self.results.cancel(first)
            return self._info(descriptor, *self._run(prepared.bound_query(), context))
        schema = self._metadata_schema(command)
        endpoint = flight.FlightEndpoint(descriptor.command, [])
        return flight.FlightInfo(schema, descriptor, [endpoint], -1, -1)

    def get_schema(self, context: Any, descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        command = self._command(descriptor)
        if isinstance(command, fsql.CommandStatementQuery):
            return flight.SchemaResult(self._probe_schema(_query_text(command.query), context))
        if isinstance(command, fsql.CommandPreparedStatementQuery):
            prepared = self._prepared_statement(command.prepared_statement_handle)
            if prepared.schema is not None:
                return flight.SchemaResult(prepared.schema)
            return flight.SchemaResult(self._probe_schema(prepared.bound_query(), context))
        return flight.SchemaResult(self._metadata_schema(command))

    def _command(self, descriptor: flight.FlightDescriptor) -> Message:
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            raise flight.FlightServerError("expected a command descriptor (Flight SQL), not a path")
        return unpack(descriptor.command, "FlightDescriptor.cmd")

    def _metadata_schema(self, command: Message) -> pa.Schema:
        if isinstance(command, fsql.CommandGetSqlInfo):
            return catalog.SQL_INFO_SCHEMA
        if isinstance(command, fsql.CommandGetCatalogs):
            return catalog.CATALOGS_SCHEMA
        if isinstance(command, fsql.CommandGetDbSchemas):
            return catalog.DB_SCHEMAS_SCHEMA
        if isinstance(command, fsql.CommandGetTables):
            return (
                catalog.TABLES_WITH_SCHEMA_SCHEMA
                if command.include_schema
                else catalog.TABLES_SCHEMA
            )
        if isinstance(command, fsql.CommandGetTableTypes):
            return catalog.TABLE_TYPES_SCHEMA
        if isinstance(command, fsql.CommandGetPrimaryKeys):
            return catalog.PRIMARY_KEYS_SCHEMA
        raise flight.FlightServerError(f"{command.DESCRIPTOR.name} is not a metadata command")

    # --- queries -------------------------------------------------------------------------------

    def _run(self, query: str, context: Any) -> tuple[bytes, _Result]:
        """Run ``query`` now; the handle of its result, and the result. If the client gives
        up meanwhile (cancels, or its deadline passes) the engine is told to stop the query
        (``_stop_when_client_leaves``)."""
        files = ExitStack()
        with self._slot():
            try:
                with (
                    self.locks.slots,
                    self.metrics.timed("flight_sql_query"),
                    self._stop_when_client_leaves(context),
                ):
                    path, num_records = files.enter_context(
                        self.app.query_file(query, self._as_of(context))
                    )
                with pa.OSFile(str(path), "rb") as source:
                    schema = ipc.open_file(source).schema
            except OdfError as e:
                files.close()
                raise _flight_error(e) from None
            except BaseException:
                files.close()
                raise
        if context.is_cancelled():
            files.close()
            raise flight.FlightCancelledError("the client cancelled the query")
        result = _Result(path, schema, num_records, files)
        log.info("flight_sql.query", rows=num_records, bytes=path.stat().st_size)
        return self.results.add(result), result

    @contextmanager
    def _stop_when_client_leaves(self, context: Any) -> Iterator[None]:
        """The engine calls of this context are cancelled (the engine stops their work) as
        soon as the client cancels the call or its deadline passes (checked every 0.1 s)."""
        cancel = engine_cancel.EngineCancel()
        done = threading.Event()

        def watch() -> None:
            while not done.wait(_WATCH_S):
                if context.is_cancelled():
                    log.info("flight_sql.query_cancelled")
                    cancel.cancel()
                    return

        watcher = threading.Thread(target=watch, name="odf-flight-sql-watch", daemon=True)
        watcher.start()
        try:
            with cancel:
                yield
        finally:
            done.set()
            watcher.join()

    def _info(
        self, descriptor: flight.FlightDescriptor, handle: bytes, result: _Result
    ) -> flight.FlightInfo:
        """The FlightInfo of a result: its schema, rows, size and a ticket to stream it."""
        ticket = flight.Ticket(pack(fsql.TicketStatementQuery(statement_handle=handle)))
        endpoint = flight.FlightEndpoint(ticket, [])
        size = result.path.stat().st_size
        return flight.FlightInfo(result.schema, descriptor, [endpoint], result.num_records, size)

    def _as_of(self, context: Any) -> str | None:
        """The session's ``as_of`` option, if the call's session has one."""
        call = session.call_of(context)
        return self.sessions.as_of(call.session) if call is not None else None

    def _probe_schema(self, query: str, context: Any) -> pa.Schema:
        """The schema of ``query``'s result, from the engine, without computing its rows."""
        probe = _SCHEMA_PROBE.format(query=query)
        with self._slot():
            try:
                with (
                    self.locks.slots,
                    self._stop_when_client_leaves(context),
                    self.app.query_file(probe, self._as_of(context)) as (path, _),
                    pa.OSFile(str(path), "rb") as source,
                ):
                    schema: pa.Schema = ipc.open_file(source).schema
                    return schema
            except OdfError as e:
                raise _flight_error(e) from None

    def _slot(self) -> ExitStack:
        """One of the ``flightSqlMaxCalls`` slots, for the context's time; refused if none."""
        if not self.calls.acquire(blocking=False):
            raise flight.FlightUnavailableError(
                f"busy: {self.max_calls} Flight SQL queries and streams at once"
                " (daemon.flightSqlMaxCalls); try again"
            )
        stack = ExitStack()
        stack.callback(self.calls.release)
        return stack

    # --- results -------------------------------------------------------------------------------

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.FlightDataStream:
        """A metadata command's table (a statement's result is streamed by the front:
        ``open_result``)."""
        return flight.RecordBatchStream(self._metadata_table(unpack(ticket.ticket, "Ticket")))

    def open_result(
        self, ticket: bytes, authorization: str | bytes, active: Callable[[], bool]
    ) -> ResultStream | None:
        """The ``DoGet`` of a statement's result, for the front to answer itself
        (``flight_front``): the headers to send and the result's ``FlightData`` messages read
        from its file one at a time (``flight_data``); ``None`` for any other ticket (the
        front passes the call on). A statement's ticket is checked against the token before
        its result is looked up; other tickets, readable or not, are left to the server behind,
        which checks the token itself (once per call). ``active`` says whether the client is
        still there."""
        try:
            command = unpack(ticket, "Ticket")
        except flight.FlightError:
            return None
        if not isinstance(command, fsql.TicketStatementQuery):
            return None
        answer = grant(self.authority, authorization, "DoGet")
        handle = command.statement_handle
        result = self.results.start(handle)
        headers = (("authorization", answer),) if answer else ()
        return ResultStream(headers, self._messages(handle, result, active))

    def _messages(
        self, handle: bytes, result: _Result, active: Callable[[], bool]
    ) -> Iterator[bytes]:
        deadline = time.monotonic() + self.timeout
        sent = released = 0
        pool = pa.default_memory_pool()
        try:
            with self._slot():
                for message in flight_data.file_messages(result.path, MAX_BATCH_BYTES):
                    if result.cancelled.is_set() or not active():
                        raise flight.FlightCancelledError("the query's result was cancelled")
                    if time.monotonic() > deadline:
                        raise flight.FlightTimedOutError(
                            f"the result took longer than {self.timeout:g} s to read"
                            " (daemon.flightSqlCallTimeout)"
                        )
                    data = flight_data.flight_data(message)
                    del message
                    sent += len(data)
                    yield data
                    del data
                    if sent - released >= RELEASE_BYTES:
                        released = sent
                        pool.release_unused()  # the messages' memory back to the system
        finally:
            self.results.finish(handle)
            log.info("flight_sql.streamed", bytes=sent)

    def _metadata_table(self, command: Message) -> pa.Table:
        schema = self._metadata_schema(command)
        if isinstance(command, fsql.CommandGetSqlInfo):
            return catalog.sql_info_table(list(command.info))
        if isinstance(command, fsql.CommandGetCatalogs):
            return catalog.catalogs_table()
        if isinstance(command, fsql.CommandGetDbSchemas):
            return catalog.db_schemas_table(command)
        if isinstance(command, fsql.CommandGetTables):
            return catalog.tables_table(self.app.ws, command)
        if isinstance(command, fsql.CommandGetTableTypes):
            return catalog.table_types_table()
        return schema.empty_table()  # primary keys: datasets declare none

    def do_put(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        """Only parameters bound to a prepared statement: one row of Arrow values (at most
        ``params.MAX_BIND_BYTES``), a column per ``?`` marker; all else is refused."""
        command = self._command(descriptor)
        if not isinstance(command, fsql.CommandPreparedStatementQuery):
            raise flight.FlightServerError("this server is read-only: no uploads, no updates")
        handle = command.prepared_statement_handle
        prepared = self._prepared_statement(handle)
        batches: list[pa.RecordBatch] = []
        size = 0
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            if chunk.data is None:
                continue
            size += chunk.data.nbytes
            if size > params.MAX_BIND_BYTES:
                raise flight.FlightServerError(
                    f"parameters: more than {params.MAX_BIND_BYTES} bytes bound"
                )
            batches.append(chunk.data)
        values = pa.Table.from_batches(batches, reader.schema)
        try:
            params.bind(prepared.query, values)  # refused now if it does not fit
        except params.ParameterError as e:
            raise flight.FlightServerError(str(e)) from None
        if prepared.first is not None:  # a result of other (or no) parameters
            self.results.cancel(prepared.first)
        prepared.values, prepared.first = values, None
        answer = fsql.DoPutPreparedStatementResult(prepared_statement_handle=handle)
        writer.write(pa.py_buffer(answer.SerializeToString()))

    def do_exchange(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        raise flight.FlightServerError("this server is read-only: no exchanges")

    # --- actions -------------------------------------------------------------------------------

    def list_actions(self, context: Any) -> list[tuple[str, str]]:
        return list(ACTIONS.items())

    def do_action(self, context: Any, action: flight.Action) -> Iterator[flight.Result]:
        handlers: dict[str, Callable[[Any, bytes], Iterator[bytes]]] = {
            "CreatePreparedStatement": self._create_prepared,
            "ClosePreparedStatement": self._close_prepared,
            "CancelFlightInfo": self._cancel_flight_info,
            "CancelQuery": self._cancel_query,
            "SetSessionOptions": self._set_session_options,
            "GetSessionOptions": self._get_session_options,
            "CloseSession": self._close_session,
        }
        handler = handlers.get(action.type)
        if handler is None:
            raise flight.FlightServerError(f"action {action.type!r} is not supported")
        body = action.body.to_pybytes() if action.body is not None else b""
        return iter([flight.Result(r) for r in handler(context, body)])

    def _create_prepared(self, context: Any, body: bytes) -> Iterator[bytes]:
        request = _action_body(body, fsql.ActionCreatePreparedStatementRequest)
        query = _query_text(request.query)
        count = len(params.markers(query))
        first: bytes | None = None
        schema: pa.Schema | None = None
        if not count:  # with parameters, the query runs once they are bound
            first, result = self._run(query, context)
            schema = result.schema
        handle = secrets.token_bytes(16)
        with self._prepared_lock:
            self._prepared[handle] = _Prepared(query, schema, first, count)
            while len(self._prepared) > MAX_PREPARED:
                dropped = self._prepared.pop(next(iter(self._prepared)))
                if dropped.first is not None:
                    self.results.cancel(dropped.first)
        yield pack(
            fsql.ActionCreatePreparedStatementResult(
                prepared_statement_handle=handle,
                dataset_schema=schema.serialize().to_pybytes() if schema is not None else b"",
                parameter_schema=(
                    params.parameter_schema(count).serialize().to_pybytes() if count else b""
                ),
            )
        )

    def _close_prepared(self, context: Any, body: bytes) -> Iterator[bytes]:
        request = _action_body(body, fsql.ActionClosePreparedStatementRequest)
        with self._prepared_lock:
            prepared = self._prepared.pop(request.prepared_statement_handle, None)
        if prepared is not None and prepared.first is not None:
            self.results.cancel(prepared.first)
        yield from ()

    def _prepared_statement(self, handle: bytes) -> _Prepared:
        with self._prepared_lock:
            prepared = self._prepared.get(handle)
        if prepared is None:
            raise _flight_error(NotFoundError("no such prepared statement (closed or dropped)"))
        return prepared

    def _cancel_flight_info(self, context: Any, body: bytes) -> Iterator[bytes]:
        request = fsql.CancelFlightInfoRequest.FromString(body)
        status = (
            fsql.CANCEL_STATUS_CANCELLED
            if self._cancel(request.info)
            else (fsql.CANCEL_STATUS_NOT_CANCELLABLE)
        )
        yield fsql.CancelFlightInfoResult(status=status).SerializeToString()

    def _cancel_query(self, context: Any, body: bytes) -> Iterator[bytes]:
        request = _action_body(body, fsql.ActionCancelQueryRequest)
        done = self._cancel(request.info)
        result = fsql.ActionCancelQueryResult.CancelResult
        yield pack(
            fsql.ActionCancelQueryResult(
                result=result.CANCEL_RESULT_CANCELLED
                if done
                else result.CANCEL_RESULT_NOT_CANCELLABLE
            )
        )

    def _set_session_options(self, context: Any, body: bytes) -> Iterator[bytes]:
        try:
            request = fsql.SetSessionOptionsRequest.FromString(body)
        except DecodeError:
            raise flight.FlightServerError("unreadable SetSessionOptionsRequest") from None
        call = session.call_of(context)
        if call is None:
            raise flight.FlightServerError("sessions are not available on this call")
        for name, value in request.session_options.items():
            error = session.as_of_error(value) if name == session.AS_OF else None
            if name != session.AS_OF or error:
                log.info("flight_sql.session_option_refused", name=name[:80], error=error)
        result = self.sessions.set(call.session or call.offered or "", request)
        yield result.SerializeToString()

    def _get_session_options(self, context: Any, body: bytes) -> Iterator[bytes]:
        call = session.call_of(context)
        options = self.sessions.options(call.session if call is not None else None)
        yield fsql.GetSessionOptionsResult(session_options=options).SerializeToString()

    def _close_session(self, context: Any, body: bytes) -> Iterator[bytes]:
        call = session.call_of(context)
        if not self.sessions.close(call.session if call is not None else None):
            raise _flight_error(NotFoundError("no such session (closed or expired)"))
        yield fsql.CloseSessionResult(status=fsql.CloseSessionResult.CLOSED).SerializeToString()

    def _cancel(self, info_bytes: bytes) -> bool:
        """Cancel the results of a FlightInfo (serialized): whether one was still there."""
        try:
            info = flight.FlightInfo.deserialize(info_bytes)
        except (pa.ArrowException, TypeError):
            raise flight.FlightServerError("the request's FlightInfo is unreadable") from None
        cancelled = False
        for endpoint in info.endpoints:
            try:
                command = unpack(endpoint.ticket.ticket, "Ticket")
            except pa.ArrowException:
                continue
            if isinstance(command, fsql.TicketStatementQuery):
                cancelled |= self.results.cancel(command.statement_handle)
        return cancelled

    def close(self, grace: float) -> None:
        """Stop serving: results are cancelled (streams stop at their next batch, unread
        ones are removed), then the calls still running get ``grace`` seconds to end."""
        self.results.close()
        stopping = threading.Thread(target=self.shutdown, name="odf-flight-sql-stop", daemon=True)
        stopping.start()
        stopping.join(grace)
        if stopping.is_alive():
            log.warning("flight_sql.calls_left_running", grace_s=grace)
        self.results.close()  # any result a query finished meanwhile


def _query_text(query: str) -> str:
    if len(query.encode("utf-8", "replace")) > MAX_QUERY_BYTES:
        raise flight.FlightServerError(f"the query is longer than {MAX_QUERY_BYTES} bytes")
    return query


def _action_body(body: bytes, kind: type[Message]) -> Any:
    """An action's request: packed in an ``Any`` (Flight SQL) or bare."""
    wrapped = any_pb2.Any()
    try:
        wrapped.ParseFromString(body)
        if wrapped.type_url.removeprefix(_TYPE_PREFIX) == kind.DESCRIPTOR.full_name:
            message = kind()
            wrapped.Unpack(message)
            return message
        return kind.FromString(body)
    except DecodeError:
        raise flight.FlightServerError(f"unreadable {kind.DESCRIPTOR.name}") from None
