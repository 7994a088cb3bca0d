"""Where a command's use cases run: through the workspace's daemon when one serves it (the CLI
is then a thin client), else in this process. ``--no-daemon`` (or ``ODF_NO_DAEMON=1``) forces
in-process.

In process, a command changing a dataset that another writer holds (the daemon, or another
``odf`` process) waits for it, saying so on stderr, for ``--wait-timeout`` seconds at most
(default: ``writers.waitTimeout`` of the workspace configuration)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from coordinator.daemon.rundir import DaemonInfo, RunDir
from coordinator.workspace import Workspace

if TYPE_CHECKING:
    from coordinator.app import UseCases
    from coordinator.app.application import Application
    from coordinator.app.use_cases import Queries
    from coordinator.dataset.writer_locks import WriterLocks
    from coordinator.ingest.progress import Progress

NO_DAEMON_ENV = "ODF_NO_DAEMON"


def add_daemon_argument(parser: Any, *, writes: bool = False) -> None:
    parser.add_argument(
        "--no-daemon",
        action="store_true",
        help="run in this process even when a daemon serves the workspace",
    )
    if writes:
        parser.add_argument(
            "--wait-timeout",
            type=_seconds,
            metavar="SECONDS",
            help="how long to wait while another writer (the daemon, another odf process) changes"
            " a dataset this command changes (default: writers.waitTimeout, 600)",
        )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def application(args: argparse.Namespace, ws: Workspace | None = None) -> Application:
    """The application of this process: its writers wait for other writers as asked, telling
    the user on stderr."""
    from coordinator.app.application import Application  # the whole application: only here

    app = Application(ws if ws is not None else Workspace.find())
    _tell_waits(app.writers, args)
    return app


def writer_locks(args: argparse.Namespace, ws: Workspace) -> WriterLocks:
    """The writer locks of a command that changes datasets without the application (a
    transfer), waiting as configured and telling the user on stderr."""
    from coordinator.config import load_config
    from coordinator.dataset.writer_locks import LOCKS_DIR, WriterLocks

    locks = WriterLocks(
        ws.odf_dir / LOCKS_DIR, timeout=load_config(ws.odf_dir).writers.wait_timeout
    )
    _tell_waits(locks, args)
    return locks


def _tell_waits(locks: WriterLocks, args: argparse.Namespace) -> None:
    from coordinator.dataset.writer_locks import COMMAND_TIMEOUT_HINT

    timeout = getattr(args, "wait_timeout", None)
    if timeout is not None:
        locks.timeout = timeout
    locks.on_wait = _tell
    locks.timeout_hint = COMMAND_TIMEOUT_HINT


def _tell(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def use_cases(args: argparse.Namespace) -> UseCases:
    """The daemon's client when a daemon serves this workspace, else the application."""
    ws, client = workspace_or_daemon(args)
    if client is not None:
        return client
    return application(args, ws)


def workspace_or_daemon(args: argparse.Namespace) -> tuple[Workspace, UseCases | None]:
    """The workspace, and the client of its daemon when one serves it (and may be used)."""
    ws = Workspace.find()
    serving = daemon_serving(args, ws)
    if serving is None:
        return ws, None
    from coordinator.daemon.client import DaemonClient  # gRPC only when needed

    client = DaemonClient(*serving)
    client.on_wait = _tell
    client.wait_timeout = getattr(args, "wait_timeout", None)
    return ws, client


def daemon_serving(args: argparse.Namespace, ws: Workspace) -> tuple[DaemonInfo, str] | None:
    """The info and token of the daemon serving ``ws``, unless none does or the command
    is to run in this process (``--no-daemon``, ``ODF_NO_DAEMON=1``)."""
    if getattr(args, "no_daemon", False) or os.environ.get(NO_DAEMON_ENV) == "1":
        return None
    return RunDir(ws.odf_dir).serving()


def query_runner(args: argparse.Namespace) -> Queries:
    """What runs an ad-hoc query: the daemon serving the workspace, over its HTTP query
    endpoint (no gRPC to load: the query leaves sooner), else the application."""
    ws = Workspace.find()
    serving = daemon_serving(args, ws)
    if serving is None:
        return application(args, ws)
    from coordinator.daemon.query_http import HttpQueries

    return HttpQueries(*serving)


def show_engine_starts(app: Queries | UseCases, progress: Progress) -> None:
    """An engine this process starts for ``app`` shows as ``starting engine ...`` on
    ``progress`` while it starts (a daemon's engines are its own: nothing to show)."""
    if hasattr(app, "progress"):
        app.progress = progress
