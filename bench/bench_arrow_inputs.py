"""Arrow IPC inputs read in place against the former restaging, and against Parquet inputs.

One warm engine (``SparkEngine`` in process, ``local[2]``) runs the same ExecuteTransform
(the map/filter query of ``bench_transform.py``) over the same ``--rows`` records, alternating:

- ``in-place``: the input as one Arrow IPC file (64k-row batches, as the coordinator cuts
  them), read where it lies by ``mapInArrow`` tasks (``engine_spark/arrow_scan.py``);
- ``staged``: the same file restaged as a Parquet file that Spark scans (the default,
  ``ArrowInputs.STAGED``);
- ``parquet``: the same records as a Parquet file (the Parquet exchange).

The first round (Spark's JIT, the Python workers' start) is not counted. Prints the median
engine time of each and the ratios; target: the default way (``ArrowInputs.STAGED``) at most
``TARGET`` times the other (the default is the faster one, within the shared machine's noise).
Exits 1 when missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from bench.bench_transform import QUERY, build_slice
from common.odf.fragments import OffsetInterval, TransformSql
from engine_spark.engine import SparkEngine
from engine_spark.session import SessionSettings, build_session
from engine_spark.staging import ArrowInputs
from engine_spark.warm_up import one_input_request

TARGET = 1.10
SYSTEM_TIME = datetime(2030, 1, 1, tzinfo=UTC)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--driver-memory", default="3g")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-arrow-inputs-") as tmp:
        table = build_slice(args.rows)
        arrow, parquet = Path(tmp) / "input.arrow", Path(tmp) / "input.parquet"
        with pa.OSFile(str(arrow), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=64 * 1024):
                writer.write_batch(batch)
        pq.write_table(table, parquet)
        session = build_session(
            SessionSettings(master="local[2]", driver_memory=args.driver_memory)
        )
        staged = SparkEngine(session)
        in_place = SparkEngine(session, arrow_inputs=ArrowInputs.IN_PLACE)
        modes: dict[str, tuple[Path, SparkEngine]] = {
            "in-place": (arrow, in_place),
            "staged": (arrow, staged),
            "parquet": (parquet, staged),
        }
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        transform = TransformSql(engine="spark", query=QUERY)
        offsets = OffsetInterval(start=0, end=args.rows - 1)
        for round_ in range(args.repeats + 1):
            for mode, (path, engine) in modes.items():
                out = Path(tmp) / f"{mode}-{round_}"
                request = one_input_request(
                    transform, "raw", (str(path),), out, system_time=SYSTEM_TIME, offsets=offsets
                )
                start = time.perf_counter()
                engine.execute_transform(request)
                took = time.perf_counter() - start
                print(f"round {round_} {mode:<9} {took:6.2f} s" + ("" if round_ else " (warm-up)"))
                if round_:
                    times[mode].append(took)
        staged.close()
    medians = {mode: statistics.median(v) for mode, v in times.items()}
    ratio = medians["staged"] / medians["in-place"]
    print(
        f"{args.rows:,} records, engine time (median of {args.repeats}): in place"
        f" {medians['in-place']:.2f} s, staged {medians['staged']:.2f} s, parquet"
        f" {medians['parquet']:.2f} s; staged (the default) / in place {ratio:.2f}x"
        f" (target <= {TARGET:.2f}x), in place / parquet"
        f" {medians['in-place'] / medians['parquet']:.2f}x"
    )
    if ratio > TARGET:
        print("FAIL")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
