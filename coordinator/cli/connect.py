"""Where a command's use cases run: through the workspace's daemon when one serves it (the CLI
is then a thin client), else in this process. ``--no-daemon`` (or ``ODF_NO_DAEMON=1``) forces
in-process."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from coordinator.daemon.rundir import RunDir
from coordinator.workspace import Workspace

if TYPE_CHECKING:
    from coordinator.app import UseCases

NO_DAEMON_ENV = "ODF_NO_DAEMON"


def add_daemon_argument(parser: Any) -> None:
    parser.add_argument(
        "--no-daemon",
        action="store_true",
        help="run in this process even when a daemon serves the workspace",
    )


def use_cases(args: argparse.Namespace) -> UseCases:
    """The daemon's client when a daemon serves this workspace, else the application."""
    ws, client = workspace_or_daemon(args)
    if client is not None:
        return client
    from coordinator.app.application import Application  # the whole application: only here

    return Application(ws)


def workspace_or_daemon(args: argparse.Namespace) -> tuple[Workspace, UseCases | None]:
    """The workspace, and the client of its daemon when one serves it (and may be used)."""
    ws = Workspace.find()
    if not getattr(args, "no_daemon", False) and os.environ.get(NO_DAEMON_ENV) != "1":
        rundir = RunDir(ws.odf_dir)
        info = rundir.read_info()
        token = rundir.read_token() if info is not None else None
        if info is not None and token is not None:
            from coordinator.daemon.client import DaemonClient  # gRPC only when needed

            return ws, DaemonClient(info, token)
    return ws, None
