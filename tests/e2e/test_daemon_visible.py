"""The daemon made visible: its log (``odf daemon logs``) holds a line for every call and every
scheduled run, ``odf daemon status`` says what it is doing, and tokens carry scopes (read,
push, admin) so the credential handed to a publisher is not full control of the daemon.

One daemon serves the module's workspace: a push root ``a`` and a polling root ``p`` on a
one-second schedule (no derivative: no engine needed)."""

from __future__ import annotations

import http.client
import json
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from coordinator.daemon.grpc_generated import coordinator_pb2 as pb
from coordinator.daemon.grpc_generated import coordinator_pb2_grpc as pb_grpc
from tests.e2e.test_daemon_workflow import polled_days
from tests.support.cli import REPO, fails, ok
from tests.support.daemon import Served, serving, wait_until
from tests.support.datasets import root
from tests.support.workspace import add, dataset, new_workspace

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    ws = new_workspace(tmp_path_factory.mktemp("visible") / "ws")
    inbox = ws / "inbox"
    inbox.mkdir()
    add(ws, root("a", ["id BIGINT", "v STRING"]), polled_days(inbox))
    (ws / ".odf" / "config.yaml").write_text("daemon:\n  schedules:\n    p: 1s\n")
    with serving(ws) as served:
        yield served


def _stub(served: Served) -> tuple[grpc.Channel, pb_grpc.CoordinatorStub]:
    channel = grpc.insecure_channel(served.address)
    return channel, pb_grpc.CoordinatorStub(channel)


def _code(call: Callable[[], object]) -> grpc.StatusCode:
    """The status of a call (a streaming one read to its end)."""
    try:
        result = call()
        if isinstance(result, Iterator):
            list(result)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def test_status_shows_schedules_with_last_and_next_runs_queue_and_engines(served: Served) -> None:
    (served.ws / "inbox" / "day-2020-01-01.csv").write_text("city,population\nA,1\nB,2\n")
    wait_until(lambda: dataset(served.ws, "p").state().num_records == 2, what="p polled")
    wait_until(  # each second's run overwrites the last outcome: 1 commit, then 0
        lambda: "Z ok (" in ok(served.ws, "daemon", "status"),
        what="the status shows p's run",
        timeout=30,
    )
    lines = ok(served.ws, "daemon", "status").splitlines()
    assert lines[0].startswith(f"running: pid {served.process.pid}, gRPC {served.address}")
    schedule = next(line for line in lines if line.startswith("  p: "))
    assert "every 1s; last 20" in schedule and "Z ok (" in schedule and "; next 20" in schedule
    assert "queued (0): -" in lines or any(line.startswith("queued (") for line in lines)
    assert "engines: none running" in lines  # roots only: no engine was ever started
    assert any(line.startswith("pulling: ") for line in lines)


def test_the_log_has_a_line_for_every_call_and_scheduled_run(served: Served) -> None:
    ok(served.ws, "list")  # through the daemon
    wait_until(
        lambda: "method=ListDatasets" in ok(served.ws, "daemon", "logs", "-n", "500"),
        what="the call is logged",
        timeout=30,
    )
    text = ok(served.ws, "daemon", "logs", "-n", "500")
    assert "daemon.serving" in text
    call = next(line for line in text.splitlines() if "method=ListDatasets" in line)
    assert "daemon.call" in call and "outcome=ok" in call and call[19] == "Z"
    wait_until(
        lambda: "scheduler.pulled dataset=p" in ok(served.ws, "daemon", "logs", "-n", "500"),
        what="the scheduled pull is logged",
        timeout=30,
    )
    entries = [json.loads(x) for x in ok(served.ws, "daemon", "logs", "--json").splitlines()]
    assert all({"event", "level", "timestamp"} <= e.keys() for e in entries)


def test_logs_follow_prints_new_entries_as_they_come(served: Served) -> None:
    follower = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "daemon", "logs", "-n", "0", "-f"],
        cwd=served.ws,
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    try:
        time.sleep(1.5)  # it has read to the end
        ok(served.ws, "inspect", "schema", "p")
        assert follower.stdout is not None
        deadline = time.monotonic() + 30
        seen = ""
        while "method=DescribeDataset" not in seen:
            assert time.monotonic() < deadline, seen
            seen += follower.stdout.readline()
    finally:
        follower.terminate()
        follower.wait(10)


def test_tokens_have_scopes_and_are_stored_as_hashes(served: Served) -> None:
    ws = served.ws
    read = ok(ws, "daemon", "token", "create", "--scope", "read", "--name", "dashboards").strip()
    push = ok(ws, "daemon", "token", "create", "--scope", "push", "--name", "publisher").strip()
    stored = (ws / ".odf" / "tokens.json").read_text()
    assert read not in stored and push not in stored
    assert stat.S_IMODE((ws / ".odf" / "tokens.json").stat().st_mode) == 0o600
    listing = ok(ws, "daemon", "token", "list")
    assert "read   " in listing and "dashboards" in listing and "publisher" in listing

    channel, stub = _stub(served)
    try:

        def as_(token: str) -> tuple[tuple[str, str]]:
            return (("authorization", f"Bearer {token}"),)

        stub.ListDatasets(pb.ListDatasetsRequest(), metadata=as_(read))
        denied = _code(lambda: stub.Pull(pb.PullRequest(names=["a"]), metadata=as_(read)))
        assert denied == grpc.StatusCode.PERMISSION_DENIED
        ingest = iter([pb.IngestRequest()])
        assert (
            _code(lambda: stub.Ingest(ingest, metadata=as_(read)))
            == grpc.StatusCode.PERMISSION_DENIED
        )
        assert _code(lambda: stub.Status(pb.StatusRequest(), metadata=as_(push))) == (
            grpc.StatusCode.PERMISSION_DENIED
        )
        with pytest.raises(grpc.RpcError) as e:
            stub.ListDatasets(pb.ListDatasetsRequest(), metadata=as_(read[:-2] + "xx"))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        stub.Status(pb.StatusRequest(), metadata=served.metadata)  # the start-up token: admin

        assert _push_handshake(served, read) == 403
        assert _push_handshake(served, "nonsense") == 401
        assert _push_handshake(served, push) == 101

        token_id = read.split("_")[1]
        assert ok(ws, "daemon", "token", "revoke", token_id).startswith(f"revoked token {token_id}")
        with pytest.raises(grpc.RpcError) as e:
            stub.ListDatasets(pb.ListDatasetsRequest(), metadata=as_(read))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        channel.close()
    assert fails(ws, "daemon", "token", "revoke", "nosuchid").startswith("error: no token")


def _push_handshake(served: Served, token: str) -> int:
    """The status of a Smart Transfer Protocol push handshake carrying ``token``."""
    host, port = str(served.info["httpAddress"]).rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(
            "GET",
            "/a/push",
            headers={
                "Authorization": f"Bearer {token}",
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                "Sec-WebSocket-Version": "13",
                "X-Odf-Smtp-Version": "1",
            },
        )
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_client_shown_text_is_escaped_in_the_log(served: Served, tmp_path: Path) -> None:
    fails(served.ws, "tail", "no\x1b[31mred")
    wait_until(
        lambda: "no\\x1b[31mred" in ok(served.ws, "daemon", "logs", "-n", "500"),
        what="the refused call is logged, escaped",
        timeout=30,
    )
    assert "\x1b[31m" not in ok(served.ws, "daemon", "logs", "-n", "500")
