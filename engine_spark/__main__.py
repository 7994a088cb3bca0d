"""``python -m engine_spark`` / ``odf-engine-spark``: run the engine gRPC server.

Ports, socket and Spark master come from flags, else from the environment
(``ODF_ENGINE_PORTS`` comma-separated, ``ODF_ENGINE_UNIX_SOCKET``, ``SPARK_MASTER``,
``SPARK_DRIVER_MEMORY``). SIGTERM or SIGINT stops the server gracefully, then Spark.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

import structlog

from common.engine_rpc import REFERENCE_ENGINE_PORT, SPEC_ENGINE_PORT
from common.logs import configure_logging
from engine_spark.server import EngineServer, ServerBindError, ServerSettings

if TYPE_CHECKING:
    from engine_spark.engine import SparkEngine

log = structlog.get_logger("engine_spark")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    env = os.environ
    default_ports = env.get("ODF_ENGINE_PORTS", f"{SPEC_ENGINE_PORT},{REFERENCE_ENGINE_PORT}")
    p = argparse.ArgumentParser(
        prog="odf-engine-spark", description="Run the ODF Spark engine gRPC server."
    )
    p.add_argument("--host", default=env.get("ODF_ENGINE_HOST", "0.0.0.0"), help="bind address")
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
        help="Spark master: local[*] (default), local[N] or a cluster URL",
    )
    p.add_argument("--driver-memory", default=env.get("SPARK_DRIVER_MEMORY"))
    p.add_argument(
        "--no-warm-up", action="store_true", help="skip the start-up warm-up transaction"
    )
    p.add_argument("--max-workers", type=int, default=8, help="gRPC worker threads")
    p.add_argument("-v", "--verbose", action="count", default=0, help="-v info, -vv debug")
    p.add_argument("--log-json", action="store_true", help="JSON log lines")
    return p.parse_args(argv)


def parse_ports(text: str) -> tuple[int, ...]:
    ports = tuple(int(p) for p in text.replace(" ", "").split(",") if p)
    for port in ports:
        if not 0 <= port <= 65535:
            raise SystemExit(f"error: port {port} is outside 0..65535")
    return ports


def spark_backend_factory(args: argparse.Namespace) -> SparkEngine:
    """Build the SparkEngine (imports pyspark: runs on the server's start-up thread)."""
    from engine_spark.engine import SparkEngine
    from engine_spark.session import SessionSettings, build_session

    settings = SessionSettings(
        master=args.master,
        driver_memory=args.driver_memory,
        log_level="WARN" if args.verbose >= 2 else "FATAL",
    )
    engine = SparkEngine(build_session(settings))
    if not args.no_warm_up:
        engine.warm_up()
    return engine


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.verbose, json=args.log_json)
    settings = ServerSettings(
        host=args.host,
        ports=parse_ports(args.ports),
        unix_socket=args.unix_socket,
        max_workers=args.max_workers,
    )
    if not settings.ports and not settings.unix_socket:
        print("error: no TCP port and no Unix socket to listen on", file=sys.stderr)
        return 2
    engines: list[SparkEngine] = []

    def build_engine() -> SparkEngine:
        engines.append(spark_backend_factory(args))
        return engines[-1]

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
    while not stop.wait(0.5):
        pass
    server.stop()
    for engine in engines:
        engine.close()
    log.info("engine.stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
