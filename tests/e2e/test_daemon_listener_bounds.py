"""A real ``odf serve`` against a hostile HTTP client (``tests.support.hostile_client``): slow,
idle, oversized and malformed requests and WebSockets are each refused or closed within the
configured bound (small here: seconds), the daemon answers ``/healthz`` meanwhile, its thread
count returns to where it was, and nothing in the workspace changes. The connection caps
refuse at once what is over them."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.workspace import Workspace
from tests.support.daemon import Served, serving
from tests.support.hostile_client import HostileClient, Outcome, thread_count, ws_frame
from tests.unit.sharing.test_transfer import source_dataset

pytestmark = pytest.mark.e2e

HEADER_S, BODY_S, IDLE_S = 2, 2, 3
PER_CLIENT, TOTAL = 4, 10
MARGIN_S = 5.0
"""Scheduling slack on a loaded machine: a bound is checked as bound + this."""
CONFIG = f"""daemon:
  httpHeaderTimeout: {HEADER_S}
  httpBodyTimeout: {BODY_S}
  httpIdleTimeout: {IDLE_S}
  httpMaxConnections: {TOTAL}
  httpMaxConnectionsPerClient: {PER_CLIENT}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    ws = Workspace.init(tmp_path_factory.mktemp("listener") / "ws")
    source_dataset(ws.datasets_dir / "cities", 1)
    (ws.odf_dir / "config.yaml").write_text(CONFIG)
    with serving(ws.root) as served:
        healthy(served)
        yield served


@pytest.fixture(scope="module")
def baseline(served: Served) -> int:
    return thread_count(served.process.pid)


@pytest.fixture
def client(served: Served, baseline: int) -> Iterator[HostileClient]:
    """The attacker; afterwards the daemon must be healthy, back to its threads, and the
    workspace as it was."""
    before = tree(served.ws)
    host, port = str(served.info["httpAddress"]).rsplit(":", 1)
    yield HostileClient(host, int(port))
    healthy(served)
    deadline = time.monotonic() + 30
    while thread_count(served.process.pid) > baseline:
        assert time.monotonic() < deadline, "the daemon's threads did not return to baseline"
        time.sleep(0.1)
    assert tree(served.ws) == before


def healthy(served: Served) -> None:
    url = f"http://{served.info['httpAddress']}/healthz"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file of the workspace but the daemon's own (run dir, log): size and mtime."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            rel = str(path.relative_to(root))
            if rel.startswith(".odf/run") or rel == "serve.log":
                continue
            st = path.stat()
            found[rel] = (st.st_size, st.st_mtime_ns)
    return found


def cut_within(outcome: Outcome, bound: float) -> None:
    assert outcome.closed, f"still open after {outcome.seconds:.0f} s: {outcome.answer[:200]!r}"
    assert outcome.seconds < bound + MARGIN_S, outcome


def test_slowloris_headers_are_cut_at_the_header_deadline(
    served: Served, client: HostileClient
) -> None:
    # a byte a second: each read is well within the idle timeout, only the total deadline cuts
    outcome = client.slowloris(interval=1.0)
    cut_within(outcome, HEADER_S)
    assert outcome.seconds >= HEADER_S - 0.5
    assert served.metric('odf_http_refused_total{why="header"}') >= 1


def test_an_idle_connection_is_cut_at_the_header_deadline(client: HostileClient) -> None:
    cut_within(client.idle(), HEADER_S)


@pytest.mark.parametrize("attack", ["huge_headers", "many_headers"])
def test_oversized_headers_are_refused(client: HostileClient, attack: str) -> None:
    outcome = getattr(client, attack)()
    cut_within(outcome, HEADER_S)
    assert outcome.status in (431, None), outcome.answer[:200]


def test_a_garbage_request_line_is_refused(client: HostileClient) -> None:
    outcome = client.garbage()
    cut_within(outcome, HEADER_S)
    # no HTTP version to answer in: the standard library answers as HTTP/0.9 (a bare body)
    assert b"Error code: 400" in outcome.answer


def test_a_body_that_never_comes_is_answered_without_waiting(client: HostileClient) -> None:
    # an upload URL of no session: answered at once, the announced body never read
    key = "k" * 43
    outcome = client.slow_body(f"/cities/push/{key}/data/f1220abc", 1 << 30)
    cut_within(outcome, BODY_S)
    assert outcome.status == 404


def test_an_idle_pull_websocket_is_closed(client: HostileClient) -> None:
    outcome = client.ws_idle("/cities/pull")
    cut_within(outcome, HEADER_S + IDLE_S)
    assert outcome.seconds >= IDLE_S - 0.5


def test_an_idle_push_websocket_is_closed(served: Served, client: HostileClient) -> None:
    outcome = client.ws_idle("/cities/push", f"Authorization: Bearer {served.token}\r\n")
    cut_within(outcome, HEADER_S + IDLE_S)


def test_a_dripped_websocket_frame_is_cut_at_the_idle_deadline(client: HostileClient) -> None:
    # bytes keep coming (every 0.5 s) but never a whole frame
    cut_within(client.ws_drip("/cities/pull", interval=0.5), HEADER_S + IDLE_S)


def test_a_huge_websocket_message_is_refused(client: HostileClient) -> None:
    # announces 1 GiB: refused on its header (close 1009), nothing of it read
    outcome = client.ws_send("/cities/pull", ws_frame(b"{}", length=1 << 30))
    cut_within(outcome, HEADER_S)
    assert b"\x03\xf1" in outcome.answer  # close code 1009: message too big


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (ws_frame(b"{}", masked=False), b"\x03\xea"),  # a client frame must be masked: 1002
        (ws_frame(b"\xff\xfe", opcode=1), b'"BadRequest"'),  # not UTF-8: an error, a close
        (ws_frame(b"x", opcode=0x3), b"\x03\xea"),  # a reserved opcode: 1002
    ],
    ids=["unmasked", "not-utf8", "reserved-opcode"],  # stable: the masks are random
)
def test_bad_websocket_frames_close_the_connection(
    client: HostileClient, frame: bytes, code: bytes
) -> None:
    outcome = client.ws_send("/cities/pull", frame)
    # the server's close is not answered: the connection ends at the idle deadline at most
    cut_within(outcome, HEADER_S + IDLE_S)
    assert code in outcome.answer


def test_connections_over_the_per_client_cap_are_refused_at_once(
    served: Served, client: HostileClient
) -> None:
    attacker = HostileClient(client.host, client.port, source="127.0.0.3")
    held = [attacker.connect() for _ in range(PER_CLIENT)]
    try:
        time.sleep(0.5)  # all accepted
        refused = attacker.idle()
        cut_within(refused, 0)
        assert refused.seconds < HEADER_S  # refused, not cut at the deadline
        assert refused.status in (503, None)
        healthy(served)  # another client still served
    finally:
        for sock in held:
            sock.close()
    assert served.metric('odf_http_refused_total{why="cap"}') >= 1


def test_connections_over_the_total_cap_are_refused_at_once(
    served: Served, client: HostileClient
) -> None:
    held = []
    try:
        for i in range(TOTAL):
            source = f"127.0.0.{10 + i // PER_CLIENT}"
            held.append(HostileClient(client.host, client.port, source=source).connect())
        time.sleep(0.5)
        refused = HostileClient(client.host, client.port, source="127.0.0.20").idle()
        assert refused.closed and refused.seconds < HEADER_S
    finally:
        for sock in held:
            sock.close()
