"""``python -m engine_spark`` / ``odf-engine-spark``: run the engine gRPC server.

Ports, socket, data roots and Spark master come from flags, else from the environment
(``ODF_ENGINE_HOST``, ``ODF_ENGINE_PORTS`` comma-separated, ``ODF_ENGINE_UNIX_SOCKET``,
``ODF_ENGINE_DATA_ROOTS`` separated by ``:``, ``SPARK_MASTER``, ``SPARK_DRIVER_MEMORY``).
The server binds loopback unless told otherwise, serves requests only for files under its
data roots, and can require a token and TLS (see docs/security.md). SIGTERM or SIGINT stops
the server gracefully, then Spark. Exit codes: 0 stopped, 1 could not listen, 2 bad
arguments, 3 the engine died (its JVM exited: out of memory, or killed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import structlog

from common.engine_rpc import REFERENCE_ENGINE_PORT, SPEC_ENGINE_PORT
from common.logs import configure_logging
from engine_spark import class_data_sharing as cds
from engine_spark.class_data_sharing import CDS_ENV
from engine_spark.data_roots import DataRoots
from engine_spark.masters import (
    CONNECT_LOCAL_MASTER,
    EXPECTED,
    MasterKind,
    check_master,
    check_reachable,
    master_kind,
)
from engine_spark.server import EngineServer, ServerBindError, ServerSettings, TlsFiles

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine_spark.engine import SparkEngine
    from engine_spark.session import SessionSettings

log = structlog.get_logger("engine_spark")

OUTPUT_WRITERS = ("stream", "spark", "collect")
ARROW_INPUTS = ("staged", "in-place")
"""``staging.ArrowInputs`` values (spelled out: staging imports Spark, parsing must not)."""
JVM_FIRST_ENV = "ODF_ENGINE_JVM_FIRST"
FAST_STOP_ENV = "ODF_ENGINE_FAST_STOP"
JIT_ENV = "ODF_ENGINE_JIT"
JIT_MODES = ("full", "quick")
QUICK_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1",)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    env = os.environ
    default_ports = env.get("ODF_ENGINE_PORTS", f"{SPEC_ENGINE_PORT},{REFERENCE_ENGINE_PORT}")
    p = argparse.ArgumentParser(
        prog="odf-engine-spark", description="Run the ODF Spark engine gRPC server."
    )
    from_env: list[tuple[str, str, tuple[str, ...]]] = []

    def choice(flag: str, variable: str, choices: tuple[str, ...], default: str, text: str) -> None:
        """An option among ``choices`` whose default is environment ``variable``, else
        ``default`` (checked after parsing: argparse does not check defaults)."""
        p.add_argument(
            flag, choices=choices, default=env.get(variable, default), help=f"{text}; {variable}"
        )
        from_env.append((flag.removeprefix("--").replace("-", "_"), variable, choices))

    p.add_argument(
        "--host",
        default=env.get("ODF_ENGINE_HOST", "127.0.0.1"),
        help="bind address (default 127.0.0.1; 0.0.0.0 exposes the engine: see --token-file)",
    )
    p.add_argument(
        "--ports",
        default=default_ports,
        help="comma-separated TCP ports (default: 5544 from the spec, 2884 for kamu); "
        "empty for none",
    )
    p.add_argument(
        "--unix-socket",
        default=env.get("ODF_ENGINE_UNIX_SOCKET"),
        help="also listen on this Unix socket path",
    )
    p.add_argument(
        "--master",
        default=env.get("SPARK_MASTER", "local[*]"),
        help=f"Spark master, passed to Spark unchanged: {EXPECTED} (refused: Spark"
        " Connect); default local[*]",
    )
    p.add_argument("--driver-memory", default=env.get("SPARK_DRIVER_MEMORY"))
    choice(
        "--warm-up",
        "ODF_ENGINE_WARM_UP",
        ("on", "off"),
        "on",
        "run a small transaction before reporting SERVING (on: a long-running server's"
        " first call is faster; off: a one-shot command starts ~2-3 s sooner)",
    )
    p.add_argument(
        "--no-warm-up",
        action="store_const",
        const="off",
        dest="warm_up",
        help="the same as --warm-up off",
    )
    choice(
        "--cds",
        CDS_ENV,
        ("on", "off"),
        "on",
        "start the driver JVM with an application class-data sharing archive, written by"
        " the first start into ~/.cache/odf/cds (on: a one-shot start is ~1/3 faster)",
    )
    choice(
        "--jit",
        JIT_ENV,
        JIT_MODES,
        "full",
        "the driver JVM's compilers: full (default: C1, then C2 for hot code) or quick"
        " (C1 only: a short one-shot query, such as odf sql's, ends sooner; a long transaction"
        " runs slower)",
    )
    choice(
        "--output-writer",
        "ODF_ENGINE_OUTPUT_WRITER",
        OUTPUT_WRITERS,
        "stream",
        "how row-wise outputs are written: stream (default: Arrow batches partition by"
        " partition), spark (Spark's own Parquet writer, local masters), collect (the whole"
        " result collected first, the former path)",
    )
    choice(
        "--arrow-inputs",
        "ODF_ENGINE_ARROW_INPUTS",
        ARROW_INPUTS,
        "staged",
        "how Arrow IPC inputs reach Spark: staged (default: restaged as Parquet, measured"
        " faster) or in-place (read where they lie by mapInArrow tasks)",
    )
    p.add_argument(
        "--shared-staging",
        default=env.get("ODF_ENGINE_SHARED_STAGING"),
        metavar="DIR",
        help="with a cluster master: a directory every node mounts at this path; Arrow IPC"
        " inputs are staged there and outputs the coordinator puts there are written by the"
        " executors (no record through the driver); ODF_ENGINE_SHARED_STAGING",
    )
    p.add_argument(
        "--data-root",
        action="append",
        dest="data_roots",
        metavar="DIR",
        help="a directory requests may read and write under (repeatable; default: "
        "$ODF_ENGINE_DATA_ROOTS, ':'-separated); paths elsewhere are refused",
    )
    p.add_argument(
        "--token-file",
        help="require 'authorization: Bearer <token>' on every call but health checks; "
        "the file holds the token",
    )
    p.add_argument("--tls-cert", help="serve TCP ports over TLS with this PEM certificate chain")
    p.add_argument("--tls-key", help="the PEM private key of --tls-cert")
    p.add_argument("--reflection", action="store_true", help="enable gRPC server reflection")
    p.add_argument(
        "--max-queue",
        type=int,
        default=16,
        help="calls that may wait while one runs; more get RESOURCE_EXHAUSTED (default 16)",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        metavar="SECONDS",
        help="cancel a call (and its Spark jobs) that runs longer than this",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="-v info, -vv debug")
    p.add_argument("--log-json", action="store_true", help="JSON log lines")
    args = p.parse_args(argv)
    for dest, variable, choices in from_env:
        if getattr(args, dest) not in choices:
            p.error(f"{variable}={getattr(args, dest)!r}: must be one of {', '.join(choices)}")
    if args.shared_staging is not None and not os.path.isdir(args.shared_staging):
        p.error(f"--shared-staging {args.shared_staging}: not a directory")
    return args


def parse_ports(text: str) -> tuple[int, ...]:
    ports = tuple(int(p) for p in text.replace(" ", "").split(",") if p)
    for port in ports:
        if not 0 <= port <= 65535:
            raise SystemExit(f"error: port {port} is outside 0..65535")
    return ports


@dataclass(slots=True)
class StartedEngine:
    """The engine and the class-data sharing archive its JVM uses or writes."""

    engine: SparkEngine
    archive: cds.ArchivePlan | None


def spark_backend_factory(args: argparse.Namespace) -> StartedEngine:
    """Build the SparkEngine (imports pyspark: runs on the server's start-up thread).

    The JVM is launched first: the engine's own modules (pyarrow, ~1 s of imports) are
    imported by another thread while it boots (``ODF_ENGINE_JVM_FIRST=off``: one after the
    other, as before; for measurements)."""
    from engine_spark.session import SessionSettings

    importing = threading.Thread(target=_import_engine_modules, name="engine-import", daemon=True)
    if os.environ.get(JVM_FIRST_ENV, "on") == "off":
        _import_engine_modules()
    else:
        importing.start()
    connect = None
    master = args.master
    if master_kind(master) is MasterKind.CONNECT:
        from engine_spark.connect import ConnectServer

        # The local JVM only vets and analyzes queries (no data): one core is plenty.
        connect, master = ConnectServer(master), CONNECT_LOCAL_MASTER
    settings = SessionSettings(
        master=master,
        driver_memory=args.driver_memory,
        log_level="WARN" if args.verbose >= 2 else "FATAL",
        jvm_options=QUICK_JIT_OPTIONS if args.jit == "quick" else (),
    )
    archive = cds.prepare(os.environ, archive_key_options(settings)) if args.cds == "on" else None
    session, archive = start_session(settings, archive)
    if importing.is_alive():
        importing.join()
    from engine_spark.engine import SparkEngine
    from engine_spark.outputs import OutputWriter
    from engine_spark.staging import ArrowInputs

    engine = SparkEngine(
        session,
        output_writer=OutputWriter(args.output_writer),
        arrow_inputs=ArrowInputs(args.arrow_inputs),
        shared_staging=Path(args.shared_staging) if args.shared_staging else None,
        connect=connect,
    )
    if args.warm_up == "on":
        engine.warm_up()
    return StartedEngine(engine, archive)


def _import_engine_modules() -> None:
    """Import what the engine needs besides pyspark (a failure shows where it is used)."""
    with contextlib.suppress(Exception):
        import engine_spark.engine
        import engine_spark.outputs  # noqa: F401


def archive_key_options(settings: SessionSettings) -> tuple[str, ...]:
    """The driver JVM's own options, which an archive's key includes."""
    from engine_spark.session import session_conf

    conf = session_conf(settings)
    java_options = cds.strip_archive_options(conf.get("spark.driver.extraJavaOptions", ""))
    return (
        f"spark.driver.extraJavaOptions={java_options}",
        f"spark.driver.memory={conf.get('spark.driver.memory', '')}",
    )


def start_session(
    settings: SessionSettings, archive: cds.ArchivePlan | None
) -> tuple[SparkSession, cds.ArchivePlan | None]:
    """The session, its JVM started with the archive; if that JVM cannot start, the archive
    is discarded and the session started without (an archive never fails the engine)."""
    from engine_spark.session import build_session

    if archive is None:
        return build_session(settings), None
    try:
        options = (*settings.jvm_options, *archive.jvm_options())
        return build_session(replace(settings, jvm_options=options)), archive
    except Exception as e:  # any start failure: retried without the archive
        if archive.mode is not cds.Mode.USE:
            raise
        log.warning("cds.start_failed", archive=str(archive.path), error=str(e))
        cds.discard(archive)
        return build_session(settings), None


def server_settings(args: argparse.Namespace) -> ServerSettings:
    """The server's settings from the parsed flags; ``ValueError`` names a bad one."""
    try:
        if check_master(args.master) is MasterKind.CONNECT:
            check_reachable(args.master)
    except ValueError as e:
        raise ValueError(f"--master {e}") from None
    roots = args.data_roots
    if roots is None:
        roots = [p for p in os.environ.get("ODF_ENGINE_DATA_ROOTS", "").split(":") if p]
    for root in roots:
        if not os.path.isdir(root):
            raise ValueError(f"--data-root {root}: not a directory")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    if args.max_queue < 0:
        raise ValueError(f"--max-queue {args.max_queue}: must be 0 or more")
    if args.request_timeout is not None and args.request_timeout <= 0:
        raise ValueError(f"--request-timeout {args.request_timeout:g}: must be positive")
    settings = ServerSettings(
        host=args.host,
        ports=parse_ports(args.ports),
        unix_socket=args.unix_socket,
        data_roots=DataRoots.of(roots),
        max_queue=args.max_queue,
        request_timeout=args.request_timeout,
        token=read_token(args.token_file) if args.token_file else None,
        tls=TlsFiles(cert=args.tls_cert, key=args.tls_key) if args.tls_cert else None,
        reflection=args.reflection,
    )
    if not settings.ports and not settings.unix_socket:
        raise ValueError("no TCP port and no Unix socket to listen on")
    return settings


def read_token(path: str) -> str:
    """The token in ``path`` (surrounding whitespace stripped); ``ValueError`` if unusable."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--token-file {path}: cannot read it: {e}") from e
    if not token or any(c.isspace() for c in token):
        raise ValueError(f"--token-file {path}: the token must be one word, not empty")
    return token


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.verbose, json=args.log_json)
    try:
        settings = server_settings(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    engines: list[StartedEngine] = []

    def build_engine() -> SparkEngine:
        engines.append(spark_backend_factory(args))
        return engines[-1].engine

    server = EngineServer(settings, build_engine)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("server.signal", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.start()
    except ServerBindError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    while not stop.wait(0.5) and not server.failed.is_set():
        pass
    server.stop()
    if server.failed.is_set():
        print(f"error: the engine stopped: {server.failure}", file=sys.stderr)
        return 3
    fast = os.environ.get(FAST_STOP_ENV, "on") != "off"
    for started in engines:
        archive = started.archive
        if not fast:
            started.engine.close()
        if archive is not None:
            from engine_spark.session import jvm_process

            cds.hand_over(archive, jvm_process())
    log.info("engine.stopped")
    if fast:
        # Nothing is left to wait for: the JVM sees its stdin close when this process ends and
        # stops Spark itself (its shutdown hook), so the one waiting for this process (a
        # one-shot command) need not wait for Spark's stop (~0.5 s) nor for the interpreter's
        # teardown of py4j's and gRPC's threads (~0.5 s).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
