"""``odf ui``: the workspace's web UI in a browser.

Starts a daemon for the workspace when none serves it (``odf serve`` in the background, its
log in ``.odf/run/daemon.log``), asks it for a one-time login link with the start-up token,
and opens the link in the default browser; when no browser can be opened (or with
``--no-browser``) the link is printed instead (it works once, within two minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from common.odf.errors import OdfError
from coordinator.app import Application
from coordinator.cli.terminal_text import visible
from coordinator.daemon.rundir import DaemonInfo, RunDir

START_TIMEOUT_S = 60.0
LINK_TIMEOUT_S = 10.0
MAX_REPLY = 64 << 10


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("ui", help="open the web UI (a daemon is started if none runs)")
    no_browser = "print the one-time login link instead of opening a browser"
    p.add_argument("--no-browser", action="store_true", help=no_browser)
    p.set_defaults(handler=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    rundir = RunDir((app := Application.open()).ws.odf_dir)
    info = rundir.read_info() or _start_daemon(rundir, app.ws.root)
    token = rundir.read_token()
    if token is None:
        raise OdfError(f"the daemon's token is not readable ({rundir.token_path})")
    base = _base_url(info)
    url = base + _login_path(base, token, info.tls_cert)
    if not args.no_browser:
        import webbrowser

        if webbrowser.open(url):
            print(f"opened {base}/ui/ in the browser", file=sys.stderr)
            return 0
        print("no browser could be opened; open this link (once, within 2 min):", file=sys.stderr)
    print(url)
    return 0


def _start_daemon(rundir: RunDir, root: os.PathLike[str]) -> DaemonInfo:
    """``odf serve`` in the background (its own session: it outlives this command)."""
    print("starting a daemon for this workspace (`odf daemon stop` stops it) ...", file=sys.stderr)
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "--log-format", "json"],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        info = rundir.read_info()
        if info is not None and info.pid == process.pid and rundir.read_token():
            return info
        code = process.poll()
        if code is not None:
            raise OdfError(
                f"the daemon exited with code {code} before serving (`odf serve` shows why)"
            )
        time.sleep(0.1)
    raise OdfError(f"the daemon did not serve within {START_TIMEOUT_S:.0f} s (pid {process.pid})")


def _base_url(info: DaemonInfo) -> str:
    host, port = info.http_reach()
    scheme = "https" if info.tls_cert else "http"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def _login_path(base: str, token: str, cert: str | None) -> str:
    """A one-time login path (``/ui/login/<code>``) from the daemon, asked with the token."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=cert) if cert else None
    request = urllib.request.Request(
        base + "/ui/api/link",
        data=b"",
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Length": "0"},
    )
    try:
        with urllib.request.urlopen(request, timeout=LINK_TIMEOUT_S, context=context) as reply:
            body = reply.read(MAX_REPLY + 1)
    except (urllib.error.URLError, OSError) as e:
        raise OdfError(f"cannot reach the daemon at {base}: {e}") from None
    try:
        path = json.loads(body[:MAX_REPLY])["path"]
    except (ValueError, KeyError, TypeError):
        raise OdfError(f"the daemon at {base} sent no login link") from None
    if not isinstance(path, str) or not path.startswith("/ui/login/"):
        raise OdfError(f"the daemon at {base} sent an unexpected link: {visible(str(path)[:80])}")
    return path
