"""Where a warm engine's small transaction and small raw query spend their time, against plain
PySpark doing the same work on the same file in the same run (issue 32).

Three parts, each alternating its sides, medians of ``--repeats``:

1. Phases, in this process: the engine's own code (``SparkEngine`` over this process's
   SparkSession, the configuration ``engine_spark.session`` gives it) runs a ``--rows``-record
   map/filter transaction and a ``SELECT count(*)`` raw query over one Parquet file, with the
   phase recording of ``engine_spark/phases.py`` on: request decode, session, inputs, parse,
   each sandbox walk, analysis, optimisation, physical planning, job and tasks, output write,
   checkpoint, response encode; each phase's wall time, this process's CPU time and the
   driver JVM's. Beside them plain PySpark on the same session (``spark_floor.py``: the same
   query over the same file, one Parquet file written the faster of the two plain ways; the
   count collected as Arrow and written as an Arrow IPC file).
2. The whole transaction through the coordinator (``Transformer``: planning, exchange, the
   engine call over gRPC, contract checks, logical and physical hashes, the atomic commit)
   against a warm engine server of this checkout and, with ``--baseline REPO`` (a checkout of
   the code before the cuts, e.g. ``git worktree add /tmp/base main``), one of that checkout,
   alternating. Every run's output must have the same logical hash (both engines').
3. ``odf sql --command 'SELECT count(*) ...'`` through a running daemon (``odf serve``) of
   this checkout and, with ``--baseline``, one of the baseline's, on two copies of one
   workspace, alternating (``bench_daemon_query.py``, whose restart part runs alone;
   ``--no-daemon`` leaves it out).

Targets (exit 1 when missed): the whole transaction at most 0.5x plain PySpark's time; the
daemon's count at most 0.25 s and at most 0.5x the baseline daemon's. Without ``--baseline``
the baseline rows are left out. ``--json PATH`` writes the figures for ``bench/run_all.py``.

    .venv/bin/python bench/bench_phases.py [--rows 100000] [--repeats 7] [--baseline REPO]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402

from bench import spark_floor  # noqa: E402
from bench.bench_daemon_query import (  # noqa: E402
    daemon_figures,
    logged_seconds,
    show,
    warm_queries,
    workspaces,
)
from bench.bench_engine import warm_request  # noqa: E402
from bench.bench_transform import QUERY, SYSTEM_TIME, create_derivative, create_root  # noqa: E402
from bench.figures import Figure, add_json_argument, write_json  # noqa: E402
from common.logs import configure_logging  # noqa: E402
from common.odf import engine_protocol as ep  # noqa: E402
from common.odf.fragments import TransformSql  # noqa: E402
from common.serde import flatbuffers_codec as codec  # noqa: E402
from coordinator.config import TransformConfig  # noqa: E402
from coordinator.engine import EngineSession  # noqa: E402
from coordinator.engine.remote import RemoteEngineProvider  # noqa: E402
from coordinator.transform.runner import Transformer, workspace_resolver  # noqa: E402
from coordinator.transform.transaction import Timings  # noqa: E402
from coordinator.workspace import Workspace  # noqa: E402
from engine_spark import queries  # noqa: E402
from engine_spark import session as session_module  # noqa: E402
from engine_spark.engine import SparkEngine  # noqa: E402
from engine_spark.exchange import read_table  # noqa: E402
from engine_spark.phases import Recording, phase, recording  # noqa: E402
from engine_spark.planned_queries import PlannedQueries  # noqa: E402
from engine_spark.queries import VettedPlans  # noqa: E402
from engine_spark.session import jvm_process  # noqa: E402
from tests.support.engine_server import engine_server_process  # noqa: E402

TRANSACTION_TARGET = 0.5
"""The whole warm transaction at most this times plain PySpark's time."""
COUNT = "SELECT count(*) AS n FROM {view}"
TIMED_PARTS = ("exchange", "engine", "hashing", "commit")
"""The coordinator's timings of a transaction (``Timings``)."""


@dataclass
class Phases:
    """Each phase's runs: (wall, cpu, jvm cpu) seconds per request."""

    runs: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)

    def add(self, rec: Recording) -> None:
        for name, seconds in rec.phases.items():
            self.runs.setdefault(name, []).append(seconds)

    def median(self, name: str, i: int = 0) -> float:
        return statistics.median(r[i] for r in self.runs[name])

    def show(self, title: str, total: float | None) -> str:
        lines = [f"{title:<28}{'wall ms':>9}{'py cpu':>8}{'jvm cpu':>8}   (medians)"]
        for name in self.runs:
            lines.append(
                f"  {name:<26}{self.median(name) * 1e3:9.1f}{self.median(name, 1) * 1e3:8.1f}"
                f"{self.median(name, 2) * 1e3:8.1f}"
            )
        if total is not None:
            rest = total - sum(self.median(n) for n in self.runs)
            lines.append(f"  {'(outside the phases)':<26}{rest * 1e3:9.1f}")
            lines.append(f"  {'whole call':<26}{total * 1e3:9.1f}")
        return "\n".join(lines)


@contextmanager
def cuts_undone(engine: SparkEngine) -> Iterator[None]:
    """The engine as before issue 32's cuts: no vetted plan kept, no small-input settings,
    Spark's default explain mode, no ad-hoc query's plan kept."""
    saved = session_module.SMALL_INPUT_BYTES, queries.VETTED, session_module.REQUEST_CONF
    kept = engine._planned
    session_module.SMALL_INPUT_BYTES = -1
    queries.VETTED = VettedPlans(capacity=0)
    session_module.REQUEST_CONF = {}
    engine._planned = PlannedQueries(capacity=0)
    try:
        yield
    finally:
        session_module.SMALL_INPUT_BYTES, queries.VETTED, session_module.REQUEST_CONF = saved
        engine._planned = kept


def engine_call(
    engine: SparkEngine,
    request: ep.TransformRequest | ep.RawQueryRequest | ep.QueryRequest,
    jvm: int,
) -> tuple[float, Recording]:
    """One request through the engine's code as its server runs it (decode, execute,
    encode): seconds and its phases."""
    if isinstance(request, ep.TransformRequest):
        codecs: tuple[Any, Any] = (codec.TRANSFORM_REQUEST, codec.TRANSFORM_RESPONSE)
        execute: Callable[[Any], Any] = engine.execute_transform
    elif isinstance(request, ep.QueryRequest):
        codecs, execute = (codec.QUERY_REQUEST, codec.QUERY_RESPONSE), engine.execute_query
    else:
        codecs, execute = (
            (codec.RAW_QUERY_REQUEST, codec.RAW_QUERY_RESPONSE),
            engine.execute_raw_query,
        )
    data = codecs[0].encode(request)
    started = time.perf_counter()
    with recording(jvm) as rec:
        with phase("request decode"):
            decoded = codecs[0].decode(data)
        response = execute(decoded)
        with phase("response encode"):
            codecs[1].encode(response)
    return time.perf_counter() - started, rec


def count_request(data: Path, out: Path) -> ep.RawQueryRequest:
    return ep.RawQueryRequest(
        input_data_paths=(str(data),),
        transform=TransformSql(engine="spark", query=COUNT.format(view="input")),
        output_data_path=str(out),
    )


def ad_hoc_count(data: Path, out: Path) -> ep.QueryRequest:
    """``odf sql``'s count (ExecuteQuery) over the dataset's file, as a view ``a``."""
    return ep.QueryRequest(
        inputs=(ep.QueryInput(alias="a", data_paths=(str(data),)),),
        transform=TransformSql(engine="spark", query=COUNT.format(view="a")),
        output_data_path=str(out),
    )


def plain_count(spark: object, data: Path, out: Path) -> tuple[float, int]:
    """The count by plain PySpark: read, query, collect as Arrow, write as Arrow IPC."""
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    started = time.perf_counter()
    spark.read.parquet(str(data)).createOrReplaceTempView("input")
    table = spark.sql(COUNT.format(view="input")).toArrow()
    with pa.OSFile(str(out), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return time.perf_counter() - started, _count(out)


def _count(path: Path) -> int:
    return int(read_table(str(path)).column(0)[0].as_py())


# --- part 2: whole transactions through the coordinator ------------------------------------------


@contextmanager
def engine_servers(
    tmp: Path, master: str, baseline: Path | None
) -> Iterator[dict[str, EngineSession]]:
    """Warm engine servers (this checkout's, and the baseline's), as engine sessions."""
    with ExitStack() as stack:
        sessions: dict[str, EngineSession] = {}
        for label, repo in (("new", REPO), ("old", baseline)):
            if repo is None:
                continue
            server = stack.enter_context(
                engine_server_process(
                    master=master,
                    data_roots=(tmp,),
                    repo=repo,
                    log_path=tmp / f"{label}.log",
                    extra_args=("-v", "--log-json"),  # each call's seconds (``transform.end``)
                )
            )
            provider = RemoteEngineProvider(address=server.target)
            sessions[label] = stack.enter_context(EngineSession(provider))
        yield sessions


def whole_transaction(
    ws: Workspace, engines: EngineSession, name: str, root: str
) -> tuple[float, str, Timings]:
    """Seconds of one whole transaction, its output's logical hash, its parts' seconds."""
    ds = create_derivative(ws, name, root, "")
    transformer = Transformer(
        workspace_resolver(ws),
        engines,
        TransformConfig(max_input_records=10**9),
        clock=lambda: SYSTEM_TIME,
    )
    started = time.perf_counter()
    (result,) = transformer.transform(ds).transactions
    seconds = time.perf_counter() - started
    new_data = result.event.new_data
    assert new_data is not None
    return seconds, str(new_data.logical_hash), result.timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--baseline", type=Path, help="a checkout of the code before the cuts")
    parser.add_argument("--no-daemon", action="store_true", help="leave out odf sql (part 3)")
    add_json_argument(parser)
    args = parser.parse_args()
    configure_logging(0)
    baseline = args.baseline.resolve() if args.baseline else None
    figures: list[Figure] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as tmp_name:
        tmp = Path(tmp_name)
        ws = Workspace.init(tmp / "ws")
        create_root(ws, "warm", 1000, tmp)
        root = create_root(ws, "in", args.rows, tmp)
        (data,) = root.layout.data_dir.iterdir()
        spark = spark_floor.plain_session(args.master, args.driver_memory)
        jvm = jvm_process()
        assert jvm is not None
        engine = SparkEngine(spark)
        transaction, raw_query, ad_hoc = Phases(), Phases(), Phases()
        before = {"transaction": Phases(), "raw query": Phases(), "ad-hoc query": Phases()}
        times: dict[str, list[float]] = {}

        def timed(label: str, seconds: float) -> None:
            times.setdefault(label, []).append(seconds)

        with engine_servers(tmp, args.master, baseline) as servers:
            hashes: set[str] = set()
            for i in range(args.repeats + 2):  # the first two warm up, not counted
                warm = i < 2
                seconds, rec = engine_call(
                    engine, warm_request(data, tmp / f"engine-{i}", args.rows), jvm.pid
                )
                plain = min(
                    s for s, _ in spark_floor.write_ways(spark, QUERY, data, tmp, f"plain-{i}")
                )
                raw_s, raw_rec = engine_call(engine, count_request(data, tmp / f"raw-{i}"), jvm.pid)
                n = _count(tmp / f"raw-{i}")
                # odf sql's count: the same text over the same file each time (its plan kept).
                ad_hoc_s, ad_hoc_rec = engine_call(
                    engine, ad_hoc_count(data, tmp / f"ad-hoc-{i}.arrow"), jvm.pid
                )
                assert _count(tmp / f"ad-hoc-{i}.arrow") == n
                if not warm:  # the cuts of issue 32 undone: each phase before them
                    with cuts_undone(engine):
                        for kind, req in (
                            ("transaction", warm_request(data, tmp / f"before-{i}", args.rows)),
                            ("raw query", count_request(data, tmp / f"raw-before-{i}")),
                            ("ad-hoc query", ad_hoc_count(data, tmp / f"ad-hoc-b-{i}.arrow")),
                        ):
                            before[kind].add(engine_call(engine, req, jvm.pid)[1])
                plain_raw_s, plain_n = plain_count(spark, data, tmp / f"plain-raw-{i}")
                assert n == plain_n == args.rows, (n, plain_n)
                whole = {}
                for label, engines in servers.items():
                    whole[label] = whole_transaction(ws, engines, f"{label}-{i}", "in")
                    hashes.add(whole[label][1])
                if warm:
                    continue
                transaction.add(rec)
                raw_query.add(raw_rec)
                ad_hoc.add(ad_hoc_rec)
                timed("engine ad-hoc query", ad_hoc_s)
                timed("engine transaction", seconds)
                timed("plain", plain)
                timed("engine raw query", raw_s)
                timed("plain count", plain_raw_s)
                for label, (s, _, parts) in whole.items():
                    timed(f"whole {label}", s)
                    for part in TIMED_PARTS:
                        timed(f"{part} {label}", getattr(parts, part))
            spark.stop()
        med = {label: statistics.median(t) for label, t in times.items()}
        for label in servers:  # what each server measured of its calls (the counted ones)
            own = logged_seconds(tmp / f"{label}.log", "transform.end", args.repeats)
            med[f"server {label}"] = statistics.median(own)
        print(transaction.show(f"transaction, {args.rows:,} records", med["engine transaction"]))
        print(before["transaction"].show("  the same before the cuts", None))
        print(raw_query.show("raw query (count)", med["engine raw query"]))
        print(before["raw query"].show("  the same before the cuts", None))
        print(ad_hoc.show("ad-hoc query (odf sql's count)", med["engine ad-hoc query"]))
        print(before["ad-hoc query"].show("  the same before the cuts", None))
        print(
            f"plain PySpark: query written {med['plain'] * 1e3:.1f} ms,"
            f" count {med['plain count'] * 1e3:.1f} ms"
        )
        for label in servers:
            print(
                f"whole transaction ({label} engine): {med[f'whole {label}'] * 1e3:.1f} ms; "
                + ", ".join(f"{p} {med[f'{p} {label}'] * 1e3:.1f}" for p in TIMED_PARTS)
                + f" (the engine server's own time of the call {med[f'server {label}'] * 1e3:.1f})"
            )
        same = len(hashes) == 1
        print(f"logical hashes of every whole transaction: {'equal' if same else sorted(hashes)}")
        failed |= not same
        rows = f"{args.rows:,} records"
        figures += [
            Figure(
                f"warm transaction (whole) vs plain PySpark, {rows}",
                med["whole new"] if same else float("inf"),
                "s",
                med["plain"],
                TRANSACTION_TARGET,
            ),
            Figure(
                f"engine call (gRPC) vs plain PySpark, {rows}",
                med["engine new"],
                "s",
                med["plain"],
            ),
            Figure(
                f"engine server's own time of the call (its log), {rows}",
                med["server new"],
                "s",
                med["engine new"],
            ),
            Figure(
                f"engine code in process vs plain PySpark, {rows}",
                med["engine transaction"],
                "s",
                med["plain"],
            ),
            Figure(
                f"raw count in process vs plain PySpark, {rows}",
                med["engine raw query"],
                "s",
                med["plain count"],
            ),
            Figure(
                f"odf sql's count (ExecuteQuery, plan kept) in process vs plain PySpark, {rows}",
                med["engine ad-hoc query"],
                "s",
                med["plain count"],
            ),
        ]
        if "whole old" in med:
            figures.append(
                Figure(
                    f"warm transaction (whole) vs before, {rows}",
                    med["whole new"],
                    "s",
                    med["whole old"],
                )
            )
        for name in transaction.runs:
            figures.append(Figure(f"phase of a transaction: {name}", transaction.median(name), "s"))
        if not args.no_daemon:
            warm = warm_queries(workspaces(tmp, baseline, args.rows), args.repeats)
            figures += daemon_figures(warm, None)
    print()
    failed |= not show(figures)
    write_json(args.json, figures)
    print("FAIL" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
