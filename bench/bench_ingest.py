"""Ingest throughput and memory against a bare pyarrow CSV-to-Parquet conversion.

One command, both sides on the same generated CSV (1M rows by default):

- baseline: ``pyarrow.csv.open_csv`` streamed into ``pyarrow.parquet.ParquetWriter`` (snappy),
  and, for reference, ``read_csv`` + ``write_table`` (whole file in memory, multi-threaded);
- ingest: ``push_ingest`` into a root dataset with an Append push source: read, merge, system
  columns and offsets, Parquet, logical and physical hash, commit.

Each run is a separate process, so its peak RSS is its own. The ingest is also run on files
``--scale`` and ``2 * --scale`` times larger (past the 1M-row Parquet row group that a 1M-row
file fits in): bounded memory means the peak RSS does not grow with the file.
Targets: ingest throughput >= 50% of the streaming baseline's; peak RSS about flat.

    .venv/bin/python bench/bench_ingest.py [--rows 1000000] [--scale 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ("event_time TIMESTAMP", "id BIGINT", "city STRING", "population BIGINT", "score DOUBLE")
CITIES = ["Vancouver", "Seattle", "Kyiv", "Odessa", "Lisbon", "Nairobi", "Osaka", "Lima"]


def generate(path: Path, rows: int) -> None:
    """A CSV with a header, event times in order (the common case), mixed column types."""
    with open(path, "w") as f:
        f.write("event_time,id,city,population,score\n")
        chunk = []
        for i in range(rows):
            day, second = divmod(i, 86400)
            hh, rest = divmod(second, 3600)
            mm, ss = divmod(rest, 60)
            chunk.append(
                f"2020-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T{hh:02d}:{mm:02d}:{ss:02d}Z,"
                f"{i},{CITIES[i % len(CITIES)]},{(i * 7919) % 1_000_000},{(i % 1000) / 7:.4f}\n"
            )
            if len(chunk) == 10000:
                f.writelines(chunk)
                chunk.clear()
        f.writelines(chunk)


# --- the measured sides, each run in its own process ---------------------------------------------


def run_baseline_streaming(csv_path: Path, work: Path) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    types = {
        "event_time": pa.timestamp("ns", "UTC"),
        "id": pa.int64(),
        "city": pa.string(),
        "population": pa.int64(),
        "score": pa.float64(),
    }
    reader = pacsv.open_csv(
        csv_path,
        read_options=pacsv.ReadOptions(block_size=8 << 20),
        convert_options=pacsv.ConvertOptions(column_types=types),
    )
    with pq.ParquetWriter(work / "out.parquet", reader.schema, compression="snappy") as writer:
        for batch in reader:
            writer.write_batch(batch)


def run_baseline_whole(csv_path: Path, work: Path) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    pq.write_table(pacsv.read_csv(csv_path), work / "out.parquet", compression="snappy")


def run_ingest(csv_path: Path, work: Path) -> None:
    from common.odf.events import AddPushSource
    from common.odf.fragments import DatasetKind, MergeStrategyAppend, ReadStepCsv
    from common.odf.snapshot import DatasetSnapshot
    from coordinator.ingest.push import push_ingest
    from coordinator.workspace import Workspace

    ws = Workspace.init(work)
    source = AddPushSource(
        source_name="bench",
        read=ReadStepCsv(header=True, schema=SCHEMA),
        merge=MergeStrategyAppend(),
    )
    ds = ws.create_dataset(DatasetSnapshot(name="bench", kind=DatasetKind.ROOT, metadata=(source,)))
    cpu_start, start = _cpu_seconds(), time.perf_counter()
    result = push_ingest(ds, csv_path)
    _report(time.perf_counter() - start, cpu_start, result.num_records)


SIDES = {
    "baseline-streaming": run_baseline_streaming,
    "baseline-whole": run_baseline_whole,
    "ingest": run_ingest,
}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _report(seconds: float, cpu_start: float, records: int | None = None) -> None:
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {
        "seconds": seconds,
        "cpu_seconds": _cpu_seconds() - cpu_start,
        "peak_mib": peak_kib / 1024,
        "records": records,
    }
    print(json.dumps(result))


def child(side: str, csv_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as work:
        if side == "ingest":
            run_ingest(csv_path, Path(work))
            return
        cpu_start, start = _cpu_seconds(), time.perf_counter()
        SIDES[side](csv_path, Path(work))
        _report(time.perf_counter() - start, cpu_start)


def measure(side: str, csv_path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", side, str(csv_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--scale", type=int, default=2, help="sizes of the memory check files")
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "CSV"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-ingest-data-") as tmp:
        csv_path = Path(tmp) / "data.csv"
        generate(csv_path, args.rows)
        size_mib = csv_path.stat().st_size / 2**20
        print(f"input: {args.rows:,} rows, {size_mib:.1f} MiB of CSV")
        runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
        for _ in range(args.repeat):  # interleaved, so that load changes hit every side
            for side in SIDES:
                runs[side].append(measure(side, csv_path))
        best = {side: min(r, key=lambda x: x["seconds"]) for side, r in runs.items()}
        cpu = {side: min(x["cpu_seconds"] for x in r) for side, r in runs.items()}
        for side, r in best.items():
            rate = args.rows / r["seconds"]
            print(
                f"  {side:20s} {r['seconds']:6.2f} s wall {cpu[side]:6.2f} s CPU"
                f"  {rate / 1e6:5.2f} M rows/s  peak RSS {r['peak_mib']:6.0f} MiB"
            )
        ratio = best["baseline-streaming"]["seconds"] / best["ingest"]["seconds"]
        cpu_ratio = cpu["baseline-streaming"] / cpu["ingest"]
        whole = best["baseline-whole"]["seconds"] / best["ingest"]["seconds"]
        print(
            f"ingest throughput = {ratio:.0%} of the streaming baseline's (target >= 50%;"
            f" {cpu_ratio:.0%} by CPU time), {whole:.0%} of the whole-file baseline's"
        )
        csv_path.unlink()
        peaks = []
        for factor in (args.scale, 2 * args.scale):
            big = Path(tmp) / f"x{factor}.csv"
            generate(big, args.rows * factor)
            peaks.append(measure("ingest", big)["peak_mib"])
            big.unlink()
        growth = peaks[1] / peaks[0]
        print(
            f"memory: ingest peak RSS {peaks[0]:.0f} MiB at {args.scale}x the rows,"
            f" {peaks[1]:.0f} MiB at {2 * args.scale}x ({growth:.2f}x; bounded if ~1x)"
        )
        ok = ratio >= 0.5 and growth < 1.2
        print("PASS" if ok else "BELOW TARGET")
    return 0


if __name__ == "__main__":
    sys.exit(main())
