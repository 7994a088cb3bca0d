"""The daemon at work, as a real ``odf serve`` process: the CLI as its thin client, a plain gRPC
client, pipelines kept up to date with no manual pull, and recovery after ``kill -9``.

One daemon serves the module's workspace (a push root ``a``, its derivative ``b``, a polling
root ``p`` on a one-second schedule); the kill test runs its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pyarrow as pa
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash
from coordinator.daemon.grpc_generated import coordinator_pb2 as pb
from coordinator.daemon.grpc_generated import coordinator_pb2_grpc as pb_grpc
from tests.support.cli import REPO, imported_by, odf, ok
from tests.support.daemon import Served, serving, start, stop, wait_until
from tests.support.datasets import DAY_FILE, derivative, polled, root
from tests.support.workspace import add, dataset, new_workspace

pytestmark = pytest.mark.e2e

UPPER = "SELECT event_time, id, upper(v) AS v FROM a"
CITY_COLUMNS = ["city STRING", "population BIGINT"]


def polled_days(inbox: Path) -> str:
    """``p``: polls the inbox's ``day-YYYY-MM-DD.csv`` files, the date in a name its event time."""
    return polled("p", f"{inbox}/day-*.csv", CITY_COLUMNS, event_time_pattern=DAY_FILE)


def records(ws: Path, name: str) -> int:
    return dataset(ws, name).state().num_records


def new_pipeline(ws: Path, *, schedule: bool = False) -> Path:
    new_workspace(ws)
    inbox = ws / "inbox"
    inbox.mkdir()
    add(
        ws,
        root("a", ["id BIGINT", "v STRING"]),
        derivative("b", UPPER, ["a"]),
        polled_days(inbox),
    )
    if schedule:
        (ws / ".odf" / "config.yaml").write_text("daemon:\n  schedules:\n    p: 1s\n")
    return ws


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    ws = new_pipeline(tmp_path_factory.mktemp("daemon") / "ws", schedule=True)
    with serving(ws) as served:
        yield served


def test_an_ingest_flows_to_its_derivative_with_no_pull(served: Served) -> None:
    ws = served.ws
    (ws / "one.csv").write_text("id,v\n1,x\n2,y\n")
    line = ok(ws, "ingest", "a", "one.csv")
    assert line.startswith("a: 2 records from one.csv (head f1620")
    assert served.metric('odf_calls_total{call="ingest",outcome="ok"}') >= 1  # via the daemon
    wait_until(lambda: records(ws, "b") == 2, what="b has a's 2 records")
    table = ok(ws, "tail", "b", "-o", "csv")
    assert sorted(r.split(",")[-1] for r in table.splitlines()[1:]) == ["X", "Y"]
    assert served.metric("odf_transactions_total") >= 1
    assert served.metric('odf_calls_total{call="scheduled",outcome="ok"}') >= 1
    assert served.metric("odf_engine_starts_total") == 1


def test_a_polling_source_on_a_schedule_picks_up_a_new_file(served: Served) -> None:
    (served.ws / "inbox" / "day-2020-01-01.csv").write_text("city,population\nA,1\nB,2\n")
    wait_until(lambda: records(served.ws, "p") == 2, what="p polled its new file", timeout=60)
    (served.ws / "inbox" / "day-2020-01-02.csv").write_text("city,population\nC,3\n")
    wait_until(lambda: records(served.ws, "p") == 3, what="p polled a second file", timeout=60)


TYPED = (
    "SELECT id, v, CAST(id AS DECIMAL(10, 2)) AS d, id / 3 AS f, DATE '2026-01-02' AS day,"
    " TIMESTAMP '2026-01-01 10:00:00.123456' AS t, array(id, id) AS arr, map('k', v) AS m,"
    " named_struct('a', id, 'b', v) AS s, X'00ff' AS bin, NULL AS nothing,"
    " 'tab\there' AS text FROM b ORDER BY id"
)
"""A query with values of most types, shown the same through the daemon and in process."""
COMPARED = [
    ("list", "-o", "csv"),
    ("log", "b"),
    ("log", "a", "-o", "yaml"),
    ("tail", "a", "-n", "5"),
    ("inspect", "schema", "b"),
    ("sql", "--command", "SELECT id, v FROM b ORDER BY id"),
    *(("sql", "-c", TYPED, "-o", fmt) for fmt in ("table", "json")),  # text cells, values
    ("sql", "-c", "SELECT id, id, v FROM b ORDER BY id", "-n", "1"),  # cut; a name twice
    ("sql", "-c", TYPED, "--limit", "0"),  # every row: an Arrow stream
    ("tail", "nope"),
    ("sql", "--command", "SELECT * FROM nowhere"),
    ("set-transform", "b", "--query", UPPER),
]


def test_the_thin_client_prints_what_the_command_prints_in_process(served: Served) -> None:
    ws = served.ws
    wait_until(lambda: records(ws, "b") >= 2, what="b has data")
    for args in COMPARED:
        through = odf(ws, *args)
        local = odf(ws, *args, "--no-daemon")
        if TYPED in args:
            assert through.returncode == 0 and "2026-01-01" in through.stdout, through.stderr
        assert (through.returncode, through.stdout, through.stderr) == (
            local.returncode,
            local.stdout,
            local.stderr,
        ), args
    assert served.metric('odf_calls_total{call="query",outcome="ok"}') >= 1
    # One warm engine served every call (none died with the call's thread).
    assert served.metric("odf_engine_starts_total") == 1
    assert served.metric("odf_engine_restarts_total") == 0


def test_a_pull_through_the_daemon_loads_only_grpc_and_the_messages(served: Served) -> None:
    """The thin client neither does the work nor loads what does it: no pyarrow (nor numpy),
    no YAML, no transactions, ingest, engine client or hashing; the daemon has them warm."""
    ws = served.ws
    wait_until(lambda: records(ws, "b") >= 2, what="b has data")
    calls = served.metric('odf_calls_total{call="pull",outcome="ok"}')
    loaded = imported_by(ws, "-q", "pull", "b", whole=True, daemon=True)
    assert served.metric('odf_calls_total{call="pull",outcome="ok"}') == calls + 1
    assert "grpc" in loaded
    heavy = {"pyarrow", "numpy", "yaml", "structlog", "rich"}
    assert not loaded & heavy, sorted(loaded & heavy)
    work = {
        "coordinator.transform.runner",
        "coordinator.transform.transaction",
        "coordinator.ingest.context",
        "coordinator.ingest.polling",
        "coordinator.engine.client",
        "common.hashing.data_file",  # the logical hash (the physical hasher is hashlib only)
        "common.hashing.record_digest",
    }
    assert not loaded & work, sorted(loaded & work)


SENT_WITH = """
import http.client, json, sys
send = http.client.HTTPConnection.request
loaded = []
def request(self, *args, **kwargs):
    loaded.append(sorted(sys.modules))
    return send(self, *args, **kwargs)
http.client.HTTPConnection.request = request
from coordinator.cli import main
code = main(["sql", "-c", "SELECT count(*) AS n FROM b"])
print(json.dumps(loaded[0]), file=sys.stderr)
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def test_odf_sql_through_the_daemon_sends_its_query_before_the_heavy_imports(
    served: Served,
) -> None:
    """The query leaves over the daemon's HTTP query endpoint as soon as the CLI and the
    standard library's HTTP client are loaded; the rows come back as they are shown, so
    neither gRPC nor pyarrow (nor numpy) loads at all; nor rich (stderr is no terminal: no
    progress), the other calls' converters or the metadata codecs."""
    ws = served.ws
    wait_until(lambda: records(ws, "b") >= 2, what="b has data")
    calls = served.metric('odf_calls_total{call="query",outcome="ok"}')
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", SENT_WITH], cwd=ws, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "n", done.stdout
    assert served.metric('odf_calls_total{call="query",outcome="ok"}') == calls + 1
    *_, at_request, at_end = done.stderr.strip().splitlines()
    loaded = set(json.loads(at_request))
    assert "http.client" in loaded and "coordinator.daemon.query_http" in loaded
    assert not set(json.loads(at_end)) & {"grpc", "pyarrow", "numpy", "rich"}
    early = {
        "grpc",
        "pyarrow",
        "numpy",
        "rich",
        "coordinator.daemon.client",
        "coordinator.daemon.convert",
        "common.serde.flatbuffers_codec",
        "common.odf.events",
    }
    assert not loaded & early, sorted(loaded & early)


def test_verify_through_the_daemon_replays_and_reports_as_in_process(served: Served) -> None:
    ws = served.ws
    wait_until(lambda: records(ws, "b") >= 2, what="b has data")
    through = odf(ws, "verify", "b", "--recursive", "-o", "json")
    local = odf(ws, "verify", "b", "--recursive", "-o", "json", "--no-daemon")
    assert through.returncode == local.returncode == 0, through.stderr
    assert through.stdout == local.stdout
    assert '"replay": "ok"' in through.stdout


def test_a_plain_grpc_client(served: Served) -> None:
    ws = served.ws
    wait_until(lambda: records(ws, "b") >= 2, what="b has data")
    with grpc.insecure_channel(served.address) as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        with pytest.raises(grpc.RpcError) as denied:
            stub.ListDatasets(pb.ListDatasetsRequest(), timeout=10)
        assert denied.value.code() is grpc.StatusCode.UNAUTHENTICATED
        md = served.metadata
        names = [d.name for d in stub.ListDatasets(pb.ListDatasetsRequest(), metadata=md).datasets]
        assert names == ["a", "b", "p"]
        # Blocks come as stored: each hashes to its name.
        blocks = list(stub.Log(pb.LogRequest(name="b", limit=3), metadata=md, timeout=30))
        assert blocks and all(
            Multihash.from_multibase(b.hash) == block_hash(b.data) for b in blocks
        )
        # Query results are Arrow IPC streams, then the total.
        replies = list(
            stub.Query(
                pb.QueryRequest(sql="SELECT id FROM b ORDER BY id", limit=1),
                metadata=md,
                timeout=120,
            )
        )
        assert replies[-1].end.num_records == records(ws, "b")
        first = pa.ipc.open_stream(replies[0].arrow_ipc).read_all()
        assert first.column_names == ["id"] and first.num_rows == 1
        # Reflection lists the API (for grpcurl and friends).
        reflected = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), metadata=md
        )
        services = {s.name for r in reflected for s in r.list_services_response.service}
        assert {"odf.coordinator.v1.Coordinator", "grpc.health.v1.Health"} <= services
        # Errors are status codes naming what is wrong.
        with pytest.raises(grpc.RpcError) as missing:
            stub.DescribeDataset(pb.DescribeDatasetRequest(name="nope"), metadata=md, timeout=10)
        assert missing.value.code() is grpc.StatusCode.NOT_FOUND
        assert "nope" in (missing.value.details() or "")
        with pytest.raises(grpc.RpcError) as bad:
            list(stub.Query(pb.QueryRequest(sql="SELEC 1"), metadata=md, timeout=120))
        assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        # Uploads are checked before anything is read into the dataset.
        head = dataset(ws, "a").head()
        upload = [
            pb.IngestRequest(
                header=pb.IngestHeader(dataset="a", file_name="x.bin", media_type="video/mp4")
            ),
            pb.IngestRequest(chunk=b"\x00\x01not data"),
        ]
        with pytest.raises(grpc.RpcError) as wrong_type:
            list(stub.Ingest(iter(upload), metadata=md, timeout=30))
        assert wrong_type.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "media_type: unknown format 'video/mp4'" in (wrong_type.value.details() or "")
        with pytest.raises(grpc.RpcError) as headless:
            list(stub.Ingest(iter(upload[1:]), metadata=md, timeout=30))
        assert headless.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert dataset(ws, "a").head() == head  # nothing committed
        # A deadline ends a long call.
        with pytest.raises(grpc.RpcError) as late:
            list(stub.Verify(pb.VerifyRequest(names=["b"]), metadata=md, timeout=0.05))
        assert late.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED


def test_two_queries_and_a_pull_at_once(served: Served) -> None:
    ws = served.ws
    wait_until(lambda: records(ws, "b") >= 2, what="b has data")
    results: dict[str, tuple[int, str]] = {}

    def run(key: str, *args: str) -> None:
        r = odf(ws, *args)
        results[key] = (r.returncode, r.stdout + r.stderr)

    threads = [
        threading.Thread(
            target=run, args=("q1", "sql", "--command", "SELECT count(*) AS n FROM b")
        ),
        threading.Thread(target=run, args=("q2", "sql", "--command", "SELECT max(id) AS m FROM a")),
        threading.Thread(target=run, args=("pull", "pull", "b", "p")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert {k: code for k, (code, _) in results.items()} == {"q1": 0, "q2": 0, "pull": 0}, results
    assert results["q2"][1].splitlines()[1] == "2"


def engine_processes(daemon_pid: int) -> list[int]:
    """The daemon's embedded engines (its children running ``engine_spark``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == daemon_pid and b"engine_spark" in cmdline:
            found.append(int(proc.name))
    return found


def test_a_dead_engine_is_started_again(served: Served) -> None:
    ws = served.ws
    count = "SELECT count(*) AS n FROM b"
    before = ok(ws, "sql", "--command", count)
    (engine,) = engine_processes(served.process.pid)
    os.killpg(engine, signal.SIGKILL)  # the engine and its JVM
    assert ok(ws, "sql", "--command", count) == before
    assert served.metric("odf_engine_restarts_total") == 1
    assert served.metric("odf_engines_running") == 1


def test_an_idle_engine_is_stopped_and_started_on_demand_and_warmed_at_the_next_start(
    tmp_path: Path,
) -> None:
    ws = new_pipeline(tmp_path / "ws")
    config = "daemon:\n  engineIdleTimeout: 1\n  warmUpSeconds: 5\n"
    (ws / ".odf" / "config.yaml").write_text(config)
    (ws / "one.csv").write_text("id,v\n1,x\n")
    ok(ws, "ingest", "a", "one.csv")
    with serving(ws) as served:
        assert ok(ws, "sql", "--command", "SELECT max(id) AS m FROM a").splitlines()[1] == "1"
        assert served.metric("odf_engines_running") == 1
        wait_until(
            lambda: served.metric("odf_engine_idle_stops_total") == 1,
            what="the idle engine is stopped",
            timeout=30,
        )
        assert served.metric("odf_engines_running") == 0
        assert not engine_processes(served.process.pid)
        assert ok(ws, "sql", "--command", "SELECT max(id) AS m FROM a").splitlines()[1] == "1"
        assert served.metric("odf_engine_starts_total") == 2
    # The next daemon replays the query on its engine before anyone asks (query_warm_up).
    recent = json.loads((ws / ".odf" / "run" / "recent_queries.json").read_text())
    assert recent == [{"sql": "SELECT max(id) AS m FROM a", "limit": 1000}]
    (ws / ".odf" / "config.yaml").write_text(config.replace("1\n", "600\n", 1))
    with serving(ws) as served:

        def warmed() -> list[dict[str, object]]:
            lines = served.log.read_text().splitlines()
            logged = [json.loads(line) for line in lines if line[:1] == "{"]
            return [e for e in logged if e.get("event") == "warm_up.done"]

        wait_until(lambda: bool(warmed()), what="the warm-up is done", timeout=120)
        assert int(warmed()[-1]["queries"]) >= 1, warmed()  # type: ignore[call-overload]
        assert served.metric("odf_engine_starts_total") == 1
        assert ok(ws, "sql", "--command", "SELECT max(id) AS m FROM a").splitlines()[1] == "1"


def daemon_in_a_transaction(ws: Path) -> Served:
    """A daemon pulling ``b`` over 200,001 records of ``a``, caught with files staged."""
    new_pipeline(ws)
    (ws / "big.csv").write_text("id,v\n" + "".join(f"{i},v{i}\n" for i in range(200_000)))
    ok(ws, "ingest", "a", "big.csv")  # in process: no daemon yet
    served = start(ws, "-v")
    staging = dataset(ws, "b").layout.staging_root
    # The heads a daemon first sees are its starting point: b is queued once a moves.
    (ws / "two.csv").write_text("id,v\n-1,w\n")
    ok(ws, "ingest", "a", "two.csv")
    wait_until(
        lambda: staging.is_dir() and any(staging.iterdir()),
        what="b's transaction is under way (files staged)",
    )
    return served


def finishes_cleanly(ws: Path) -> None:
    """A daemon completes b's pending pull: all records once, and verification passes."""
    again = start(ws)
    try:
        wait_until(lambda: records(ws, "b") == 200_001, what="the pending pull completed")
        time.sleep(2)  # nothing more is committed
        assert records(ws, "b") == 200_001
        report = ok(ws, "verify", "b", "--recursive")
        assert "b: ok" in report
        ids = ok(ws, "sql", "--command", "SELECT count(DISTINCT id) AS n, count(*) AS c FROM b")
        assert ids.splitlines()[1].split() == ["200001", "200001"]
    finally:
        assert stop(again) == 0


def test_kill_9_in_a_transaction_then_restart_completes_it_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first = daemon_in_a_transaction(ws)
    try:
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(30)
    finally:
        stop(first)
    assert records(ws, "b") == 0, "the killed transaction committed nothing"
    assert "b" in (ws / ".odf" / "run" / "queue.json").read_text()
    logged = [json.loads(line) for line in first.log.read_text().splitlines() if line[:1] == "{"]
    queued = [e for e in logged if e.get("event") == "scheduler.queued"]
    assert queued and queued[-1]["datasets"] == ["b"], "JSON logs say what the scheduler does"
    finishes_cleanly(ws)


def test_sigterm_in_a_transaction_exits_0_with_the_dataset_whole(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first = daemon_in_a_transaction(ws)
    first.process.send_signal(signal.SIGTERM)
    assert first.process.wait(90) == 0
    # Finished within the grace period (committed whole), or cancelled (nothing committed).
    assert records(ws, "b") in (0, 200_001)
    assert not (ws / ".odf" / "run" / "daemon.json").exists()
    finishes_cleanly(ws)
