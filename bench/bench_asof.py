"""The event-time as-of join's transaction: the equi-join rewrite against Spark's own plan.

A stream of ticks joined as of each tick's event time with a versioned input of prices
(``LEFT JOIN LATERAL (... ORDER BY p.event_time DESC, p.offset DESC LIMIT 1)``, 1,000
symbols, ticks and prices half the records each) is fed ``--transactions`` transactions of
each size in ``--sizes`` (default 1k, 10k and 100k records). Every input's watermark follows
its newest record, so each transaction releases its ticks and keeps about one version per
symbol.

Each size runs the same slices through two pipelines on one warm in-process engine: ``new``
(``as_of_join/plan.py``: an equi-join on the symbol plus a ranked window in place of the
lateral join) and ``old`` (``as_of_join.runner.EQUI_JOIN = False``: Spark's decorrelation, a
nested-loop product of the distinct tick times with the versions). The old path is quadratic,
so it runs only up to ``--old-max`` records per transaction. Both pipelines' outputs are
compared byte for byte. Reported: median seconds per transaction (the first, which compiles,
skipped), the ratio old/new, and how the new path grows from the smallest to the largest size.

Targets: from 10k records on (at 1k both are dominated by the transaction's fixed cost), the
new path at least 5x faster than the old wherever both run; the new path's median grows at
most 2x faster than the records (e.g. at most 200x from 1k to 100k). Exit 1 when a target is
missed or the outputs differ (at any size).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.bench_stateful import Stream, setup, timed_transaction
from common.odf.fragments import SqlQueryStep, TemporalTable, TransformSql
from engine_spark.engine import SparkEngine
from engine_spark.stateful.as_of_join import runner as asof_transaction
from tests.integration.engine.datasets import T0, TS, OutputDataset

QUERY = (
    "SELECT t.event_time, t.symbol, t.qty, v.price FROM ticks AS t "
    "LEFT JOIN LATERAL (SELECT p.* FROM prices AS p WHERE p.symbol = t.symbol "
    "AND p.event_time <= t.event_time ORDER BY p.event_time DESC, p.offset DESC LIMIT 1) "
    "AS v ON true"
)
KEYS = 1000
SPEEDUP_TARGET = 5.0
SPEEDUP_FROM = 10_000
GROWTH_SLACK = 2.0


def slice_of(name: str, rows: int, tx: int, rng: np.random.Generator) -> pa.Table:
    """``rows`` records of ``name`` over the transaction's minute, event times ascending."""
    start = T0 + timedelta(minutes=tx)
    step_us = 60_000_000 // rows
    times = pa.array([start + timedelta(microseconds=i * step_us) for i in range(rows)], TS)
    symbols = [f"s{k}" for k in rng.integers(0, KEYS, rows)]
    if name == "prices":
        return pa.table({"event_time": times, "symbol": symbols, "price": rng.random(rows)})
    return pa.table({"event_time": times, "symbol": symbols, "qty": rng.integers(1, 100, rows)})


@dataclass
class Run:
    """One pipeline's seconds per transaction and output files' bytes."""

    seconds: list[float] = field(default_factory=list)
    outputs: list[bytes] = field(default_factory=list)


def run(engine: SparkEngine, work: Path, label: str, size: int, transactions: int) -> Run:
    """Feed one pipeline ``transactions`` transactions of ``size`` records."""
    rng = np.random.default_rng(7)
    (work / "in").mkdir(parents=True, exist_ok=True)
    streams = {n: Stream(work / "in", f"{label}-{n}") for n in ("prices", "ticks")}
    transform = TransformSql(
        engine="spark",
        queries=(SqlQueryStep(query=QUERY),),
        temporal_tables=(TemporalTable(name="prices", primary_key=("symbol",)),),
    )
    output = OutputDataset(work, label, transform)
    result = Run()
    for tx in range(transactions):
        entries = tuple(
            dataclasses.replace(s.append(slice_of(n, size // 2, tx, rng)), query_alias=n)
            for n, s in streams.items()
        )
        seconds, request, response = timed_transaction(engine, output, entries)
        result.seconds.append(seconds)
        if response.new_offset_interval is not None:
            result.outputs.append(Path(request.new_data_path).read_bytes())
        print(f"  {label} tx{tx}: {result.seconds[-1]:.2f}s", flush=True)
    return result


def main() -> int:
    largest_old = (10_000, "largest size for the old path")
    args, engine = setup(__doc__, "1000,10000,100000", old_max=largest_old)
    medians: dict[int, float] = {}
    failed = False
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="odf-bench-asof-") as tmp:
            print(f"{size:,} records per transaction:", flush=True)
            asof_transaction.EQUI_JOIN = True
            new = run(engine, Path(tmp) / "new", f"new{size}", size, args.transactions)
            medians[size] = statistics.median(new.seconds[1:])
            line = f"== {size:,}: new {medians[size]:.2f}s"
            if size <= args.old_max:
                asof_transaction.EQUI_JOIN = False
                try:
                    old = run(engine, Path(tmp) / "old", f"old{size}", size, args.transactions)
                finally:
                    asof_transaction.EQUI_JOIN = True
                before = statistics.median(old.seconds[1:])
                ratio = before / medians[size]
                same = old.outputs == new.outputs
                line += f", old {before:.2f}s, old/new {ratio:.1f}x, outputs identical: {same}"
                if not same:
                    line += "\n   MISSED: the outputs differ"
                    failed = True
                if size >= SPEEDUP_FROM and ratio < SPEEDUP_TARGET:
                    line += f"\n   MISSED: speed-up below {SPEEDUP_TARGET}x"
                    failed = True
            print(line, flush=True)
    smallest, largest = min(medians), max(medians)
    if largest > smallest:
        growth = medians[largest] / medians[smallest]
        allowed = GROWTH_SLACK * largest / smallest
        print(f"== new path growth {smallest:,} -> {largest:,}: {growth:.1f}x", end="")
        print(f" (at most {allowed:.0f}x)")
        if growth > allowed:
            print("   MISSED: the new path grows faster than the records")
            failed = True
    engine.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
