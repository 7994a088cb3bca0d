"""Warm engine vs the reference way: one 100k-row map/filter transaction, side by side.

The reference Spark engine (kamu-engine-spark) runs ``spark-submit`` for every request: a new
JVM and SparkSession per transaction. This bench does the same work both ways in one run:

- reference: a fresh ``spark-submit`` (PySpark's own) of a small script that reads the input
  Parquet, filters it to the offset interval, applies the query, numbers rows with
  ``row_number()`` over ``monotonically_increasing_id()`` in one partition and writes one
  Parquet file, as the reference engine does;
- warm: ``ExecuteTransform`` through gRPC against ``python -m engine_spark``, started once.

Prints seconds per transaction, the ratio, and the engine process tree's resident memory when
idle (ready, before any request) and at its peak (sampled during the transactions, and the
kernel's high-water mark). Exits 1 when the warm engine is less than 20x faster.

    .venv/bin/python bench/bench_engine.py [--rows 100000] [--warm-runs 10] [--reference-runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.engine_rpc import engine_pb2, engine_pb2_grpc  # noqa: E402
from common.odf import engine_protocol as ep  # noqa: E402
from common.odf.fragments import (  # noqa: E402
    OffsetInterval,
    TransformSql,
)
from common.serde import flatbuffers_codec as codec  # noqa: E402
from engine_spark.warm_up import one_input_request  # noqa: E402
from tests.support.engine_server import engine_server_process  # noqa: E402

TARGET_RATIO = 20.0
T0 = datetime(2024, 1, 1, tzinfo=UTC)
QUERY = (
    "select event_time, city, population * 10 as population_x10 from `bench.cities` "
    "where population % 3 <> 0"
)

REFERENCE_SCRIPT = """
import os, sys, glob, shutil
from pyspark.sql import SparkSession, Window, functions as F
inp, out, system_time, query = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[6]
start, end = int(sys.argv[4]), int(sys.argv[5])
spark = SparkSession.builder.getOrCreate()
df = spark.read.parquet(inp).coalesce(1).orderBy("offset")
df = df.where((F.col("offset") >= start) & (F.col("offset") <= end))
df.createOrReplaceTempView("`bench.cities`")
res = spark.sql(query)
order = Window.orderBy(F.monotonically_increasing_id())
res = res.withColumn("offset", (F.row_number().over(order) - 1).cast("long"))
data = [c for c in res.columns if c != "offset"]
system = F.lit(system_time).cast("timestamp").alias("system_time")
res = res.select("offset", F.lit(0).alias("op"), system, *data)
tmp = out + ".tmp"
res.coalesce(1).write.parquet(tmp)
(part,) = glob.glob(os.path.join(tmp, "part-*.parquet"))
shutil.move(part, out)
shutil.rmtree(tmp)
spark.stop()
"""


def write_input(path: Path, rows: int) -> None:
    cities = [f"city-{i % 1000}" for i in range(rows)]
    table = pa.table(
        {
            "offset": pa.array(range(rows), pa.int64()),
            "op": pa.array([0] * rows, pa.int32()),
            "system_time": pa.array([T0] * rows, pa.timestamp("ms", tz="UTC")),
            "event_time": pa.array(
                [T0 + timedelta(seconds=i) for i in range(rows)], pa.timestamp("ms", tz="UTC")
            ),
            "city": cities,
            "population": pa.array(range(rows), pa.int64()),
        }
    )
    pq.write_table(table, path)


def reference_transaction(script: Path, inp: Path, out: Path, rows: int) -> float:
    import pyspark

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    args = [
        str(spark_submit),
        "--master=local[*]",
        "--driver-memory=2g",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.sql.parquet.outputTimestampType=TIMESTAMP_MILLIS",
        str(script), str(inp), str(out), T0.isoformat(), "0", str(rows - 1), QUERY,
    ]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    assert pq.read_metadata(out).num_rows > 0
    return elapsed


def warm_request(inp: Path, out_dir: Path, rows: int) -> ep.TransformRequest:
    return one_input_request(
        TransformSql(engine="spark", query=QUERY),
        "bench.cities",
        (str(inp),),
        out_dir,
        system_time=T0,
        offsets=OffsetInterval(start=0, end=rows - 1),
        watermark=T0,
    )


def warm_transaction(stub: engine_pb2_grpc.EngineStub, request: ep.TransformRequest) -> float:
    pb = engine_pb2.TransformRequest(flatbuffer=codec.TRANSFORM_REQUEST.encode(request))
    started = time.perf_counter()
    (message,) = list(stub.ExecuteTransform(pb, timeout=600))
    elapsed = time.perf_counter() - started
    response = codec.TRANSFORM_RESPONSE.decode(message.flatbuffer)
    assert isinstance(response, ep.TransformResponseSuccess), response
    return elapsed


# --- Memory of the engine process tree (Python server + its JVM), from /proc ---------------


def process_tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    tree, stack = [], [pid]
    while stack:
        current = stack.pop()
        tree.append(current)
        stack.extend(children.get(current, []))
    return tree


def status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_mib(pid: int, key: str = "VmRSS") -> float:
    return sum(status_kib(p, key) for p in process_tree(pid)) / 1024


class PeakSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._halt = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.05):
            self.peak = max(self.peak, tree_rss_mib(self.pid))

    def stop(self) -> float:
        self._halt.set()
        self.join()
        return self.peak


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--warm-runs", type=int, default=10)
    p.add_argument("--reference-runs", type=int, default=3)
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        root = Path(tmp)
        inp = root / "in" / "f1620input"
        inp.parent.mkdir()
        write_input(inp, args.rows)

        print(f"warm engine: python -m engine_spark, {args.warm_runs} transactions of "
              f"{args.rows} rows")  # fmt: skip
        with engine_server_process(
            master="local[*]", data_roots=[root], log_path=root / "engine.log"
        ) as server:
            time.sleep(2)
            idle = tree_rss_mib(server.process.pid)
            with server.channel() as channel:
                stub = engine_pb2_grpc.EngineStub(channel)
                sampler = PeakSampler(server.process.pid)
                sampler.start()
                first = warm_transaction(stub, warm_request(inp, root / "warm-0", args.rows))
                warm = [
                    warm_transaction(stub, warm_request(inp, root / f"warm-{i}", args.rows))
                    for i in range(1, args.warm_runs + 1)
                ]
                peak = sampler.stop()
            hwm = tree_rss_mib(server.process.pid, "VmHWM")
            out_rows = pq.read_metadata(root / "warm-1" / "data").num_rows

        print(f"reference: fresh spark-submit per transaction, {args.reference_runs} runs")
        script = root / "reference_transform.py"
        script.write_text(REFERENCE_SCRIPT)
        reference = [
            reference_transaction(script, inp, root / f"ref-{i}", args.rows)
            for i in range(args.reference_runs)
        ]
        ref_rows = pq.read_metadata(root / "ref-0").num_rows

    assert ref_rows == out_rows, (ref_rows, out_rows)
    warm_s, ref_s = statistics.median(warm), statistics.median(reference)
    ratio = ref_s / warm_s
    print()
    print(f"{'':32}{'median s':>10}{'min s':>10}{'max s':>10}")
    print(f"{'reference (spark-submit)':32}{ref_s:10.3f}{min(reference):10.3f}"
          f"{max(reference):10.3f}")  # fmt: skip
    print(f"{'warm engine (gRPC)':32}{warm_s:10.3f}{min(warm):10.3f}{max(warm):10.3f}")
    print(f"{'first warm call (after start)':32}{first:10.3f}")
    print(f"output rows per transaction: {out_rows}")
    print(f"speed-up: {ratio:.1f}x (target >= {TARGET_RATIO:.0f}x)")
    print(f"engine memory (python + JVM): idle {idle:.0f} MiB, peak sampled {peak:.0f} MiB, "
          f"high-water mark {hwm:.0f} MiB")  # fmt: skip
    ok = ratio >= TARGET_RATIO
    print("PASS" if ok else "FAIL: the warm engine is less than 20x faster")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
