"""``odf serve`` (the coordinator daemon, in the foreground) and ``odf daemon status|stop``."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common.humanize import human_time
from common.logs import configure_logging
from common.odf.errors import OdfError, ValidationError
from coordinator.app import Application
from coordinator.config import DaemonConfig
from coordinator.daemon.rundir import DaemonInfo, RunDir

STOP_TIMEOUT_S = 60.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve", help="run the coordinator daemon for this workspace (in the foreground)"
    )
    p.add_argument("--address", metavar="HOST:PORT", help="gRPC (default: config daemon.address)")
    p.add_argument(
        "--http-address", metavar="HOST:PORT", help="HTTP (default: config daemon.httpAddress)"
    )
    p.add_argument("--tls-cert", type=Path, metavar="PEM", help="serve gRPC and HTTPS")
    p.add_argument("--tls-key", type=Path, metavar="PEM", help="the key of --tls-cert")
    p.add_argument(
        "--log-format",
        choices=("json", "console"),
        help="structlog output (default: json, console when stderr is a terminal)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback address without TLS (the token travels in clear text)",
    )
    p.set_defaults(handler=cmd_serve)

    p = subparsers.add_parser("daemon", help="the daemon of this workspace")
    commands = p.add_subparsers(dest="daemon_command", metavar="COMMAND", required=True)
    status = commands.add_parser("status", help="whether a daemon runs (exit 1 if not), where")
    status.set_defaults(handler=cmd_status)
    stop = commands.add_parser("stop", help="stop the daemon (SIGTERM, then wait for it)")
    stop.set_defaults(handler=cmd_stop)


def cmd_serve(args: argparse.Namespace) -> int:
    from coordinator.daemon.server import Daemon, TlsFiles  # only here: keeps `odf` start fast

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValidationError("give both --tls-cert and --tls-key", path="--tls-cert")
    json_logs = args.log_format == "json" or (args.log_format is None and not sys.stderr.isatty())
    configure_logging(args.verbose, json=json_logs)
    app = Application.open()
    listen = DaemonConfig(
        address=args.address or app.config.daemon.address,
        http_address=args.http_address or app.config.daemon.http_address,
    )
    tls = TlsFiles(args.tls_cert, args.tls_key) if args.tls_cert else None
    daemon = Daemon(app, listen, tls, args.insecure)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def announce(info: DaemonInfo) -> None:
        print(
            f"serving {app.ws.root}: gRPC {info.address}, HTTP {info.http_address}"
            f" (pid {info.pid}; stop with `odf daemon stop`)",
            file=sys.stderr,
            flush=True,
        )

    daemon.run(stop, on_serving=announce)
    return 0


def _running() -> tuple[RunDir, DaemonInfo | None]:
    """The workspace's run directory and its daemon; says so on stderr when none runs."""
    rundir = RunDir(Application.open().ws.odf_dir)
    info = rundir.read_info()
    if info is None:
        print("no daemon serves this workspace", file=sys.stderr)
    return rundir, info


def cmd_status(args: argparse.Namespace) -> int:
    _, info = _running()
    if info is None:
        return 1
    print(
        f"running: pid {info.pid}, gRPC {info.address}, HTTP {info.http_address},"
        f" since {human_time(info.started)}"
    )
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    rundir, info = _running()
    if info is None:
        return 1
    with contextlib.suppress(ProcessLookupError):  # it has just exited
        os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while rundir.read_info() is not None:
        if time.monotonic() > deadline:
            raise OdfError(f"the daemon (pid {info.pid}) did not stop in {STOP_TIMEOUT_S:.0f} s")
        time.sleep(0.05)
    print(f"stopped the daemon (pid {info.pid})")
    return 0
