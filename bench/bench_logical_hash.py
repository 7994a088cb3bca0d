"""Logical hash throughput against raw SHA3-256 over the same Arrow buffers.

Builds a 1M-row table (int64, utf8, timestamp, float64 with nulls, bool with nulls, utf8 with
nulls), then measures in the same process:

- baseline: ``hashlib.sha3_256`` fed every Arrow buffer of the table (validity, offsets, data);
- ours: ``logical_hash(table)``.

Both throughputs are the table's Arrow buffer bytes divided by the time taken (best of several
runs, interleaved). Target: ours >= 50% of the baseline. Exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from common.hashing import logical_hash

TARGET_RATIO = 0.5


def build_table(rows: int, seed: int = 42) -> pa.Table:
    rng = np.random.default_rng(seed)
    words = np.array([f"name-{i:05d}-{'x' * (i % 17)}" for i in range(5000)], dtype=object)
    comments = np.array(["ok", "late delivery", "refund requested", "n/a", "check again later"])
    value_nulls = rng.random(rows) < 0.1
    flag_nulls = rng.random(rows) < 0.05
    comment_nulls = rng.random(rows) < 0.2
    return pa.table(
        {
            "offset": pa.array(np.arange(rows, dtype=np.int64)),
            "name": pa.array(words[rng.integers(0, len(words), rows)], pa.string()),
            "event_time": pa.array(
                1_700_000_000_000_000 + rng.integers(0, 10**12, rows), pa.timestamp("us", "UTC")
            ),
            "value": pa.array(rng.normal(size=rows), mask=value_nulls),
            "flag": pa.array(rng.random(rows) < 0.5, mask=flag_nulls),
            "comment": pa.array(comments[rng.integers(0, len(comments), rows)], mask=comment_nulls),
        }
    )


def arrow_buffers(table: pa.Table) -> list[pa.Buffer]:
    return [
        buf
        for column in table.columns
        for chunk in column.chunks
        for buf in chunk.buffers()
        if buf is not None
    ]


def raw_sha3(buffers: list[pa.Buffer]) -> bytes:
    hasher = hashlib.sha3_256()
    for buf in buffers:
        hasher.update(buf)
    return hasher.digest()


def best_times(fns: list[Callable[[], object]], repeats: int) -> list[float]:
    """Best wall time of each function; runs are interleaved so that load from other
    processes on the machine hits all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    table = build_table(args.rows)
    buffers = arrow_buffers(table)
    size_mb = sum(buf.size for buf in buffers) / 1e6
    logical_hash(table)  # warm-up (imports, allocator)

    raw_s, ours_s = best_times(
        [lambda: raw_sha3(buffers), lambda: logical_hash(table)], args.repeats
    )
    raw_mbps, ours_mbps = size_mb / raw_s, size_mb / ours_s
    ratio = ours_mbps / raw_mbps

    print(
        f"table: {args.rows} rows, {table.num_columns} columns, {size_mb:.1f} MB of Arrow buffers"
    )
    print(f"raw SHA3-256 over the buffers: {raw_s * 1000:8.1f} ms  {raw_mbps:7.1f} MB/s")
    print(f"logical hash:                  {ours_s * 1000:8.1f} ms  {ours_mbps:7.1f} MB/s")
    print(f"ratio: {ratio:.2f} (target >= {TARGET_RATIO})  {logical_hash(table)}")
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
