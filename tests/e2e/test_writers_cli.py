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
from contextlib import nullcontext
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from coordinator.query.tail import tail_records
from tests.support import daemon
from tests.support.cli import odf, ok, start_odf
from tests.support.datasets import derivative, root, snapshot
from tests.support.http_serving import serving
from tests.support.workspace import add, dataset, ingest, new_workspace

pytestmark = pytest.mark.e2e


def remote(port: int) -> str:
    """A root pulling a CSV file from the test's HTTP server."""
    source = {
        "kind": "SetPollingSource",
        "fetch": {"kind": "Url", "url": f"http://127.0.0.1:{port}/data.csv"},
        "read": {"kind": "Csv", "header": True, "schema": CITY_COLUMNS},
        "merge": {"kind": "Append"},
    }
    return snapshot("remote", "Root", [source])


CITY_COLUMNS = ["city STRING", "population BIGINT"]
BODY = b"city,population\nA,1\nB,2\n"
WAIT_S = 60.0
BY_COMMAND = "waiting for another odf process (pid {pid}) writing remote"
BY_DAEMON = "waiting for the daemon's pull of remote"


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
def polled(tmp_path: Path) -> Iterator[tuple[SlowSource, Path]]:
    """The slow source, and a workspace with the root ``remote`` pulling from it."""
    source = SlowSource()
    try:
        with serving(handler(source)) as port:
            ws = new_workspace(tmp_path / "ws")
            add(ws, remote(port))
            yield source, ws
    finally:
        source.release.set()


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
    table = tail_records(dataset(ws, "remote"), 100)
    return sorted(
        zip(table.column("city").to_pylist(), table.column("population").to_pylist(), strict=True)
    )


def take_turns(
    source: SlowSource, ws: Path, first: tuple[str, ...], second: tuple[str, ...], waiting: str
) -> tuple[str, str]:
    """``odf FIRST`` held inside its fetch while ``odf SECOND`` starts: the second says
    ``waiting`` (``{pid}``: the first's) on stderr; both succeed once the fetch is answered.
    Their outputs."""
    one = start_odf(ws, "-q", *first)
    assert source.asked.wait(WAIT_S), f"odf {' '.join(first)} never fetched"
    two = start_odf(ws, "-q", *second)
    assert stderr_line(two, "waiting for ") == waiting.format(pid=one.pid)
    source.release.set()
    outputs = []
    for proc in (one, two):
        code, out, err = finish(proc)
        assert code == 0, err
        assert "modified concurrently" not in err
        outputs.append(out)
    return outputs[0], outputs[1]


def test_two_one_shot_pulls_take_turns(polled: tuple[SlowSource, Path]) -> None:
    source, ws = polled
    first, second = take_turns(source, ws, ("pull", "--all"), ("pull", "--all"), BY_COMMAND)
    assert first.startswith("remote: 2 records"), first
    assert second.startswith("remote: up to date"), second
    assert source.requests == ["", '"v1"']  # the second pull asked from where the first left
    assert cities(ws) == [("A", 1), ("B", 2)]


def test_a_command_beside_the_daemon_waits_for_its_pull(polled: tuple[SlowSource, Path]) -> None:
    source, ws = polled
    with daemon.serving(ws) as served:
        routed, local = take_turns(
            source, ws, ("pull", "remote"), ("pull", "--all", "--no-daemon"), BY_DAEMON
        )
        assert routed.startswith("remote: 2 records"), routed
        assert local.startswith("remote: up to date"), local
        assert served.process.poll() is None
    assert cities(ws) == [("A", 1), ("B", 2)]


def test_the_daemon_tells_a_routed_command_what_it_waits_for(
    polled: tuple[SlowSource, Path],
) -> None:
    """A command run by the daemon waits for a command writing here, then for another call of
    the daemon; each time its own stderr says for whom."""
    source, ws = polled
    with daemon.serving(ws) as served:
        _, routed = take_turns(
            source, ws, ("pull", "remote", "--no-daemon"), ("pull", "remote"), BY_COMMAND
        )
        assert routed.startswith("remote: up to date"), routed
        source.hold_next()
        take_turns(source, ws, ("pull", "remote"), ("pull", "remote"), BY_DAEMON)
        assert served.process.poll() is None
    assert cities(ws) == [("A", 1), ("B", 2)]


@pytest.mark.parametrize("routed", [False, True], ids=["in-process", "through-the-daemon"])
def test_a_wait_longer_than_the_timeout_fails_naming_the_holder(
    polled: tuple[SlowSource, Path], routed: bool
) -> None:
    """Past ``--wait-timeout``, the pull fails in one line naming the holder, whether it runs
    here or in the daemon (which waits as long as the command asked)."""
    source, ws = polled
    with daemon.serving(ws) if routed else nullcontext():
        first = start_odf(ws, "-q", "pull", "remote", "--no-daemon")
        assert source.asked.wait(WAIT_S), "the first pull never fetched"
        late = odf(ws, "-q", "pull", "remote", "--wait-timeout", "1")
        source.release.set()
        assert finish(first)[0] == 0
    assert late.returncode == 1
    holder = f"another odf process (pid {first.pid}) writing remote"
    assert late.stderr.splitlines() == [
        f"waiting for {holder}",
        f"error: gave up waiting for {holder} after 1s; try again later, or wait longer"
        " (--wait-timeout SECONDS, or writers.waitTimeout in .odf/config.yaml)",
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
    got = tail_records(table, 10)
    assert sorted(got.column("sensor").to_pylist()) == ["s0", "s1", "s2", "s3"]
    assert sorted(got.column("offset").to_pylist()) == [0, 1, 2, 3]


def test_two_pulls_of_a_derivative_run_its_transaction_once(tmp_path: Path) -> None:
    """The second pull waits while the first starts the engine and commits, then finds the
    derivative up to date: one engine started, one transaction."""
    ws = new_workspace(tmp_path / "ws")
    add(
        ws,
        root("readings", ["sensor STRING", "value BIGINT"]),
        derivative(
            "high", "SELECT event_time, sensor, value FROM readings WHERE value > 1", ["readings"]
        ),
    )
    ingest(ws, "readings", "sensor,value\ns1,1\ns2,2\ns3,3\n")
    lock = ws / ".odf" / "locks" / f"{dataset(ws, 'high').id.to_multibase()}.lock"
    first = start_odf(ws, "-q", "pull", "high")
    deadline = time.monotonic() + WAIT_S
    while f'"pid": {first.pid},' not in (lock.read_text() if lock.exists() else ""):
        assert first.poll() is None and time.monotonic() < deadline, "the pull took no lock"
        time.sleep(0.02)
    second = start_odf(ws, "-q", "pull", "high")
    waiting = stderr_line(second, "waiting for ")
    assert waiting == f"waiting for another odf process (pid {first.pid}) writing high"
    code, out, err = finish(first)
    assert code == 0, err
    assert out.startswith("high: 2 records"), out
    code, out, err = finish(second)
    assert code == 0, err
    assert out == "high: up to date\n"
    assert sorted(tail_records(dataset(ws, "high"), 10).column("sensor").to_pylist()) == [
        "s2",
        "s3",
    ]


def test_chain_edits_are_routed_through_the_daemon(tmp_path: Path) -> None:
    """set-watermark, reset, compact and rename run in the daemon serving the workspace, with
    the output of the command run here."""
    ws = new_workspace(tmp_path / "ws")
    add(ws, root("readings", ["event_time TIMESTAMP", "value BIGINT"], event_time="event_time"))
    for day in (1, 2):
        ingest(ws, "readings", f"event_time,value\n2020-01-0{day}T00:00:00Z,{day}\n")
    ingested = dataset(ws, "readings").head()
    with daemon.serving(ws) as served:
        out = ok(ws, "set-watermark", "readings", "2020-01-03T00:00:00Z")
        assert out.startswith("readings: watermark 2020-01-03T00:00:00Z (head f1620"), out
        assert dataset(ws, "readings").head() != ingested
        ok(ws, "reset", "readings", str(ingested))
        assert dataset(ws, "readings").head() == ingested
        out = ok(ws, "compact", "readings", "--hard")
        assert out.startswith("readings: 2 data files in 6 blocks -> 1 in 5 (head f1620"), out
        assert ok(ws, "rename", "readings", "sensors") == "renamed readings to sensors\n"
        for call in ("set_watermark", "compact", "reset", "rename"):
            assert served.metric(f'odf_calls_total{{call="{call}",outcome="ok"}}') == 1, call
    assert sorted(tail_records(dataset(ws, "sensors"), 10).column("value").to_pylist()) == [1, 2]
