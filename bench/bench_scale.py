"""Scaling: one 20M-record derivative transaction in local mode and on a standalone cluster with
1, 2 and 4 single-core executors, and the driver's peak memory as the records grow.

The transaction is a map/filter (``bench_transform.QUERY``: ``population % 7 <> 0`` and a
computed column; ~6/7 of the records are kept) over a root dataset with one data slice,
run through the coordinator's real path (plan, exchange, embedded engine over gRPC, contract
checks, hashes, commit). The inputs (5M and 20M records) are generated once with pyarrow into
a temporary workspace and reused; every run gets a fresh derivative.

- ``local``: ``engine.master: local[2]``, no staging directory (today's default path: the
  output's Arrow batches streamed to the driver and written there), 4g of driver memory (the
  driver is the executor here; with the default 2g the JVM died on this transaction).
- ``cluster N``: one standalone cluster (a Master and 4 Workers of 1 core each, 512 MiB
  executors, from pip pyspark's ``spark-class``), the engine as its driver with
  ``spark.cores.max N`` (N single-core executors, on N Workers), a 512 MiB driver heap
  (``--driver-memory``) and shared staging (``engine.stagingDir``): executors read the input
  and write the output file; the driver sees metadata only. A driver that held the records
  could not run the 20M-record transaction in that heap (the output alone is ~17M records).
  This bench found the one place where the driver still read records: the retraction check
  read the input's ``offset`` and ``op`` columns whole in the engine's Python process (758 MiB
  peak at 5M records, 1,280 at 20M, with a 2g or a 512 MiB heap alike); it now reads a row
  group at a time and skips row groups of appends by their statistics.

Reported per run: wall time of the transform call, the engine call's share, and the peak
resident memory of the driver (the engine's process tree: its Python server and its JVM;
executors are the Workers' children and are not counted), sampled from ``/proc`` every 50 ms.
The machine has 2 cores: 4 executors cannot be faster than 2 here.

Target: on the cluster (2 executors), the driver's peak at 20M records is at most 1.2x its peak
at 5M (it does not hold the data). Exits 1 when missed, or when a run's logical hash differs
from local mode's.

    .venv/bin/python bench/bench_scale.py [--rows 20000000] [--small-rows 5000000]

``--coordinator-only``: the coordinator's CPU seconds per output GB to accept a transaction's
output, without an engine: before (one slice: the coordinator reads and hashes every byte,
``digest_data_file`` as ``collect_output`` does) and after (K slices hashed by the executors:
``split.check_slices`` checks sizes, footers and columns and re-hashes a sample, 0.05 of the
files, or all of them with ``full``). The slices are written here by pyarrow, as executors
would write them; process CPU time (``time.process_time``) over the accepting call only.

``--engine-split``: the engine's side of a split transaction, in this process (local[2],
``--rows`` records in ``--blocks`` input files; ``bench_transform.QUERY``, whose filter needs
the slices counted first, and a projection, which does not): wall time of ExecuteTransform,
then for each K of ``--slices`` the slices run one by one through ExecuteTransform and
hashed by the driver (the former path) and written and hashed by the executors in one job
(``engine_spark/split_job.py``), with the driver's Python CPU time and whether both paths
gave the same files (records and physical hashes).

``--split``: the whole split transaction, engine included, in local mode (``local[2]``, 4g of
driver memory, as ``local`` above): a root of ``--rows`` records in ``--blocks`` blocks (one
file each, written with pyarrow: slices end at input blocks), then the map/filter derivative
unsplit (``transform.split.minRecords`` above the backlog: today's one-slice path) and split
into K = ``--slices`` slices (``minRecords`` 1, ``rehash`` full), one fresh derivative and
engine per run. Reported per run: blocks committed, wall time of the transform call, the
engine call's share (for a split run it includes the coordinator's checks and re-hash of the
slices, which follow the engine's answer in the same step), the coordinator's hashing after
it (the unsplit run's ``collect_output``; ~0 for a split run), the driver's peak
(the engine's process tree, as above: in local mode the driver is also the executor), and
wall and peak as ratios against K = 1. Every run's records, offsets and event times must be
the unsplit run's (compared column by column); exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bench_engine import tree_rss_mib
from bench_memory import engine_pid, sampled_transform
from bench_transform import TS, build_slice, create_derivative, create_root

from common.logs import configure_logging
from common.odf.events import ExecuteTransform
from coordinator.config import SplitConfig, TransformConfig
from coordinator.engine import EngineSession
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.workspace import Workspace
from tests.support.spark_cluster import SparkCluster, standalone_cluster

if TYPE_CHECKING:
    import pyarrow as pa

FLAT_TARGET = 1.2
WORKERS = 4


@dataclass(frozen=True, slots=True)
class Measured:
    label: str
    records: int
    output_records: int
    wall: float
    engine: float
    driver_peak_mib: float
    logical_hash: str
    blocks: int = 1
    checks: float = 0.0
    """The coordinator's seconds between the engine's answer and the commit (hashes or the
    split slices' checks)."""
    dataset: str = ""
    output_bytes: int = 0


def run(
    ws: Workspace,
    root: str,
    label: str,
    provider: EmbeddedEngineProvider,
    records: int,
    options: TransformConfig | None = None,
) -> Measured:
    derivative = create_derivative(
        ws, f"out-{len(ws.list_datasets())}", root, provider.resolve_version()
    )
    with EngineSession(provider) as engines:
        client = engines.get(provider.resolve_version())
        pid = engine_pid(client.description)
        result, wall, sampled = sampled_transform(
            ws, derivative, engines, pid, provider.shared_staging, options
        )
        peak = max(sampled, tree_rss_mib(pid, "VmHWM"))
    new_data = result.event.new_data
    assert new_data is not None
    return Measured(
        label=label,
        records=records,
        output_records=result.output_records,
        wall=wall,
        engine=result.timings.engine,
        driver_peak_mib=peak,
        logical_hash=str(new_data.logical_hash),
        blocks=sum(1 for i in result.items if isinstance(i.event, ExecuteTransform)),
        checks=result.timings.hashing,
        dataset=derivative.alias,
        output_bytes=sum(
            i.event.new_data.size
            for i in result.items
            if isinstance(i.event, ExecuteTransform) and i.event.new_data
        ),
    )


def create_blocks(ws: Workspace, name: str, rows: int, blocks: int, staging: Path) -> None:
    """A root of ``rows`` records in ``blocks`` AddData blocks, one Parquet file each (event
    times rising across blocks)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from common.hashing import logical_hash, physical_hash_file
    from common.odf.events import AddData
    from common.odf.fragments import DataSlice, OffsetInterval
    from coordinator.dataset import CommitItem

    per_block = rows // blocks
    root = create_root(ws, name, per_block, staging)
    for n in range(1, blocks):
        start = n * per_block
        count = rows - start if n == blocks - 1 else per_block
        table = build_slice(count, start)
        times = 1_600_000_000_000 + np.arange(start, start + count, dtype=np.int64) * 10
        table = table.set_column(3, "event_time", pa.array(times, TS))
        path = staging / f"{name}-{n}.parquet"
        pq.write_table(table, path)
        event = AddData(
            prev_offset=start - 1,
            new_data=DataSlice(
                logical_hash=logical_hash(table),
                physical_hash=physical_hash_file(path),
                offset_interval=OffsetInterval(start=start, end=start + count - 1),
                size=path.stat().st_size,
            ),
            new_watermark=datetime.fromtimestamp(1_600_000_000 + (start + count) / 100, UTC),
        )
        root.commit_events([CommitItem(event, path)], expected_head=root.head())


def read_column(files: list[Path], column: str) -> pa.ChunkedArray:
    """One column of ``files``, concatenated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    chunks = [c for f in files for c in pq.read_table(f, columns=[column]).column(0).chunks]
    return pa.chunked_array(chunks)


def same_records(ws: Workspace, expected: str, got: str) -> bool:
    """Whether two derivatives hold the same records, offsets and event times (their data
    files concatenated, oldest first, compared a column at a time)."""

    def files(name: str) -> list[Path]:
        ds = ws.open_dataset(name)
        events = [b.event for _, b in ds.iter_blocks() if isinstance(b.event, ExecuteTransform)]
        return [ds.data_path(e.new_data.physical_hash) for e in events[::-1] if e.new_data]

    a, b = files(expected), files(got)
    for column in ("offset", "event_time", "city", "population", "population_x2"):
        left, right = read_column(a, column), read_column(b, column)
        if not left.equals(right):
            return False
    return True


def split_runs(rows: int, blocks: int, slice_counts: list[int], driver_memory: str) -> int:
    """The ``--split`` measurement (module doc)."""
    with tempfile.TemporaryDirectory(prefix="bench-split-") as tmp:
        base = Path(tmp)
        ws = Workspace.init(base / "ws")
        started = time.perf_counter()
        create_blocks(ws, "blocks", rows, blocks, base)
        print(
            f"input ({rows:,} records, {blocks} blocks) written in"
            f" {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        provider = EmbeddedEngineProvider(
            master="local[2]", driver_memory=driver_memory, data_roots=(base,)
        )
        unsplit = TransformConfig(max_input_records=10**12, split=SplitConfig(min_records=10**15))
        runs = [run(ws, "blocks", "unsplit", provider, rows, unsplit)]
        print(split_row(runs[0], None), flush=True)
        for k in slice_counts:
            split = SplitConfig(min_records=1, slices=k)
            options = TransformConfig(max_input_records=10**12, split=split)
            runs.append(run(ws, "blocks", f"K={k}", provider, rows, options))
            print(split_row(runs[-1], None), flush=True)
        ok = all(same_records(ws, runs[0].dataset, m.dataset) for m in runs[1:])
    one = next((m for m in runs if m.label == "K=1"), None)
    print()
    print(
        "| run     | blocks | output records | wall s | engine s | hash s | driver peak MiB"
        " | wall / K=1 | peak / K=1 |"
    )
    print(
        "|---------|--------|----------------|--------|----------|--------|-----------------"
        "|------------|------------|"
    )
    for m in runs:
        print(split_row(m, one))
    wrong = [m.label for m in runs[1:] if m.blocks != int(m.label.removeprefix("K="))]
    if wrong:
        print(f"MISSED: not as many blocks as slices asked: {wrong}")
    if not ok:
        print("MISSED: a split run's records differ from the unsplit run's")
    print(f"output: {runs[0].output_bytes / 1e9:.2f} GB of Parquet (unsplit)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if ok and not wrong else 1


def split_row(m: Measured, one: Measured | None) -> str:
    ratios = (
        f" | {m.wall / one.wall:>10.2f} | {m.driver_peak_mib / one.driver_peak_mib:>10.2f} |"
        if one is not None
        else ""
    )
    return (
        f"| {m.label:<7} | {m.blocks:>6} | {m.output_records:>14,} | {m.wall:>6.1f}"
        f" | {m.engine:>8.1f} | {m.checks:>6.1f} | {m.driver_peak_mib:>15,.0f}{ratios}"
    )


@contextmanager
def executors(cluster: SparkCluster, cores: int, directory: Path) -> Iterator[None]:
    """The engine started inside uses ``cores`` single-core executors of ``cluster``."""
    conf = directory / f"conf-{cores}"
    conf.mkdir(exist_ok=True)
    defaults = (cluster.conf_dir / "spark-defaults.conf").read_text()
    # Smaller input splits than the default 128 MiB: the input file gets more partitions
    # than there are executors.
    extra = f"spark.cores.max {cores}\nspark.sql.files.maxPartitionBytes 32m\n"
    (conf / "spark-defaults.conf").write_text(defaults + extra)
    saved = dict(os.environ)
    os.environ.update({**cluster.engine_env(), "SPARK_CONF_DIR": str(conf)})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def coordinator_cpu(rows: int, slice_counts: list[int], directory: Path) -> int:
    """The ``--coordinator-only`` measurement (module doc)."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    from common.hashing import digest_data_file
    from common.odf import engine_protocol as ep
    from common.odf.fragments import DatasetVocabulary, OffsetInterval, TransformSql
    from common.odf.identity import DatasetID
    from common.odf.multihash import Multihash
    from common.serde.arrow_schema import encode_arrow_schema
    from coordinator.transform.plan import DataFileRef, InputPlan, TransformPlan
    from coordinator.transform.split import check_slices

    print("| slices | rehash | output GB | coordinator CPU s | CPU s per GB |")
    print("|--------|--------|-----------|-------------------|--------------|")
    for k in slice_counts:
        bounds = [(rows * n // k, rows * (n + 1) // k - 1) for n in range(k)]
        answer, files, size = [], [], 0
        for n, (first, last) in enumerate(bounds):
            path = directory / f"k{k}-slice-{n}.parquet"
            offsets = pa.array(range(first, last + 1), pa.int64())
            table = pa.table(
                {
                    "offset": offsets,
                    "event_time": pa.array(range(first, last + 1), pa.timestamp("ms", tz="UTC")),
                    "city": pa.compute.cast(pa.compute.multiply(offsets, 7919), pa.string()),
                    "population": pa.compute.multiply(offsets, 3),
                }
            )
            pq.write_table(table, path)
            digest = digest_data_file(path)
            size += digest.size
            schema = encode_arrow_schema(digest.schema)
            interval = OffsetInterval(start=first, end=last)
            block = Multihash.sha3_256(f"block {n}".encode())
            files.append(DataFileRef(physical_hash=block, file_interval=interval, block=block))
            answer.append(
                ep.SplitSlice(
                    data_path=str(path),
                    offset_interval=interval,
                    inputs=(ep.SplitSliceInput(query_alias="in", offset_interval=interval),),
                    physical_hash=digest.physical_hash.to_multibase(),
                    logical_hash=digest.logical_hash.to_multibase(),
                    size=digest.size,
                    num_records=last - first + 1,
                )
            )
        plan = TransformPlan(
            expected_head=Multihash.sha3_256(b"head"),
            system_time=datetime.now(UTC),
            transform=TransformSql(engine="spark", query="SELECT * FROM in"),
            vocab=DatasetVocabulary(),
            prev_offset=None,
            prev_checkpoint=None,
            prev_watermark=None,
            output_schema=schema,
            inputs=(
                InputPlan(
                    dataset_id=DatasetID.new_seeded(b"bench"),
                    dataset_alias="in",
                    query_alias="in",
                    vocab=DatasetVocabulary(),
                    prev_block_hash=None,
                    new_block_hash=files[-1].block,
                    prev_offset=None,
                    new_offset=rows - 1,
                    files=tuple(files),
                    explicit_watermarks=(),
                    schema=schema,
                ),
            ),
        )
        gb = size / 1e9
        runs: list[tuple[str, float]] = []
        if k == 1:
            started = time.process_time()
            digest_data_file(Path(answer[0].data_path or ""))
            runs.append(("(today)", time.process_time() - started))
        for rehash in (1.0, 0.05, 0.02):
            started = time.process_time()
            check_slices(
                ep.SplitTransformResponseSuccess(slices=tuple(answer)),
                plan,
                directory,
                rehash=rehash,
                schema=schema,
                rng=random.Random(0),
            )
            runs.append(("full" if rehash == 1.0 else str(rehash), time.process_time() - started))
        for label, cpu in runs:
            print(f"| {k:>6} | {label:<7}| {gb:>9.2f} | {cpu:>17.2f} | {cpu / gb:>12.2f} |")
        for path in directory.glob(f"k{k}-slice-*.parquet"):
            path.unlink()
    return 0


def engine_split(rows: int, slice_counts: list[int], blocks: int, directory: Path) -> int:
    """The ``--engine-split`` measurement (module doc)."""
    import dataclasses

    import pyarrow.parquet as pq
    from bench_transform import QUERY, build_slice

    from common.odf import engine_protocol as ep
    from common.odf.fragments import DatasetVocabulary, OffsetInterval, TransformSql
    from common.odf.identity import DatasetID
    from engine_spark.engine import SparkEngine
    from engine_spark.session import SessionSettings, build_session
    from engine_spark.split import execute_split, plan_slices

    paths = []
    for b in range(blocks):
        start, end = rows * b // blocks, rows * (b + 1) // blocks
        paths.append(str(directory / f"in-{b:04d}.parquet"))
        pq.write_table(build_slice(end - start, start), paths[-1])
    request = ep.TransformRequest(
        dataset_id=DatasetID.new_seeded(b"out"),
        dataset_alias="out",
        system_time=datetime.now(UTC),
        vocab=DatasetVocabulary(),
        transform=TransformSql(engine="spark", query=QUERY),  # and a projection, below
        query_inputs=(
            ep.TransformRequestInput(
                dataset_id=DatasetID.new_seeded(b"raw"),
                dataset_alias="raw",
                query_alias="raw",
                vocab=DatasetVocabulary(),
                offset_interval=OffsetInterval(start=0, end=rows - 1),
                data_paths=tuple(paths),
                schema_file=paths[-1],
                explicit_watermarks=(),
            ),
        ),
        next_offset=0,
        prev_checkpoint_path=None,
        new_checkpoint_path=str(directory / "checkpoint"),
        new_data_path=str(directory / "unsplit.parquet"),
    )
    engine = SparkEngine(build_session(SessionSettings(master="local[2]", driver_memory="2g")))
    print(
        "| query      | path                    | slices | wall s | driver Python CPU s"
        " | output records | same bytes |"
    )
    print(
        "|------------|-------------------------|--------|--------|---------------------"
        "|----------------|------------|"
    )

    def report(query: str, label: str, k: int, started: tuple[float, float], *rest: str) -> None:
        wall, cpu = time.perf_counter() - started[0], time.process_time() - started[1]
        print(
            f"| {query:<10} | {label:<23} | {k:>6} | {wall:>6.1f} | {cpu:>19.1f}"
            f" | {rest[0]:>14} | {rest[1]:<10} |",
            flush=True,
        )

    def split(request: ep.TransformRequest, k: int, out: Path, executors: bool) -> list[str]:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        split = ep.SplitTransformRequest(
            request=request, slices=k, min_records_per_slice=1, slices_dir=str(out)
        )
        if executors:
            answer = engine.execute_split_transform(split)
        else:
            plan = plan_slices(split, engine.session.sparkContext.defaultParallelism)
            answer = execute_split(split, plan, engine.execute_transform)
        return [f"{s.num_records}:{s.physical_hash}" for s in answer.slices]

    differ = 0
    try:
        engine.warm_up()
        for name, query in (
            ("map/filter", QUERY),
            ("projection", "SELECT event_time, city, population * 2 AS population_x2 FROM raw"),
        ):
            request = dataclasses.replace(
                request, transform=TransformSql(engine="spark", query=query)
            )
            for _ in range(2):  # the first run warms Spark's code generation
                started = (time.perf_counter(), time.process_time())
                whole = engine.execute_transform(request)
                assert whole.new_offset_interval is not None
            records = f"{whole.new_offset_interval.end + 1:,}"
            report(name, "ExecuteTransform", 1, started, records, "")
            split(request, max(slice_counts), directory / "warm", executors=True)  # the workers
            for k in slice_counts:
                started = (time.perf_counter(), time.process_time())
                one_by_one = split(request, k, directory / f"k{k}-sequential", executors=False)
                report(name, "split, one by one", k, started, records, "")
                started = (time.perf_counter(), time.process_time())
                ours = split(request, k, directory / f"k{k}-executors", executors=True)
                same = "yes" if ours == one_by_one else "NO"
                differ += ours != one_by_one
                report(name, "split, on the executors", k, started, records, same)
    finally:
        engine.close()
    return 1 if differ else 0


def row(m: Measured) -> str:
    return (
        f"| {m.label:<12} | {m.records:>11,} | {m.output_records:>11,} | {m.wall:>6.1f}"
        f" | {m.engine:>8.1f} | {m.driver_peak_mib:>15.0f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--small-rows", type=int, default=5_000_000)
    parser.add_argument("--executor-memory", default="512m")
    parser.add_argument(
        "--driver-memory",
        default="512m",
        help="the cluster driver's heap: small, to show that the driver does not need room"
        " for the records",
    )
    parser.add_argument(
        "--local-driver-memory",
        default="4g",
        help="local mode's driver (and executor): 20M records in one transaction do not fit"
        " the default 2g there",
    )
    parser.add_argument("--cores", default="1,2,4", help="executor counts on the cluster")
    parser.add_argument(
        "--coordinator-only",
        action="store_true",
        help="only the coordinator's CPU per output GB, before and after split transactions",
    )
    parser.add_argument(
        "--slices",
        default=None,
        help="K values (--coordinator-only, --engine-split: 1,2,4,8; --split: 1,2,4)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="only the whole split transaction in local mode, K slices against one",
    )
    parser.add_argument(
        "--engine-split",
        action="store_true",
        help="only the engine's split transaction (local[2]), slices written one by one or"
        " by the executors in one job (--rows, --slices, --blocks)",
    )
    parser.add_argument(
        "--blocks", type=int, default=None, help="input blocks (--split: 4; --engine-split: 8)"
    )
    args = parser.parse_args()
    configure_logging(0)
    if args.split:
        slices = [int(k) for k in (args.slices or "1,2,4").split(",")]
        return split_runs(args.rows, args.blocks or 4, slices, args.local_driver_memory)
    if args.coordinator_only:
        with tempfile.TemporaryDirectory(prefix="bench-split-") as tmp:
            slices = [int(k) for k in (args.slices or "1,2,4,8").split(",")]
            return coordinator_cpu(args.rows, slices, Path(tmp).resolve())
    if args.engine_split:
        with tempfile.TemporaryDirectory(prefix="bench-split-") as tmp:
            slices = [int(k) for k in (args.slices or "1,2,4,8").split(",")]
            return engine_split(args.rows, slices, args.blocks or 8, Path(tmp).resolve())
    cores = [int(c) for c in args.cores.split(",")]
    results: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        base = Path(tmp)
        ws = Workspace.init(base / "ws")
        started = time.perf_counter()
        create_root(ws, "big", args.rows, base)
        create_root(ws, "small", args.small_rows, base)
        print(f"inputs generated in {time.perf_counter() - started:.0f} s", flush=True)
        shared = base / "shared-staging"
        shared.mkdir()
        with standalone_cluster(
            base / "cluster", workers=WORKERS, executor_memory=args.executor_memory
        ) as cluster:
            on_cluster = EmbeddedEngineProvider(
                master=cluster.master_url,
                driver_memory=args.driver_memory,
                data_roots=(base,),
                shared_staging=shared,
            )
            with executors(cluster, 2, base):  # first: the memory target's two runs
                small = run(ws, "small", "cluster 2", on_cluster, args.small_rows)
            print(row(small), flush=True)
            for n in sorted(cores, key=lambda c: c != 2):
                with executors(cluster, n, base):
                    results.append(run(ws, "big", f"cluster {n}", on_cluster, args.rows))
                print(row(results[-1]), flush=True)
        shutil.rmtree(shared, ignore_errors=True)
        local = EmbeddedEngineProvider(
            master="local[2]", driver_memory=args.local_driver_memory, data_roots=(base,)
        )
        results.append(run(ws, "big", "local[2]", local, args.rows))
        print(row(results[-1]), flush=True)
    print()
    print("| run          |     records |      output | wall s | engine s | driver peak MiB |")
    print("|--------------|-------------|-------------|--------|----------|-----------------|")
    for m in sorted((*results, small), key=lambda m: (m.records, m.label)):
        print(row(m))
    ok = True
    hashes = {m.logical_hash for m in results}
    if len(hashes) != 1:
        print(f"MISSED: logical hashes differ between runs: {sorted(hashes)}")
        ok = False
    big = next(m for m in results if m.label == "cluster 2") if 2 in cores else None
    if big is not None:
        ratio = big.driver_peak_mib / small.driver_peak_mib
        print(
            f"driver peak on the cluster (2 executors): {small.driver_peak_mib:.0f} MiB at"
            f" {small.records:,} records, {big.driver_peak_mib:.0f} MiB at {big.records:,}:"
            f" {ratio:.2f}x (target <= {FLAT_TARGET}x)"
        )
        ok = ok and ratio <= FLAT_TARGET
    print("OK" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
