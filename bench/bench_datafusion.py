"""A whole derivative transaction of ours against DataFusion on the same SQL and the same data.

For each size (100k, 1M, 5M records by default) a root dataset gets one data slice, and a
derivative with a map/filter query runs one transaction over it through the coordinator's real
path with the warm embedded engine: planning, exchange, the engine call, contract checks,
logical and physical hashes, the atomic commit (wall-clock of the whole transaction). The
baseline is what a user would pick instead: the ``datafusion`` Python package running the same
SQL in process over the same Parquet data file and writing the result as one Parquet file
(session, registration, query and write all timed). Both are timed in the same run, alternating,
medians of ``--repeats``.

The engine call's own time (gRPC round trip included) is reported too, against the floor.

In the same run, alternating with both, plain PySpark runs the same SQL over the same file in
this process (``spark_floor.py``: its own SparkSession with the engine's configuration, the
result written as one Parquet file the faster of the two plain ways; also the query as an
aggregate with no output): Spark's floor. Its rows, "plain Spark vs DataFusion" and "ours vs
plain Spark", have no target: they show when a target lies below what Spark itself needs.

With ``--compare-collect`` a second engine runs the same transactions with the former output
path (every result collected into Python and written by pyarrow, ``ODF_ENGINE_OUTPUT_WRITER=
collect``), so the figures before and after streaming outputs come from one run.

Targets: at most 5x DataFusion's time at 100k records, at most 3x at 1M records and more.
Exits 1 when a target is missed (or the record counts differ, plain Spark's included).
``--json PATH`` also writes the figures for ``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import datafusion
import pyarrow.parquet as pq
from bench_transform import QUERY, SYSTEM_TIME, create_derivative, create_root

from bench import spark_floor
from bench.figures import Figure, add_json_argument, write_json
from common.logs import configure_logging
from coordinator.config import ExchangeFormat, TransformConfig
from coordinator.dataset import Dataset
from coordinator.engine import EngineSession
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.transform.runner import Transformer, workspace_resolver
from coordinator.workspace import Workspace

SIZES = (100_000, 1_000_000, 5_000_000)
SMALL = 100_000
TARGET_SMALL = 5.0
"""Our transaction at most this many times DataFusion's at ``SMALL`` records or fewer."""
TARGET_LARGE = 3.0
"""... and at most this many times above."""


def target(rows: int) -> float:
    return TARGET_SMALL if rows <= SMALL else TARGET_LARGE


def ours(
    ws: Workspace, engines: EngineSession, name: str, root: str, version: str, fmt: ExchangeFormat
) -> tuple[float, int, float]:
    """One whole transaction: seconds, output records, and the seconds of its engine call."""
    ds = create_derivative(ws, name, root, version)
    transformer = Transformer(
        workspace_resolver(ws),
        engines,
        TransformConfig(exchange=fmt, max_input_records=10**9),
        clock=lambda: SYSTEM_TIME,
    )
    started = time.perf_counter()
    (result,) = transformer.transform(ds).transactions
    return time.perf_counter() - started, result.output_records, result.timings.engine


def started_engines(
    stack: ExitStack, provider: EmbeddedEngineProvider, version: str, env: dict[str, str]
) -> EngineSession:
    """An engine session whose engine is started now, with ``env`` added to its environment."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        engines = stack.enter_context(EngineSession(provider))
        engines.get(version)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return engines


def theirs(data_file: Path, out: Path) -> tuple[float, int]:
    """The same query by DataFusion in process, written as one Parquet file."""
    started = time.perf_counter()
    ctx = datafusion.SessionContext()
    ctx.register_parquet("raw", str(data_file), file_extension="")
    ctx.sql(QUERY).write_parquet(str(out))
    seconds = time.perf_counter() - started
    return seconds, pq.ParquetFile(out).metadata.num_rows


def data_file(dataset: Dataset) -> Path:
    (path,) = dataset.layout.data_dir.iterdir()
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument(
        "--exchange",
        choices=[f.value for f in ExchangeFormat],
        default=None,
        help="the exchange format (default: the coordinator's default)",
    )
    parser.add_argument(
        "--compare-collect",
        action="store_true",
        help="also time the former output path (results collected) on a second engine",
    )
    add_json_argument(parser)
    args = parser.parse_args()
    configure_logging(0)
    figures: list[Figure] = []
    fmt = ExchangeFormat(args.exchange) if args.exchange else TransformConfig().exchange
    failed = False
    print(f"datafusion {datafusion.__version__}, exchange {fmt.value}, master {args.master}")
    with tempfile.TemporaryDirectory(prefix="bench-datafusion-") as tmp, ExitStack() as stack:
        ws = Workspace.init(Path(tmp) / "ws")
        provider = EmbeddedEngineProvider(
            master=args.master, driver_memory=args.driver_memory, data_roots=(Path(tmp),)
        )
        version = provider.resolve_version()
        engines = {"ours": started_engines(stack, provider, version, {})}
        if args.compare_collect:
            collect = {"ODF_ENGINE_OUTPUT_WRITER": "collect"}
            engines["collected"] = started_engines(stack, provider, version, collect)
        spark = spark_floor.plain_session(args.master, args.driver_memory)
        stack.callback(spark.stop)
        warm = create_root(ws, "warm", 1000, Path(tmp))
        for label, session in engines.items():  # JIT and caches, not counted
            ours(ws, session, f"warm-{label}", "warm", version, fmt)
        spark_floor.write_ways(spark, QUERY, data_file(warm), Path(tmp), "warm")
        spark_floor.aggregate_only(spark, QUERY, data_file(warm))
        header = (
            f"{'records':>10} {'ours':>8} {'datafusion':>11} {'ratio':>7} {'target':>7}"
            f" {'plain':>8} {'plain/df':>9} {'ours/plain':>11} {'engine':>7} {'eng/plain':>10}"
            f" {'arrow':>7} {'writer':>7} {'no-out':>7}"
        )
        if args.compare_collect:
            header += f" {'collected':>10} {'ratio':>7}"
        print(header + "   (s, medians)")
        for rows in args.sizes:
            root = f"in-{rows}"
            source = data_file(create_root(ws, root, rows, Path(tmp)))
            labels = [*engines, "engine", "datafusion", *spark_floor.WAYS, "aggregate"]
            times: dict[str, list[float]] = {label: [] for label in labels}
            counts = set()
            for i in range(args.repeats):
                for label, session in engines.items():
                    seconds, n, engine = ours(
                        ws, session, f"{label}-{rows}-{i}", root, version, fmt
                    )
                    times[label].append(seconds)
                    counts.add(n)
                    if label == "ours":
                        times["engine"].append(engine)
                seconds, n = theirs(source, Path(tmp) / f"df-{rows}-{i}.parquet")
                times["datafusion"].append(seconds)
                counts.add(n)
                ways = spark_floor.write_ways(spark, QUERY, source, Path(tmp), f"{rows}-{i}")
                for way, (seconds, n) in zip(spark_floor.WAYS, ways, strict=True):
                    times[way].append(seconds)
                    counts.add(n)
                seconds, n = spark_floor.aggregate_only(spark, QUERY, source)
                times["aggregate"].append(seconds)
                counts.add(n)
            median = {label: statistics.median(t) for label, t in times.items()}
            counted = len(counts) == 1
            rows_figures = spark_floor.figures(rows, median, target(rows), counted=counted)
            figures += rows_figures
            ok = bool(rows_figures[0].ok) and counted
            failed |= not ok
            ours_df, plain_df, ours_plain = (f.ratio or 0.0 for f in rows_figures[:3])
            line = (
                f"{rows:>10} {median['ours']:>8.3f} {median['datafusion']:>11.3f}"
                f" {ours_df:>6.1f}x {target(rows):>6.0f}x"
                f" {rows_figures[1].ours:>8.3f} {plain_df:>8.1f}x {ours_plain:>10.2f}x"
                f" {median['engine']:>7.3f} {rows_figures[3].ratio or 0.0:>9.2f}x"
                + "".join(f" {median[way]:>7.3f}" for way in spark_floor.WAYS)
                + f" {median['aggregate']:>7.3f}"
            )
            if args.compare_collect:
                before = median["collected"]
                line += f" {before:>10.3f} {before / median['datafusion']:>6.1f}x"
            print(
                line
                + f"   {'ok' if ok else 'MISSED'}"
                + ("" if counted else f" (record counts differ: {sorted(counts)})"),
                flush=True,
            )
    print("FAIL" if failed else "OK")
    write_json(args.json, figures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
