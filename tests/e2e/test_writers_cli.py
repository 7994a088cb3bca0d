"""Writers take their turn (issue 34): two ``odf`` processes writing one dataset, or a command
beside ``odf serve``, both succeed; the one that waits says for whom on stderr; a wait longer
than ``--wait-timeout`` fails with one line naming the holder.

The dataset being written is a root pulled from a real local HTTP server that answers the
first request only when the test lets it: the first writer is then held inside its
transaction for as long as the test needs."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.support import daemon
from tests.support.cli import odf, start_odf
from tests.support.datasets import root
from tests.support.http_serving import serving
from tests.support.workspace import add, dataset, ingest, new_workspace

pytestmark = pytest.mark.e2e

POLLED = """\
kind: DatasetSnapshot
version: 1
content:
  name: remote
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: http://127.0.0.1:{port}/data.csv
      read:
        kind: Csv
        header: true
        schema: ["city STRING", "population BIGINT"]
      merge:
        kind: Append
"""
BODY = b"city,population\nA,1\nB,2\n"
WAIT_S = 60.0


@dataclass
class SlowSource:
    """What the HTTP server has seen, and the gate its answers wait for (``hold_next``: a new
    closed gate, for the writer the test wants to keep inside its transaction next)."""

    requests: list[str] = field(default_factory=list)
    asked: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def hold_next(self) -> None:
        self.asked.clear()
        self.release = threading.Event()


def handler(source: SlowSource) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            source.requests.append(self.headers.get("If-None-Match") or "")
            gate = source.release
            source.asked.set()
            gate.wait(WAIT_S)
            if self.headers.get("If-None-Match") == '"v1"':
                self.send_response(304)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", '"v1"')
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def slow() -> Iterator[tuple[SlowSource, int]]:
    source = SlowSource()
    try:
        with serving(handler(source)) as port:
            yield source, port
    finally:
        source.release.set()


def polled_workspace(tmp: Path, port: int) -> Path:
    ws = new_workspace(tmp / "ws")
    add(ws, POLLED.format(port=port))
    return ws


def stderr_line(proc: subprocess.Popen[str], starting: str) -> str:
    """Read ``proc``'s stderr until a line starts with ``starting``; that line."""
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(starting):
            return line.rstrip("\n")
    raise AssertionError(f"no stderr line starting with {starting!r}: {''.join(seen)}")


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def cities(ws: Path) -> list[tuple[str, int]]:
    from coordinator.query.tail import tail_records

    table = tail_records(dataset(ws, "remote"), 100)
    return sorted(
        zip(table.column("city").to_pylist(), table.column("population").to_pylist(), strict=True)
    )


def test_two_one_shot_pulls_take_turns(tmp_path: Path, slow: tuple[SlowSource, int]) -> None:
    source, port = slow
    ws = polled_workspace(tmp_path, port)
    first = start_odf(ws, "-q", "pull", "--all")
    assert source.asked.wait(WAIT_S), "the first pull never fetched"
    second = start_odf(ws, "-q", "pull", "--all")
    waiting = stderr_line(second, "waiting for ")
    assert waiting == f"waiting for another odf process (pid {first.pid}) writing remote"
    source.release.set()
    code, out, err = finish(first)
    assert code == 0, err
    assert out.startswith("remote: 2 records"), out
    code, out, err = finish(second)
    assert code == 0, err
    assert "modified concurrently" not in err
    assert out.startswith("remote: up to date"), out
    assert source.requests == ["", '"v1"']  # the second pull asked from where the first left
    assert cities(ws) == [("A", 1), ("B", 2)]


def test_a_command_beside_the_daemon_waits_for_its_pull(
    tmp_path: Path, slow: tuple[SlowSource, int]
) -> None:
    source, port = slow
    ws = polled_workspace(tmp_path, port)
    with daemon.serving(ws) as served:
        routed = start_odf(ws, "-q", "pull", "remote")  # run by the daemon
        assert source.asked.wait(WAIT_S), "the daemon's pull never fetched"
        local = start_odf(ws, "-q", "pull", "--all", "--no-daemon")
        assert stderr_line(local, "waiting for ") == "waiting for the daemon's pull of remote"
        source.release.set()
        code, out, err = finish(routed)
        assert code == 0, err
        assert out.startswith("remote: 2 records"), out
        code, out, err = finish(local)
        assert code == 0, err
        assert out.startswith("remote: up to date"), out
        assert served.process.poll() is None
    assert cities(ws) == [("A", 1), ("B", 2)]


def test_the_daemon_tells_a_routed_command_what_it_waits_for(
    tmp_path: Path, slow: tuple[SlowSource, int]
) -> None:
    """A command run by the daemon waits for a command writing here, then for another call of
    the daemon; each time its own stderr says for whom."""
    source, port = slow
    ws = polled_workspace(tmp_path, port)
    with daemon.serving(ws) as served:
        local = start_odf(ws, "-q", "pull", "remote", "--no-daemon")
        assert source.asked.wait(WAIT_S), "the local pull never fetched"
        routed = start_odf(ws, "-q", "pull", "remote")
        waiting = stderr_line(routed, "waiting for ")
        assert waiting == f"waiting for another odf process (pid {local.pid}) writing remote"
        source.release.set()
        assert finish(local)[0] == 0
        code, out, err = finish(routed)
        assert code == 0, err
        assert out.startswith("remote: up to date"), out

        source.hold_next()
        first = start_odf(ws, "-q", "pull", "remote")
        assert source.asked.wait(WAIT_S), "the daemon's pull never fetched"
        second = start_odf(ws, "-q", "pull", "remote")
        assert stderr_line(second, "waiting for ") == "waiting for the daemon's pull of remote"
        source.release.set()
        for proc in (first, second):
            code, out, err = finish(proc)
            assert code == 0, err
        assert served.process.poll() is None
    assert cities(ws) == [("A", 1), ("B", 2)]


def test_a_wait_longer_than_the_timeout_fails_naming_the_holder(
    tmp_path: Path, slow: tuple[SlowSource, int]
) -> None:
    source, port = slow
    ws = polled_workspace(tmp_path, port)
    first = start_odf(ws, "-q", "pull", "remote")
    assert source.asked.wait(WAIT_S), "the first pull never fetched"
    late = odf(ws, "-q", "pull", "remote", "--wait-timeout", "1")
    source.release.set()
    assert finish(first)[0] == 0
    assert late.returncode == 1
    assert late.stderr.splitlines() == [
        f"waiting for another odf process (pid {first.pid}) writing remote",
        f"error: gave up waiting for another odf process (pid {first.pid}) writing remote"
        " after 1s; try again later, or wait longer (--wait-timeout SECONDS, or"
        " writers.waitTimeout in .odf/config.yaml)",
    ]
    assert cities(ws) == [("A", 1), ("B", 2)]


def test_concurrent_ingests_into_one_dataset_all_commit(tmp_path: Path) -> None:
    ws = new_workspace(tmp_path / "ws")
    add(ws, root("readings", ["sensor STRING", "value BIGINT"]))
    ingest(ws, "readings", "sensor,value\ns0,0\n")
    procs = []
    for i in range(1, 4):
        (ws / f"r{i}.csv").write_text(f"sensor,value\ns{i},{i}\n")
        procs.append(start_odf(ws, "-q", "ingest", "readings", f"r{i}.csv"))
    for proc in procs:
        code, _, err = finish(proc)
        assert code == 0, err
    table = dataset(ws, "readings")
    from coordinator.query.tail import tail_records

    got = tail_records(table, 10)
    assert sorted(got.column("sensor").to_pylist()) == ["s0", "s1", "s2", "s3"]
    assert sorted(got.column("offset").to_pylist()) == [0, 1, 2, 3]
