"""``odf serve`` as a real process: one daemon per workspace, found through ``.odf/run``,
token-authenticated, healthy over gRPC and HTTP, stopped gracefully."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.cli import fails, odf, ok, start_odf
from tests.support.daemon import LOOPBACK_ANY_PORT
from tests.support.workspace import new_workspace

pytestmark = pytest.mark.e2e


START_TIMEOUT_S = 60.0
LIST_METHOD = "/odf.coordinator.v1.Coordinator/ListDatasets"


def wait_for_info(ws: Path, process: subprocess.Popen[str]) -> dict[str, object]:
    """``daemon.json`` once the daemon serves (it is written after both servers listen)."""
    path = ws / ".odf" / "run" / "daemon.json"
    deadline = time.monotonic() + START_TIMEOUT_S
    while not path.is_file():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the daemon wrote no daemon.json"
        time.sleep(0.05)
    info: dict[str, object] = json.loads(path.read_text())
    return info


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str], dict[str, object]]]:
    ws = new_workspace(tmp_path / "ws")
    process = start_odf(ws, "serve", *LOOPBACK_ANY_PORT)
    try:
        yield ws, process, wait_for_info(ws, process)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_one_daemon_per_workspace_found_by_status(
    served: tuple[Path, subprocess.Popen[str], dict[str, object]],
) -> None:
    ws, process, info = served
    assert info["pid"] == process.pid
    status = ok(ws, "daemon", "status")
    assert f"pid {process.pid}, gRPC {info['address']}, HTTP {info['httpAddress']}" in status
    line = fails(ws, "serve", *LOOPBACK_ANY_PORT)
    assert line == (
        f"error: a daemon already serves this workspace (pid {process.pid}, gRPC"
        f" {info['address']}): use it, or stop it with `odf daemon stop`"
    )
    assert process.poll() is None  # the first one is unaffected


def test_health_is_open_every_other_call_needs_the_token(
    served: tuple[Path, subprocess.Popen[str], dict[str, object]],
) -> None:
    ws, _, info = served
    token_file = ws / ".odf" / "run" / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    with grpc.insecure_channel(str(info["address"])) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        response = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert response.status == health_pb2.HealthCheckResponse.SERVING
        call = channel.unary_unary(LIST_METHOD)
        with pytest.raises(grpc.RpcError) as denied:
            call(b"", timeout=10)
        assert denied.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert denied.value.details() == "a valid daemon token is required"
        with pytest.raises(grpc.RpcError) as wrong:
            call(b"", timeout=10, metadata=(("authorization", "Bearer nope"),))
        assert wrong.value.code() is grpc.StatusCode.UNAUTHENTICATED
        reply = call(b"", timeout=10, metadata=(("authorization", f"Bearer {token}"),))
        assert reply == b""  # an empty workspace: no datasets
    with urllib.request.urlopen(f"http://{info['httpAddress']}/healthz", timeout=10) as r:
        assert (r.status, r.read()) == (200, b"ok\n")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://{info['httpAddress']}/nope", timeout=10)
    assert missing.value.code == 404


def test_stop_and_sigterm_shut_down_cleanly(
    served: tuple[Path, subprocess.Popen[str], dict[str, object]],
) -> None:
    ws, process, _ = served
    assert ok(ws, "daemon", "stop") == f"stopped the daemon (pid {process.pid})\n"
    assert process.wait(timeout=30) == 0
    left = sorted(p.name for p in (ws / ".odf" / "run").iterdir())
    assert left == ["daemon.lock", "daemon.log"]  # the log stays, for `odf daemon logs`
    assert "daemon.stopped" in ok(ws, "daemon", "logs", "-n", "1")
    assert "no daemon serves this workspace" in fails_status(ws)
    assert fails_stop(ws)
    # A new daemon starts on the same workspace; SIGTERM stops it as `odf daemon stop` does.
    again = start_odf(ws, "serve", *LOOPBACK_ANY_PORT)
    try:
        wait_for_info(ws, again)
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 0
    finally:
        if again.poll() is None:
            again.kill()
        again.communicate()
    assert not (ws / ".odf" / "run" / "daemon.json").exists()


def test_a_killed_daemon_leaves_a_stale_file_that_is_ignored(
    served: tuple[Path, subprocess.Popen[str], dict[str, object]],
) -> None:
    ws, process, _ = served
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert (ws / ".odf" / "run" / "daemon.json").exists()  # nobody removed it...
    assert "no daemon serves this workspace" in fails_status(ws)  # ...but nobody holds the lock
    again = start_odf(ws, "serve", *LOOPBACK_ANY_PORT)
    try:
        info = wait_for_info(ws, again)
        deadline = time.monotonic() + START_TIMEOUT_S
        while info["pid"] != again.pid:  # the stale file, until the new one replaces it
            assert time.monotonic() < deadline
            time.sleep(0.05)
            info = json.loads((ws / ".odf" / "run" / "daemon.json").read_text())
        assert str(again.pid) in ok(ws, "daemon", "status")
    finally:
        again.terminate()
        again.communicate(timeout=30)


def test_a_public_address_needs_tls_or_insecure(tmp_path: Path) -> None:
    ws = new_workspace(tmp_path / "ws")
    line = fails(ws, "serve", "--address", "0.0.0.0:0", "--http-address", "127.0.0.1:0")
    assert line == (
        "error: --address: 0.0.0.0 is not a loopback address: serving it needs TLS (--tls-cert"
        " and --tls-key), or --insecure to send the token in clear text"
    )
    assert fails(ws, "serve", "--address", "nowhere") == (
        "error: --address: expected host:port, got 'nowhere'"
    )
    assert not (ws / ".odf" / "run" / "daemon.json").exists()


def fails_status(ws: Path) -> str:
    """``odf daemon status`` when no daemon runs: exit 1; its stderr."""
    result = odf(ws, "daemon", "status")
    assert result.returncode == 1, result
    return result.stderr


def fails_stop(ws: Path) -> bool:
    """Whether ``odf daemon stop`` says, with exit 1, that no daemon runs."""
    result = odf(ws, "daemon", "stop")
    return result.returncode == 1 and "no daemon serves this workspace" in result.stderr
