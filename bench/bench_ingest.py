"""Ingest throughput and memory against a bare pyarrow CSV-to-Parquet conversion.

One command, both sides on the same generated CSV (2M rows, about 100 MB, by default):

- baseline: ``pyarrow.csv.read_csv`` + ``pyarrow.parquet.write_table`` (whole file in memory,
  multi-threaded, snappy) and, for reference, ``open_csv`` streamed into a ``ParquetWriter``;
- ingest: ``push_ingest`` into a root dataset with an Append push source: read, merge, system
  columns and offsets, Parquet, logical and physical hash, commit;
- through the CLI: ``odf ingest`` as a process, against the baseline as a process
  (``python -c`` importing pyarrow, reading and writing): both timed whole, interpreter start
  and imports included.

In process, neither side's imports are timed (each imports what it needs before its timer).
As processes, both sides import compiled bytecode: the baseline's pyarrow has its ``.pyc``
files from its installation, and the timed checkout's are compiled once before the runs (an
environment with ``PYTHONDONTWRITEBYTECODE`` would otherwise recompile every module of ours
on every ``odf ingest``, which no installed copy does).
Each run is a separate process, so its peak RSS is its own. The ingest is also run on files
``--scale`` and ``2 * --scale`` times larger: bounded memory means the peak RSS does not grow
with the file. Targets: ingest throughput (library and CLI) >= 70% of the baseline's; peak
RSS growth below 1.2x. Exits 1 when a target is missed.

``--big GB`` also ingests a CSV of at least that many GB (generated once, vectorised, into the
temporary directory; about 20 times the default file's rows per GB, so minutes on this
machine: an explicit flag) and reports its peak RSS against the default file's: bounded
memory means it stays within 1.2x. ``--json PATH`` writes the figures for ``run_all.py``.

    .venv/bin/python bench/bench_ingest.py [--rows 2000000] [--scale 2] [--tree PATH]
        [--big 2.1] [--json PATH]
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
TREE_ENV = "BENCH_INGEST_TREE"
"""The checkout whose ingest is timed (``--tree``), handed to the child processes."""

sys.path.insert(0, str(ROOT))
if os.environ.get(TREE_ENV):  # a child timing another checkout imports that one's code
    sys.path.insert(0, os.environ[TREE_ENV])

from bench.figures import Figure, add_json_argument, write_json  # noqa: E402


def tree() -> Path:
    return Path(os.environ.get(TREE_ENV, str(ROOT)))


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


def generate_big(path: Path, min_bytes: int) -> int:
    """A CSV of at least ``min_bytes`` with the same columns as ``generate``'s, written a
    million rows at a time by pyarrow (seconds per GB, where ``generate`` takes minutes);
    its number of rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    chunk = 1_000_000
    cities = pa.array(CITIES)
    start = 1_577_836_800  # 2020-01-01T00:00:00Z
    rows = 0
    schema = pa.schema(
        [
            ("event_time", pa.timestamp("s", tz="UTC")),
            ("id", pa.int64()),
            ("city", pa.string()),
            ("population", pa.int64()),
            ("score", pa.float64()),
        ]
    )
    with pacsv.CSVWriter(path, schema) as writer:
        while path.stat().st_size < min_bytes:
            i = np.arange(rows, rows + chunk, dtype=np.int64)
            table = pa.table(
                [
                    pa.array(i + start).cast(pa.timestamp("s", tz="UTC")),
                    pa.array(i),
                    cities.take(pa.array(i % len(CITIES))),
                    pa.array(i * 7919 % 1_000_000),
                    pa.array(np.round((i % 1000) / 7, 4)),
                ],
                schema=schema,
            )
            writer.write_table(table)
            rows += chunk
    return rows


# --- the measured sides, each run in its own process ---------------------------------------------


def run_baseline_streaming(csv_path: Path, work: Path) -> None:
    import pyarrow as pa  # imported before the timer (``child``): these are no-ops
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


def run_process(side: str, csv_path: Path, work: Path) -> None:
    """A whole process, timed from outside: ``odf ingest`` or the baseline as a script."""
    env = {**os.environ, "PYTHONPATH": str(tree()), "ODF_NO_DAEMON": "1"}
    if side == "cli":
        from common.odf.events import AddPushSource
        from common.odf.fragments import DatasetKind, MergeStrategyAppend, ReadStepCsv
        from common.odf.snapshot import DatasetSnapshot
        from coordinator.workspace import Workspace

        ws = Workspace.init(work)
        source = AddPushSource(
            source_name="bench",
            read=ReadStepCsv(header=True, schema=SCHEMA),
            merge=MergeStrategyAppend(),
        )
        meta = (source,)
        ws.create_dataset(DatasetSnapshot(name="bench", kind=DatasetKind.ROOT, metadata=meta))
        argv = [sys.executable, "-m", "coordinator", "-q", "ingest", "bench", str(csv_path)]
    else:
        argv = [sys.executable, "-c", BASELINE_PROCESS, str(csv_path), str(work / "out.parquet")]
    cpu_start, start = _children_cpu_seconds(), time.perf_counter()
    subprocess.run(argv, cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cpu = _children_cpu_seconds() - cpu_start
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_mib": peak_kib / 1024}))


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


BASELINES = {"baseline-whole": run_baseline_whole, "baseline-streaming": run_baseline_streaming}
PROCESS_SIDES = ("baseline-process", "cli")
SIDES = (*BASELINES, "ingest", *PROCESS_SIDES)
TARGET_RATIO = 0.7
TARGET_GROWTH = 1.2


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


BASELINE_PROCESS = """
import sys
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
pq.write_table(pacsv.read_csv(sys.argv[1]), sys.argv[2], compression="snappy")
"""


def child(side: str, csv_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as work:
        if side == "ingest":
            run_ingest(csv_path, Path(work))
            return
        if side in PROCESS_SIDES:
            run_process(side, csv_path, Path(work))
            return
        import pyarrow.csv
        import pyarrow.parquet  # noqa: F401  (the ingest side's imports are untimed too)

        cpu_start, start = _cpu_seconds(), time.perf_counter()
        BASELINES[side](csv_path, Path(work))
        _report(time.perf_counter() - start, cpu_start)


def compile_tree() -> None:
    """Bytecode for the timed checkout's packages, as an installation has it."""
    import compileall

    for package in ("common", "coordinator"):
        compileall.compile_dir(tree() / package, quiet=1)


def measure(side: str, csv_path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", side, str(csv_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tree())},
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--scale", type=int, default=2, help="sizes of the memory check files")
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings")
    parser.add_argument(
        "--tree", type=Path, help="time another checkout's ingest (e.g. main, for a before figure)"
    )
    parser.add_argument(
        "--big", type=float, metavar="GB", help="also measure the peak RSS on a CSV this large"
    )
    add_json_argument(parser)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "CSV"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return 0
    if args.tree is not None:
        os.environ[TREE_ENV] = str(args.tree.resolve())
        print(f"ingest of {tree()}")

    compile_tree()
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
        ratio = best["baseline-whole"]["seconds"] / best["ingest"]["seconds"]
        cpu_ratio = cpu["baseline-whole"] / cpu["ingest"]
        streaming = best["baseline-streaming"]["seconds"] / best["ingest"]["seconds"]
        cli_ratio = best["baseline-process"]["seconds"] / best["cli"]["seconds"]
        print(
            f"ingest throughput = {ratio:.2f}x the baseline's (read_csv + write_table; target"
            f" >= {TARGET_RATIO}x; {cpu_ratio:.2f}x by CPU time), {streaming:.2f}x the"
            f" streaming baseline's"
        )
        print(
            f"odf ingest throughput = {cli_ratio:.2f}x the baseline process's (target >="
            f" {TARGET_RATIO}x)"
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
            f" {peaks[1]:.0f} MiB at {2 * args.scale}x ({growth:.2f}x; target < {TARGET_GROWTH}x)"
        )
        rows = f"{args.rows / 1e6:g}M rows"

        def throughput(what: str, ours: str, baseline: str) -> Figure:
            """Rows per second of run ``ours`` against run ``baseline`` (``what``: the pair)."""
            return Figure(
                f"ingest throughput, {what}",
                args.rows / best[ours]["seconds"],
                "rows/s",
                args.rows / best[baseline]["seconds"],
                TARGET_RATIO,
                at_least=True,
            )

        figures = [
            throughput(f"library ({rows}; vs bare pyarrow)", "ingest", "baseline-whole"),
            throughput(f"odf ingest ({rows}; process vs process)", "cli", "baseline-process"),
            Figure(
                f"ingest peak RSS, {2 * args.scale}x vs {args.scale}x the rows",
                peaks[1] * 2**20,
                "B",
                peaks[0] * 2**20,
                TARGET_GROWTH,
            ),
        ]
        if args.big:
            figures.append(big_file_memory(Path(tmp), args.big, best["ingest"]["peak_mib"]))
            big = figures[-1]
            print(
                f"memory: ingest peak RSS {big.ours / 2**20:.0f} MiB on the {args.big:g} GB"
                f" file, {best['ingest']['peak_mib']:.0f} MiB on {rows}"
                f" ({big.measured:.2f}x; target <= {TARGET_GROWTH}x)"
            )
        write_json(args.json, figures)
        ok = all(f.ok for f in figures)
        print("PASS" if ok else "MISSED: a target above is not met")
    return 0 if ok else 1


def big_file_memory(tmp: Path, gigabytes: float, small_peak_mib: float) -> Figure:
    """The ingest's peak RSS on a generated CSV of ``gigabytes`` against ``small_peak_mib``
    (its peak on the default file)."""
    big = tmp / "big.csv"
    started = time.perf_counter()
    rows = generate_big(big, int(gigabytes * 1e9))
    size = big.stat().st_size
    print(
        f"big input: {rows:,} rows, {size / 1e9:.2f} GB of CSV"
        f" (generated in {time.perf_counter() - started:.0f} s)"
    )
    result = measure("ingest", big)
    big.unlink()
    print(f"  ingest of it: {result['seconds']:.0f} s wall, peak RSS {result['peak_mib']:.0f} MiB")
    return Figure(
        f"ingest peak RSS, {size / 1e9:.1f} GB CSV vs the {small_peak_mib:.0f} MiB of the small",
        result["peak_mib"] * 2**20,
        "B",
        small_peak_mib * 2**20,
        TARGET_GROWTH,
    )


if __name__ == "__main__":
    sys.exit(main())
