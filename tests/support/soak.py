"""A load and soak run of ``odf serve`` on loopback, shared by ``bench/bench_soak.py`` (figures)
and ``tests/e2e/test_daemon_soak.py`` (invariants only).

One real daemon serves a workspace with a push root ``a`` and a derivative ``b`` over it (the
scheduler follows the lineage). For ``seconds``, concurrent clients each loop over one kind of
work: ingest into ``a`` (gRPC, as ``odf ingest`` through a daemon), SQL through the warm engine,
a simple pull of ``a`` over HTTP into the client's own workspace, a smart push of the client's
own dataset into the daemon, and describing datasets; beside them, slow clients (headers one
byte at a time), idle TCP connections and idle smart-pull WebSockets. Every acknowledged ingest
and push is recorded. Then the slow and idle clients leave, the daemon's threads and memory are
read against their baseline (after a warm-up), the daemon is killed with SIGKILL and started
again, and the run checks that every acknowledged record and pushed head is there and that
every dataset verifies.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.app import IngestFile
from coordinator.daemon.client import DaemonClient
from coordinator.daemon.rundir import RunDir
from coordinator.dataset import Dataset
from coordinator.sharing.transfer import Options
from coordinator.workspace import Workspace
from tests.support.daemon import Served, start, stop
from tests.support.datasets import derivative, root
from tests.support.workspace import add, new_workspace

KINDS = ("ingest", "sql", "pull", "push", "describe")
POOL_THREADS = 16
"""Worker threads the daemon's gRPC server keeps once a load has started them
(``coordinator.daemon.server._WORKERS``): a bounded pool, not a leak."""


@dataclass(frozen=True)
class Mix:
    """How many clients of each kind, and of the hostile ones."""

    ingest: int = 6
    sql: int = 4
    pull: int = 4
    push: int = 4
    describe: int = 2
    slow: int = 3
    idle: int = 3
    idle_ws: int = 2

    @property
    def clients(self) -> int:
        return self.ingest + self.sql + self.pull + self.push + self.describe


@dataclass
class Report:
    seconds: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    acknowledged_records: int = 0
    pushed_heads: dict[str, str] = field(default_factory=dict)
    baseline: tuple[int, int] = (0, 0)
    """(threads, RSS in KiB) after the warm-up."""
    loaded: tuple[int, int] = (0, 0)
    """(threads, RSS in KiB) at the peak of the load."""
    after: tuple[int, int] = (0, 0)
    """(threads, RSS in KiB) once the clients left."""
    records_after_restart: int = 0
    verified: dict[str, bool] = field(default_factory=dict)
    restart_seconds: float = 0.0

    def throughput(self, kind: str) -> float:
        return len(self.latencies[kind]) / self.seconds

    def percentile(self, kind: str, p: float) -> float:
        values = sorted(self.latencies[kind])
        if not values:
            return float("nan")
        if len(values) == 1:
            return values[0]
        return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def process_usage(pid: int) -> tuple[int, int]:
    """(threads, RSS in KiB) of a process, from ``/proc``."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    return int(fields["Threads"][0]), int(fields["VmRSS"][0])


def prepare(base: Path) -> Path:
    ws = new_workspace(base / "served")
    add(
        ws,
        root("a", ["id BIGINT", "v STRING"]),
        derivative("b", "SELECT event_time, id, upper(v) AS v FROM a", ["a"]),
    )
    return ws


def run(base: Path, seconds: float, mix: Mix = Mix()) -> Report:
    ws = prepare(base)
    served = start(ws)
    report = Report(seconds)
    try:
        client = _client(ws)
        _ingest_once(client, base / "warm.csv", 0)  # warm-up: the engine, every path once
        client.query("SELECT count(*) AS n FROM a")
        report.acknowledged_records += 1
        report.baseline = process_usage(served.process.pid)
        _load(served, base, seconds, mix, report)
        report.after = _settled(served.process.pid, report.baseline[0])
        client.close()
    finally:
        served.process.kill()  # SIGKILL: what was acknowledged must survive it
        served.process.wait()
    started = time.monotonic()
    served = start(ws)
    report.restart_seconds = time.monotonic() - started
    try:
        client = _client(ws)
        report.records_after_restart = _records(ws, "a")
        names = [s.name for s in client.list_datasets()]
        for r in client.verify(names):
            report.verified[r.dataset] = r.ok
        client.close()
    finally:
        stop(served)
    for name, head in report.pushed_heads.items():
        found = str(Dataset(ws / ".odf" / "datasets" / name).head())
        if found != head:
            report.errors.append(f"pushed {name}: head {found}, acknowledged {head}")
    return report


def _client(ws: Path) -> DaemonClient:
    run_dir = RunDir(ws / ".odf")
    info, token = run_dir.read_info(), run_dir.read_token()
    assert info is not None and token is not None
    return DaemonClient(info, token)


def _ingest_once(client: DaemonClient, path: Path, first_id: int, rows: int = 1) -> int:
    path.write_text("id,v\n" + "".join(f"{first_id + i},v{first_id + i}\n" for i in range(rows)))
    results = list(client.ingest("a", [IngestFile(path, path.name)]))
    return sum(r.num_records for r in results)


def _records(ws: Path, name: str) -> int:
    state = Dataset(ws / ".odf" / "datasets" / name).state()
    return 0 if state.last_offset is None else state.last_offset + 1


def _load(served: Served, base: Path, seconds: float, mix: Mix, report: Report) -> None:
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    http = str(served.info["httpAddress"])
    token = served.token

    def loop(kind: str, index: int, work: Callable[[int], None]) -> None:
        n = 0
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                work(n)
            except Exception as e:  # every failure is reported
                with lock:
                    report.errors.append(f"{kind} {index}: {type(e).__name__}: {e}"[:300])
            else:
                with lock:
                    report.latencies[kind].append(time.monotonic() - started)
            n += 1

    def ingest(index: int) -> Callable[[int], None]:
        client = _client(served.ws)
        path = base / f"ingest-{index}.csv"

        def work(n: int) -> None:
            records = _ingest_once(client, path, 1_000_000 * (index + 1) + n * 10, rows=10)
            with lock:
                report.acknowledged_records += records

        return work

    def sql(index: int) -> Callable[[int], None]:
        client = _client(served.ws)

        def work(n: int) -> None:
            client.query("SELECT count(*) AS n, max(id) AS m FROM a")

        return work

    def describe(index: int) -> Callable[[int], None]:
        client = _client(served.ws)

        def work(n: int) -> None:
            client.list_datasets()

        return work

    def pull(index: int) -> Callable[[int], None]:
        from coordinator.app.sharing import Sharing

        sharing = Sharing(Workspace.init(base / f"pull-{index}"))

        def work(n: int) -> None:
            sharing.pull_remote(f"http://{http}/a", Options(parallel=2))

        return work

    def push(index: int) -> Callable[[int], None]:
        from coordinator.app.application import Application
        from coordinator.app.sharing import Sharing

        local = new_workspace(base / f"push-{index}")
        name = f"p{index}"
        add(local, root(name, ["id BIGINT"]))
        app = Application.open(local)
        sharing = Sharing(Workspace(local))
        csv = local / "rows.csv"

        def work(n: int) -> None:
            csv.write_text(f"id\n{n}\n")
            list(app.ingest(name, [IngestFile(csv, csv.name)]))
            done = sharing.push(
                name, Options(parallel=2), to=f"odf+http://{http}/{name}", token=token
            )
            with lock:
                report.pushed_heads[name] = str(done.result.new_head)

        return work

    makers = {"ingest": ingest, "sql": sql, "pull": pull, "push": push, "describe": describe}
    threads = [
        threading.Thread(target=loop, args=(kind, i, makers[kind](i)), daemon=True)
        for kind in KINDS
        for i in range(getattr(mix, kind))
    ]
    hostile = _hostile(http, mix)
    for t in threads:
        t.start()
    peak = report.baseline
    while any(t.is_alive() for t in threads):
        usage = process_usage(served.process.pid)
        peak = (max(peak[0], usage[0]), max(peak[1], usage[1]))
        time.sleep(0.5)
    report.loaded = peak
    for close in hostile:
        close()


def _hostile(http: str, mix: Mix) -> list[Callable[[], None]]:
    """Slow and idle clients that stay until closed; their closers."""
    host, port = http.rsplit(":", 1)
    closers: list[Callable[[], None]] = []
    stop_event = threading.Event()

    def slow() -> None:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 10_000:
                if stop_event.wait(1.0):
                    return
                try:
                    s.sendall(bytes([byte]))
                except OSError:
                    return  # the daemon cut it off: expected

    for _ in range(mix.slow):
        threading.Thread(target=slow, daemon=True).start()
    for _ in range(mix.idle):
        idle = socket.create_connection((host, int(port)), timeout=5)
        closers.append(idle.close)
    sockets = ExitStack()  # websockets 17 warns when closing a connection never entered
    for _ in range(mix.idle_ws):
        from websockets.sync.client import connect

        sockets.enter_context(connect(f"ws://{http}/a/pull", open_timeout=10))
    closers.append(sockets.close)
    closers.append(stop_event.set)
    return closers


def _settled(pid: int, baseline_threads: int, timeout: float = 60.0) -> tuple[int, int]:
    """The daemon's (threads, RSS) once its threads are back near the baseline (or at the
    timeout: the caller compares)."""
    deadline = time.monotonic() + timeout
    usage = process_usage(pid)
    while usage[0] > baseline_threads + POOL_THREADS and time.monotonic() < deadline:
        time.sleep(0.5)
        usage = process_usage(pid)
    return usage
