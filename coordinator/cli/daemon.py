"""``odf serve`` (the coordinator daemon, in the foreground) and ``odf daemon status|stop``."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.humanize import human_time
from common.logs import INFO, LogFile, configure_logging
from common.odf.errors import OdfError, ValidationError
from coordinator.app import Application
from coordinator.cli.terminal_text import visible
from coordinator.config import DaemonConfig, parse_optional_address
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
    p.add_argument(
        "--flight-sql-address",
        metavar="HOST:PORT",
        help="Arrow Flight SQL, `none` for no Flight SQL (default: config"
        " daemon.flightSqlAddress, 127.0.0.1:50050)",
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
    status = commands.add_parser(
        "status",
        help="whether a daemon runs (exit 1 if not), where, and what it is doing: its queue,"
        " schedules with their last and next runs, engines and running calls",
    )
    status.set_defaults(handler=cmd_status)
    stop = commands.add_parser("stop", help="stop the daemon (SIGTERM, then wait for it)")
    stop.set_defaults(handler=cmd_stop)
    logs = commands.add_parser("logs", help="the daemon's log (.odf/run/daemon.log)")
    logs.add_argument("-n", "--lines", type=int, default=50, metavar="N", help="last N entries")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new entries")
    logs.add_argument("--json", action="store_true", help="the entries as stored (JSON lines)")
    logs.set_defaults(handler=cmd_logs)
    token = commands.add_parser("token", help="tokens for the daemon's clients, with scopes")
    token_commands = token.add_subparsers(dest="token_command", metavar="COMMAND", required=True)
    create = token_commands.add_parser(
        "create",
        help="issue a token (printed once): read (list, log, tail, query, verify), push"
        " (and ingest, Smart Transfer Protocol pushes) or admin (everything)",
    )
    create.add_argument("--scope", required=True, choices=("read", "push", "admin"))
    create.add_argument("--name", default="", help="what it is for (shown by `token list`)")
    create.set_defaults(handler=cmd_token_create)
    listing = token_commands.add_parser("list", help="the issued tokens (never the tokens)")
    listing.set_defaults(handler=cmd_token_list)
    revoke = token_commands.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("id")
    revoke.set_defaults(handler=cmd_token_revoke)


def cmd_serve(args: argparse.Namespace) -> int:
    from coordinator.daemon.server import Daemon, TlsFiles  # only here: keeps `odf` start fast

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValidationError("give both --tls-cert and --tls-key", path="--tls-cert")
    json_logs = args.log_format == "json" or (args.log_format is None and not sys.stderr.isatty())
    app = Application.open()
    RunDir(app.ws.odf_dir).path.mkdir(parents=True, exist_ok=True)
    log_file = LogFile(RunDir(app.ws.odf_dir).log_path)
    configure_logging(args.verbose, json=json_logs, floor=INFO, file=log_file)
    listen = DaemonConfig(
        address=args.address or app.config.daemon.address,
        http_address=args.http_address or app.config.daemon.http_address,
        flight_sql_address=(
            app.config.daemon.flight_sql_address
            if args.flight_sql_address is None
            else parse_optional_address(args.flight_sql_address, path="--flight-sql-address")
        ),
    )
    tls = TlsFiles(args.tls_cert, args.tls_key) if args.tls_cert else None
    daemon = Daemon(app, listen, tls, args.insecure)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def announce(info: DaemonInfo) -> None:
        flight_sql = f", Flight SQL {info.flight_sql_address}" if info.flight_sql_address else ""
        print(
            f"serving {app.ws.root}: gRPC {info.address}, HTTP {info.http_address}{flight_sql}"
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
    rundir, info = _running()
    if info is None:
        return 1
    print(
        f"running: pid {info.pid}, gRPC {info.address}, HTTP {info.http_address},"
        + (f" Flight SQL {info.flight_sql_address}," if info.flight_sql_address else "")
        + f" since {human_time(info.started)}"
    )
    token = rundir.read_token()
    if token is None:
        return 0
    from coordinator.daemon.client import DaemonClient  # gRPC only here

    client = DaemonClient(info, token)
    try:
        status = client.status()
    finally:
        client.close()
    print(daemon_status_text(status))
    return 0


def daemon_status_text(status: Any) -> str:
    """The lines of ``odf daemon status`` after the first, from a ``StatusResponse``."""
    lines = [f"pulling: {visible(status.pulling) if status.pulling else '-'}"]
    queued = ", ".join(visible(q) for q in status.queued)
    lines.append(f"queued ({len(status.queued)}): {queued or '-'}")
    lines.append(f"schedules ({len(status.schedules)}):" if status.schedules else "schedules: -")
    for s in status.schedules:
        last = (
            f"last {_instant(s.last_run.ToDatetime(UTC))} {visible(s.last_outcome)}"
            if s.HasField("last_run")
            else "not run yet"
        )
        lines.append(
            f"  {visible(s.dataset)}: {visible(s.when)}; {last};"
            f" next {_instant(s.next_run.ToDatetime(UTC))}"
        )
    lines.append(f"engines ({len(status.engines)}):" if status.engines else "engines: none running")
    for e in status.engines:
        use = f"{e.leases} in use" if e.leases else f"idle {e.idle_seconds:.0f} s"
        lines.append(f"  {visible(e.version)}: {e.state}, {use}")
    lines.append(f"calls ({len(status.calls)}):" if status.calls else "calls: none running")
    for c in status.calls:
        on = f" {visible(c.dataset)}" if c.dataset else ""
        lines.append(f"  {c.method}{on}: {c.seconds:.1f} s")
    return "\n".join(lines)


def _instant(value: datetime) -> str:
    """RFC 3339 in UTC with ``Z``, to the second."""
    return human_time(value.replace(microsecond=0))


def cmd_logs(args: argparse.Namespace) -> int:
    from coordinator.cli.daemon_logs import follow_log, last_entries, render_entry

    path = RunDir(Application.open().ws.odf_dir).log_path
    if not path.exists():
        print(f"no daemon log yet ({path})", file=sys.stderr)
        return 1
    show = (lambda line: line.rstrip("\n")) if args.json else render_entry
    for line in last_entries(path, max(0, args.lines)):
        print(show(line), flush=True)
    if args.follow:
        try:
            for line in follow_log(path):
                print(show(line), flush=True)
        except KeyboardInterrupt:
            return 130
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    from coordinator.daemon.access import Scope, TokenStore

    issued, token = TokenStore(Application.open().ws.odf_dir).create(
        Scope.parse(args.scope), args.name
    )
    print(token)
    print(
        f"token {issued.id} (scope {issued.scope.label}) created; it is shown only now",
        file=sys.stderr,
    )
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    from coordinator.daemon.access import TokenStore

    tokens = TokenStore(Application.open().ws.odf_dir).load()
    if not tokens:
        print("no tokens issued (the daemon's start-up token is in .odf/run/token)")
        return 0
    for t in tokens:
        print(f"{t.id}  {t.scope.label:<5}  {_instant(t.created)}  {visible(t.name)}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from coordinator.daemon.access import TokenStore

    revoked = TokenStore(Application.open().ws.odf_dir).revoke(args.id)
    print(f"revoked token {revoked.id} (scope {revoked.scope.label})")
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
