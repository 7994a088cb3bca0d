"""The engine's memory: idle, and at its peak during a 10M-record transaction in the default
2g of driver memory.

A root dataset gets one data slice of ``--rows`` records (default 10M); a derivative with a
map/filter query runs one transaction over it through the coordinator and the embedded engine
started with ``--driver-memory`` (default 2g, the coordinator's default). The resident memory
of the engine's process tree (its Python server and its JVM) is read from ``/proc``: idle
after start-up, then sampled every 50 ms during the transaction, plus the kernel's high-water
mark. The coordinator's own peak (this process, which hashes the output) is reported too.

Targets: the transaction completes (within the driver memory: an engine out of heap exits)
and the engine's peak stays under ``--max-peak-mib`` (default 3,072 MiB: a 2g heap plus the
JVM's own and Python's). Exits 1 when missed.
``--json PATH`` also writes the figures for ``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench_engine import PeakSampler, tree_rss_mib
from bench_transform import SYSTEM_TIME, create_derivative, create_root

from bench.figures import Figure, add_json_argument, write_json
from common.logs import configure_logging
from coordinator.config import TransformConfig
from coordinator.dataset.dataset import Dataset
from coordinator.engine import EngineSession
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.transform.runner import Transformer, workspace_resolver
from coordinator.transform.transaction import TransactionResult
from coordinator.workspace import Workspace


def engine_pid(description: str) -> int:
    """The pid in an embedded engine's description (``embedded engine (pid N)``)."""
    return int(description.rsplit("pid ", 1)[1].rstrip(")"))


def sampled_transform(
    ws: Workspace,
    derivative: Dataset,
    engines: EngineSession,
    pid: int,
    shared_staging: Path | None = None,
    options: TransformConfig | None = None,
) -> tuple[TransactionResult, float, float]:
    """Transform ``derivative`` (one transaction) while sampling the engine process tree's
    memory: the transaction, its wall seconds and the peak RSS sampled (MiB). ``options``:
    the transform configuration (default: no batching limit)."""
    sampler = PeakSampler(pid)
    sampler.start()
    started = time.perf_counter()
    transformer = Transformer(
        workspace_resolver(ws),
        engines,
        options or TransformConfig(max_input_records=10**9),
        clock=lambda: SYSTEM_TIME,
        shared_staging=shared_staging,
    )
    (result,) = transformer.transform(derivative).transactions
    seconds = time.perf_counter() - started
    return result, seconds, sampler.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--max-peak-mib", type=float, default=3072)
    parser.add_argument(
        "--writer",
        choices=("stream", "spark", "collect"),
        default="stream",
        help="how the engine writes the output (collect: the former path)",
    )
    add_json_argument(parser)
    args = parser.parse_args()
    configure_logging(0)
    os.environ["ODF_ENGINE_OUTPUT_WRITER"] = args.writer  # the engine process inherits it
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        ws = Workspace.init(Path(tmp) / "ws")
        create_root(ws, "big", args.rows, Path(tmp))
        derivative = create_derivative(ws, "out", "big", EmbeddedEngineProvider().resolve_version())
        provider = EmbeddedEngineProvider(
            master=args.master, driver_memory=args.driver_memory, data_roots=(Path(tmp),)
        )
        with EngineSession(provider) as engines:
            client = engines.get(provider.resolve_version())
            pid = engine_pid(client.description)
            time.sleep(2)
            idle = tree_rss_mib(pid)
            result, seconds, peak = sampled_transform(ws, derivative, engines, pid)
            hwm = tree_rss_mib(pid, "VmHWM")
    coordinator_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.rows:,} input records, {result.output_records:,} output records in"
        f" {seconds:.1f} s (engine {result.timings.engine:.1f} s), driver memory"
        f" {args.driver_memory}, output writer {args.writer}"
    )
    print(
        f"engine memory (python + JVM): idle {idle:.0f} MiB, peak sampled {peak:.0f} MiB,"
        f" high-water mark {hwm:.0f} MiB (target <= {args.max_peak_mib:.0f} MiB)"
    )
    print(f"coordinator (this process, input built here too): peak {coordinator_mib:.0f} MiB")
    ok = max(peak, hwm) <= args.max_peak_mib
    write_json(
        args.json,
        [
            Figure("engine memory, idle", idle * 2**20, "B"),
            Figure(
                f"engine peak memory, {args.rows:,}-record transaction ({args.driver_memory})",
                max(peak, hwm) * 2**20,
                "B",
                target=args.max_peak_mib * 2**20,
            ),
        ],
    )
    print("OK" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
