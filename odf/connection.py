"""``connect`` and ``Connection``: one workspace's datasets, wherever they are served.

A workspace is reached three ways, with the same calls:

- a **path** (``odf.connect("~/flights")``): in this process, through the application layer the
  CLI uses; when a daemon serves the workspace, its calls go to the daemon (its warm engines)
  as ``odf`` commands do (``use_daemon=False``: never). Reads come straight from the data files.
- an **http(s) URL** of a daemon's gRPC address (``odf.connect("http://127.0.0.1:4884",
  token=...)``): every call through the daemon client.
- a **Flight SQL URL** (``grpc://host:50050``, ``grpc+tls://``): listing, schemas, reads and SQL
  through the ADBC Flight SQL driver; pushing, pulling and verifying need one of the others.

Errors are the CLI's (``OdfError`` and its subclasses), with the messages ``odf`` prints.
"""

from __future__ import annotations

import atexit
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

from common.odf.errors import NotFoundError, OdfError, ValidationError
from odf.result import Result

if TYPE_CHECKING:
    from common.odf.block import MetadataBlock
    from common.odf.multihash import Multihash
    from coordinator.app import DatasetSummary, PullEvent, UseCases
    from coordinator.app.application import Application
    from coordinator.ingest.context import IngestResult
    from coordinator.ingest.progress import ProgressTask
    from coordinator.verify.replay import ReplayResult
    from coordinator.verify.report import DatasetReport
    from odf.flight_sql import FlightSql

DAEMON_SCHEMES = ("http", "https")
FLIGHT_SQL_SCHEMES = ("grpc", "grpc+tls")
WARM_ENGINES_IDLE_S = 300.0
"""How long an in-process connection keeps an idle engine running for the next query."""

ProgressCallback = Callable[[str, int, "int | None"], None]
"""``(task, done, total)``: a task (``"ingest flights.csv"``, ``"starting engine ..."``) has
done ``done`` units of ``total`` (``None``: unknown) so far."""


def connect(
    target: str | os.PathLike[str] = ".",
    token: str | None = None,
    *,
    tls_root_cert: str | os.PathLike[str] | None = None,
    use_daemon: bool = True,
) -> Connection:
    """A connection to a workspace: a path (the workspace containing it), a daemon's
    ``http(s)://host:port`` or a Flight SQL ``grpc[+tls]://host:port`` (see the module doc).

    ``token``: the bearer token of a daemon or Flight SQL URL; ``tls_root_cert``: the PEM
    file of the certificate a TLS URL is trusted with (default: the system's roots);
    ``use_daemon``: with a path, whether to go through the workspace's daemon when it runs."""
    text = os.fspath(target)
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if not scheme:
        return _workspace_connection(Path(text).expanduser(), use_daemon=use_daemon)
    if token is None:
        raise ValidationError(f"a token is needed to connect to {text}", path="token")
    cert = Path(tls_root_cert) if tls_root_cert is not None else None
    if scheme in DAEMON_SCHEMES:
        return _daemon_connection(text, token, cert)
    if scheme in FLIGHT_SQL_SCHEMES:
        from odf.flight_sql import FlightSql

        return Connection(text, flight=FlightSql(text, token, tls_root_cert=cert))
    known = ", ".join(f"{s}://" for s in DAEMON_SCHEMES + FLIGHT_SQL_SCHEMES)
    raise ValidationError(f"unknown scheme {scheme}:// (expected a path, {known})", path=text)


def init(path: str | os.PathLike[str], *, exist_ok: bool = False) -> Connection:
    """A new workspace at ``path`` (as ``odf init``), connected in this process."""
    from coordinator.app.application import Application

    Application.init(Path(path).expanduser(), exist_ok=exist_ok)
    return connect(path, use_daemon=False)


def _workspace_connection(path: Path, *, use_daemon: bool) -> Connection:
    from coordinator.app.application import Application
    from coordinator.daemon.rundir import RunDir
    from coordinator.workspace import Workspace

    try:
        ws = Workspace.find(path)
    except NotFoundError:
        raise NotFoundError(f"no odf workspace at or above {path} (run `odf init`)") from None
    local = Application(ws)
    serving = RunDir(ws.odf_dir).serving() if use_daemon else None
    if serving is not None:
        from coordinator.daemon.client import DaemonClient

        return Connection(str(ws.root), calls=DaemonClient(*serving), local=local)
    local.keep_engines_warm(idle_timeout=WARM_ENGINES_IDLE_S)
    return Connection(str(ws.root), calls=local, local=local)


def _daemon_connection(url: str, token: str, cert: Path | None) -> Connection:
    from coordinator.daemon.client import DaemonClient
    from coordinator.daemon.rundir import DaemonInfo

    parts = urlsplit(url)
    if not parts.hostname or parts.port is None or parts.path not in ("", "/"):
        raise ValidationError(f"expected {parts.scheme}://HOST:PORT, got {url}", path="url")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    info = DaemonInfo(
        pid=0,
        address=f"{host}:{parts.port}",
        http_address="",
        started=datetime.now(UTC),
        tls_cert=str(cert) if cert is not None else None,
    )
    return Connection(url, calls=DaemonClient(info, token, tls=parts.scheme == "https"))


class Connection:
    """The datasets of one workspace (made by ``odf.connect``); a context manager that
    closes the connection (and stops the engines it started)."""

    def __init__(
        self,
        target: str,
        *,
        calls: UseCases | None = None,
        local: Application | None = None,
        flight: FlightSql | None = None,
    ) -> None:
        self.target = target
        """What the connection was made to: a workspace's directory or a URL."""
        self._calls, self._local, self._flight = calls, local, flight
        self._closed = False
        atexit.register(self.close)

    # --- datasets --------------------------------------------------------------------------------

    def list_datasets(self) -> list[DatasetSummary]:
        """Every dataset, by name: kind, head, blocks, records, size, last update, watermark
        (over Flight SQL: the names only)."""
        if self._flight is not None:
            return self._flight.list_datasets()
        return self._use_cases().list_datasets()

    def dataset(self, name: str) -> DatasetSummary:
        """One dataset's summary (as ``list_datasets`` gives it)."""
        if self._flight is not None:
            return self._flight.summary(name)
        return self._use_cases().summary(name)

    def schema(self, name: str) -> pa.Schema:
        """A dataset's Arrow schema (the system columns included)."""
        if self._flight is not None:
            return self._flight.schema(name)
        return self._use_cases().schema(name)

    def log(self, name: str, limit: int | None = None) -> list[tuple[Multihash, MetadataBlock]]:
        """A dataset's metadata blocks, newest first (at most ``limit``): (hash, block)."""
        return self._use_cases("log").log(name, limit)

    def add(self, snapshots: Sequence[str | os.PathLike[str]]) -> list[str]:
        """Create datasets from DatasetSnapshot files (YAML; directories: the files in them),
        as ``odf add``: all or none. The names of the datasets created."""
        from coordinator.app.snapshots import read_snapshots, snapshot_files

        paths = [Path(p).expanduser() for p in snapshots]
        sources = read_snapshots(snapshot_files(paths, recursive=False))
        return [added.alias for added in self._use_cases("add").add(sources)]

    # --- reading ---------------------------------------------------------------------------------

    def read(self, name: str, *, as_of: str | None = None) -> Result:
        """A dataset's records, as of a block (its hash or a unique prefix) or an RFC 3339
        time (default: the head). Through a path they stream from the data files, oldest
        first; through a URL they come from the server's engine (in its order)."""
        if self._flight is not None:
            return Result(self._flight.read(name, as_of=as_of))
        calls = self._local if self._local is not None else self._use_cases()
        return Result(calls.read(name, as_of=as_of))

    def sql(
        self, query: str, *, as_of: Mapping[str, str] | None = None, limit: int | None = None
    ) -> Result:
        """The result of one Spark SQL query over the datasets (each a table under its name;
        quote names with dots in backticks). ``as_of``: dataset name -> block or RFC 3339
        time, as ``odf sql --as-of``; ``limit``: read back at most this many rows."""
        from coordinator.query import single_query

        text = single_query(query, where="sql")
        if self._flight is not None:
            if as_of:
                raise ValidationError(
                    "over Flight SQL, name a dataset as of a block or time in the query itself:"
                    " `NAME@BLOCK_OR_TIME`",
                    path="as_of",
                )
            return Result(self._flight.query(text, limit=limit))
        from coordinator.app import QueryOptions

        options = QueryOptions(limit=limit, as_of=dict(as_of or {}))
        result = self._use_cases().query(text, options)
        return Result(result.table, total=result.num_records)

    # --- changing data ---------------------------------------------------------------------------

    def push(
        self,
        name: str,
        data: Any,
        *,
        source_name: str | None = None,
        event_time: datetime | None = None,
    ) -> IngestResult:
        """Push records into a root dataset's push source, as one commit: a pyarrow
        ``Table``/``RecordBatch``/``RecordBatchReader``, a pandas or a polars ``DataFrame``.
        ``event_time``: for records without one (default: now)."""
        from coordinator.app import IngestFile, IngestOptions

        calls = self._use_cases("push")
        table = _arrow_table(data)
        with tempfile.TemporaryDirectory(prefix="odf-push-") as tmp:
            import pyarrow.parquet as pq

            path = Path(tmp) / f"{name}.parquet"
            pq.write_table(table, path)
            (result,) = calls.ingest(
                name,
                [IngestFile(path, f"{type(data).__name__} of {table.num_rows} rows")],
                IngestOptions(source_name, "parquet", event_time),
            )
        return result

    def pull(
        self,
        names: Sequence[str] = (),
        *,
        all_datasets: bool = False,
        recursive: bool = False,
        on_event: Callable[[PullEvent], None] | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> list[PullEvent]:
        """Bring datasets up to date, inputs first (as ``odf pull``); every event is also
        told to ``on_event`` as it happens, fetches and ingests to ``on_progress``. A dataset
        that fails is a ``PullFailed`` event: the others go on."""
        from coordinator.app import PullOptions
        from coordinator.ingest.progress import NO_PROGRESS, Progress

        events = []
        progress: Progress = _CallbackProgress(on_progress) if on_progress else NO_PROGRESS
        options = PullOptions(all_datasets=all_datasets, recursive=recursive, progress=progress)
        for event in self._use_cases("pull").pull(names, options):
            if on_event is not None:
                on_event(event)
            events.append(event)
        return events

    def verify(
        self,
        names: Sequence[str],
        *,
        recursive: bool = False,
        integrity_only: bool = False,
        on_replay: Callable[[str, ReplayResult], None] | None = None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> list[DatasetReport]:
        """Check datasets (as ``odf verify``): one report each, ``ok`` when no problem was
        found. ``on_replay`` is told of each replayed block (dataset, outcome),
        ``on_bytes`` of the bytes hashed."""
        from coordinator.app import VerifyOptions

        options = VerifyOptions(
            recursive=recursive,
            integrity_only=integrity_only,
            on_replay=on_replay,
            on_bytes=on_bytes,
        )
        return self._use_cases("verify").verify(names, options)

    # --- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection and stop the engines it keeps warm; idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._flight is not None:
            self._flight.close()
        closing = getattr(self._calls, "close", None)
        if closing is not None:
            closing()
        if self._local is not None and self._local.pool is not None:
            self._local.pool.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *raised: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<odf.Connection to {self.target}>"

    def _use_cases(self, what: str = "this") -> UseCases:
        if self._closed:
            raise OdfError(f"the connection to {self.target} is closed")
        if self._calls is None:
            raise OdfError(
                f"{what} is not available over Flight SQL ({self.target}): connect to the"
                " workspace's path or its daemon's http(s):// address"
            )
        return self._calls


def _arrow_table(data: Any) -> pa.Table:
    """``data`` (Arrow, pandas or polars) as a pyarrow ``Table``."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if module == "polars":
        table = data.to_arrow()
        assert isinstance(table, pa.Table)
        return table
    raise ValidationError(
        f"cannot push a {type(data).__name__}: give a pyarrow Table, RecordBatch or"
        " RecordBatchReader, or a pandas or polars DataFrame",
        path="data",
    )


class _CallbackProgress:
    """A ``Progress`` telling a callback of each task's progress."""

    def __init__(self, callback: ProgressCallback) -> None:
        self.callback = callback

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        del unit
        return _CallbackTask(self.callback, description, total)


class _CallbackTask:
    def __init__(self, callback: ProgressCallback, description: str, total: int | None) -> None:
        self.callback, self.description, self.total = callback, description, total
        self.done = 0
        callback(description, 0, total)

    def advance(self, amount: int) -> None:
        self.done += amount
        self.callback(self.description, self.done, self.total)

    def close(self) -> None:
        pass
