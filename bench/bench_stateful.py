"""Stateful transactions on the warm engine against the same query's stateless form.

Two queries, each fed ``--transactions`` transactions of ``--rows`` new records (run once with
100k and once with 1M by default):

- ``window``: ``GROUP BY window(event_time, '1 minute'), sensor`` (1,000 sensors);
- ``join``: views joined with clicks of the same user within 5 minutes (two inputs, half of
  the records each).

Every transaction runs twice on the same in-process engine (one SparkSession, warm): as the
stateful transaction (ExecuteTransform: Structured Streaming, state restored from and packed
into the checkpoint) and as the stateless form of the same SQL over the same slices
(ExecuteQuery: a batch query over the same files, no state). Event time advances by
``--minutes`` per transaction and every input's watermark follows its newest record, so
windows close and join state is evicted as the stream moves on.

Reported per size and query: median seconds per transaction for both forms, their ratio, the
fixed extra cost (median difference), and the checkpoint size after each transaction (it must
stay flat once windows close). Targets: at 1M records per transaction a stateful transaction
takes at most 2x the stateless one; at 100k the fixed extra cost is at most 0.3 s. Exit 1 when
a target is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common.odf import engine_protocol as ep
from common.odf.fragments import (
    DatasetVocabulary,
    OffsetInterval,
    SqlQueryStep,
    TransformSql,
    Watermark,
)
from common.odf.identity import DatasetID
from engine_spark.engine import SparkEngine
from engine_spark.session import SessionSettings, build_session
from tests.integration.engine.datasets import T0, TS, OutputDataset

QUERIES = {
    "window": (
        ("events",),
        "SELECT window.end AS event_time, sensor, count(*) AS n, sum(value) AS total "
        "FROM events GROUP BY window(event_time, '1 minute'), sensor",
    ),
    "join": (
        ("views", "clicks"),
        "SELECT v.event_time, v.user, v.page, c.ad FROM views v JOIN clicks c "
        "ON v.user = c.user AND c.event_time BETWEEN v.event_time "
        "AND v.event_time + INTERVAL 5 MINUTES",
    ),
}
FIXED_COST_TARGET_S = 0.3
RATIO_TARGET = 2.0


@dataclass
class Stream:
    """A root dataset written slice by slice."""

    directory: Path
    name: str
    next_offset: int = 0
    files: list[str] = field(default_factory=list)

    @property
    def id(self) -> DatasetID:
        return DatasetID.new_seeded(self.name.encode())

    def append(self, table: pa.Table) -> ep.TransformRequestInput:
        n = table.num_rows
        head = pa.table(
            {
                "offset": pa.array(range(self.next_offset, self.next_offset + n), pa.int64()),
                "op": pa.array(np.zeros(n, dtype=np.int32)),
                "system_time": pa.array([T0] * n, TS),
            }
        )
        full = pa.Table.from_arrays(
            head.columns + table.columns, names=head.column_names + table.column_names
        )
        path = str(self.directory / f"{self.name}-{len(self.files):04d}.parquet")
        pq.write_table(full, path)
        self.files.append(path)
        interval = OffsetInterval(start=self.next_offset, end=self.next_offset + n - 1)
        self.next_offset += n
        newest = table.column("event_time").to_pylist()[-1]
        return ep.TransformRequestInput(
            dataset_id=self.id,
            dataset_alias=self.name,
            query_alias=self.name,
            vocab=DatasetVocabulary(),
            offset_interval=interval,
            data_paths=(path,),
            schema_file=path,
            explicit_watermarks=(Watermark(system_time=T0, event_time=newest),),
        )


def setup(doc: str, sizes: str, **own: tuple[int, str]) -> tuple[argparse.Namespace, SparkEngine]:
    """Parse the options the stateful benchmarks share (``--sizes``: records per transaction,
    comma separated; ``--transactions``; the Spark ``--master``) and the benchmark's own integer
    options (``name=(default, help)`` for ``--name``); then warm up an engine for the runs."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--sizes", default=sizes, help="records per transaction")
    parser.add_argument("--transactions", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    for name, (default, text) in own.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default, help=text)
    args = parser.parse_args()
    return args, warm_engine(args.master)


def warm_engine(master: str) -> SparkEngine:
    """An engine on its own session (4 GiB driver), warmed up so that no run pays for it."""
    engine = SparkEngine(build_session(SessionSettings(master=master, driver_memory="4g")))
    engine.warm_up()
    return engine


def slice_of(name: str, rows: int, tx: int, minutes: int, rng: np.random.Generator) -> pa.Table:
    start = T0 + timedelta(minutes=tx * minutes)
    step_us = minutes * 60_000_000 // rows
    times = pa.array([start + timedelta(microseconds=i * step_us) for i in range(rows)], TS)
    keys = rng.integers(0, 1000 if name == "events" else 100_000, rows)
    if name == "events":
        return pa.table(
            {
                "event_time": times,
                "sensor": [f"s{k}" for k in keys],
                "value": rng.integers(0, 100, rows),
            }
        )
    column = "page" if name == "views" else "ad"
    return pa.table(
        {
            "event_time": times,
            "user": [f"u{k}" for k in keys],
            column: [f"{column}{k % 7}" for k in keys],
        }
    )


def timed_transaction(
    engine: SparkEngine, output: OutputDataset, entries: Sequence[ep.TransformRequestInput]
) -> tuple[float, ep.TransformRequest, ep.TransformResponseSuccess]:
    """The next transaction of ``output`` over ``entries``, committed: its engine seconds, the
    request and the response."""
    request = output.request(entries)
    started = time.perf_counter()
    response = engine.execute_transform(request)
    seconds = time.perf_counter() - started
    output.commit(request, response)
    return seconds, request, response


def run_query(
    engine: SparkEngine,
    work: Path,
    label: str,
    query: str,
    inputs: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, list[float]]:
    rng = np.random.default_rng(7)
    streams = {name: Stream(work / "in", f"{label}-{name}") for name in inputs}
    (work / "in").mkdir(exist_ok=True)
    transform = TransformSql(engine="spark", queries=(SqlQueryStep(query=query),))
    output = OutputDataset(work, label, transform)
    result: dict[str, list[float]] = {"stateful": [], "stateless": [], "checkpoint": []}
    rows = args.rows // len(inputs)
    for tx in range(args.transactions):
        entries = []
        for name in inputs:
            entry = streams[name].append(slice_of(name, rows, tx, args.minutes, rng))
            entries.append(dataclasses.replace(entry, query_alias=name))
        seconds, request, _ = timed_transaction(engine, output, entries)
        result["stateful"].append(seconds)
        result["checkpoint"].append(Path(request.new_checkpoint_path).stat().st_size)
        batch = ep.QueryRequest(
            inputs=tuple(
                ep.QueryInput(alias=e.query_alias, data_paths=e.data_paths) for e in entries
            ),
            transform=transform,
            output_data_path=str(Path(request.new_data_path).parent / "batch"),
        )
        started = time.perf_counter()
        engine.execute_query(batch)
        result["stateless"].append(time.perf_counter() - started)
        print(
            f"  {label} tx{tx}: stateful {result['stateful'][-1]:.2f}s, "
            f"stateless {result['stateless'][-1]:.2f}s, "
            f"checkpoint {result['checkpoint'][-1] / 1024:.0f} KiB",
            flush=True,
        )
    return result


def main() -> int:
    args, engine = setup(__doc__, "100000,1000000", minutes=(10, "event time per transaction"))
    failed = False
    for size in [int(s) for s in args.sizes.split(",")]:
        args.rows = size
        for label, (inputs, query) in QUERIES.items():
            with tempfile.TemporaryDirectory(prefix="odf-bench-stateful-") as tmp:
                print(f"{label}, {size:,} records per transaction:", flush=True)
                r = run_query(engine, Path(tmp), f"{label}{size}", query, inputs, args)
            # The first transaction of each run pays for query compilation: medians skip it.
            stateful = statistics.median(r["stateful"][1:])
            stateless = statistics.median(r["stateless"][1:])
            extra = statistics.median(
                a - b for a, b in zip(r["stateful"][1:], r["stateless"][1:], strict=True)
            )
            ratio = stateful / stateless
            sizes = ", ".join(f"{s / 1024:.0f}" for s in r["checkpoint"])
            print(
                f"== {label} {size:,}: stateful {stateful:.2f}s, stateless {stateless:.2f}s, "
                f"ratio {ratio:.2f}x, fixed extra {extra:.2f}s; checkpoint KiB: {sizes}"
            )
            if size >= 1_000_000 and ratio > RATIO_TARGET:
                print(f"   MISSED: ratio above {RATIO_TARGET}x")
                failed = True
            if size <= 100_000 and extra > FIXED_COST_TARGET_S:
                print(f"   MISSED: fixed extra cost above {FIXED_COST_TARGET_S}s")
                failed = True
    engine.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
