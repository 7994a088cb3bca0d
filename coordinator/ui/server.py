"""``WebUi``: the web UI's routes on the daemon's HTTP listener (the daemon hands it every
request for ``/`` and ``/ui/...``).

Every response carries the security headers (``SECURITY_HEADERS``: a strict
Content-Security-Policy with no inline script or style and nothing from another origin,
``nosniff``, no framing, no referrer). Pages and their JSON need a session
(``sessions``); a request without one is sent to the login page (pages) or refused with 401
(the rest). POSTs must come from the UI's own origin and carry the session's CSRF token.
Pulls need a session whose token has scope ``admin``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from common.humanize import human_value
from common.logs import get_logger
from common.odf.errors import NotFoundError, OdfError
from coordinator.ui import pages
from coordinator.ui.html import Html, join, render, visible
from coordinator.ui.live import HEARTBEAT_S, Event, Hub
from coordinator.ui.sessions import Session, Sessions, csrf_ok, same_origin

if TYPE_CHECKING:
    import pyarrow as pa

    from coordinator.app import Application, DatasetSummary
    from coordinator.query import QueryResult
    from coordinator.transform.lineage import Lineage

log = get_logger(__name__)

ADMIN = 3
"""``access.Scope.ADMIN`` (the scope pulls need)."""
SCOPES = {1: "read", 2: "push", 3: "admin"}
MAX_BODY = 1 << 20
SQL_PAGE = 100
MAX_QUERY_PAGES = 100
MAX_DOWNLOAD_ROWS = 1_000_000
MAX_JOBS = 4
"""Pulls and verifications started from the UI running at once."""
STATIC = {"ui.js": "text/javascript; charset=utf-8", "ui.css": "text/css; charset=utf-8"}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_POSITION = re.compile(r"line (\d+)(?:,? pos |:)(\d+)", re.IGNORECASE)
"""Where an engine's error message places the problem: ``line 1, pos 7`` (Spark's parser),
``line 1 pos 7`` (its analyzer), ``line 1:7``."""
_NAMED = re.compile(r"(?:name|table or view) `([^`]+)` cannot be (?:resolved|found)")
"""An error about one identifier (Spark's unresolved column or table)."""

Say = Callable[[str], None]
"""Told one line of a job's progress."""


class Operations(Protocol):
    """What the UI asks the daemon to run (under its locks, counted in its metrics)."""

    def pull(self, name: str, say: Say) -> bool:
        """Pull one dataset; whether it went well."""
        ...

    def verify(self, name: str, say: Say, on_bytes: Callable[[int], None]) -> tuple[bool, str]:
        """Verify one dataset (and its inputs' links); whether it is valid, and a summary."""
        ...

    def query(self, sql: str, limit: int | None) -> QueryResult: ...


class Reply(Exception):
    """Ends a request with this status and message (JSON for the API, a page otherwise)."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class WebUi:
    def __init__(
        self,
        app: Application,
        operations: Operations,
        scope_of: Callable[[str], int | None],
        *,
        secure: bool,
    ) -> None:
        self.app = app
        self.operations = operations
        self.sessions = Sessions(scope_of, secure=secure)
        self.hub = Hub(self._heads)
        self.verified: dict[str, pages.Verified] = {}
        self.scheme = "https" if secure else "http"
        self._job_slots = threading.BoundedSemaphore(MAX_JOBS)
        self._lineage_cache: tuple[tuple[tuple[str, str], ...], Lineage] | None = None
        self._static = {
            name: resources.files("coordinator.ui").joinpath("static", name).read_bytes()
            for name in STATIC
        }

    @staticmethod
    def serves(path: str) -> bool:
        route = urlsplit(path).path
        return route in ("/", "/ui") or route.startswith("/ui/")

    def stop(self) -> None:
        self.hub.stop()

    # --- dispatch --------------------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        method = handler.command
        url = urlsplit(handler.path)
        route, query = url.path, {k: v[-1] for k, v in parse_qs(url.query).items()}
        api = route.startswith("/ui/api/") or route == "/ui/events"
        try:
            if route in ("/", "/ui"):
                self._redirect(handler, "/ui/")
            elif route.startswith("/ui/static/") and method == "GET":
                self._send_static(handler, route.removeprefix("/ui/static/"))
            elif route == "/ui/login":
                self._login(handler)
            elif route.startswith("/ui/login/") and method == "GET":
                self._redeem(handler, route.removeprefix("/ui/login/"))
            elif route == "/ui/api/link" and method == "POST":
                self._issue_link(handler)
            else:
                self._authenticated(handler, method, route, query, api)
        except Reply as r:
            self._refuse(handler, r.status, str(r), api)
        except NotFoundError as e:
            self._refuse(handler, HTTPStatus.NOT_FOUND, str(e), api)
        except OdfError as e:  # a bad name, block or query parameter
            self._refuse(handler, HTTPStatus.BAD_REQUEST, str(e), api)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _authenticated(
        self,
        handler: BaseHTTPRequestHandler,
        method: str,
        route: str,
        query: dict[str, str],
        api: bool,
    ) -> None:
        found = self.sessions.find(handler.headers.get("Cookie"))
        if found is None:
            if api or method != "GET":
                raise Reply(HTTPStatus.UNAUTHORIZED, "log in first (/ui/login)")
            self._redirect(handler, "/ui/login")
            return
        session, scope = found
        if method == "POST":
            self._check_post(handler, session)
            payload = self._json_body(handler)
            if route == "/ui/logout":
                self.sessions.end(session)
                self._send(
                    handler, 200, b"{}", "application/json", cookie=self.sessions.cookie(None)
                )
            elif route == "/ui/api/query":
                self._send_json(
                    handler,
                    self._query(str(payload.get("sql", "")), _int(str(payload.get("page", 1)), 1)),
                )
            elif route == "/ui/api/verify":
                self._send_json(
                    handler, {"job": self._start_verify(str(payload.get("dataset", "")))}
                )
            elif route == "/ui/api/pull":
                if scope < ADMIN:
                    raise Reply(HTTPStatus.FORBIDDEN, "a pull needs a token with scope admin")
                self._send_json(handler, {"job": self._start_pull(str(payload.get("dataset", "")))})
            else:
                raise Reply(HTTPStatus.NOT_FOUND, "not found")
            return
        if method != "GET":
            raise Reply(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
        if route == "/ui/events":
            self._events(handler)
            return
        if route.startswith("/ui/api/datasets/") and route.endswith("/blocks"):
            name = unquote(route.removeprefix("/ui/api/datasets/").removesuffix("/blocks"))
            blocks = pages.newer_blocks(self.app, self._summary(name).name, query.get("after", ""))
            self._send_json(handler, {"blocks": blocks})
            return
        if route.startswith("/ui/api/datasets/") and route.endswith("/summary"):
            name = unquote(route.removeprefix("/ui/api/datasets/").removesuffix("/summary"))
            self._send_json(handler, self._summary_json(self._summary(name)))
            return
        if route == "/ui/sql/download":
            self._download(handler, query.get("sql", ""), query.get("format", "csv"))
            return
        csrf, scope_label = session.csrf, SCOPES.get(scope, "")
        if route == "/ui/":
            body, _ = pages.dataset_list(
                self.app.list_datasets(),
                self.verified,
                search=query.get("q", ""),
                sort=query.get("sort", "name") if query.get("sort") in pages.SORTS else "name",
                descending=query.get("desc") == "1",
                page_no=_int(query.get("page"), 1),
            )
            self._send_page(handler, pages.page("Datasets", body, csrf=csrf, scope=scope_label))
        elif route.startswith("/ui/datasets/"):
            name = unquote(route.removeprefix("/ui/datasets/"))
            tab = query.get("tab", "overview")
            body = self._dataset_page(name, tab if tab in pages.TABS else "overview", query, scope)
            self._send_page(handler, pages.page(name, body, csrf=csrf, scope=scope_label))
        elif route == "/ui/lineage":
            body = join([Html("<h1>Lineage</h1>"), pages.lineage_graph(self._lineage(), None)])
            self._send_page(handler, pages.page("Lineage", body, csrf=csrf, scope=scope_label))
        elif route == "/ui/sql":
            catalog = self._catalog()
            body = pages.sql_page(catalog, query.get("sql", ""))
            self._send_page(handler, pages.page("SQL", body, csrf=csrf, scope=scope_label))
        else:
            raise Reply(HTTPStatus.NOT_FOUND, "no such page")

    # --- pages -----------------------------------------------------------------------------------

    def _summary(self, name: str) -> DatasetSummary:
        try:
            return self.app.summary(name)
        except NotFoundError as e:
            raise Reply(HTTPStatus.NOT_FOUND, str(e)) from None

    def _dataset_page(self, name: str, tab: str, query: dict[str, str], scope: int) -> Html:
        summary = self._summary(name)
        name = summary.name
        head = pages.dataset_header(summary, self.verified.get(name), tab, scope >= ADMIN)
        try:
            if tab == "schema":
                content = pages.schema_tab(self.app.dataset(name).state().arrow_schema())
            elif tab == "data":
                content = pages.data_tab(
                    self.app, name, _int(query.get("page"), 1), query.get("as_of", "").strip()
                )
            elif tab == "history":
                content = pages.history_tab(self.app, name, query.get("from", "").strip())
            elif tab == "lineage":
                content = pages.lineage_graph(self._lineage().around(name), name)
            else:
                content = pages.overview(self.app, name)
        except OdfError as e:
            content = render('<p class="error" role="alert">$e</p>', e=str(e))
        return join(
            [head, render('<section class="tab" id="tab-$t">$c</section>', t=tab, c=content)]
        )

    def _lineage(self) -> Lineage:
        """The workspace's lineage, read again only when a dataset's head moved (or one was
        added, renamed or deleted)."""
        heads = tuple(sorted(self._heads().items()))
        cached = self._lineage_cache
        if cached is None or cached[0] != heads:
            cached = (heads, self.app.lineage())
            self._lineage_cache = cached
        return cached[1]

    def _catalog(self) -> list[tuple[str, list[str]]]:
        catalog = []
        for s in self.app.list_datasets():
            try:
                schema = self.app.dataset(s.name).state().arrow_schema()
            except (OdfError, OSError):
                schema = None
            catalog.append((s.name, list(schema.names) if schema is not None else []))
        return catalog

    @staticmethod
    def _summary_json(s: DatasetSummary) -> dict[str, Any]:
        return {
            "dataset": s.name,
            "records": s.records,
            "blocks": s.blocks,
            "size": pages.size_text(s.size),
            "head": s.head.to_multibase() if s.head else "",
            "updated": pages.time_text(s.updated),
            "age": pages.age_text(s.updated),
            "watermark": pages.time_text(s.watermark),
        }

    def _heads(self) -> dict[str, str]:
        heads = {}
        for s in self.app.list_datasets():
            heads[s.name] = s.head.to_multibase() if s.head else ""
        return heads

    # --- SQL -------------------------------------------------------------------------------------

    def _query(self, sql: str, page_no: int) -> dict[str, Any]:
        if not sql.strip():
            return {"error": "no query given"}
        page_no = min(max(page_no, 1), MAX_QUERY_PAGES)
        started = time.monotonic()
        try:
            result = self.operations.query(sql, SQL_PAGE * page_no)
        except OdfError as e:
            return query_error(str(e), sql)
        table = result.table.slice((page_no - 1) * SQL_PAGE, SQL_PAGE)
        return {
            "columns": [visible(c) for c in table.column_names],
            "rows": _rows(table),
            "total": result.num_records,
            "page": page_no,
            "pages": max(1, -(-result.num_records // SQL_PAGE)),
            "seconds": round(time.monotonic() - started, 3),
        }

    def _download(self, handler: BaseHTTPRequestHandler, sql: str, fmt: str) -> None:
        import io

        if fmt not in ("csv", "parquet"):
            raise Reply(HTTPStatus.BAD_REQUEST, "format is csv or parquet")
        try:
            result = self.operations.query(sql, MAX_DOWNLOAD_ROWS)
        except OdfError as e:
            raise Reply(HTTPStatus.BAD_REQUEST, str(e)) from None
        out = io.BytesIO()
        if fmt == "csv":
            import pyarrow.csv as pacsv

            pacsv.write_csv(result.table, out)
            content_type = "text/csv; charset=utf-8"
        else:
            import pyarrow.parquet as pq

            pq.write_table(result.table, out)
            content_type = "application/vnd.apache.parquet"
        self._send(
            handler,
            200,
            out.getvalue(),
            content_type,
            extra={"Content-Disposition": f'attachment; filename="query.{fmt}"'},
        )

    # --- jobs ------------------------------------------------------------------------------------

    def _run_job(self, job: str, run: Callable[[], None]) -> None:
        """``run`` on its own thread, at most ``MAX_JOBS`` at once (else 429)."""
        if not self._job_slots.acquire(blocking=False):
            raise Reply(HTTPStatus.TOO_MANY_REQUESTS, f"{MAX_JOBS} jobs run already: wait")

        def bounded() -> None:
            try:
                run()
            finally:
                self._job_slots.release()

        threading.Thread(target=bounded, name=f"odf-ui-{job}", daemon=True).start()

    def _start_verify(self, name: str) -> str:
        summary = self._summary(name)
        job = self.hub.new_job()

        def say(text: str) -> None:
            self.hub.publish(Event("job", {"job": job, "dataset": summary.name, "text": text}))

        last = [0.0]
        hashed = [0]

        def on_bytes(n: int) -> None:
            hashed[0] += n
            now = time.monotonic()
            if now - last[0] >= 0.2:
                last[0] = now
                self.hub.publish(
                    Event(
                        "job",
                        {
                            "job": job,
                            "dataset": summary.name,
                            "bytes": hashed[0],
                            "total": summary.size,
                        },
                    )
                )

        def run() -> None:
            say(f"verifying {summary.name} ...")
            try:
                ok, text = self.operations.verify(summary.name, say, on_bytes)
            except Exception as e:  # reported on the page; the daemon goes on
                ok, text = False, f"failed: {' '.join(str(e).split())}"
            head = self.app.summary(summary.name).head
            self.verified[summary.name] = pages.Verified(
                head.to_multibase() if head else None, ok, datetime.now(UTC), text
            )
            self.hub.publish(
                Event(
                    "job",
                    {
                        "job": job,
                        "dataset": summary.name,
                        "text": text,
                        "done": True,
                        "ok": ok,
                        "verified": pages.verified_text(self.verified[summary.name], head),
                    },
                )
            )

        self._run_job(job, run)
        return job

    def _start_pull(self, name: str) -> str:
        summary = self._summary(name)
        job = self.hub.new_job()

        def say(text: str) -> None:
            self.hub.publish(Event("job", {"job": job, "dataset": summary.name, "text": text}))

        def run() -> None:
            say(f"pulling {summary.name} ...")
            try:
                ok = self.operations.pull(summary.name, say)
                text = "done" if ok else "failed"
            except Exception as e:
                ok, text = False, f"failed: {' '.join(str(e).split())}"
            self.hub.publish(
                Event(
                    "job",
                    {"job": job, "dataset": summary.name, "text": text, "done": True, "ok": ok},
                )
            )

        self._run_job(job, run)
        return job

    # --- live events -----------------------------------------------------------------------------

    def _events(self, handler: BaseHTTPRequestHandler) -> None:
        """The event stream, for as long as the page listens and its session lasts."""
        cookie = handler.headers.get("Cookie")
        subscription = self.hub.subscribe()
        try:
            handler.close_connection = True
            handler.send_response(200)
            for key, value in SECURITY_HEADERS.items():
                handler.send_header(key, value)
            handler.send_header("Content-Type", "text/event-stream")
            handler.end_headers()
            handler.wfile.write(b"retry: 2000\n\n")
            handler.wfile.flush()
            while self.sessions.find(cookie) is not None:
                event = subscription.next(HEARTBEAT_S)
                handler.wfile.write(event.encoded() if event else b": keep-alive\n\n")
                handler.wfile.flush()
        except OSError:
            pass
        finally:
            subscription.close()

    # --- login -----------------------------------------------------------------------------------

    def _login(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.command == "GET":
            if self.sessions.find(handler.headers.get("Cookie")) is not None:
                self._redirect(handler, "/ui/")
            else:
                self._send_page(handler, pages.login_page(None))
            return
        if handler.command != "POST":
            raise Reply(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
        self._check_origin(handler)
        form = parse_qs(self._body(handler).decode("utf-8", "replace"))
        session = self.sessions.login(form.get("token", [""])[-1])
        if session is None:
            log.warning("ui.login_refused", client=handler.client_address[0])
            self._send_page(
                handler, pages.login_page("That is not a token of this daemon."), status=401
            )
            return
        log.info("ui.login", client=handler.client_address[0])
        self._redirect(handler, "/ui/", cookie=self.sessions.cookie(session))

    def _redeem(self, handler: BaseHTTPRequestHandler, code: str) -> None:
        session = self.sessions.redeem(code)
        if session is None:
            self._send_page(
                handler, pages.login_page("That login link is used or expired."), status=401
            )
            return
        self._redirect(handler, "/ui/", cookie=self.sessions.cookie(session))

    def _issue_link(self, handler: BaseHTTPRequestHandler) -> None:
        code = self.sessions.issue_link(handler.headers.get("Authorization", ""))
        if code is None:
            raise Reply(HTTPStatus.UNAUTHORIZED, "a login link needs a daemon token (Bearer)")
        self._send_json(handler, {"path": f"/ui/login/{code}"})

    def _check_origin(self, handler: BaseHTTPRequestHandler) -> None:
        if not same_origin(
            handler.headers.get("Origin"),
            handler.headers.get("Referer"),
            handler.headers.get("Host"),
            self.scheme,
        ):
            raise Reply(HTTPStatus.FORBIDDEN, "cross-origin request refused")

    def _check_post(self, handler: BaseHTTPRequestHandler, session: Session) -> None:
        self._check_origin(handler)
        if not csrf_ok(session, handler.headers.get("X-CSRF-Token")):
            raise Reply(HTTPStatus.FORBIDDEN, "missing or wrong CSRF token")

    # --- bodies and responses --------------------------------------------------------------------

    def _body(self, handler: BaseHTTPRequestHandler) -> bytes:
        try:
            length = int(handler.headers.get("Content-Length", ""))
        except ValueError:
            raise Reply(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required") from None
        if length < 0 or length > MAX_BODY:
            raise Reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a body of at most {MAX_BODY} bytes")
        within = getattr(handler, "read_body_within", None)
        if within is not None:
            within(length)
        return handler.rfile.read(length)

    def _json_body(self, handler: BaseHTTPRequestHandler) -> dict[str, Any]:
        raw = self._body(handler)
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except ValueError:
            raise Reply(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None
        if not isinstance(value, dict):
            raise Reply(HTTPStatus.BAD_REQUEST, "the body is not a JSON object")
        return value

    def _refuse(
        self, handler: BaseHTTPRequestHandler, status: HTTPStatus, message: str, api: bool
    ) -> None:
        if api or handler.command != "GET":
            self._send_json(handler, {"error": message}, status=status)
        else:
            page = pages.message_page(status.phrase, message, csrf=None)
            self._send_page(handler, page, status=status)

    def _send_static(self, handler: BaseHTTPRequestHandler, name: str) -> None:
        if name not in STATIC:
            raise Reply(HTTPStatus.NOT_FOUND, "not found")
        self._send(handler, 200, self._static[name], STATIC[name], cache="no-cache")

    def _send_page(self, handler: BaseHTTPRequestHandler, page: Html, status: int = 200) -> None:
        self._send(handler, status, page.encode(), "text/html; charset=utf-8")

    def _send_json(self, handler: BaseHTTPRequestHandler, value: Any, status: int = 200) -> None:
        self._send(handler, status, json.dumps(value).encode(), "application/json")

    def _redirect(
        self, handler: BaseHTTPRequestHandler, where: str, cookie: str | None = None
    ) -> None:
        self._send(handler, 303, b"", "text/plain", extra={"Location": where}, cookie=cookie)

    def _send(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        content_type: str,
        *,
        extra: dict[str, str] | None = None,
        cookie: str | None = None,
        cache: str = "no-store",
    ) -> None:
        handler.send_response(status)
        for key, value in SECURITY_HEADERS.items():
            handler.send_header(key, cache if key == "Cache-Control" else value)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            handler.send_header(key, value)
        if cookie is not None:
            handler.send_header("Set-Cookie", cookie)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default


def _rows(table: pa.Table) -> list[list[str]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[visible(human_value(c[r])) for c in columns] for r in range(table.num_rows)]


def query_error(message: str, sql: str) -> dict[str, Any]:
    """An error of ``sql`` for the console: its message, and where it is (``line``, 1-based,
    and ``column``, 0-based) when the message says, or names an identifier found in ``sql``."""
    error: dict[str, Any] = {"error": message}
    found = _POSITION.search(message)
    if found:
        error["line"], error["column"] = int(found.group(1)), int(found.group(2))
        return error
    named = _NAMED.search(message)
    if named:
        name = named.group(1).rsplit(".", 1)[-1]
        at = re.search(rf"(?<![\w`]){re.escape(name)}(?![\w`])", sql, re.IGNORECASE)
        if at is not None:
            before = sql[: at.start()]
            error["line"] = before.count("\n") + 1
            error["column"] = at.start() - (before.rfind("\n") + 1)
    return error


def static_dir() -> Path:
    return Path(__file__).parent / "static"
