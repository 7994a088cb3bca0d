"""The workspace configuration file ``.odf/config.yaml``: which engine runs transformations.

Every key is optional; a missing file means the defaults (the embedded engine)::

    engine:
      provider: embedded          # embedded | container | remote
      image: localhost/odf-engine-spark:latest   # container: a tag or repo@sha256:<digest>
      address: 127.0.0.1:2884     # remote: host:port, or unix:/path/to/socket
      tokenFile: engine.token     # remote: file holding the engine's token (--token-file)
      tlsCa: engine-ca.pem        # remote: CA certificate(s) to check the engine's TLS with
      master: local[2]            # embedded and container: the Spark master
      driverMemory: 2g            # embedded and container: Spark driver memory (default 2g)
      startTimeout: 300           # seconds for an engine to become ready
      stagingDir: /shared/odf     # embedded and container: exchange files on storage every
                                  #   cluster node reaches (an absolute path or file:///...)
    transform:
      exchange: parquet           # parquet (the inputs' data files as they lie) | arrow (IPC)
      maxInputRecords: 1000000    # input records per transaction, per input (batches)
      split:                      # row-local queries over a large backlog: K slices, K blocks
        minRecords: 5000000       #   input records below which a transaction is never split
        slices: 0                 #   slices wanted (0: the engine picks, its parallelism)
        rehash: full              #   full (re-hash every slice) | a sample fraction, e.g. 0.05
    daemon:
      address: 127.0.0.1:4884     # odf serve: gRPC (host:port)
      httpAddress: 127.0.0.1:4885 # odf serve: HTTP (/healthz, /metrics)
      flightSqlAddress: 127.0.0.1:50050  # odf serve: Arrow Flight SQL (none: not served)
      flightSqlMaxCalls: 8        # odf serve: Flight SQL queries and streams at once
      flightSqlCallTimeout: 600   # odf serve: seconds a Flight SQL query or stream may take
      flightSqlMaxRequestBytes: 4194304  # odf serve: bytes one Flight SQL call may send
      flightSqlHandshakeTimeout: 10  # odf serve: seconds a Flight SQL connection has to start
      maxParallel: 2              # odf serve: calls changing datasets at once (one per dataset)
      engineIdleTimeout: 600      # odf serve: seconds before an unused warm engine is stopped
      warmUpSeconds: 20           # odf serve: seconds at start replaying the workspace's recent
                                  #   quick queries to warm the engine (0: none)
      followLineage: true         # odf serve: update derivatives when their inputs move
      requireTokenForReads: false # odf serve: pulls over HTTP and /metrics need the token
      httpHeaderTimeout: 10       # odf serve: seconds to send a request's headers (and TLS)
      httpBodyTimeout: 60         # odf serve: seconds for a body, plus 1 per 16 KiB of it
      httpIdleTimeout: 120        # odf serve: seconds a WebSocket or a socket may be silent
      httpMaxConnections: 128     # odf serve: HTTP connections at once (more: refused)
      httpMaxConnectionsPerClient: 32  # odf serve: of them from one client address
      schedules:                  # odf serve: polling sources (and derivatives) pulled on a
        nyc.weather: 10m          #   schedule: an interval (30s, 10m, 2h, 1d) or a cron line
        nyc.taxi: "*/15 * * * *"
    ingest:
      csvColumnsByPosition:       # datasets whose Csv sources read a DDL schema's columns by
        - legacy.sensors          #   position, the header line only skipped (Spark's and
                                  #   ODF < 0.35's enforceSchema); others match it by name
    writers:
      waitTimeout: 600            # seconds a writer waits for another writer of a dataset (a
                                  #   pull by the daemon or by another odf process) to finish
    verify:
      executorMinBytes: 1073741824  # odf verify on a standalone cluster: a dataset's data files
                                  #   are hashed by the executors from this many bytes on (less:
                                  #   on this machine, no engine started for it); 0: always

Relative paths (``tokenFile``, ``tlsCa``) are relative to the ``.odf`` directory. Errors name
the file, the line and the key (``.odf/config.yaml:3: engine.provider: ...``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from common.odf.errors import ValidationError

CONFIG_FILE = "config.yaml"
DEFAULT_IMAGE = "localhost/odf-engine-spark:latest"
DEFAULT_START_TIMEOUT_S = 300.0
DEFAULT_DRIVER_MEMORY = "2g"
"""Spark's own default (1g) runs out of heap on million-record transactions."""
DEFAULT_MAX_INPUT_RECORDS = 1_000_000
DEFAULT_SPLIT_MIN_RECORDS = 5_000_000
FULL_REHASH = 1.0
DEFAULT_DAEMON_ADDRESS = "127.0.0.1:4884"
DEFAULT_DAEMON_HTTP_ADDRESS = "127.0.0.1:4885"
DEFAULT_FLIGHT_SQL_ADDRESS = "127.0.0.1:50050"
DEFAULT_WAIT_TIMEOUT_S = 600.0
DEFAULT_EXECUTOR_MIN_BYTES = 1 << 30
"""About 7-10 s of hashing here (100-150 MB/s): less than a cluster engine's start and job."""


class EngineProviderKind(enum.Enum):
    EMBEDDED = "embedded"
    """``python -m engine_spark`` started by the coordinator on a private Unix socket."""
    CONTAINER = "container"
    """The engine image, run through the ``docker`` SDK (Docker, or Podman's socket)."""
    REMOTE = "remote"
    """An engine already running at ``address``."""


class ExchangeFormat(enum.Enum):
    ARROW = "arrow"
    """Input slices are written as Arrow IPC files, which the engine memory-maps."""
    PARQUET = "parquet"
    """The engine reads the inputs' Parquet data files directly."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    provider: EngineProviderKind = EngineProviderKind.EMBEDDED
    image: str = DEFAULT_IMAGE
    address: str | None = None
    master: str = "local[2]"
    driver_memory: str | None = DEFAULT_DRIVER_MEMORY
    start_timeout: float = DEFAULT_START_TIMEOUT_S
    token_file: Path | None = None
    """Remote engines: the token sent as ``authorization: Bearer <token>`` on every call."""
    tls_ca: Path | None = None
    """Remote engines: connect over TLS, trusting these CA certificates (PEM)."""
    staging_dir: Path | None = None
    """Shared staging: a directory mounted at this same path on every node of a Spark cluster.
    Each transaction's exchange files (inputs, output, checkpoint) are put there, so executors
    read the inputs and write the output themselves (``coordinator/transform/shared_staging``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitConfig:
    """``transform.split``: when and how a row-local transaction is split into slices that the
    engine's executors write and hash (``coordinator/transform/split``)."""

    min_records: int = DEFAULT_SPLIT_MIN_RECORDS
    """Input records of a transaction below which it is never split."""
    slices: int = 0
    """Slices wanted; 0: the engine picks (its parallelism)."""
    rehash: float = FULL_REHASH
    """The fraction of the slices' files the coordinator re-hashes before it trusts the
    executors' hashes: 1.0 (``full``, the default) re-hashes every file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformConfig:
    exchange: ExchangeFormat = ExchangeFormat.PARQUET
    """Parquet: measured faster than Arrow IPC slices in 2 of 3 runs of bench_transform
    (1.42x and 1.20x; 0.81x under heavy load): no slice is cut and the engine restages
    nothing."""
    max_input_records: int = DEFAULT_MAX_INPUT_RECORDS
    split: SplitConfig = field(default_factory=SplitConfig)


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig:
    address: str = DEFAULT_DAEMON_ADDRESS
    """``odf serve``'s gRPC address (``host:port``)."""
    http_address: str = DEFAULT_DAEMON_HTTP_ADDRESS
    """``odf serve``'s HTTP address (``host:port``)."""
    max_parallel: int = 2
    engine_idle_timeout: float = 600.0
    warm_up_seconds: float = 20.0
    """Seconds at start replaying the recent quick queries (``daemon.query_warm_up``); 0: off."""
    follow_lineage: bool = True
    schedules: tuple[Schedule, ...] = ()
    require_token_for_reads: bool = False
    """Whether reading datasets over HTTP and ``/metrics`` need the token (``/healthz`` never)."""
    http_header_timeout: float = 10.0
    """Seconds from a connection to the end of its request's headers (TLS handshake included)."""
    http_body_timeout: float = 60.0
    """Seconds a request body may take, plus one per 16 KiB it announces."""
    http_idle_timeout: float = 120.0
    """Seconds a WebSocket may stay silent; every socket's read and write timeout."""
    http_max_connections: int = 128
    http_max_connections_per_client: int = 32
    flight_sql_address: str | None = DEFAULT_FLIGHT_SQL_ADDRESS
    """``odf serve``'s Arrow Flight SQL address (``host:port``); ``None``: not served."""
    flight_sql_max_calls: int = 8
    """Flight SQL queries and result streams at once; more are refused (UNAVAILABLE)."""
    flight_sql_call_timeout: float = 600.0
    """Seconds a Flight SQL query, or the stream of its result, may take."""
    flight_sql_max_request_bytes: int = 4 * 1024 * 1024
    """Bytes one Flight SQL call may send (one message or all of them); more: refused."""
    flight_sql_handshake_timeout: float = 10.0
    """Seconds a new Flight SQL connection has for its TLS and HTTP/2 handshakes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WritersConfig:
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT_S
    """Seconds a writer waits for the datasets it changes while others write them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyConfig:
    executor_min_bytes: int = DEFAULT_EXECUTOR_MIN_BYTES
    """Bytes of a dataset's data files from which ``odf verify`` on a standalone cluster has
    the executors hash them (``coordinator/verify/engine_hashes.py``); below, this machine
    hashes them (faster than a Spark job, and no engine starts for it)."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """When the daemon pulls a dataset by itself: every ``interval`` seconds, or at the times
    of a ``cron`` line (minute hour day month weekday)."""

    dataset: str
    interval: float | None = None
    cron: str | None = None

    @property
    def text(self) -> str:
        return self.cron if self.cron is not None else f"every {self.interval:g}s"


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestConfig:
    csv_columns_by_position: tuple[str, ...] = ()
    """Datasets whose Csv readers match a DDL schema to the columns by position (the header
    line is only skipped) rather than by the header's names."""

    def csv_by_position(self, dataset: str) -> bool:
        return dataset.lower() in {d.lower() for d in self.csv_columns_by_position}


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceConfig:
    engine: EngineConfig = field(default_factory=EngineConfig)
    transform: TransformConfig = field(default_factory=TransformConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    writers: WritersConfig = field(default_factory=WritersConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)

    def dataset_names(self) -> dict[str, tuple[str, ...]]:
        """The keys that name datasets and the names they hold (checked by ``odf config``)."""
        return {
            "daemon.schedules": tuple(s.dataset for s in self.daemon.schedules),
            "ingest.csvColumnsByPosition": self.ingest.csv_columns_by_position,
        }


def config_path(odf_dir: Path) -> Path:
    return odf_dir / CONFIG_FILE


def load_config(odf_dir: Path) -> WorkspaceConfig:
    """The configuration of the workspace whose ``.odf`` directory is ``odf_dir``."""
    path = config_path(odf_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return WorkspaceConfig()
    config = parse_config(text, source=str(path))
    engine = config.engine
    return replace(
        config,
        engine=replace(
            engine,
            token_file=odf_dir / engine.token_file if engine.token_file else None,
            tls_ca=odf_dir / engine.tls_ca if engine.tls_ca else None,
        ),
    )


def parse_config(text: str, *, source: str = CONFIG_FILE) -> WorkspaceConfig:
    """Parse the YAML text of a configuration file (no document: the defaults)."""
    from common.serde import yaml_document  # yaml: only when there is a file to read

    documents = yaml_document.load_all(text, source)
    if not documents:  # empty, or only comments
        return WorkspaceConfig()
    if len(documents) > 1:
        raise ValidationError(f"expected one YAML document, found {len(documents)}", path=source)
    document = documents[0]
    if document.value is None:
        return WorkspaceConfig()
    try:
        return _workspace_config(document.value)
    except ValidationError as e:
        raise document.locate(e) from None


def _workspace_config(value: Any) -> WorkspaceConfig:
    top = _mapping(value, "", ("engine", "transform", "daemon", "ingest", "writers", "verify"))
    return WorkspaceConfig(
        engine=_engine_config(top.get("engine")),
        transform=_transform_config(top.get("transform")),
        daemon=_daemon_config(top.get("daemon")),
        ingest=_ingest_config(top.get("ingest")),
        writers=_writers_config(top.get("writers")),
        verify=_verify_config(top.get("verify")),
    )


def _verify_config(value: Any) -> VerifyConfig:
    m = _mapping({} if value is None else value, "verify", ("executorMinBytes",))
    default = VerifyConfig().executor_min_bytes
    return VerifyConfig(
        executor_min_bytes=int(
            _positive(m, "verify", "executorMinBytes", default, integer=True, zero=True)
        ),
    )


def _writers_config(value: Any) -> WritersConfig:
    m = _mapping({} if value is None else value, "writers", ("waitTimeout",))
    return WritersConfig(
        wait_timeout=_positive(m, "writers", "waitTimeout", DEFAULT_WAIT_TIMEOUT_S),
    )


def _ingest_config(value: Any) -> IngestConfig:
    m = _mapping({} if value is None else value, "ingest", ("csvColumnsByPosition",))
    names = m.get("csvColumnsByPosition") or []
    path = "ingest.csvColumnsByPosition"
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        raise ValidationError(f"expected a list of dataset names, got {_kind(names)}", path=path)
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ValidationError(
                f"expected a dataset name, got {_kind(name)}", path=f"{path}[{i}]"
            )
    return IngestConfig(csv_columns_by_position=tuple(names))


_ENGINE_KEYS = (
    "provider",
    "image",
    "address",
    "master",
    "driverMemory",
    "startTimeout",
    "tokenFile",
    "tlsCa",
    "stagingDir",
)


def _engine_config(value: Any) -> EngineConfig:
    if value is None:
        return EngineConfig()
    m = _mapping(value, "engine", _ENGINE_KEYS)
    default = EngineConfig()
    provider = _enum(m, "engine", "provider", EngineProviderKind, default.provider)
    address = _string(m, "engine", "address", None)
    if provider is EngineProviderKind.REMOTE and not address:
        raise ValidationError("is required when provider is remote", path="engine.address")
    return EngineConfig(
        provider=provider,
        image=_string(m, "engine", "image", default.image) or default.image,
        address=address,
        master=_string(m, "engine", "master", default.master) or default.master,
        driver_memory=_string(m, "engine", "driverMemory", default.driver_memory),
        start_timeout=_positive(m, "engine", "startTimeout", default.start_timeout),
        token_file=_path(m, "engine", "tokenFile"),
        tls_ca=_path(m, "engine", "tlsCa"),
        staging_dir=_staging_dir(_string(m, "engine", "stagingDir", None)),
    )


_FILE_URI = "file://"


def _staging_dir(value: str | None) -> Path | None:
    """``engine.stagingDir``: an absolute directory path, or a ``file:///`` URI of one."""
    if value is None:
        return None
    where = "engine.stagingDir"
    text = value.strip()
    if text.startswith(_FILE_URI):
        text = text[len(_FILE_URI) :]
        if not text.startswith("/"):
            raise ValidationError(
                f"{value!r}: a file URI needs an absolute path and no host (file:///dir)",
                path=where,
            )
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValidationError(
            f"{value!r}: {scheme}:// is not supported; the coordinator and the engine's driver"
            " read and write exchange files with POSIX calls, so give a directory every node"
            " mounts at the same path (an object store through a FUSE or NFS mount)",
            path=where,
        )
    if not text.startswith("/"):
        raise ValidationError(
            f"expected an absolute directory path (or file:///dir), got {value!r}", path=where
        )
    if any(part == ".." for part in text.split("/")) or "\x00" in text:
        raise ValidationError(f"{value!r}: no '..' components allowed", path=where)
    return Path(text)


def _transform_config(value: Any) -> TransformConfig:
    if value is None:
        return TransformConfig()
    m = _mapping(value, "transform", ("exchange", "maxInputRecords", "split"))
    default = TransformConfig()
    return TransformConfig(
        exchange=_enum(m, "transform", "exchange", ExchangeFormat, default.exchange),
        max_input_records=int(
            _positive(m, "transform", "maxInputRecords", default.max_input_records, integer=True)
        ),
        split=_split_config(m.get("split")),
    )


def _split_config(value: Any) -> SplitConfig:
    default = SplitConfig()
    if value is None:
        return default
    where = "transform.split"
    m = _mapping(value, where, ("minRecords", "slices", "rehash"))
    slices = m.get("slices", default.slices)
    if isinstance(slices, bool) or not isinstance(slices, int) or slices < 0:
        raise ValidationError(
            f"expected 0 (the engine picks) or a positive integer, got {_kind(slices)}",
            path=_join(where, "slices"),
        )
    return SplitConfig(
        min_records=int(_positive(m, where, "minRecords", default.min_records, integer=True)),
        slices=slices,
        rehash=_rehash(m.get("rehash")),
    )


def _rehash(value: Any) -> float:
    """``transform.split.rehash``: ``full``, or a fraction in (0, 1] of the files."""
    if value is None or value == "full":
        return FULL_REHASH
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1
    if not ok:
        raise ValidationError(
            f"expected full or a fraction in (0, 1], got {_kind(value)}",
            path="transform.split.rehash",
        )
    return float(value)


def _daemon_config(value: Any) -> DaemonConfig:
    keys = (
        "address",
        "httpAddress",
        "maxParallel",
        "engineIdleTimeout",
        "warmUpSeconds",
        "followLineage",
        "schedules",
        "requireTokenForReads",
        "httpHeaderTimeout",
        "httpBodyTimeout",
        "httpIdleTimeout",
        "httpMaxConnections",
        "httpMaxConnectionsPerClient",
        "flightSqlAddress",
        "flightSqlMaxCalls",
        "flightSqlCallTimeout",
        "flightSqlMaxRequestBytes",
        "flightSqlHandshakeTimeout",
    )
    m = _mapping({} if value is None else value, "daemon", keys)
    d = DaemonConfig()
    address = _host_port(m, "daemon", "address", DEFAULT_DAEMON_ADDRESS)
    http_address = _host_port(m, "daemon", "httpAddress", DEFAULT_DAEMON_HTTP_ADDRESS)
    flight_sql = _string(m, "daemon", "flightSqlAddress", None)
    flight_sql_address = parse_optional_address(
        DEFAULT_FLIGHT_SQL_ADDRESS if flight_sql is None else flight_sql,
        path="daemon.flightSqlAddress",
    )
    schedules = m.get("schedules") or {}
    if not isinstance(schedules, dict):
        raise ValidationError(
            f"expected a mapping, got {_kind(schedules)}", path="daemon.schedules"
        )
    return DaemonConfig(
        address=address,
        http_address=http_address,
        max_parallel=int(_positive(m, "daemon", "maxParallel", 2, integer=True)),
        engine_idle_timeout=_positive(m, "daemon", "engineIdleTimeout", 600.0),
        warm_up_seconds=_positive(m, "daemon", "warmUpSeconds", d.warm_up_seconds, zero=True),
        follow_lineage=_boolean(m, "daemon", "followLineage", True),
        schedules=tuple(
            parse_schedule(str(name), when, path=f"daemon.schedules.{name}")
            for name, when in schedules.items()
        ),
        require_token_for_reads=_boolean(m, "daemon", "requireTokenForReads", False),
        http_header_timeout=_positive(m, "daemon", "httpHeaderTimeout", d.http_header_timeout),
        http_body_timeout=_positive(m, "daemon", "httpBodyTimeout", d.http_body_timeout),
        http_idle_timeout=_positive(m, "daemon", "httpIdleTimeout", d.http_idle_timeout),
        http_max_connections=int(
            _positive(m, "daemon", "httpMaxConnections", d.http_max_connections, integer=True)
        ),
        http_max_connections_per_client=int(
            _positive(
                m,
                "daemon",
                "httpMaxConnectionsPerClient",
                d.http_max_connections_per_client,
                integer=True,
            )
        ),
        flight_sql_address=flight_sql_address,
        flight_sql_max_calls=int(
            _positive(m, "daemon", "flightSqlMaxCalls", d.flight_sql_max_calls, integer=True)
        ),
        flight_sql_call_timeout=_positive(
            m, "daemon", "flightSqlCallTimeout", d.flight_sql_call_timeout
        ),
        flight_sql_max_request_bytes=int(
            _positive(
                m,
                "daemon",
                "flightSqlMaxRequestBytes",
                d.flight_sql_max_request_bytes,
                integer=True,
            )
        ),
        flight_sql_handshake_timeout=_positive(
            m, "daemon", "flightSqlHandshakeTimeout", d.flight_sql_handshake_timeout
        ),
    )


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_schedule(dataset: str, when: Any, *, path: str) -> Schedule:
    """``30s``, ``10m``, ``2h``, ``1d`` (an interval) or a five-field cron line."""
    if not isinstance(when, str) or not when.strip():
        raise ValidationError(f"expected an interval or a cron line, got {_kind(when)}", path=path)
    text = when.strip()
    number, unit = text[:-1], text[-1:].lower()
    if unit in _UNITS and number.replace(".", "", 1).isdigit():
        seconds = float(number) * _UNITS[unit]
        if seconds <= 0:
            raise ValidationError(f"the interval must be positive, got {text!r}", path=path)
        return Schedule(dataset, interval=seconds)
    from croniter import croniter  # only when a cron line is configured

    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise ValidationError(
            f"{text!r} is neither an interval (30s, 10m, 2h, 1d) nor a cron line"
            " (minute hour day month weekday)",
            path=path,
        )
    return Schedule(dataset, cron=text)


def parse_host_port(text: str, *, path: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for IPv6) as its parts; a clear error otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValidationError(f"expected host:port, got {text!r}", path=path)
    return host, int(port)


def parse_optional_address(text: str, *, path: str) -> str | None:
    """``host:port``, or ``None`` for ``none`` or an empty text (the listener is off)."""
    if text.strip().lower() in ("", "none"):
        return None
    parse_host_port(text, path=path)
    return text


def _host_port(m: dict[str, Any], path: str, key: str, default: str) -> str:
    value = _string(m, path, key, None)
    if value is None:
        return default
    parse_host_port(value, path=_join(path, key))
    return value


T = TypeVar("T")


# --- typed access to plain values ----------------------------------------------------------------


def _mapping(value: Any, path: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"expected a mapping, got {_kind(value)}", path=path or None)
    for key in value:
        if key not in keys:
            raise ValidationError(
                f"unknown key (expected one of: {', '.join(keys)})", path=_join(path, key)
            )
    return value


def _typed(m: dict[str, Any], path: str, key: str, cls: type[T], wanted: str) -> T | None:
    """``m[key]`` if it is a ``cls``, None if it is absent or null; anything else is refused
    as not ``wanted``."""
    value = m.get(key)
    if value is None or isinstance(value, cls):
        return value
    raise ValidationError(f"expected {wanted}, got {_kind(value)}", path=_join(path, key))


def _string(m: dict[str, Any], path: str, key: str, default: str | None) -> str | None:
    value = _typed(m, path, key, str, "a string")
    return default if value is None else value


def _path(m: dict[str, Any], path: str, key: str) -> Path | None:
    value = _string(m, path, key, None)
    if value is None:
        return None
    if not value:
        raise ValidationError("expected a file path, got an empty string", path=_join(path, key))
    return Path(value)


def _enum(m: dict[str, Any], path: str, key: str, cls: type[Any], default: Any) -> Any:
    value = _string(m, path, key, None)
    if value is None:
        return default
    try:
        return cls(value)
    except ValueError:
        allowed = " | ".join(e.value for e in cls)
        raise ValidationError(f"{value!r} is not one of {allowed}", path=_join(path, key)) from None


def _positive(
    m: dict[str, Any],
    path: str,
    key: str,
    default: float,
    *,
    integer: bool = False,
    zero: bool = False,
) -> float:
    """The number at ``key``: positive, or with ``zero`` zero too."""
    value = m.get(key)
    if value is None:
        return default
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type:
        wanted = "an integer" if integer else "a number"
        raise ValidationError(f"expected {wanted}, got {_kind(value)}", path=_join(path, key))
    if value < 0 or (value == 0 and not zero):
        wanted = "must not be negative" if zero else "must be positive"
        raise ValidationError(f"{wanted}, got {value}", path=_join(path, key))
    return float(value)


def _boolean(m: dict[str, Any], path: str, key: str, default: bool) -> bool:
    value = _typed(m, path, key, bool, "true or false")
    return default if value is None else value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {value!r}"
    return "a list" if isinstance(value, list) else "a mapping"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- reading and changing single keys (odf config) -----------------------------------------------


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


SETTINGS: dict[str, Any] = {
    "engine.provider": lambda c: c.engine.provider,
    "engine.image": lambda c: c.engine.image,
    "engine.address": lambda c: c.engine.address,
    "engine.tokenFile": lambda c: c.engine.token_file,
    "engine.tlsCa": lambda c: c.engine.tls_ca,
    "engine.master": lambda c: c.engine.master,
    "engine.driverMemory": lambda c: c.engine.driver_memory,
    "engine.startTimeout": lambda c: c.engine.start_timeout,
    "engine.stagingDir": lambda c: c.engine.staging_dir,
    "transform.exchange": lambda c: c.transform.exchange,
    "transform.maxInputRecords": lambda c: c.transform.max_input_records,
    "transform.split.minRecords": lambda c: c.transform.split.min_records,
    "transform.split.slices": lambda c: c.transform.split.slices,
    "transform.split.rehash": lambda c: (
        "full" if c.transform.split.rehash == FULL_REHASH else c.transform.split.rehash
    ),
    "daemon.address": lambda c: c.daemon.address,
    "daemon.httpAddress": lambda c: c.daemon.http_address,
    "daemon.flightSqlAddress": lambda c: c.daemon.flight_sql_address or "none",
    "daemon.flightSqlMaxCalls": lambda c: c.daemon.flight_sql_max_calls,
    "daemon.flightSqlCallTimeout": lambda c: c.daemon.flight_sql_call_timeout,
    "daemon.flightSqlMaxRequestBytes": lambda c: c.daemon.flight_sql_max_request_bytes,
    "daemon.flightSqlHandshakeTimeout": lambda c: c.daemon.flight_sql_handshake_timeout,
    "daemon.maxParallel": lambda c: c.daemon.max_parallel,
    "daemon.engineIdleTimeout": lambda c: c.daemon.engine_idle_timeout,
    "daemon.warmUpSeconds": lambda c: c.daemon.warm_up_seconds,
    "daemon.followLineage": lambda c: c.daemon.follow_lineage,
    "daemon.requireTokenForReads": lambda c: c.daemon.require_token_for_reads,
    "daemon.httpHeaderTimeout": lambda c: c.daemon.http_header_timeout,
    "daemon.httpBodyTimeout": lambda c: c.daemon.http_body_timeout,
    "daemon.httpIdleTimeout": lambda c: c.daemon.http_idle_timeout,
    "daemon.httpMaxConnections": lambda c: c.daemon.http_max_connections,
    "daemon.httpMaxConnectionsPerClient": lambda c: c.daemon.http_max_connections_per_client,
    "daemon.schedules": lambda c: ", ".join(f"{s.dataset}={s.text}" for s in c.daemon.schedules),
    "ingest.csvColumnsByPosition": lambda c: ", ".join(c.ingest.csv_columns_by_position),
    "writers.waitTimeout": lambda c: c.writers.wait_timeout,
    "verify.executorMinBytes": lambda c: c.verify.executor_min_bytes,
}
"""Every key of the file (``section.key``) and how to read its effective value."""


def setting(config: WorkspaceConfig, key: str) -> str:
    """The effective value of ``key`` (the default when the file does not set it), as text."""
    if key not in SETTINGS:
        raise ValidationError(f"unknown key (expected one of: {', '.join(SETTINGS)})", path=key)
    return _text(SETTINGS[key](config))


def with_setting(text: str, key: str, value: str | None, *, source: str) -> str:
    """The configuration file's ``text`` with ``key`` set to ``value`` (YAML: ``10``, ``true``,
    ``{a: 1m}``...) or, for ``None``, removed; checked as a whole before it is returned.
    Comments are not kept."""
    import yaml

    if key not in SETTINGS:
        raise ValidationError(f"unknown key (expected one of: {', '.join(SETTINGS)})", path=key)
    document = yaml.safe_load(text) if text.strip() else None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ValidationError("the file is not a mapping of sections", path=source)
    *sections, name = key.split(".")
    chain, block = [], document
    for depth, section in enumerate(sections):
        chain.append((block, section))
        block = block.setdefault(section, {})
        if not isinstance(block, dict):
            where = ".".join(sections[: depth + 1])
            raise ValidationError(f"expected a mapping, got {_kind(block)}", path=where)
    if value is None:
        block.pop(name, None)
        for parent, section in reversed(chain):  # sections left empty go too
            if parent[section]:
                break
            parent.pop(section)
    else:
        try:
            block[name] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ValidationError(f"{value!r} is not a YAML value", path=key) from None
    new_text = (
        yaml.safe_dump(document, sort_keys=False, default_flow_style=False) if document else ""
    )
    try:
        parse_config(new_text, source=source)  # refuse what the file could not hold
    except ValidationError as e:
        raise ValidationError(e.reason, path=key) from None
    return new_text
